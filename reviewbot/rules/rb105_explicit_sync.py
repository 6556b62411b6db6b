"""RB105 explicit-sync."""

from __future__ import annotations

from reviewbot.lazy import libcst as cst

from reviewbot.rule import Invalid, Valid
from reviewbot.rules._sync import STREAM, UNKNOWN, SyncRule

# torch's device-wide waits (a stream's own wait spelled through torch included).
DEVICE_SYNCS = frozenset({
    "torch.cuda.synchronize", "torch.accelerator.synchronize",
    "torch.cuda.current_stream().synchronize", "torch.cuda.default_stream().synchronize",
    "torch.accelerator.current_stream().synchronize"})


class ExplicitSync(SyncRule):
    """A device or stream synchronisation in a hot path.

    ## What it does
    Finds `torch.cuda.synchronize()`, `torch.accelerator.synchronize()`,
    `stream.synchronize()` and `torch.cuda.current_stream().synchronize()` in a function
    that runs every step. `event.synchronize()` on a `torch.cuda.Event` is the fix, not a
    finding.

    ## Why is this bad?
    A device sync waits for every kernel on every stream, a stream sync for every kernel
    on that stream, so the host cannot queue the next step meanwhile. With a side stream
    busy for 20 ms, `torch.cuda.synchronize()` took 22.4 ms on an H200 where an event sync
    on the needed copy returned in under 0.4 ms.

    ## Example
    ```python
    def execute_model(self, batch):
        out = self.model(batch)
        torch.cuda.synchronize()
        return out
    ```

    ## Use instead
    ```python
    def execute_model(self, batch):
        out = self.model(batch)
        self.done.record()
        self.done.synchronize()  # waits for this work only
        return out
    ```

    ## Options
    None.

    ## Fix safety
    No automatic fix.
    """

    code = "RB105"
    name = "explicit-sync"
    summary = "A device or stream synchronisation in a hot path"
    consequence = ("the host waits for every queued kernel; record a torch.cuda.Event after "
                   "the work you need and synchronise on it")
    CANDIDATES = ("synchronize",)
    QUIET_IN_ALLOWED_BLOCKS = False
    VALID = [
        Valid("import torch\nclass R:\n    def __init__(self):\n"
              "        self.ev = torch.cuda.Event()\n    def execute_model(self):\n"
              "        self.ev.record()\n        self.ev.synchronize()\n"),
        Valid("import torch\nclass R:\n    def load_model(self):\n"
              "        torch.cuda.synchronize()\n"),
        # A recorder that is off unless someone profiles.
        Valid("import torch\nclass R:\n    def execute_model(self, ids):\n"
              "        if not self._record:\n            return\n"
              "        torch.cuda.synchronize()\n"),
    ]
    INVALID = [
        Invalid("import torch\nclass R:\n    def execute_model(self):\n"
                "        torch.cuda.synchronize()\n", line=4),
        # Reported with a note: the block says the wait is expected, yet the host waits.
        Invalid("import torch\nclass R:\n    def execute_model(self):\n"
                "        with gpu_sync_allowed():\n            torch.cuda.synchronize()\n",
                line=5),
        Invalid("from torch import cuda\nclass R:\n    def execute_model(self):\n"
                "        cuda.current_stream().synchronize()\n", line=4),
        Invalid("import torch\nclass R:\n    def __init__(self):\n"
                "        self.s = torch.cuda.Stream()\n    def execute_model(self):\n"
                "        self.s.synchronize()\n", line=6),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.callee_name(node) != "synchronize":
            return
        chain = self.reporting_here()
        if chain is False or self.allowed(node):
            return
        torch_function = self.torch_function(node)
        if torch_function is not None:
            if torch_function in DEVICE_SYNCS:
                self.report_sync(node, f"`{self.source(node.func)}()` waits for all GPU work",
                                 STREAM, "a device-wide synchronisation", chain)
            return  # another function of torch (an Event's wait is not a stream's)
        if not isinstance(node.func, cst.Attribute):
            return
        receiver = self.receiver_of_method(node)
        if receiver is None:
            return
        if receiver.kind == STREAM:
            why = receiver.evidence
        else:
            holder = self.short(node.func.value).rsplit(".", 1)[-1].lower()
            if receiver.kind != UNKNOWN or not holder.endswith("stream"):
                return
            why = f"`{holder}` is named as a CUDA stream"
        self.report_sync(node, f"`{self.short(node.func)}()` waits for every kernel on the "
                         "stream", STREAM, why, chain)
