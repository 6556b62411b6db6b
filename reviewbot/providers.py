"""LibCST metadata providers backed by reviewbot's own analysis of the file.

A :class:`~reviewbot.rule.CstRule` lists the ones it reads in ``METADATA_DEPENDENCIES``
and asks ``self.get_metadata(DeviceProvider, node)``, as for any LibCST provider:

* :class:`DeviceProvider`: an expression -> :class:`DeviceFact` (``cuda``, ``cpu``,
  ``value``, ``unknown``, ... and the evidence), as the device walk of
  ``reviewbot.analysis.gpu`` labelled it; no fact for an expression it did not label.
* :class:`HotPathProvider`: a ``FunctionDef`` -> the chain of calls from an entry point
  that makes it hot (a tuple of names), through this module or, after the project's link
  phase, through others; no fact (``None``) for a function that is not hot.
* :class:`SyncAllowedProvider`: an expression -> flags where the analysis takes a sync to
  be intended: ``QUIET`` (a debug or validation guard, a once-only guard, the code after an
  early return for the unusual case) and ``MARKED`` (a ``with`` block of the packs'
  sync-allowed contexts, which the readback rules still report).
* :class:`SpanProvider`: a node -> its ``CodeRange``, as LibCST's ``PositionProvider``
  gives it.
* :class:`ImportedNameProvider`: a name, attribute chain or call -> the qualified name the
  module's imports give it (``torch.cuda.synchronize`` for ``t.cuda.synchronize`` after
  ``import torch as t``; ``torch.cuda.current_stream().synchronize`` through a call).
* :class:`AnalyzedFunctionProvider`: a ``FunctionDef`` -> the qualified name under which the
  analysis knows it (``Runner.execute_model``); none for a function it does not index (a
  closure is analysed with the function around it).
* :class:`UnwaitedCopyProvider`: an expression that reads a host buffer while a
  ``non_blocking`` copy into it is still unwaited -> :class:`UnwaitedCopy` (the buffer, the
  copy's line).
* :class:`BufferProvider` (the size bounds): an allocation a class's method assigns to
  ``self.x`` whose leading dimension spells a size bound of the rule packs ->
  :class:`~reviewbot.analysis.buffers.Buffer` (that bound, the nodes that spell it, and
  every use of the buffer in the class with the bounds the use shows).

The facts come from CPython's ``ast``, which the analysis already parsed, and are kept by
the ``ast`` node's span. A LibCST expression inside a function is matched to its ``ast``
twin by order: the expressions of both trees, listed in source order, line up one to one
(checked kind by kind and name by name), so the twin's span is read off the ``ast`` node
and no code is generated. Where the trees do not line up, or for other nodes, the span is
computed by generating the code of the function the walk is inside (LibCST's
``PositionProvider`` would do that for the whole module, about four times the cost of the
parse), and of the whole module only for a node outside every function. Each value is
computed when a rule first asks for it, never for the nodes no rule reads.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple

from reviewbot.lazy import libcst as cst

if TYPE_CHECKING:
    from libcst.metadata import CodeRange, MetadataWrapper

    from reviewbot.context import FileContext

__all__ = ["AnalyzedFunctionProvider", "BufferProvider", "DeviceFact", "DeviceProvider", "HotPathProvider",
           "ImportedNameProvider", "SpanProvider", "SyncAllowedProvider", "UnwaitedCopy",
           "UnwaitedCopyProvider"]


class DeviceFact(NamedTuple):
    """What the analysis knows an expression holds.

    ``kind`` is ``cuda`` or ``cpu`` (a tensor on that device), ``value`` (not a tensor),
    ``unknown``, or one of the analysis's other kinds (``device:cuda``, ``device:cpu``,
    ``stream``, ``event``, ``module``, ``object``). ``evidence`` says why
    (``output of self.sampler at line 120``); ``weak`` marks a CUDA tensor assumed only
    from ``devices.default: cuda``; ``boolean`` a boolean tensor (a mask).
    """

    kind: str
    evidence: str
    weak: bool = False
    boolean: bool = False


class UnwaitedCopy(NamedTuple):
    """A host read of ``buffer`` before anything waited for the ``non_blocking`` copy into
    it at line ``copy_line``."""

    buffer: str
    copy_line: int


_BLOCKS = ("body", "handlers", "cases", "orelse", "finalbody")  # in source order


def _cst_functions(owner: Any, out: list[cst.FunctionDef]) -> None:
    """The function definitions under a LibCST statement, in source order (statements
    only: a definition is never inside an expression)."""
    for attr in _BLOCKS:
        value = getattr(owner, attr, None)
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, cst.BaseCompoundStatement):
                    if isinstance(item, cst.FunctionDef):
                        out.append(item)
                    _cst_functions(item, out)
                elif not isinstance(item, (cst.SimpleStatementLine, cst.BaseSmallStatement)):
                    _cst_functions(item, out)  # an except handler or a match case
        elif isinstance(value, cst.IndentedBlock):
            _cst_functions(value, out)
        elif not isinstance(value, cst.SimpleStatementSuite):
            _cst_functions(value, out)  # else, elif, finally


def _ast_functions(owner: Any, out: list[ast.AST]) -> None:
    """The function definitions under an ``ast`` statement, in the same order."""
    for attr in _BLOCKS:
        value = getattr(owner, attr, None)
        if not isinstance(value, list):
            continue
        for item in value:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append(item)
            if isinstance(item, (ast.stmt, ast.excepthandler, ast.match_case)):
                _ast_functions(item, out)


# Expressions that have one ``ast`` node each, in the same order, by kind: a LibCST node of
# these kinds is matched to its ``ast`` twin by that order within its function, and the
# twin's span addresses the analysis's labels, with no code generated to find the span.
_CST_KINDS = {
    "Name": "name", "Attribute": "attribute", "Call": "call", "Subscript": "subscript",
    "Comparison": "compare", "BinaryOperation": "binop", "UnaryOperation": "unaryop",
    "BooleanOperation": "boolop", "IfExp": "ifexp", "NamedExpr": "namedexpr",
    "List": "list", "Tuple": "tuple", "Set": "set", "Dict": "dict", "ListComp": "listcomp",
    "SetComp": "setcomp", "DictComp": "dictcomp", "Lambda": "lambda", "Await": "await",
    "Integer": "number", "Float": "number", "Imaginary": "number", "Ellipsis": "constant",
    "SimpleString": "string", "ConcatenatedString": "string", "FormattedString": "string",
}
_AST_KINDS: dict[type, str] = {
    ast.Name: "name", ast.Attribute: "attribute", ast.Call: "call",
    ast.Subscript: "subscript", ast.Compare: "compare", ast.BinOp: "binop",
    ast.UnaryOp: "unaryop", ast.BoolOp: "boolop", ast.IfExp: "ifexp",
    ast.NamedExpr: "namedexpr", ast.List: "list", ast.Tuple: "tuple", ast.Set: "set",
    ast.Dict: "dict", ast.ListComp: "listcomp", ast.SetComp: "setcomp",
    ast.DictComp: "dictcomp", ast.Lambda: "lambda", ast.Await: "await",
    ast.JoinedStr: "string",
}
# Statements whose names are not expressions to ``ast`` (or whose patterns are not): left
# out on both sides.
_CST_LEFT_OUT = frozenset({"Import", "ImportFrom", "Global", "Nonlocal", "Match",
                           "TypeAlias"})
_AST_LEFT_OUT = tuple(getattr(ast, n) for n in ("Import", "ImportFrom", "Global", "Nonlocal",
                                                  "Match", "TypeAlias") if hasattr(ast, n))
_TRIVIA_MODULES = ("libcst._nodes.whitespace", "libcst._nodes.op")
_CONSTANT_NAMES = frozenset({"True", "False", "None"})  # ast.Constant, not ast.Name
# The fields of a LibCST node in source order, where the dataclass has them otherwise or
# holds names that are no ``ast`` expressions (a keyword's, an attribute's, a definition's).
_CST_ORDER = {
    "FunctionDef": ("decorators", "params", "returns", "body"),
    "ClassDef": ("decorators", "bases", "keywords", "body"),
    "ExceptHandler": ("type", "body"),
    "ExceptStarHandler": ("type", "body"),
    "IfExp": ("body", "test", "orelse"),
    "Parameters": ("posonly_params", "params", "star_arg", "kwonly_params", "star_kwarg"),
    "Param": ("annotation", "default"),
    "Arg": ("value",),
    "Attribute": ("value",),
    "Decorator": ("decorator",),
}
_CST_FIELDS: dict[type, tuple[str, ...]] = {}


def _whole_slice(node: Any) -> Any:
    """The tuple of `x[(a, b)]`: the whole subscript, which ``ast`` has as a Tuple for
    `x[a, b]` as well (left out on both sides). None for any other subscript."""
    if len(node.slice) != 1 or node.slice[0].comma is not cst.MaybeSentinel.DEFAULT:
        return None
    index = node.slice[0].slice
    value = getattr(index, "value", None)
    return value if type(value).__name__ == "Tuple" else None


def _cst_kind(node: Any, parent: Any) -> str | None:
    name = type(node).__name__
    kind = _CST_KINDS.get(name)
    if kind is None:
        return None
    if name == "Name" and node.value in _CONSTANT_NAMES:
        return "constant"
    parent_name = type(parent).__name__
    if parent_name == "ConcatenatedString":
        return None  # one ast string for all its parts
    if name == "Tuple" and parent_name == "Del" and not node.lpar:
        return None  # `del a, b`: two targets to ast
    return kind


def _continues(node: Any, parent: Any) -> bool:
    """`a and b` of `a and b and c`: one ``ast.BoolOp`` holds the whole chain."""
    return type(node).__name__ == "BooleanOperation" and \
        type(parent).__name__ == "BooleanOperation" and parent.left is node and \
        type(parent.operator) is type(node.operator) and not node.lpar


def _cst_twins(node: Any, out: list[Any], chained: set[int] | None = None,
               parent: Any = None, slices: set[int] | None = None) -> None:
    """The nodes with an ``ast`` twin under ``node`` (itself included), in source order;
    ``chained`` gets the inner operations of a boolean chain (they have none)."""
    if slices is None:
        slices = set()
    kind = type(node)
    if _cst_kind(node, parent) is not None and id(node) not in slices:
        if _continues(node, parent):
            if chained is not None:
                chained.add(id(node))
        else:
            out.append(node)
    fields = _CST_FIELDS.get(kind)
    if fields is None:
        import dataclasses

        fields = _CST_ORDER.get(kind.__name__) or tuple(
            f.name for f in dataclasses.fields(node) if not f.name.startswith(
                ("whitespace", "leading_lines", "lines_after", "lpar", "rpar", "comma",
                 "semicolon", "header", "footer", "indent", "type_parameters")))
        _CST_FIELDS[kind] = fields
    if kind.__name__ == "Subscript":
        whole = _whole_slice(node)
        if whole is not None:
            slices.add(id(whole))
    for attr in fields:
        value = getattr(node, attr)
        if isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, cst.CSTNode) and _holds_twins(type(item)):
                    _cst_twins(item, out, chained, node, slices)
        elif isinstance(value, cst.CSTNode) and _holds_twins(type(value)):
            _cst_twins(value, out, chained, node, slices)


def _holds_twins(kind: type) -> bool:
    return kind.__name__ not in _CST_LEFT_OUT and kind.__module__ not in _TRIVIA_MODULES


def _ast_kind(node: ast.AST, parent: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant):
        if isinstance(parent, ast.JoinedStr):
            return None  # an f-string's text
        value = node.value
        if isinstance(value, (str, bytes)):
            return "string"
        return "constant" if value is None or value is Ellipsis or isinstance(value, bool) \
            else "number"
    if isinstance(node, ast.JoinedStr) and isinstance(parent, ast.FormattedValue):
        return None  # a format spec: parts of the f-string to LibCST
    if isinstance(node, ast.Tuple) and isinstance(parent, ast.Subscript) and \
            parent.slice is node:
        return None
    return _AST_KINDS.get(type(node))


def _child_nodes(node: ast.AST) -> list[ast.AST]:
    """``list(ast.iter_child_nodes(node))`` without its generators."""
    out: list[ast.AST] = []
    for name in node._fields:
        try:
            value = getattr(node, name)
        except AttributeError:
            continue
        if isinstance(value, ast.AST):
            out.append(value)
        elif isinstance(value, list):
            out.extend(item for item in value if isinstance(item, ast.AST))
    return out


def _ast_children(node: ast.AST) -> list[ast.AST]:
    """An ``ast`` node's children in source order; a child without a place of its own (the
    arguments of a definition, a comprehension's clauses) gives its own children."""
    found: list[ast.AST] = []
    pending = _child_nodes(node)[::-1]  # the next child last
    while pending:
        child = pending.pop()
        if isinstance(child, (ast.expr_context, ast.boolop, ast.operator, ast.unaryop,
                              ast.cmpop)) or isinstance(child, _AST_LEFT_OUT):
            continue
        if getattr(child, "lineno", None) is None:
            pending.extend(reversed(_child_nodes(child)))
            continue
        found.append(child)
    if isinstance(node, (ast.JoinedStr, ast.FormattedValue)):
        return found  # places inside f-strings are not to be trusted before Python 3.12
    found.sort(key=lambda c: (c.lineno, c.col_offset))  # type: ignore[attr-defined]
    return found


def _ast_twins(node: ast.AST, out: list[ast.AST], parent: ast.AST | None = None) -> None:
    if _ast_kind(node, parent) is not None:
        out.append(node)
    for child in _ast_children(node):
        _ast_twins(child, out, node)


def _same(ours: Any, theirs: ast.AST) -> bool:
    name = type(ours).__name__
    if name == "Name":
        if ours.value in _CONSTANT_NAMES:
            return isinstance(theirs, ast.Constant) and repr(theirs.value) == ours.value
        return isinstance(theirs, ast.Name) and ours.value == theirs.id
    if name == "Attribute":
        return isinstance(theirs, ast.Attribute) and ours.attr.value == theirs.attr
    kind = _CST_KINDS[name]
    if isinstance(theirs, ast.Constant):
        value = theirs.value
        return kind == ("string" if isinstance(value, (str, bytes)) else
                        "constant" if value is Ellipsis else "number")
    return _AST_KINDS.get(type(theirs)) == kind


def pair_twins(func: Any, node: ast.AST) -> tuple[dict[int, ast.AST], set[int]] | None:
    """For the expressions of a function: id(LibCST node) -> its ``ast`` twin, and the ids
    of the nodes known to have none (inner links of a boolean chain); None when the two
    trees do not line up (then spans are computed)."""
    ours: list[Any] = []
    theirs: list[ast.AST] = []
    chained: set[int] = set()
    try:
        _cst_twins(func, ours, chained)
        _ast_twins(node, theirs)
    except RecursionError:
        return None
    if len(ours) != len(theirs) or not all(map(_same, ours, theirs)):
        return None
    return {id(a): b for a, b in zip(ours, theirs)}, chained


class _Positions:
    """What LibCST's position codegen writes into (it needs only ``_computed``)."""

    def __init__(self) -> None:
        self._computed: dict[cst.CSTNode, CodeRange] = {}


class FileFacts:
    """The analysis's facts of one file, addressed by LibCST node.

    ``walking`` holds the functions the engine's walk is inside (outermost first): the
    span of a node a rule asks about is computed from the innermost of them.
    """

    def __init__(self, ctx: "FileContext", module: cst.Module,
                 functions: list[tuple[cst.FunctionDef, cst.Module, Any]] | None = None
                 ) -> None:
        self.ctx = ctx
        self.module = module
        self.walking: list[cst.FunctionDef] = []
        self._pairs: dict[cst.FunctionDef, ast.AST] | None = None
        self._infos: dict[int, Any] | None = None
        self._positions: dict[cst.CSTNode, CodeRange] = {}
        self._placed: set[int] = set()
        self._whole = False
        # Each function parsed alone: its tree (for its default indentation and newline).
        self._module_of: dict[int, cst.Module] = {}
        if functions:
            self._pairs = {f: info.node for f, _, info in functions}
            self._module_of = {id(f): m for f, m, _ in functions}
            self._whole = True  # no module to compute every span from
        self._lines: list[str] | None = None
        # Outermost function -> its nodes' ast twins (None: the trees do not line up).
        self._twins: dict[int, tuple[dict[int, ast.AST], set[int]] | None] = {}
        self._aliases: dict[str, str] | None = None
        self._buffers: dict[tuple[Any, ...], Any] | None = None
        # How the spans were computed (the README's figures come from these).
        self.placed_functions = 0
        self.whole_module = False

    # Functions ------------------------------------------------------------------------
    def ast_function(self, func: cst.FunctionDef) -> ast.AST | None:
        """The ``ast`` definition of a LibCST ``FunctionDef`` (None when the two trees'
        definitions do not pair up, name by name in source order)."""
        if self._pairs is None:
            ours: list[cst.FunctionDef] = []
            for stmt in self.module.body:
                if isinstance(stmt, cst.BaseCompoundStatement):
                    if isinstance(stmt, cst.FunctionDef):
                        ours.append(stmt)
                    _cst_functions(stmt, ours)
            theirs: list[ast.AST] = []
            _ast_functions(self.ctx.ast_tree, theirs)
            paired = len(ours) == len(theirs) and all(
                a.name.value == b.name for a, b in zip(ours, theirs))  # type: ignore[attr-defined]
            self._pairs = dict(zip(ours, theirs)) if paired else {}
        return self._pairs.get(func)

    def function_info(self, func: cst.FunctionDef) -> Any:
        """The analysis's ``FunctionInfo`` of a LibCST ``FunctionDef`` (None for a function
        it does not index, such as one nested in another)."""
        node = self.ast_function(func)
        if node is None:
            return None
        if self._infos is None:
            self._infos = {id(info.node): info for info in self.ctx.gpu.functions.values()}
        return self._infos.get(id(node))

    def hot_chain(self, func: cst.FunctionDef) -> tuple[str, ...] | None:
        """The chain of calls that makes a function hot, or None."""
        info = self.function_info(func)
        if info is None:
            return None
        chain = self.ctx.gpu.hot.get(info.qualname)
        return tuple(chain) if chain is not None else None

    # Spans ----------------------------------------------------------------------------
    def position(self, node: cst.CSTNode) -> CodeRange:
        """A node's range as LibCST's ``PositionProvider`` gives it (raises KeyError for
        a node that is not in the module)."""
        known = self._positions.get(node)
        if known is not None:
            return known
        for func in reversed(self.walking):
            if id(func) not in self._placed:
                self._placed.add(id(func))
                self._place(func)
                known = self._positions.get(node)
                if known is not None:
                    return known
        if not self._whole:
            self._whole = self.whole_module = True
            from libcst.metadata.position_provider import PositionProvidingCodegenState

            positions = _Positions()
            self.module._codegen(PositionProvidingCodegenState(
                default_indent=self.module.default_indent,
                default_newline=self.module.default_newline, provider=positions))
            self._positions.update(positions._computed)
        return self._positions[node]

    def _place(self, func: cst.FunctionDef) -> None:
        """Compute the spans of one function's nodes by generating its code alone, from
        where the ``ast`` says it starts; nothing when that cannot be made sure of."""
        target = self.ast_function(func)
        if target is None:
            return
        decorators = target.decorator_list  # type: ignore[attr-defined]
        first = decorators[0].lineno if decorators else target.lineno  # type: ignore[attr-defined]
        lines = self._source_lines()
        if not 0 < first <= len(lines):
            return
        text = lines[first - 1]
        stripped = text.lstrip(" \t\f")
        if not stripped.startswith("@" if decorators else ("def", "async")):
            return  # a decorator spread over lines: its `@` is elsewhere
        start = first - len(func.leading_lines) - (
            len(func.decorators[0].leading_lines) if func.decorators else 0)
        indent = text[:len(text) - len(stripped)]
        from libcst.metadata.position_provider import PositionProvidingCodegenState

        positions = _Positions()
        module = self._module_of.get(id(func), self.module)
        func._codegen(PositionProvidingCodegenState(
            default_indent=module.default_indent,
            default_newline=module.default_newline, provider=positions,
            indent_tokens=[indent] if indent else [], line=start, column=0))
        name = positions._computed.get(func.name)
        if name is None or name.start.line != target.lineno:  # type: ignore[attr-defined]
            return  # not where the ast has it: the whole module's spans will be used
        self._positions.update(positions._computed)
        self.placed_functions += 1

    def _source_lines(self) -> list[str]:
        if self._lines is None:
            from reviewbot.source import split_lines

            self._lines = split_lines(self.ctx.text)
        return self._lines

    def twin(self, node: cst.CSTNode) -> ast.AST | bool:
        """The ``ast`` node of a LibCST expression inside the function being walked; False
        where it has none (an inner link of a boolean chain); True where that is not known
        here (another kind of node, or trees that do not line up)."""
        if not self.walking or type(node).__name__ not in _CST_KINDS:
            return True
        outer = self.walking[0]
        twins = self._twins.get(id(outer), False)
        if twins is False:
            target = self.ast_function(outer)
            twins = self._twins[id(outer)] = pair_twins(outer, target) \
                if target is not None else None
        if twins is None:
            return True
        found = twins[0].get(id(node))
        if found is not None:
            return found
        return id(node) not in twins[1]

    def ast_span(self, node: cst.CSTNode) -> tuple[int, int, int, int] | None:
        """A LibCST expression's span as ``ast`` counts it: (line, byte offset, end line,
        end byte offset), None where ``ast`` has no node. Both leave out the parentheses
        around an expression."""
        twin = self.twin(node)
        if twin is False:
            return None
        if twin is not True:
            line, col = twin.lineno, twin.col_offset  # type: ignore[attr-defined]
            end_line = twin.end_lineno or line  # type: ignore[attr-defined]
            end_col = twin.end_col_offset  # type: ignore[attr-defined]
            return line, col, end_line, col if end_col is None else end_col
        pos = self.position(node)
        columns = self.ctx.columns
        return (pos.start.line, columns.offset(pos.start.line, pos.start.column),
                pos.end.line, columns.offset(pos.end.line, pos.end.column))

    # Labels ---------------------------------------------------------------------------
    def enclosing_info(self, node: cst.CSTNode) -> Any:
        """The analysis's ``FunctionInfo`` of the function that holds ``node`` (the one
        around a closure), or None."""
        for func in reversed(self.walking):  # closures are walked with the function
            info = self.function_info(func)
            if info is not None:
                return info
        line = self.position(node).start.line
        inside = [i for i in self.ctx.gpu.functions.values()
                  if i.node.lineno <= line <= (i.node.end_lineno or i.node.lineno)]
        return max(inside, key=lambda i: i.node.lineno, default=None)

    def label(self, node: cst.CSTNode) -> Any:
        """The analysis's (Label, sync allowed) of an expression, or None."""
        info = self.enclosing_info(node)
        if info is None:
            return None
        labels = self.ctx.gpu.labels_of(info.qualname)
        if labels is None:
            return None
        return labels.get(self.ast_span(node))

    def buffer(self, node: cst.CSTNode) -> Any:
        """The bound-sized buffer an allocation call makes, or None (the file's buffers are
        found once, on CPython's ``ast``, when a rule first asks)."""
        buffers = self._buffers
        if buffers is None:
            from reviewbot.analysis.buffers import BufferAnalyzer

            ctx = self.ctx
            found = BufferAnalyzer(ctx.ast_tree, ctx.packs, ctx.text).buffers() \
                if ctx.packs is not None and ctx.packs.size_bounds else []
            buffers = self._buffers = {
                (b.call.lineno, b.call.col_offset, b.call.end_lineno, b.call.end_col_offset): b
                for b in found}
        return buffers.get(self.ast_span(node)) if buffers else None

    def unwaited(self, node: cst.CSTNode) -> UnwaitedCopy | None:
        """The unwaited copy a host read of ``node`` comes too early for, or None. Only the
        functions that make a ``non_blocking`` copy can hold one, and the analysis walks
        all of them: no other function is walked for it."""
        gpu = self.ctx.gpu
        if not gpu.unwaited:
            return None
        info = self.enclosing_info(node)
        reads = gpu.unwaited.get(info.qualname) if info is not None else None
        if not reads:
            return None
        found = reads.get(self.ast_span(node))
        return UnwaitedCopy(*found) if found is not None else None

    # Names ----------------------------------------------------------------------------
    def qualify(self, node: cst.CSTNode) -> str | None:
        """The qualified name of a name, attribute chain or call, through the module's
        import aliases (as ``reviewbot.analysis.gpu.Names.qualify`` for ``ast``)."""
        if self._aliases is None:
            names = self.ctx.gpu.names
            if names is None:
                from reviewbot.analysis.gpu import Names

                names = Names(self.ctx.ast_tree)
            self._aliases = names.aliases
        parts: list[str] = []
        while isinstance(node, cst.Attribute):
            parts.append(node.attr.value)
            node = node.value
        if isinstance(node, cst.Call):
            inner = self.qualify(node.func)
            if inner is None:
                return None
            return ".".join([inner + "()", *reversed(parts)])
        if not isinstance(node, cst.Name):
            return None
        head = self._aliases.get(node.value, node.value)
        if not parts:
            return head
        parts.append(head)
        parts.reverse()
        return ".".join(parts)


class _Lazy(Mapping):  # type: ignore[type-arg]
    """A provider's node -> value mapping that computes each value when first read (a
    node without a fact raises KeyError, so ``get_metadata``'s default applies)."""

    def __init__(self, compute: Callable[[Any], Any]) -> None:
        self._compute = compute
        self._known: dict[Any, Any] = {}

    def __getitem__(self, node: Any) -> Any:
        try:
            value = self._known[node]
        except KeyError:
            value = self._known[node] = self._compute(node)
        if value is None:
            raise KeyError(node)
        return value

    def __iter__(self) -> Iterator[Any]:
        return iter([n for n, v in self._known.items() if v is not None])

    def __len__(self) -> int:
        return sum(1 for v in self._known.values() if v is not None)


class AnalysisProvider:
    """A provider whose values come from reviewbot's analysis of the file.

    It answers ``get_metadata`` as LibCST's providers do, and the engine resolves it for
    the rules that list it; it is not a ``BaseMetadataProvider``, so that a run that
    parses nothing with LibCST does not import it (a ``MetadataWrapper`` of LibCST alone
    cannot resolve it).
    """

    # Rules that read it run after the project's link phase (hot paths through other
    # modules, devices of other modules' fields and returns).
    project_facts = True
    # The analysis must keep its labels by span for it (DeviceProvider, SyncAllowed).
    needs_labels = False

    def _gen(self, wrapper: MetadataWrapper) -> Mapping[Any, Any]:
        facts = getattr(wrapper, "facts", None)
        if not isinstance(facts, FileFacts):
            raise cst.MetadataException(f"{type(self).__name__} reads reviewbot's analysis: "
                                    "run the rule with reviewbot's engine")
        return _Lazy(lambda node: self.fact(facts, node))

    def fact(self, facts: FileFacts, node: Any) -> Any:
        """The value for ``node`` (None: no fact)."""
        raise NotImplementedError


class DeviceProvider(AnalysisProvider):
    """An expression -> :class:`DeviceFact`, as the device analysis labelled it."""

    needs_labels = True

    def fact(self, facts: FileFacts, node: Any) -> DeviceFact | None:
        """The expression's device fact (None where the analysis labelled nothing)."""
        if not isinstance(node, cst.BaseExpression):
            return None
        found = facts.label(node)
        if found is None:
            return None
        label = found[0]
        return DeviceFact(label.kind, label.why, label.weak, label.boolean)


QUIET, MARKED = 1, 2  # the flags of SyncAllowedProvider's facts


class SyncAllowedProvider(AnalysisProvider):
    """An expression -> flags where the analysis takes a sync there to be intended:
    ``QUIET`` behind a debug, validation or once-only guard, or in the unusual case;
    ``MARKED`` inside a ``with`` block of the packs' sync-allowed contexts."""

    needs_labels = True

    def fact(self, facts: FileFacts, node: Any) -> int | None:
        """The flags (0: neither; None where the analysis labelled nothing)."""
        if not isinstance(node, cst.BaseExpression):
            return None
        found = facts.label(node)
        return None if found is None else int(found[1])


class HotPathProvider(AnalysisProvider):
    """A ``FunctionDef`` -> the chain of calls from an entry point that makes it hot."""

    def fact(self, facts: FileFacts, node: Any) -> tuple[str, ...] | None:
        """The chain (None: not hot, or not a function)."""
        if not isinstance(node, cst.FunctionDef):
            return None
        return facts.hot_chain(node)


class SpanProvider(AnalysisProvider):
    """A node -> its ``CodeRange`` (as ``PositionProvider``), computed per function."""

    project_facts = False

    def fact(self, facts: FileFacts, node: Any) -> CodeRange | None:
        """The node's range."""
        try:
            return facts.position(node)
        except KeyError:
            return None




class ImportedNameProvider(AnalysisProvider):
    """A name, attribute chain or call -> its qualified name through the module's imports."""

    project_facts = False

    def fact(self, facts: FileFacts, node: Any) -> str | None:
        """The qualified name (None for an expression that is not a name or a chain)."""
        if not isinstance(node, (cst.Name, cst.Attribute, cst.Call)):
            return None
        return facts.qualify(node)


class AnalyzedFunctionProvider(AnalysisProvider):
    """A ``FunctionDef`` -> the qualified name under which the analysis knows it."""

    project_facts = False

    def fact(self, facts: FileFacts, node: Any) -> str | None:
        """The qualified name (None: a function the analysis does not index)."""
        if not isinstance(node, cst.FunctionDef):
            return None
        info = facts.function_info(node)
        return info.qualname if info is not None else None


class UnwaitedCopyProvider(AnalysisProvider):
    """An expression read on the host while a ``non_blocking`` copy into it is unwaited ->
    :class:`UnwaitedCopy`."""

    def fact(self, facts: FileFacts, node: Any) -> UnwaitedCopy | None:
        """The copy (None: no copy in flight into what ``node`` reads)."""
        if not isinstance(node, cst.BaseExpression):
            return None
        return facts.unwaited(node)


class BufferProvider(AnalysisProvider):
    """An allocation call -> the :class:`~reviewbot.analysis.buffers.Buffer` it makes, when
    a class's method assigns it to ``self.x`` and its leading dimension spells a size bound
    (with every use of the buffer in the class and the bounds each shows)."""

    project_facts = False

    def fact(self, facts: FileFacts, node: Any) -> Any:
        """The buffer (None: not a bound-sized buffer of a class)."""
        if not isinstance(node, cst.Call):
            return None
        return facts.buffer(node)
