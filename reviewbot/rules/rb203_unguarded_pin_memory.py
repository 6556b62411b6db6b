"""RB203 unguarded-pin-memory."""

from __future__ import annotations

import ast
from typing import Any, Mapping

from reviewbot.analysis.allocations import allocations
from reviewbot.analysis.gpu import Names
from reviewbot.context import FileContext
from reviewbot.finding import Finding
from reviewbot.rule import AstRule, Invalid, Valid

_GUARD_WORDS = ("is_available", "is_pin_memory_available")


class UnguardedPinMemory(AstRule):
    """`pin_memory=True` spelled as a literal where no CUDA check guards it.

    ## What it does
    Finds `pin_memory=True` written as a literal outside any `if` (or conditional
    expression) that tests `torch.cuda.is_available()`, `is_pin_memory_available()` or a
    `pin_memory` flag, and in a function that has no such check before it. Off by
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
    kind = "analysis"
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
    ]

    @classmethod
    def applies_to(cls, text: str, settings: Mapping[str, Any], packs: Any = None) -> bool:
        """The file must spell the literal."""
        return "pin_memory=True" in text or "pin_memory = True" in text

    def check_file(self, ctx: FileContext) -> None:
        """Report unguarded literal pins at module level and in every function."""
        tree = ctx.ast_tree
        names = Names(tree)
        scopes: list[ast.AST] = [tree]
        scopes += [node for node in ast.walk(tree)
                   if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for scope in scopes:
            checks = _guard_lines(scope)
            for found, _, guarded in allocations(scope, names):
                node = found.node
                if not found.literal_pin or guarded or any(line < node.lineno for line in checks):
                    continue
                ctx.findings.append(Finding(
                    self.code, self.name,
                    "`pin_memory=True` raises on a machine without CUDA; pass "
                    "`pin_memory=torch.cuda.is_available()` or check for CUDA first",
                    ctx.path, *ctx.span(node), self.severity))


def _guard_lines(scope: ast.AST) -> list[int]:
    """Lines of ``if`` / ``assert`` checks for CUDA in the scope's own body."""
    lines = []
    for stmt in getattr(scope, "body", []):
        test = stmt.test if isinstance(stmt, (ast.If, ast.Assert)) else None
        if test is not None and any(word in ast.unparse(test) for word in _GUARD_WORDS):
            lines.append(stmt.lineno)
    return lines
