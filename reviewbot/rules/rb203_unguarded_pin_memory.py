"""RB203 unguarded-pin-memory."""

from __future__ import annotations

from typing import Any, Mapping

from reviewbot.lazy import libcst as cst

from reviewbot.providers import ImportedNameProvider
from reviewbot.rule import CstRule, Invalid, Valid
from reviewbot.rules._alloc import allocation, calls_under, code_of

_GUARD_WORDS = ("is_available", "is_pin_memory_available")
# Tests that make pinning conditional on a CUDA machine.
_PIN_GUARDS = ("is_available", "is_pin_memory_available", "pin_memory", "is_cuda",
               "device_count", "cuda.is_initialized")


class UnguardedPinMemory(CstRule):
    """`pin_memory=True` spelled as a literal where no CUDA check guards it.

    ## What it does
    Finds `pin_memory=True` written as a literal outside any `if` (or conditional
    expression) that tests `torch.cuda.is_available()`, `is_pin_memory_available()` or a
    `pin_memory` flag, in a module, class body or function that has no such check (an
    `if` or an `assert`) before it. Off by
    default: code that only ever runs on CUDA machines need not care.

    ## Why is this bad?
    Pinning needs a CUDA driver: on a CPU-only machine (a CI runner, a laptop) the
    allocation raises `RuntimeError`, so the code cannot even be imported and tested
    there.

    ## Example
    ```python
    self.buf = torch.empty(n, dtype=torch.int64, pin_memory=True)
    ```

    ## Use instead
    ```python
    self.buf = torch.empty(n, dtype=torch.int64,
                           pin_memory=torch.cuda.is_available())
    ```

    ## Options
    None.

    ## Fix safety
    No automatic fix.
    """

    code = "RB203"
    name = "unguarded-pin-memory"
    summary = "`pin_memory=True` as a literal where no CUDA check guards it"
    severity = "warning"
    default_enabled = False
    VALID = [
        Valid("import torch\nbuf = torch.empty(4, pin_memory=torch.cuda.is_available())\n"),
        Valid("import torch\ndef make(n):\n    if torch.cuda.is_available():\n"
              "        return torch.empty(n, pin_memory=True)\n    return torch.empty(n)\n"),
        Valid("import torch\ndef make(n):\n    if not torch.cuda.is_available():\n"
              "        raise RuntimeError('needs CUDA')\n"
              "    return torch.empty(n, pin_memory=True)\n"),
    ]
    INVALID = [
        Invalid("import torch\nclass R:\n    def __init__(self, n):\n"
                "        self.buf = torch.empty(n, pin_memory=True)\n", line=4),
        Invalid("import torch\nbuf = torch.zeros(8, pin_memory=True)\n", line=2),
        # A class body runs on import, as a module does.
        Invalid("import torch\nclass Pool:\n    SHARED = torch.zeros(8, pin_memory=True)\n",
                line=3),
    ]

    METADATA_DEPENDENCIES = (ImportedNameProvider,)
    CANDIDATES = ("pin_memory",)

    @classmethod
    def applies_to(cls, text: str, settings: Mapping[str, Any], packs: Any = None) -> bool:
        """The file must spell the literal."""
        return "pin_memory=True" in text or "pin_memory = True" in text

    def __init__(self, settings: Any, ctx: Any = None) -> None:
        super().__init__(settings, ctx)
        # The scopes the walk is in: a module, class body or function, or None for a
        # lambda (not walked: a lambda is an expression its caller runs).
        self._scopes: list[_Scope | None] = []
        self._guarded: set[int] = set()  # calls under a CUDA or pin-memory test

    def visit_Module(self, node: cst.Module) -> None:
        self._scopes.append(_Scope(node.body))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        self._scopes.append(_Scope(body))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._scopes.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        # A class body runs when the module is imported, as the module's does.
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        self._scopes.append(_Scope(body))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._scopes.append(None)

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self._scopes.pop()

    def visit_If(self, node: cst.If) -> None:
        self._note_test(node, node.test, node.body, node.orelse)

    def visit_While(self, node: cst.While) -> None:
        self._note_test(node, node.test, node.body, node.orelse)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if _tests_pinning(node.test):
            self._guarded.update(id(call) for call in calls_under(node.body, node.orelse))

    def visit_Assert(self, node: cst.Assert) -> None:
        self._note_test(node, node.test)

    def _note_test(self, node: cst.CSTNode, test: cst.BaseExpression,
                   *blocks: cst.CSTNode | None) -> None:
        scope = self._scopes[-1] if self._scopes else None
        if scope is None:
            return
        if blocks and _tests_pinning(test):
            self._guarded.update(id(call) for call in calls_under(*blocks))
        if id(node) in scope.statements and any(w in code_of(test) for w in _GUARD_WORDS):
            # A check for CUDA in the scope's own body covers what comes after it.
            scope.checked = True
            scope.in_check.update(id(call) for call in calls_under(test))

    def visit_Call(self, node: cst.Call) -> None:
        scope = self._scopes[-1] if self._scopes else None
        if scope is None or id(node) in self._guarded or (
                scope.checked and id(node) not in scope.in_check):
            return
        found = allocation(node, self.get_metadata(ImportedNameProvider, node.func))
        if found is not None and found.literal_pin:
            self.report(node, "`pin_memory=True` raises on a machine without CUDA; pass "
                              "`pin_memory=torch.cuda.is_available()` or check for CUDA first")


class _Scope:
    """A module or function body: its own statements, and whether a CUDA check in them
    has been passed."""

    def __init__(self, body: Any) -> None:
        self.statements: set[int] = set()
        for stmt in body:
            if isinstance(stmt, cst.SimpleStatementLine):
                self.statements.update(id(small) for small in stmt.body)
            else:
                self.statements.add(id(stmt))
        self.checked = False
        self.in_check: set[int] = set()  # calls inside the check's own test


def _tests_pinning(test: cst.BaseExpression) -> bool:
    """Whether a test makes pinning conditional on a CUDA machine."""
    text = code_of(test)
    return any(word in text for word in _PIN_GUARDS)
