"""RB106 unsynchronised-async-copy."""

from __future__ import annotations

from reviewbot.lazy import libcst as cst

from reviewbot.providers import UnwaitedCopyProvider
from reviewbot.rule import Invalid, Valid
from reviewbot.rules._sync import CPU, SyncRule

# Calls that read their receiver on the host, and builtins that iterate their argument.
_READING_METHODS = frozenset({"tolist", "numpy", "item", "__array__"})
_ITERATING = frozenset({"list", "tuple", "sorted"})

_INIT = ("import torch\nclass R:\n    def __init__(self):\n"
         "        self.pinned = torch.empty((256, 1), dtype=torch.int64, pin_memory=True)\n"
         "        self.event = torch.cuda.Event()\n"
         "    def read(self, n):\n        ids = torch.zeros((n, 1), device='cuda')\n"
         "        self.pinned[:n].copy_(ids, non_blocking=True)\n")


class UnsynchronisedAsyncCopy(SyncRule):
    """A `non_blocking=True` copy to the host read before anything waits for it.

    ## What it does
    Finds a `non_blocking=True` copy from a CUDA tensor into host memory
    (`host.copy_(cuda, non_blocking=True)`, `cuda.to("cpu", non_blocking=True)`) whose
    destination is then read on the host (`.tolist()`, `.numpy()`, `.item()`, indexing,
    iteration) with no `event.synchronize()`, stream sync or device sync in between.
    Reported everywhere, hot path or not: it is a correctness bug. A destination whose
    device is unknown counts as host memory when its name says so (`cpu`, `pinned`,
    `host`).

    ## Why is this bad?
    The copy is only queued: the host reads whatever the buffer held before, silently.
    It passes tests on an idle GPU and returns stale token ids under load.

    ## Example
    ```python
    self.pinned[:n].copy_(ids, non_blocking=True)
    return self.pinned[:n].tolist()
    ```

    ## Use instead
    ```python
    self.pinned[:n].copy_(ids, non_blocking=True)
    self.transfer_event.record()
    self.transfer_event.synchronize()
    return self.pinned[:n].tolist()
    ```

    ## Options
    None.

    ## Fix safety
    No automatic fix.
    """

    code = "RB106"
    name = "unsynchronised-async-copy"
    summary = "A non_blocking copy to the host read before anything waits for it"
    consequence = ("the copy may not have landed, so the host reads stale data; record a "
                   "torch.cuda.Event after the copy and call event.synchronize() before "
                   "reading")
    HOT_ONLY = False
    CANDIDATES = ("non_blocking",)
    METADATA_DEPENDENCIES = (*SyncRule.METADATA_DEPENDENCIES, UnwaitedCopyProvider)
    VALID = [
        Valid(_INIT + "        self.event.record()\n        self.event.synchronize()\n"
                      "        return self.pinned[:n].tolist()\n"),
        Valid(_INIT + "        torch.cuda.synchronize()\n        return self.pinned[:n].tolist()\n"),
    ]
    INVALID = [
        Invalid(_INIT + "        return self.pinned[:n].tolist()\n", line=9,
                message_contains="before the non_blocking copy into it (line 8)"),
        Invalid("import torch\ndef f(x):\n    y = x.cuda().to('cpu', non_blocking=True)\n"
                "    return y[0]\n", line=4),
    ]

    def _read(self, node: cst.BaseExpression) -> None:
        """Report a host read of a buffer whose non_blocking copy is still unwaited."""
        copy = self.get_metadata(UnwaitedCopyProvider, node)
        if copy is None:
            return
        chain = self.reporting_here()
        if chain is False:
            return
        self.report_sync(node, f"`{copy.buffer}` is read on the host before the non_blocking "
                         f"copy into it (line {copy.copy_line}) is waited for", CPU,
                         f"filled by a non_blocking copy at line {copy.copy_line}", chain)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self._read(node)  # buf[i]

    def visit_Call(self, node: cst.Call) -> None:
        if self.method_name(node) in _READING_METHODS:
            self._read(node)  # buf.tolist()
        elif isinstance(node.func, cst.Name) and self.qualify(node.func) in _ITERATING:
            args = self.positional(node)
            if args:
                self._read(args[0])  # list(buf)

    def visit_For(self, node: cst.For) -> None:
        self._iterated(node.iter)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._iterated(node.iter)

    def _iterated(self, node: cst.BaseExpression) -> None:
        """``for row in buf``, and each of ``zip(a, b)`` or ``enumerate(a)``."""
        self._read(node)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and \
                node.func.value in ("zip", "enumerate"):
            for arg in self.positional(node):
                self._read(arg)
