"""RB103 blocking-copy-to-host."""

import ast
from typing import Any

from reviewbot.analysis.gpu import Site
from reviewbot.context import FileContext
from reviewbot.finding import Fix
from reviewbot.rule import Invalid, Valid
from reviewbot.rules._sync import HELPER_NAME, INCLUDE_UNKNOWN, SyncRule


class BlockingCopyToHost(SyncRule):
    """A blocking copy of a CUDA tensor to the host in a hot path.

    ## What it does
    Finds `.cpu()`, `.numpy()`, `.to("cpu")`, `.to(torch.device("cpu"))`, `.to(cpu_tensor)`
    and `cpu_tensor.copy_(cuda_tensor)` without `non_blocking=True` on a tensor known to be
    on the GPU, inside a function that runs every step.

    ## Why is this bad?
    A blocking device-to-host copy into pageable memory waits for the default stream, and
    while it waits every other host thread's CUDA calls stall with it (19.3 ms instead of
    0.16 ms for a KV-transfer thread on an H200 with 20 ms of work queued).

    ## Example
    ```python
    def execute_model(self, batch):
        ids = self.sampler(self.model(batch)).sampled_token_ids
        return ids.cpu()
    ```

    ## Use instead
    ```python
    def execute_model(self, batch):
        ids = self.sampler(self.model(batch)).sampled_token_ids
        host = self.ids_pinned[: ids.shape[0]]
        host.copy_(ids, non_blocking=True)
        self.copy_done.record()
        self.copy_done.synchronize()
        return host
    ```

    ## Options
    - `include-unknown` (bool, default false): also report tensors whose device is
      unknown, as warnings.

    - `helper-name` (string, default `_to_list`): the event-synced readback helper the
      fix calls.

    ## Fix safety
    Safe where the copy is turned into a list (`x.cpu().tolist()`,
    `x.cpu().numpy().tolist()`, `x.to("cpu").tolist()`): the whole expression becomes
    `self._to_list(x)`, as for RB101. Other copies have no automatic fix.
    """

    code = "RB103"
    name = "blocking-copy-to-host"
    summary = "A blocking copy of a CUDA tensor to the host in a hot path"
    consequence = ("a blocking copy into pageable memory: the host waits and other threads' "
                   "CUDA calls stall; copy into a pinned buffer with non_blocking=True and "
                   "wait on a torch.cuda.Event")
    sync_words = ("cpu", "numpy", ".to(", "copy_")
    options = (INCLUDE_UNKNOWN, HELPER_NAME)
    fix_safety = "sometimes"
    VALID = [
        Valid("import torch\nclass R:\n    def execute_model(self, n):\n"
              "        t = torch.arange(n)\n        return t.cpu().numpy()\n"),
        Valid("import torch\nclass R:\n    def __init__(self):\n"
              "        self.buf = torch.empty(8, pin_memory=True)\n"
              "        self.dev = torch.zeros(8, device='cuda')\n"
              "    def execute_model(self):\n"
              "        self.buf.copy_(self.dev, non_blocking=True)\n"),
    ]
    INVALID = [
        Invalid("import torch\nclass R:\n    def execute_model(self, x):\n"
                "        y = x.to('cuda') + 1\n        return y.cpu()\n", line=5),
        Invalid("import torch\nclass R:\n    def execute_model(self, x):\n"
                "        y = x.cuda()\n        return y.to('cpu')\n", line=5,
                message_contains="without `non_blocking=True`"),
        Invalid("import torch\nclass R:\n    def __init__(self):\n"
                "        self.host = torch.empty(8, device='cpu')\n"
                "        self.dev = torch.zeros(8, device='cuda')\n"
                "    def execute_model(self):\n"
                "        self.host.copy_(self.dev)\n", line=7),
    ]

    def fix_for(self, ctx: FileContext, site: Site, analysis: Any) -> Fix | None:
        """``x.cpu().tolist()`` (and ``.numpy().tolist()``) -> ``self._to_list(x)``."""
        call = self.call_at(ctx, site, analysis)
        if call is None or not isinstance(call.func, ast.Attribute) \
                or call.func.attr not in ("cpu", "to", "numpy"):
            return None
        outer: ast.AST = call
        parent = self.parent_of(ctx, site, analysis, outer)
        if isinstance(parent, ast.Attribute) and parent.attr == "numpy" and call.func.attr != \
                "numpy":
            grand = self.parent_of(ctx, site, analysis, parent)
            if not (isinstance(grand, ast.Call) and grand.func is parent and not grand.args):
                return None
            outer, parent = grand, self.parent_of(ctx, site, analysis, grand)
        if not (isinstance(parent, ast.Attribute) and parent.attr == "tolist"):
            return None
        tolist = self.parent_of(ctx, site, analysis, parent)
        if not (isinstance(tolist, ast.Call) and tolist.func is parent and not tolist.args):
            return None
        return self.event_sync_fix(ctx, site, analysis, tolist, call.func.value,
                                   f"`.{call.func.attr}().tolist()`")
