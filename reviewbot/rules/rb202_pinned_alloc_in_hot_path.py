"""RB202 pinned-alloc-in-hot-path."""

from __future__ import annotations

from typing import Any, Mapping

from reviewbot.analysis.allocations import allocations
from reviewbot.analysis.gpu import Names
from reviewbot.context import FileContext
from reviewbot.finding import Finding
from reviewbot.rule import AstRule, Invalid, Valid

_WORDS = ("pin_memory", "Event(", "Stream(")


class PinnedAllocInHotPath(AstRule):
    """Pinned host memory, a CUDA event or a CUDA stream created in a hot path.

    ## What it does
    Finds `pin_memory=True` (or a `pin_memory=` flag that may be true), `.pin_memory()`,
    `torch.cuda.Event()` and `torch.cuda.Stream()` in a function that runs every step
    (the hot paths of RB101-RB106). An allocation under a guard that makes it happen once
    or only to grow (`if self.buf is None:`, `if self.buf.shape[0] < n:`) is not reported.

    ## Why is this bad?
    Pinned memory comes from `cudaHostAlloc`, which PyTorch caches; when the cache misses,
    a pinned allocation costs about 15-25x a pageable one (on an H200: 102 us for 1 MiB
    against 4 us). Events and streams are driver objects. A buffer or event made once in
    `__init__` and reused costs nothing per step.

    ## Example
    ```python
    def execute_model(self, batch):
        ids = self.model(batch).argmax(-1)
        host = torch.empty(ids.shape, dtype=ids.dtype, pin_memory=True)
        done = torch.cuda.Event()
        ...
    ```

    ## Use instead
    ```python
    def __init__(self, max_num_reqs):
        self.host = torch.empty(max_num_reqs, dtype=torch.int64, pin_memory=True)
        self.done = torch.cuda.Event()
    ```

    ## Options
    None; hot paths come from the rule packs, as for RB101-RB106.

    ## Fix safety
    No automatic fix: where the object should live is a design choice.
    """

    code = "RB202"
    kind = "analysis"
    name = "pinned-alloc-in-hot-path"
    summary = "Pinned host memory, a CUDA event or a CUDA stream created in a hot path"
    severity = "warning"
    VALID = [
        Valid("import torch\nclass R:\n    def __init__(self):\n"
              "        self.buf = torch.empty(256, pin_memory=True)\n"
              "        self.ev = torch.cuda.Event()\n"
              "    def execute_model(self, x):\n        self.buf[:4].copy_(x)\n"),
        Valid("import torch\nclass R:\n    def execute_model(self, x):\n"
              "        if self.buf is None or self.buf.shape[0] < x.shape[0]:\n"
              "            self.buf = torch.empty(x.shape, pin_memory=True)\n"),
        Valid("import torch\nclass R:\n    def execute_model(self, x):\n"
              "        return torch.empty(x.shape, pin_memory=False)\n"),
        # Passing the flag on: the helper's own torch call is the allocation (reported
        # there when the helper is hot), not this line.
        Valid("import torch\nclass R:\n    def execute_model(self, x):\n"
              "        return make_staging(x.shape, pin_memory=True)\n"),
    ]
    INVALID = [
        Invalid("import torch\nclass R:\n    def execute_model(self, x):\n"
                "        buf = torch.empty(x.shape, pin_memory=True)\n", line=4,
                message_contains="execute_model"),
        Invalid("import torch\nclass R:\n    def execute_model(self, x):\n"
                "        self._read(x)\n    def _read(self, x):\n"
                "        done = torch.cuda.Event()\n", line=6,
                message_contains="execute_model -> _read"),
        Invalid("import torch\nclass R:\n    def execute_model(self, x):\n"
                "        return x.cpu().pin_memory()\n", line=4),
    ]

    project_facts = True

    @classmethod
    def applies_to(cls, text: str, settings: Mapping[str, Any], packs: Any = None) -> bool:
        """The file must spell an allocation this rule knows."""
        return any(word in text for word in _WORDS)

    def check_file(self, ctx: FileContext) -> None:
        """Report allocations in the file's hot functions."""
        analysis = ctx.gpu
        if not analysis.hot:
            return
        names = Names(ctx.ast_tree)
        for qualname, chain in analysis.hot.items():
            func = analysis.functions[qualname]
            for found, grow, _ in allocations(func.node, names):
                if grow or not found.direct:
                    continue  # grown only when needed; or a helper's own call allocates
                node = found.node
                if found.what.endswith("Event()") or found.what.endswith("Stream()"):
                    harm = ("a driver object made every step; create it once in "
                            "__init__ and reuse it")
                else:
                    harm = ("pinned host memory allocated every step costs 15-25x a "
                            "pageable allocation when PyTorch's pinned cache misses; "
                            "allocate the buffer once in __init__ and reuse it")
                ctx.findings.append(Finding(
                    self.code, self.name,
                    f"`{found.what}` in hot path {' -> '.join(chain)}: {harm}",
                    ctx.path, *ctx.span(node), self.severity))
