"""RB103 blocking-copy-to-host."""

from __future__ import annotations

import ast
from typing import Callable

from reviewbot.lazy import libcst as cst

from reviewbot.finding import Fix
from reviewbot.providers import DeviceFact
from reviewbot.rule import Invalid, Valid
from reviewbot.rules._sync import CPU, CUDA, DEV_CPU, HELPER_NAME, INCLUDE_UNKNOWN, UNKNOWN, \
    RUNNER_WITH_HELPER, SyncRule, ast_positional

_HOST_WORDS = ("cpu", "pinned", "host")


# A class that already has the event-synced readback helper: the fix calls it.


class BlockingCopyToHost(SyncRule):
    """A blocking copy of a CUDA tensor to the host in a hot path.

    ## What it does
    Finds `.cpu()`, `.numpy(force=True)`, `.to("cpu")`, `.to(torch.device("cpu"))`,
    `.to(cpu_tensor)` and `cpu_tensor.copy_(cuda_tensor)` without `non_blocking=True` on a
    tensor known to be on the GPU, and `cpu_tensor[i] = cuda_tensor` (an assignment into a
    host tensor copies and waits), inside a function that runs every step. A plain
    `.numpy()` is not reported: torch raises it for a CUDA tensor, so code that runs calls it
    on a host tensor only.

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
    CANDIDATES = ("cpu", "numpy", ".to(", "copy_", "[")
    NEEDS_CUDA = True
    QUIET_IN_ALLOWED_BLOCKS = False
    options = (INCLUDE_UNKNOWN, HELPER_NAME)
    fix_safety = "sometimes"
    VALID = [
        Valid("import torch\nclass R:\n    def execute_model(self, n):\n"
              "        t = torch.arange(n)\n        return t.cpu().numpy()\n"),
        # `.numpy()` of a CUDA tensor raises: a tensor it is called on is on the host.
        Valid("import torch\nclass R:\n    def execute_model(self, x):\n"
              "        y = x.to('cuda') + 1\n        return y.numpy()\n"),
        Valid("import torch\nclass R:\n    def __init__(self):\n"
              "        self.buf = torch.empty(8, pin_memory=True)\n"
              "        self.dev = torch.zeros(8, device='cuda')\n"
              "    def execute_model(self):\n"
              "        self.buf.copy_(self.dev, non_blocking=True)\n"),
        Valid("import torch\nclass R:\n    def __init__(self):\n"
              "        self.flag_cpu = torch.zeros(1, dtype=torch.bool)\n"
              "        self.flag = torch.zeros(1, dtype=torch.bool, device='cuda')\n"
              "    def execute_model(self, ids: torch.Tensor):\n"
              "        self.flag_cpu[0] = True\n"
              "        self.flag[0] = torch.all(ids == -1)\n"
              # A tensor on the GPU only by default: the host tensor it is put into wins.
              "        self.flag_cpu[0] = torch.all(ids == -1)\n"),
    ]
    INVALID = [
        Invalid("import torch\nclass R:\n    def execute_model(self, x):\n"
                "        y = x.to('cuda') + 1\n        return y.cpu()\n", line=5),
        Invalid("import torch\nclass R:\n    def execute_model(self, x):\n"
                "        y = x.to('cuda') + 1\n        return y.numpy(force=True)\n", line=5,
                message_contains="`.numpy(force=True)`"),
        Invalid("import torch\nclass R:\n    def execute_model(self, x):\n"
                "        y = x.cuda()\n        return y.to('cpu')\n", line=5,
                message_contains="without `non_blocking=True`"),
        Invalid("import torch\nclass R:\n    def __init__(self):\n"
                "        self.host = torch.empty(8, device='cpu')\n"
                "        self.dev = torch.zeros(8, device='cuda')\n"
                "    def execute_model(self):\n"
                "        self.host.copy_(self.dev)\n", line=7),
        Invalid("import torch\nclass R:\n    def __init__(self):\n"
                "        self.flag_cpu = torch.zeros(1, dtype=torch.bool)\n"
                "        self.ids = torch.zeros(8, device='cuda')\n"
                "    def execute_model(self):\n"
                "        done = torch.all(self.ids == -1)\n"
                "        self.flag_cpu[0] = done\n", line=8,
                message_contains="assigned into the host tensor"),
        Invalid(RUNNER_WITH_HELPER.format(body="        return ids.cpu().tolist()\n"), line=11,
                expected_fix=RUNNER_WITH_HELPER.format(body="        return self._to_list(ids)\n")),
    ]

    @staticmethod
    def cuda_sites(node: ast.AST) -> tuple[ast.AST, ...]:
        """The receiver of ``x.cpu()``, ``.numpy()`` and ``.to()``, the source of
        ``host.copy_(x)``, the value assigned into ``host[i]``."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if method in ("cpu", "numpy", "to"):
                return (node.func.value,)
            if method == "copy_" and node.args:
                return ast_positional(node)[:1]
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript)
                                                  for t in node.targets):
            return (node.value,)
        return ()

    @staticmethod
    def host_sites(node: ast.AST, kind_of: Callable[[ast.AST], str | None]) -> bool:
        """``.to(x)`` reports only where ``x`` (its ``device=``, else its first positional
        argument) is labelled the host, and ``host[i] = cuda`` only where a target's
        tensor is labelled a host tensor, as :meth:`visit_Call` and :meth:`visit_Assign`
        ask: most ``.to(...)`` calls of a hot path move a tensor to the GPU or cast it."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "to":
            target = next((k.value for k in node.keywords if k.arg == "device"), None)
            if target is None:
                args = ast_positional(node)
                target = args[0] if args else None
            return target is not None and kind_of(target) in (DEV_CPU, CPU)
        if isinstance(node, ast.Assign):
            return any(kind_of(t.value) == CPU for t in node.targets
                       if isinstance(t, ast.Subscript))
        return True

    def visit_Call(self, node: cst.Call) -> None:
        method = self.method_name(node)
        if method not in ("cpu", "numpy", "to", "copy_"):
            return
        chain = self.reporting_here()
        if chain is False:
            return
        receiver = self.receiver(node)
        if receiver is None or self.allowed(node):
            return
        assert isinstance(node.func, cst.Attribute)
        held = node.func.value
        if method == "numpy" and not self._forced(node):
            return  # torch raises for a CUDA tensor: this one is on the host
        if method in ("cpu", "numpy"):
            spelled = "numpy(force=True)" if method == "numpy" else "cpu()"
            if self.reportable(receiver):
                self.report_sync(node, f"`.{spelled}` on `{self.short(held)}`", receiver.kind,
                                 receiver.evidence, chain)
        elif method == "to":
            target = self.device_argument(node, 0)
            if target is None or target.kind not in (DEV_CPU, CPU):
                return  # not to the host (or to a device the analysis does not know)
            if receiver.kind == CUDA and self.non_blocking(node):
                return  # an async copy: RB106 watches its reads
            if self.reportable(receiver):
                self.report_sync(node, f"`.to(...)` of `{self.short(held)}` to the CPU without "
                                 "`non_blocking=True`", receiver.kind, receiver.evidence, chain)
        else:
            self._copy_into_host(node, receiver, chain)

    @staticmethod
    def _forced(node: cst.Call) -> bool:
        """``.numpy(force=True)``: copies a CUDA tensor to the host instead of raising."""
        return any(arg.keyword is not None and arg.keyword.value == "force" and
                   isinstance(arg.value, cst.Name) and arg.value.value == "True"
                   for arg in node.args)

    def visit_Assign(self, node: cst.Assign) -> None:
        """``host[i] = cuda``: the element assignment copies to the host and waits."""
        targets = [t.target for t in node.targets if isinstance(t.target, cst.Subscript)]
        if not targets:
            return
        chain = self.reporting_here()
        if chain is False or self.allowed(node.value):
            return
        source = self.device(node.value)
        if source is None or source.kind != CUDA or source.weak:
            return  # a tensor taken to be on the GPU only by default: the host tensor wins
        for target in targets:
            into = self.device(target.value)
            if into is not None and into.kind == CPU:
                self.report_sync(node, f"`{self.short(node.value)}` (a CUDA tensor) assigned "
                                 f"into the host tensor `{self.short(target.value)}`",
                                 source.kind, source.evidence, chain)
                return

    def _copy_into_host(self, node: cst.Call, receiver: DeviceFact,
                        chain: tuple[str, ...] | None) -> None:
        """``host.copy_(cuda)`` without ``non_blocking=True``."""
        assert isinstance(node.func, cst.Attribute)
        kind = receiver.kind
        named_host = kind == UNKNOWN and any(
            word in (self.root_key(node.func.value) or "").lower() for word in _HOST_WORDS)
        if not (kind == CPU or named_host) or self.non_blocking(node):
            return
        args = self.positional(node)
        if not args:
            return
        source = self.device(args[0])
        if source is None or source.kind not in (CUDA, UNKNOWN) or not self.reportable(source):
            return
        self.report_sync(node, f"`.copy_()` of `{self.short(args[0])}` into the host tensor "
                         f"`{self.short(node.func.value)}` without `non_blocking=True`",
                         source.kind, source.evidence, chain)

    def fix_for(self, node: cst.CSTNode) -> Fix | None:
        """``x.cpu().tolist()`` (and ``.numpy().tolist()``) -> ``self._to_list(x)``."""
        call = self.ast_call(node) if isinstance(node, cst.Call) else None
        if call is None or not isinstance(call.func, ast.Attribute) \
                or call.func.attr not in ("cpu", "to", "numpy"):
            return None
        outer: ast.AST = call
        parent = self.ast_parent(outer)
        if isinstance(parent, ast.Attribute) and parent.attr == "numpy" and call.func.attr != \
                "numpy":
            grand = self.ast_parent(parent)
            if not (isinstance(grand, ast.Call) and grand.func is parent and not grand.args):
                return None
            outer, parent = grand, self.ast_parent(grand)
        if not (isinstance(parent, ast.Attribute) and parent.attr == "tolist"):
            return None
        tolist = self.ast_parent(parent)
        if not (isinstance(tolist, ast.Call) and tolist.func is parent and not tolist.args):
            return None
        assert isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
        return self.event_sync_fix(tolist, call.func.value, f"`.{call.func.attr}().tolist()`",
                                   node.func.value)
