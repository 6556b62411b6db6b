"""RB202 pinned-alloc-in-hot-path."""

from __future__ import annotations

from reviewbot.lazy import libcst as cst

from reviewbot.providers import HotPathProvider, ImportedNameProvider
from reviewbot.rule import CstRule, Invalid, Valid
from reviewbot.rules._alloc import allocation, calls_under, is_grow_guard, pins_into_cache

_WORDS = ("pin_memory", "Event(", "Stream(")


class PinnedAllocInHotPath(CstRule):
    """Pinned host memory, a CUDA event or a CUDA stream created in a hot path.

    ## What it does
    Finds `pin_memory=True` (or a `pin_memory=` flag that may be true), `.pin_memory()`,
    `torch.cuda.Event()` and `torch.cuda.Stream()` in a function that runs every step
    (the hot paths of RB101-RB106). An allocation under a guard that makes it happen once
    or only to grow (`if self.buf is None:`, `if self.buf.shape[0] < n:`, `if not
    buf.is_pinned(): cache[key] = buf.pin_memory()`) is not reported; pinning a local copy
    that is not pinned yet happens on every call, and is.

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
        # Pinned once: the next step finds the buffer pinned.
        Valid("import torch\nclass R:\n    def execute_model(self, x):\n"
              "        buf = self.cache[x.shape[0]]\n        if not buf.is_pinned():\n"
              "            self.cache[x.shape[0]] = buf.pin_memory()\n"),
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
        # A local copy pinned when it is not: every call, since each call's tensor is new.
        Invalid("import torch\nclass R:\n    def execute_model(self, x):\n"
                "        t = x.cpu()\n        if not t.is_pinned():\n"
                "            t = t.pin_memory()\n        return t\n", line=6),
    ]

    METADATA_DEPENDENCIES = (HotPathProvider, ImportedNameProvider)
    CANDIDATES = _WORDS
    HOT_ONLY = True
    LOCAL_CANDIDATES = True
    FUNCTION_LOCAL = True

    def __init__(self, settings: Any, ctx: Any = None) -> None:
        super().__init__(settings, ctx)
        self._chains: list[tuple[str, ...] | None] = []  # per enclosing function
        self._lambdas = 0
        self._grown: set[int] = set()  # calls under a grow-or-create-once guard

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        # A nested function has no chain of its own: it runs when something calls it.
        chain = self.get_metadata(HotPathProvider, node) if not self._chains else None
        self._chains.append(chain)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._chains.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._lambdas += 1

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self._lambdas -= 1

    def visit_If(self, node: cst.If) -> None:
        self._note_guard(node)
        if self._chains and self._chains[-1] and pins_into_cache(node):
            self._grown.update(id(call) for call in calls_under(node.body))

    def visit_While(self, node: cst.While) -> None:
        self._note_guard(node)

    def _note_guard(self, node: cst.If | cst.While) -> None:
        if self._chains and self._chains[-1] and is_grow_guard(node.test):
            self._grown.update(id(call) for call in calls_under(node.body))

    def visit_Call(self, node: cst.Call) -> None:
        chain = self._chains[-1] if self._chains else None
        if not chain or self._lambdas or id(node) in self._grown:
            return  # not per step, or grown only when needed
        found = allocation(node, self.get_metadata(ImportedNameProvider, node.func))
        if found is None or not found.direct:
            return  # nothing allocated here, or a helper's own call allocates
        if found.what.endswith(("Event()", "Stream()")):
            harm = "a driver object made every step; create it once in __init__ and reuse it"
        else:
            harm = ("pinned host memory allocated every step costs 15-25x a pageable "
                    "allocation when PyTorch's pinned cache misses; allocate the buffer "
                    "once in __init__ and reuse it")
        self.report(node, f"`{found.what}` in hot path {' -> '.join(chain)}: {harm}")
