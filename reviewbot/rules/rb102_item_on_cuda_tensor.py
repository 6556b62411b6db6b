"""RB102 item-on-cuda-tensor."""

from __future__ import annotations

import ast

from reviewbot.lazy import libcst as cst

from reviewbot.finding import Fix
from reviewbot.rule import Invalid, Valid

# Reductions that give a 0-d tensor when called without a dimension.
_FULL_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "prod", "any", "all", "argmax",
                              "argmin", "norm", "count_nonzero", "amax", "amin", "nansum"})


def _zero_dimensional(expr: ast.expr) -> bool:
    """``x.sum()`` or ``torch.sum(x)``: a full reduction, whatever ``x``'s shape."""
    if not isinstance(expr, ast.Call) or expr.keywords or not isinstance(expr.func,
                                                                        ast.Attribute):
        return False
    if expr.func.attr not in _FULL_REDUCTIONS:
        return False
    owner = expr.func.value
    if isinstance(owner, ast.Name) and owner.id == "torch":
        return len(expr.args) == 1 and not isinstance(expr.args[0], ast.Starred)
    return not expr.args
from reviewbot.rules._sync import (HELPER_NAME, INCLUDE_UNKNOWN, RUNNER_WITH_HELPER, SyncRule,
                                    method_receiver)


# A class that already has the event-synced readback helper: the fix calls it.


class ItemOnCudaTensor(SyncRule):
    """`.item()` on a CUDA tensor in a hot path.

    ## What it does
    Finds `.item()` on a tensor known to be on the GPU inside a function that runs every
    step. The message names the hot path and why the tensor is on the GPU.

    ## Why is this bad?
    `.item()` waits until every kernel queued before it has run, so the host cannot queue
    the next step's work meanwhile and the GPU idles between steps. Unlike `.tolist()` it
    did not stall other threads' CUDA calls in our H200 measurement (0.19 ms), but the
    calling thread still waits for the whole queue.

    ## Example
    ```python
    def execute_model(self, batch):
        logits = self.model(batch)
        if logits.max().item() > 30.0:
            self.clip(logits)
    ```

    ## Use instead
    ```python
    def execute_model(self, batch):
        logits = self.model(batch)
        logits = torch.clamp(logits, max=30.0)  # stays on the GPU
    ```

    ## Options
    - `include-unknown` (bool, default false): also report tensors whose device is
      unknown, as warnings.

    - `helper-name` (string, default `_to_list`): the event-synced readback helper the
      fix calls.

    ## Fix safety
    Safe where the tensor is provably 0-d (a full reduction such as `x.sum()` or
    `torch.max(x)`, with no `dim`): there `.tolist()` returns the same Python scalar as
    `.item()`, so the call becomes `self._to_list(x.sum())` as for RB101. Elsewhere the
    fix is display-only: a one-element tensor of another shape would give a list.
    """

    code = "RB102"
    name = "item-on-cuda-tensor"
    summary = "`.item()` on a CUDA tensor in a hot path"
    consequence = ("the host waits for all queued GPU work before the next step can be "
                   "queued; keep the value on the GPU or read it with an event-synced "
                   "pinned copy")
    CANDIDATES = ("item",)
    NEEDS_CUDA = True
    QUIET_IN_ALLOWED_BLOCKS = False
    options = (INCLUDE_UNKNOWN, HELPER_NAME)
    fix_safety = "sometimes"
    VALID = [
        Valid("import torch\nclass R:\n    def execute_model(self, n):\n"
              "        t = torch.tensor([n])\n        return t.item()\n"),
        Valid("import torch\nclass R:\n    def profile_run(self):\n"
              "        t = torch.zeros(1, device='cuda')\n        return t.item()\n"),
        Valid("import torch\nclass R:\n    def execute_model(self, d):\n"
              "        return d.item()  # a dict? unknown: not reported by default\n"),
    ]
    INVALID = [
        Invalid("import torch\nclass R:\n    def execute_model(self, n):\n"
                "        t = torch.zeros(n, device=torch.device('cuda'))\n"
                "        return t.sum().item()\n", line=5,
                message_contains="allocated on the device 'cuda'"),
        Invalid("import torch\nclass R:\n    def execute_model(self, d):\n"
                "        return d.item()\n", line=4, options={"include-unknown": True},
                message_contains="device unknown"),
        Invalid(RUNNER_WITH_HELPER.format(body="        return ids.sum().item()\n"), line=11,
                expected_fix=RUNNER_WITH_HELPER.format(
                    body="        return self._to_list(ids.sum())\n")),
    ]

    @staticmethod
    def cuda_sites(node: ast.AST) -> tuple[ast.AST, ...]:
        """The receiver of ``x.item()``."""
        return method_receiver(node, "item")

    def visit_Call(self, node: cst.Call) -> None:
        self.report_readback(node, "item")

    def fix_for(self, node: cst.CSTNode) -> Fix | None:
        """A safe fix for a 0-d tensor; a display-only suggestion otherwise."""
        call = self.ast_call(node) if isinstance(node, cst.Call) else None
        if call is None or not isinstance(call.func, ast.Attribute) or call.args:
            return None
        tensor = call.func.value
        if _zero_dimensional(tensor):
            assert isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            return self.event_sync_fix(call, tensor, "`.item()`", node.func.value)
        return Fix("display", "Keep the value on the GPU (torch.where, clamp, masks), or "
                   "read it once per step with an event-synced pinned copy")
