"""Statements a fix adds to a file, inserted with LibCST and rendered as one edit.

A fix that adds code (a helper method at the end of a class, a helper function after a
module's docstring and imports) builds it as LibCST nodes; a transformer puts them into
the file's tree, and the edit inserts them where the transformer did, rendered by LibCST
with the file's own indentation. Edits spell line ends ``\\n``: they take the file's
newline when they are applied (``reviewbot.fixer.apply_edits``).

Where the statements go is checked against the file's text: the statements before the
insertion point, rendered, must be the file's lines there, or there is no edit (never a
misplaced one).
"""

from __future__ import annotations

import ast
from typing import Callable, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState

from reviewbot.analysis.walk import walk as fast_walk
from reviewbot.finding import Edit

# What builds the added statements, given the indentation of the block they join (a
# docstring's continuation lines are written at its function's body indentation).
Build = Callable[[str], Sequence[cst.BaseStatement]]

# The nodes a class can be nested in: the walk that finds a class enters no other node
# (expressions, parameters, decorators, simple statements hold no class).
_HOLDERS = (cst.Module, cst.BaseCompoundStatement, cst.IndentedBlock, cst.Else,
            cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)


def blank_line() -> cst.EmptyLine:
    """An empty line, with no indentation written on it."""
    return cst.EmptyLine(indent=False)


def render(module: cst.Module, nodes: Sequence[cst.CSTNode], indent: Sequence[str] = ()) -> str:
    """The code of ``nodes`` inside blocks indented by ``indent`` (one unit per enclosing
    block), with the module's default indentation unit and ``\\n`` line ends; as
    ``module.code_for_node``, which renders a node at the top level only."""
    state = CodegenState(default_indent=module.default_indent, default_newline="\n",
                         indent_tokens=list(indent))
    for node in nodes:
        node._codegen(state)
    return "".join(state.tokens)


def _with_blank_lines(statement: cst.BaseStatement, count: int) -> cst.BaseStatement:
    return statement.with_changes(
        leading_lines=(*(blank_line() for _ in range(count)), *statement.leading_lines))


def _lines_of(code: str) -> list[str]:
    return code.split("\n")[:-1]


def _matches(lines: Sequence[str], first: int, code: str) -> bool:
    """Whether ``code`` is the file's text from line ``first`` (1-based) on."""
    expected = _lines_of(code)
    return first >= 1 and lines[first - 1:first - 1 + len(expected)] == expected


class _AppendToClass(cst.CSTTransformer):
    """Appends statements to the body of the ``ordinal``-th class of a module (in source
    order), after its last statement and before the comments that end the block."""

    def __init__(self, ordinal: int, name: str, build: Build, default_indent: str) -> None:
        super().__init__()
        self.ordinal, self.name, self.build = ordinal, name, build
        self.default_indent = default_indent
        self.target: cst.ClassDef | None = None
        self.updated: cst.ClassDef | None = None
        self.indent: list[str] = []  # the indentation of the target's body, unit by unit
        self._classes = -1
        self._blocks: list[str] = []

    def _unit(self, block: cst.IndentedBlock) -> str:
        return self.default_indent if block.indent is None else block.indent

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.ClassDef):
            self._classes += 1
            if self._classes == self.ordinal and node.name.value == self.name and \
                    isinstance(node.body, cst.IndentedBlock) and self.target is None:
                self.target = node
                self.indent = [*self._blocks, self._unit(node.body)]
        elif isinstance(node, cst.IndentedBlock):
            self._blocks.append(self._unit(node))
        return self.target is None and isinstance(node, _HOLDERS)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode
                 ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        if isinstance(original_node, cst.IndentedBlock):
            self._blocks.pop()
        elif original_node is self.target and isinstance(updated_node, cst.ClassDef):
            added = list(self.build("".join(self.indent)))
            added[0] = _with_blank_lines(added[0], 1)  # methods are one blank line apart
            body = updated_node.body
            self.updated = updated_node.with_changes(
                body=body.with_changes(body=(*body.body, *added)))
            return self.updated
        return updated_node


def _first_line(node: cst.BaseStatement, module: cst.Module, tree_node: ast.stmt) -> int:
    """The line a statement's code (its leading lines and decorators included) starts at,
    from the line CPython gives the statement (that of its keyword, or its first part)."""
    above = [*node.leading_lines]
    for decorator in getattr(node, "decorators", ()):
        above.append(decorator)
    return tree_node.lineno - render(module, above).count("\n")


def add_to_class(module: cst.Module, tree: ast.Module, cls: ast.ClassDef,
                 lines: Sequence[str], build: Build) -> Edit | None:
    """The edit that adds ``build``'s statements at the end of the class ``cls`` of
    ``tree`` (CPython's tree of the same text as ``module``; ``lines``: its lines), or None
    when the class cannot be found exactly."""
    classes = sorted((node for node in fast_walk(tree) if isinstance(node, ast.ClassDef)),
                     key=lambda node: (node.lineno, node.col_offset))
    ordinal = next((i for i, node in enumerate(classes) if node is cls), None)
    if ordinal is None or not cls.body:
        return None
    inserter = _AppendToClass(ordinal, cls.name, build, module.default_indent)
    module.visit(inserter)
    if inserter.target is None or inserter.updated is None:
        return None
    original = inserter.target.body
    assert isinstance(original, cst.IndentedBlock)
    last = original.body[-1]
    # The CPython statement the last LibCST one starts with: `a = 1; b = 2` is one line.
    count = len(last.body) if isinstance(last, cst.SimpleStatementLine) else 1
    if count > len(cls.body):
        return None
    before = render(module, [last], inserter.indent)
    first = _first_line(last, module, cls.body[-count])
    if not _matches(lines, first, before):
        return None
    updated = inserter.updated.body
    assert isinstance(updated, cst.IndentedBlock)
    tail = render(module, updated.body[len(original.body) - 1:], inserter.indent)
    if not tail.startswith(before):
        return None
    line = first + before.count("\n")
    return Edit(line, 1, line, 1, tail[len(before):])


def _heads(module: cst.Module) -> int:
    """How many of the module's first statements are its docstring and imports."""
    count = 0
    for index, statement in enumerate(module.body):
        if not isinstance(statement, cst.SimpleStatementLine):
            break
        small = statement.body
        is_doc = index == 0 and len(small) == 1 and isinstance(small[0], cst.Expr) and \
            isinstance(small[0].value, (cst.SimpleString, cst.ConcatenatedString))
        if not is_doc and not all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in small):
            break
        count += 1
    return count


class _InsertAfterImports(cst.CSTTransformer):
    """Inserts statements into a module after its docstring and imports, two blank lines
    from the code around them."""

    def __init__(self, build: Build) -> None:
        super().__init__()
        self.build = build
        self.at = 0  # the index in the module's body of the first statement added
        self.added: list[cst.BaseStatement] = []  # those statements, as inserted
        self.after: list[cst.EmptyLine] = []  # the blank lines that follow them

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False  # the module's statements are not walked, only the module left

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode
                 ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        if not isinstance(updated_node, cst.Module):
            return updated_node
        at = self.at = _heads(updated_node)
        added = list(self.build(""))
        body = list(updated_node.body)
        if at:
            added[0] = _with_blank_lines(added[0], 2)
        else:  # first in the body: after the file's header (shebang, coding, license)
            trailing = 0
            for line in reversed(updated_node.header):
                if line.comment is not None:
                    break
                trailing += 1
            if updated_node.header:
                added[0] = _with_blank_lines(added[0], max(0, 2 - trailing))
            if body:
                self.after = [blank_line(), blank_line()]
                body[0] = body[0].with_changes(
                    leading_lines=(*self.after, *body[0].leading_lines))
        self.added = added
        return updated_node.with_changes(body=(*body[:at], *added, *body[at:]))


def add_after_imports(module: cst.Module, lines: Sequence[str], build: Build) -> Edit | None:
    """The edit that adds ``build``'s statements after the module's docstring and imports
    (``lines``: the module's lines), or None when they cannot be placed exactly."""
    inserter = _InsertAfterImports(build)
    module.visit(inserter)
    before = render(module, [*module.header, *module.body[:inserter.at]])
    if not _matches(lines, 1, before):
        return None
    line = 1 + before.count("\n")
    return Edit(line, 1, line, 1, render(module, [*inserter.added, *inserter.after]))
