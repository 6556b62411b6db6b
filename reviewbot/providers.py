"""LibCST metadata providers backed by reviewbot's own analysis of the file.

A :class:`~reviewbot.rule.CstRule` lists the ones it reads in ``METADATA_DEPENDENCIES``
and asks ``self.get_metadata(DeviceProvider, node)``, as for any LibCST provider:

* :class:`DeviceProvider`: an expression -> :class:`DeviceFact` (``cuda``, ``cpu``,
  ``value``, ``unknown``, ... and the evidence), as the device walk of
  ``reviewbot.analysis.gpu`` labelled it; no fact for an expression it did not label.
* :class:`HotPathProvider`: a ``FunctionDef`` -> the chain of calls from an entry point
  that makes it hot (a tuple of names), through this module or, after the project's link
  phase, through others; no fact (``None``) for a function that is not hot.
* :class:`SyncAllowedProvider`: an expression -> True where the analysis takes a sync to be
  intended (a ``with`` block of the packs' sync-allowed contexts, a debug or validation
  guard, the code after an early return for the unusual case).
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

The facts come from CPython's ``ast``, which the analysis already parsed; a LibCST node is
matched to them by its source span. LibCST's ``PositionProvider`` would compute the span
of every node of the module (about four times the cost of the parse), so the spans are
computed here one function at a time, for the functions the walk is inside when a rule
asks, and for the whole module only when a rule asks about a node outside every function.
Each value is computed when a rule first asks for it, never for the nodes no rule reads.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple

import libcst as cst
from libcst import MetadataException
from libcst.metadata import BaseMetadataProvider, CodeRange, MetadataWrapper
from libcst.metadata.position_provider import PositionProvidingCodegenState

if TYPE_CHECKING:
    from reviewbot.context import FileContext

__all__ = ["AnalyzedFunctionProvider", "DeviceFact", "DeviceProvider", "HotPathProvider",
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
        self._aliases: dict[str, str] | None = None
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

    def ast_span(self, node: cst.CSTNode) -> tuple[int, int, int, int]:
        """A LibCST expression's span as ``ast`` counts it: (line, byte offset, end line,
        end byte offset). Both leave out the parentheses around an expression."""
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


class AnalysisProvider(BaseMetadataProvider[Any]):
    """A provider whose values come from reviewbot's analysis of the file."""

    # Rules that read it run after the project's link phase (hot paths through other
    # modules, devices of other modules' fields and returns).
    project_facts = True
    # The analysis must keep its labels by span for it (DeviceProvider, SyncAllowed).
    needs_labels = False

    def _gen(self, wrapper: MetadataWrapper) -> Mapping[Any, Any]:  # type: ignore[override]
        facts = getattr(wrapper, "facts", None)
        if not isinstance(facts, FileFacts):
            raise MetadataException(f"{type(self).__name__} reads reviewbot's analysis: "
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


class SyncAllowedProvider(AnalysisProvider):
    """An expression -> True where the analysis takes a sync there to be intended."""

    needs_labels = True

    def fact(self, facts: FileFacts, node: Any) -> bool | None:
        """True inside a sync-allowed block (None where the analysis labelled nothing)."""
        if not isinstance(node, cst.BaseExpression):
            return None
        found = facts.label(node)
        return None if found is None else bool(found[1])


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
