"""RB101 tolist-on-cuda-tensor."""

from __future__ import annotations

import ast

from reviewbot.lazy import libcst as cst

from reviewbot.finding import Fix
from reviewbot.rule import Invalid, Valid
from reviewbot.rules._sync import (HELPER_NAME, INCLUDE_UNKNOWN, RUNNER_WITH_HELPER, SyncRule,
                                    method_receiver)

_RUNNER = '''
import torch

class ModelRunner:
    def __init__(self):
        self.sampler = Sampler()
        self.pinned = torch.empty((256, 1), dtype=torch.int64, pin_memory=True)

    def execute_model(self, logits):
        {body}
'''


# A class that already has the event-synced readback helper: the fix calls it.


class TolistOnCudaTensor(SyncRule):
    """`.tolist()` on a CUDA tensor in a hot path.

    ## What it does
    Finds `.tolist()` on a tensor that the analysis knows is on the GPU (allocated on a
    CUDA device, moved with `.cuda()`/`.to("cuda")`, the output of an `nn.Module`, or
    computed from such tensors), inside a function that runs every step (reached from an
    entry point such as `*ModelRunner.execute_model` or an `nn.Module`'s `forward`). The
    message names the hot path and why the tensor is on the GPU.

    ## Why is this bad?
    `.tolist()` of a CUDA tensor copies into pageable host memory: the host waits for the
    whole default stream, and while it waits every other host thread's CUDA calls stall
    with it. Measured on an H200 with 20 ms of work queued: a KV-transfer thread's copy
    enqueue took 19.1 ms instead of 0.16 ms. The same `.tolist()` on a numpy array, a
    list, a CPU or pinned tensor, or in start-up code is fine and is not reported.

    ## Example
    ```python
    def execute_model(self, scheduler_output):
        sampled_token_ids = self.sampler(logits).sampled_token_ids
        return sampled_token_ids.tolist()
    ```

    ## Use instead
    ```python
    def execute_model(self, scheduler_output):
        sampled_token_ids = self.sampler(logits).sampled_token_ids
        return self._to_list(sampled_token_ids)

    def _to_list(self, t):
        pinned = self.sampled_token_ids_pinned_cpu[: t.shape[0]]
        pinned.copy_(t, non_blocking=True)
        self.transfer_event.record()
        self.transfer_event.synchronize()  # waits for this copy only
        return pinned.tolist()
    ```

    ## Options
    - `include-unknown` (bool, default false): also report tensors whose device is
      unknown, as warnings.
    - Hot paths come from the rule packs (`rule-packs`): entry points, start-up functions,
      and `with` blocks that mark a sync as intended.

    - `helper-name` (string, default `_to_list`): the event-synced readback helper the
      fix calls.

    ## Fix safety
    Safe. The call becomes `self._to_list(x)` (or `_to_list(x)` in a free function). A
    class that has no helper of that shape gains one, with its docstring, and a class
    attribute holding a `threading.local`: each thread keeps, per device, a
    `torch.cuda.Event` and a pinned host buffer (`device="cpu"`), made on first use, so
    the class still builds without CUDA, and `copy.deepcopy` and `pickle` of its objects
    work as before. The copy and the event go on the current stream of the tensor's own
    device. The buffer starts at the class's bound of what the tensor holds
    (`self.max_num_reqs` for sampled token ids) and grows only when a tensor does not fit.
    The helper returns exactly what `.tolist()` returns, for every shape and dtype.
    """

    code = "RB101"
    name = "tolist-on-cuda-tensor"
    summary = "`.tolist()` on a CUDA tensor in a hot path"
    consequence = ("the host waits for the GPU and the pageable copy stalls every other "
                   "thread's CUDA calls; copy into a pinned buffer with non_blocking=True "
                   "and wait on a torch.cuda.Event")
    CANDIDATES = ("tolist",)
    NEEDS_CUDA = True
    QUIET_IN_ALLOWED_BLOCKS = False
    options = (INCLUDE_UNKNOWN, HELPER_NAME)
    fix_safety = "safe"
    VALID = [
        Valid(_RUNNER.format(body="return logits.cpu().numpy().tolist()  # numpy")),
        Valid(_RUNNER.format(body="return self.pinned[:4].tolist()")),
        Valid(_RUNNER.format(body="ids = torch.tensor([1, 2])\n        return ids.tolist()")),
        Valid("import torch\nclass M:\n    def __init__(self):\n"
              "        x = torch.zeros(4, device='cuda')\n        self.n = x.tolist()\n"),
        Valid("import numpy as np\ndef execute_model(x):\n    return np.arange(4).tolist()\n"),
    ]
    INVALID = [
        Invalid(_RUNNER.format(body="out = self.sampler(logits)\n"
                                    "        ids = out.sampled_token_ids\n"
                                    "        return ids.tolist()"),
                line=12, message_contains="hot path execute_model"),
        Invalid("import torch as t\nclass Runner:\n    def __init__(self):\n"
                "        self.ids = t.zeros(4, device='cuda')\n"
                "    def execute_model(self):\n        return self._read()\n"
                "    def _read(self):\n        return self.ids.tolist()\n", line=8,
                message_contains="hot path execute_model -> _read"),
        Invalid("import torch\nclass Head(torch.nn.Module):\n    def forward(self, x):\n"
                "        y = x.cuda() * 2\n        return y.tolist()\n", line=5),
        Invalid(RUNNER_WITH_HELPER.format(body="        return ids.tolist()\n"), line=11,
                expected_fix=RUNNER_WITH_HELPER.format(body="        return self._to_list(ids)\n")),
        # A receiver over several lines keeps its lines and its comment; the finding is on
        # the line that calls `.tolist()`.
        Invalid(RUNNER_WITH_HELPER.format(body="        return (ids  # the sampled ids\n"
                                         "                .view(-1)).tolist()\n"), line=12,
                expected_fix=RUNNER_WITH_HELPER.format(
                    body="        return self._to_list(ids  # the sampled ids\n"
                         "                .view(-1))\n")),
    ]

    @staticmethod
    def cuda_sites(node: ast.AST) -> tuple[ast.AST, ...]:
        """The receiver of ``x.tolist()``."""
        return method_receiver(node, "tolist")

    def visit_Call(self, node: cst.Call) -> None:
        self.report_readback(node, "tolist")

    def fix_for(self, node: cst.CSTNode) -> Fix | None:
        """``x.tolist()`` -> ``self._to_list(x)``."""
        call = self.ast_call(node) if isinstance(node, cst.Call) else None
        if call is None or not isinstance(call.func, ast.Attribute) or call.args \
                or call.keywords:
            return None
        assert isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
        return self.event_sync_fix(call, call.func.value, "`.tolist()`", node.func.value)
