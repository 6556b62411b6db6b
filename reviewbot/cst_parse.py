"""LibCST trees for the rules: the module, or only the functions they can report in, with
the file's facts (imported only when a file is parsed with LibCST)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst
from libcst.metadata import MetadataWrapper

from reviewbot.providers import FileFacts

if TYPE_CHECKING:
    from reviewbot.context import FileContext


class FactsWrapper(MetadataWrapper):
    """The engine's MetadataWrapper: the module (not copied) and the file's facts.

    ``roots`` are the trees the rules walk: the module, or (:func:`parse_functions`) the
    functions, each parsed alone.
    """

    def __init__(self, module: cst.Module, ctx: "FileContext",
                 functions: list[tuple[cst.FunctionDef, cst.Module, Any]] | None = None
                 ) -> None:
        super().__init__(module, unsafe_skip_copy=True)
        self.facts = FileFacts(ctx, module, functions)
        self.roots: list[cst.CSTNode] = [f for f, _, _ in functions] if functions else [module]


def parse_functions(ctx: "FileContext", infos: list[Any]) -> "FactsWrapper | None":
    """Parse only the given functions of the analysis (``FunctionInfo``), each from its own
    lines: a LibCST parse costs about ten times CPython's, and the rules that read nothing
    outside the functions they report in need no more. A method keeps its indentation
    (under an ``if 1:``), so that the lines of its strings stay what they are. None when
    a function's text cannot be cut out exactly (a definition that shares its first line
    with other code): parse the module."""
    from reviewbot.source import split_lines

    lines = split_lines(ctx.text)
    newline = "\r\n" if "\r\n" in ctx.text else "\n"
    parsed: list[tuple[cst.FunctionDef, cst.Module, Any]] = []
    for info in sorted(infos, key=lambda i: i.node.lineno):
        node = info.node
        first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        last = node.end_lineno or node.lineno
        if not 0 < first <= last <= len(lines):
            return None
        chunk = lines[first - 1:last]
        stripped = chunk[0].lstrip(" \t\f")
        if not stripped.startswith("@" if node.decorator_list else ("def", "async")):
            return None
        indented = len(stripped) != len(chunk[0])
        text = newline.join((["if 1:"] if indented else []) + chunk) + newline
        try:
            module = cst.parse_module(text)
        except (cst.ParserSyntaxError, RecursionError, ValueError):
            return None
        outer = module.body[0] if len(module.body) == 1 else None
        func = outer.body.body[0] if indented and isinstance(outer, cst.If) and isinstance(
            outer.body, cst.IndentedBlock) and len(outer.body.body) == 1 else outer
        if not isinstance(func, cst.FunctionDef) or func.name.value != node.name:
            return None
        parsed.append((func, module, info))
    if not parsed:
        return None
    return FactsWrapper(parsed[0][1], ctx, parsed)
