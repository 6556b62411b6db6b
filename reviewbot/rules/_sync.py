"""What the GPU->host sync rules (RB101-RB107) share: the facts they read, how a call reaches
a tensor method, hot-path gating, messages and the readback fix.

Each rule matches its own LibCST nodes (its calls, tests, subscripts) and decides whether
it is a finding; the analysis only says what the expressions hold
(``reviewbot.providers``).
"""

from __future__ import annotations

import ast
from typing import Any, ClassVar, Iterator, Mapping

from reviewbot.analysis.walk import walk as fast_walk
from reviewbot.lazy import libcst as cst

from reviewbot.analysis.gpu import trigger_words
from reviewbot.finding import Fix
from reviewbot.providers import (MARKED, QUIET, AnalyzedFunctionProvider, DeviceFact,
                                 DeviceProvider, HotPathProvider, ImportedNameProvider,
                                 SyncAllowedProvider)
from reviewbot.rule import CstRule, Option

INCLUDE_UNKNOWN = Option(
    "include-unknown", False,
    "Also report tensors whose device is unknown (as warnings).", (bool,))
HELPER_NAME = Option(
    "helper-name", "_to_list",
    "Name of the event-synced readback helper the fix calls (and adds when missing).",
    (str,), lambda v: None if v.isidentifier() else "expected a Python identifier")

# An engine runner whose class already has the event-synced readback helper: the examples
# of the rules whose fix calls it (`{body}` is the end of `execute_model`).
RUNNER_WITH_HELPER = """import torch


class ModelRunner:
    def __init__(self):
        self.pinned = torch.empty((256, 1), dtype=torch.int64, pin_memory=True)
        self.event = torch.cuda.Event()

    def execute_model(self, logits):
        ids = logits.cuda().argmax(-1)
{body}
    def _to_list(self, t):
        pinned = self.pinned[: t.numel()].view(t.shape)
        pinned.copy_(t, non_blocking=True)
        self.event.record()
        self.event.synchronize()
        return pinned.tolist()
"""

CUDA, CPU, VALUE, UNKNOWN = "cuda", "cpu", "value", "unknown"
DEV_CUDA, DEV_CPU, STREAM, EVENT, MODULE = "device:cuda", "device:cpu", "stream", "event", "module"

# Builtins whose result is a host value: a call of one is never a tensor method.
VALUE_BUILTINS = frozenset({
    "list", "tuple", "dict", "set", "str", "sum", "min", "max", "range", "enumerate", "zip",
    "sorted", "abs", "round", "bool", "int", "float", "len", "isinstance", "hasattr",
    "getattr", "id", "repr", "print", "format"})
_NN_NOT_MODULES = frozenset({"Parameter", "Buffer", "UninitializedParameter",
                             "UninitializedBuffer", "ParameterList", "ParameterDict"})


_LAST_FILE: list[Any] = [None, None, False]  # text, packs, their answer
_LAST_WORD: list[str] = [""]  # the entry-point word that the last hot file spelled


def _file_words(text: str, packs: Any) -> bool:
    """Whether the text spells an entry point's word (or there are no words to look for).
    Every RB1xx rule asks this of the same text: answered once."""
    if _LAST_FILE[0] is text and _LAST_FILE[1] is packs:
        return _LAST_FILE[2]
    hot_text = False
    if packs is not None:
        words = trigger_words(packs)
        # The word found last is tried first: a project's files share their vocabulary.
        last = _LAST_WORD[0]
        if not words or (last in words and last in text):
            hot_text = True
        else:
            for word in words:
                if word in text:
                    _LAST_WORD[0] = word
                    hot_text = True
                    break
    _LAST_FILE[:] = [text, packs, hot_text]
    return hot_text


class SyncRule(CstRule):
    """A GPU->host sync rule: a LibCST visitor over the functions that can report.

    Subclasses match their nodes in ``visit_*`` and call :meth:`report_sync`. Only hot
    functions report (``HOT_ONLY``), and never inside a block where a sync is intended,
    unless a rule says otherwise.
    """

    severity = "error"
    # The harm a finding does, said once per rule, after the finding itself.
    consequence: ClassVar[str] = ""
    # No word of the file's own is required: a module that never names torch still reads
    # the CUDA tensors other modules hand it (a scheduler's mixin, a scorer of proposals).
    triggers = None
    HOT_ONLY = True
    # Whether a sync inside a `with` block of a sync-allowed context (`gpu_sync_allowed()`)
    # goes unreported. The readback rules report it, with a note: the block says the sync
    # is expected, yet the host waits all the same (those blocks often carry a TODO).
    QUIET_IN_ALLOWED_BLOCKS = True
    # Each rule's candidates are the words of the node it matches: a finding's function
    # spells one.
    LOCAL_CANDIDATES = True
    FUNCTION_LOCAL = True
    METADATA_DEPENDENCIES = (DeviceProvider, SyncAllowedProvider, HotPathProvider,
                             AnalyzedFunctionProvider, ImportedNameProvider)

    @classmethod
    def applies_to(cls, text: str, settings: Mapping[str, Any], packs: Any = None) -> bool:
        """As :meth:`CstRule.applies_to` (a candidate, and for ``HOT_ONLY`` rules an entry
        point's word), with the words every sync rule asks of a text found once."""
        if cls.HOT_ONLY and packs is not None and not _file_words(text, packs):
            return False
        return cls.CANDIDATES is None or any(word in text for word in cls.CANDIDATES)

    def __init__(self, settings: Mapping[str, Any], ctx: Any = None) -> None:
        super().__init__(settings, ctx)
        self._functions: list[cst.FunctionDef] = []
        # function -> (its analysed qualified name, its hot chain), found once each
        self._known: dict[int, tuple[str | None, tuple[str, ...] | None]] = {}
        self._aug_target: cst.CSTNode | None = None

    # The functions the walk is inside ---------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions.pop()

    def _analysed(self) -> tuple[str | None, tuple[str, ...] | None]:
        """The innermost enclosing function the analysis indexes (a closure is analysed
        with the function around it): its qualified name and hot chain."""
        for func in reversed(self._functions):
            known = self._known.get(id(func))
            if known is None:
                qualname = self.get_metadata(AnalyzedFunctionProvider, func)
                chain = self.get_metadata(HotPathProvider, func) if qualname else None
                known = self._known[id(func)] = (qualname, chain)
            if known[0] is not None:
                return known
        return None, None

    def hot_chain(self) -> tuple[str, ...] | None:
        """The hot chain of the function being walked (None: not hot)."""
        return self._analysed()[1]

    def reporting_here(self) -> tuple[str, ...] | None | bool:
        """False where this rule cannot report (a cold function for a hot-only rule), else
        the hot chain (None for a cold function of a rule that reports everywhere)."""
        qualname, chain = self._analysed()
        if qualname is None or (self.HOT_ONLY and chain is None):
            return False
        return chain

    def in_method(self) -> bool:
        """Whether the function being walked is a method (its class known to the analysis)."""
        qualname = self._analysed()[0]
        return qualname is not None and "." in qualname

    # Facts --------------------------------------------------------------------------------
    def device(self, node: cst.CSTNode) -> DeviceFact | None:
        """What the analysis labelled ``node`` (None: not labelled)."""
        return self.get_metadata(DeviceProvider, node)

    def allowed(self, node: cst.CSTNode) -> bool:
        """Whether the analysis takes a sync at ``node`` to be intended (a sync-allowed
        block counts unless the rule reports in those)."""
        flags = self._sync_flags(node)
        return bool(flags & QUIET) or (self.QUIET_IN_ALLOWED_BLOCKS and bool(flags & MARKED))

    def in_allowed_block(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` is inside a ``with`` block of a sync-allowed context."""
        return bool(self._sync_flags(node) & MARKED)

    def _sync_flags(self, node: cst.CSTNode) -> int:
        return int(self.get_metadata(SyncAllowedProvider, node, 0) or 0)

    def qualify(self, node: cst.CSTNode) -> str:
        """The qualified name of a callee ("" when it is not a name or a chain)."""
        return self.get_metadata(ImportedNameProvider, node) or ""

    def include_unknown(self) -> bool:
        return bool(self.settings.get("include-unknown", False))

    def reportable(self, fact: DeviceFact | None) -> bool:
        """A CUDA tensor, or (with include-unknown) a tensor of unknown device."""
        return fact is not None and (fact.kind == CUDA or (
            fact.kind == UNKNOWN and self.include_unknown()))

    def report_readback(self, node: cst.Call, method: str) -> None:
        """Report ``x.<method>()`` on a CUDA tensor ``x`` (``.tolist()``, ``.item()``) where
        this rule reports and the analysis does not take the sync to be intended."""
        if self.method_name(node) != method:
            return
        chain = self.reporting_here()
        if chain is False:
            return
        receiver = self.receiver(node)
        if not self.reportable(receiver) or self.allowed(node):
            return
        assert receiver is not None and isinstance(node.func, cst.Attribute)
        self.report_sync(node, f"`.{method}()` on `{self.short(node.func.value)}`",
                         receiver.kind, receiver.evidence, chain)

    # Calls ----------------------------------------------------------------------------------
    @staticmethod
    def method_name(call: cst.Call) -> str | None:
        """``tolist`` for ``x.tolist()``; None for a call of a plain name."""
        func = call.func
        return func.attr.value if isinstance(func, cst.Attribute) else None

    @staticmethod
    def callee_name(call: cst.Call) -> str | None:
        """The last name of the callee: ``nonzero`` for ``torch.nonzero(x)``, ``x.nonzero()``
        and ``nonzero(x)``."""
        func = call.func
        if isinstance(func, cst.Attribute):
            return func.attr.value
        return func.value if isinstance(func, cst.Name) else None

    def torch_function(self, call: cst.Call) -> str | None:
        """The qualified name of a call of a function of torch (``torch.nonzero``,
        ``torch.cuda.current_stream().synchronize``); None for anything else, a
        ``torch.nn`` module class included."""
        qual = self.qualify(call.func)
        if not qual.startswith("torch."):
            return None
        if qual.startswith("torch.nn.") and "()" not in qual:
            last = qual.rsplit(".", 1)[-1]
            if last[:1].isupper() and last not in _NN_NOT_MODULES:
                return None  # nn.Linear(...): a module, not a tensor function
        if "()" not in qual or qual.endswith(").synchronize"):
            return qual
        return None

    def receiver(self, call: cst.Call) -> DeviceFact | None:
        """The receiver's fact when ``call`` is a tensor method call (``x.tolist()`` on a
        tensor, or on something of unknown kind), else None (see
        :meth:`receiver_of_method`; a module's or a stream's method)."""
        fact = self.receiver_of_method(call)
        if fact is None or fact.kind not in (CUDA, CPU, UNKNOWN):
            return None
        return fact

    def receiver_of_method(self, call: cst.Call) -> DeviceFact | None:
        """The receiver's fact when ``call`` calls a method of an object (a tensor, a
        stream, ...), else None: a function of torch, numpy or math, a builtin, a method of
        the class itself (``self.f()``), a receiver the analysis did not label."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return None
        qual = self.qualify(func)
        if qual.startswith("torch.") and ("()" not in qual or qual.endswith(").synchronize")):
            return None  # torch.cuda.synchronize, torch.Tensor.tolist: a function of torch
        if qual in VALUE_BUILTINS or qual.startswith(("numpy.", "math.")):
            return None
        if isinstance(func.value, cst.Name) and func.value.value == "self" and self.in_method():
            return None
        return self.device(func.value)

    @staticmethod
    def positional(call: cst.Call) -> list[cst.BaseExpression]:
        """The positional arguments (``*args`` included), as ``ast`` counts them."""
        return [a.value for a in call.args if a.keyword is None and a.star != "**"]

    @staticmethod
    def keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
        return next((a.value for a in call.args if a.keyword is not None
                     and a.keyword.value == name), None)

    @staticmethod
    def is_true(node: cst.BaseExpression | None) -> bool:
        return isinstance(node, cst.Name) and node.value == "True"

    def non_blocking(self, call: cst.Call) -> bool:
        """``non_blocking=True``, or ``True`` as the last of two or more positional
        arguments (``.to("cpu", True)``)."""
        if self.is_true(self.keyword(call, "non_blocking")):
            return True
        args = self.positional(call)
        return len(args) >= 2 and self.is_true(args[-1])

    def device_argument(self, call: cst.Call, position: int | None) -> DeviceFact | None:
        """The fact of a call's ``device=`` argument (or of the one at ``position``)."""
        node = self.keyword(call, "device")
        if node is None and position is not None:
            args = self.positional(call)
            node = args[position] if len(args) > position else None
        return self.device(node) if node is not None else None

    # Text -------------------------------------------------------------------------------------
    def source(self, node: cst.CSTNode) -> str:
        """An expression as ``ast.unparse`` spells it."""
        code = self.ctx.metadata_wrapper().module.code_for_node(node)
        try:
            return ast.unparse(ast.parse(f"({code})", mode="eval").body)
        except (SyntaxError, ValueError, RecursionError):
            return " ".join(code.split())

    def short(self, node: cst.CSTNode) -> str:
        """A dotted name as written, any other expression unparsed (40 characters at most)."""
        parts: list[str] = []
        inner = node
        while isinstance(inner, cst.Attribute):
            parts.append(inner.attr.value)
            inner = inner.value
        if isinstance(inner, cst.Name):
            return ".".join([inner.value, *reversed(parts)])
        text = self.source(node)
        return text if len(text) <= 40 else text[:37] + "..."

    @staticmethod
    def root_key(node: cst.BaseExpression) -> str | None:
        """The variable a buffer expression names: ``self.buf`` for ``self.buf[:n]``."""
        while isinstance(node, (cst.Subscript, cst.Call)) or (
                isinstance(node, cst.Attribute) and isinstance(node.value, cst.Call)):
            if isinstance(node, cst.Subscript):
                node = node.value
            elif isinstance(node, cst.Call):
                if not isinstance(node.func, cst.Attribute):
                    return None
                node = node.func.value
            else:
                node = node.value
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
            return f"{node.value.value}.{node.attr.value}"
        return None

    @staticmethod
    def index_of(node: cst.Subscript) -> cst.BaseExpression | None:
        """The index of ``x[i]`` (None for a slice or several indices)."""
        if len(node.slice) != 1:
            return None
        element = node.slice[0]
        if not isinstance(element.slice, cst.Index) or element.slice.star is not None or \
                isinstance(element.comma, cst.Comma):
            return None
        return element.slice.value

    # Reporting ----------------------------------------------------------------------------------
    def report_sync(self, node: cst.CSTNode, what: str, kind: str, why: str,
                    chain: tuple[str, ...] | None) -> None:
        """Report ``node``: what it is, where (the hot path), the harm, and the evidence."""
        where = f" in hot path {' -> '.join(chain)}" if chain else ""
        if kind == UNKNOWN:
            why = "device unknown: reported because include-unknown is on"
        message = f"{what}{where}: {self.consequence}"
        if why:
            message += f" [{why}]"
        if self.in_allowed_block(node):
            message += " (inside a sync-allowed block: expected there, but the host waits)"
        fix = None
        if kind == CUDA:
            try:
                fix = self.fix_for(node)
            except (SyntaxError, ValueError, RecursionError):
                fix = None
        severity = "warning" if kind == UNKNOWN else self.severity
        facts = self.ctx.metadata_wrapper().facts
        pos = facts.position(node)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
                pos.start.line != pos.end.line:
            # A method call at the end of a receiver written over several lines: the
            # finding starts at the method's name (`.nonzero(` on the line that calls it).
            name = facts.position(node.func.attr).start
            if name.line > pos.start.line:
                pos = pos.__class__(name, pos.end)
        self.ctx.report(self, message, pos.start.line, pos.start.column + 1, pos.end.line,
                        pos.end.column + 1, fix, severity=severity)

    def fix_for(self, node: cst.CSTNode) -> Fix | None:
        """The fix of a finding at ``node`` (none by default)."""
        return None

    # The readback fix, on CPython's tree of the function ---------------------------------
    def _function_index(self) -> dict[str, Any] | None:
        """The calls (by character span) and the parents of the nodes of the analysed
        function being walked."""
        qualname = self._analysed()[0]
        if qualname is None:
            return None
        ctx = self.ctx
        key = f"index:{qualname}"
        index = ctx.memo.get(key)
        if index is None:
            func = ctx.gpu.functions.get(qualname)
            if func is None:
                return None
            calls, parents = {}, {}
            for node in fast_walk(func.node):
                for child in ast.iter_child_nodes(node):
                    parents[child] = node
                if isinstance(node, ast.Call):
                    calls[ctx.span(node)] = node
            index = ctx.memo[key] = {"calls": calls, "parents": parents}
        return index

    def ast_call(self, node: cst.Call) -> ast.Call | None:
        """The ``ast`` call at the same place as a LibCST call."""
        index = self._function_index()
        if index is None:
            return None
        pos = self.ctx.metadata_wrapper().facts.position(node)
        return index["calls"].get((pos.start.line, pos.start.column + 1, pos.end.line,
                                   pos.end.column + 1))

    def ast_parent(self, node: ast.AST) -> ast.AST | None:
        index = self._function_index()
        return index["parents"].get(node) if index is not None else None

    def event_sync_fix(self, replaced: ast.Call, tensor: ast.expr, what: str,
                       receiver: cst.BaseExpression) -> Fix | None:
        """Replace ``replaced`` by a call of the event-sync helper on ``tensor``: a LibCST
        call around the rule's own ``receiver`` node, so that a receiver written over
        several lines (with its comments) is kept as it is."""
        from libcst._nodes.internal import CodegenState

        from reviewbot.source import split_lines

        module = self.ctx.metadata_wrapper().module
        argument = receiver.with_changes(lpar=(), rpar=()) if receiver.lpar else receiver
        # A continuation line of the receiver is indented from its statement's block.
        statement: ast.AST | None = replaced
        while statement is not None and not isinstance(statement, ast.stmt):
            statement = self.ast_parent(statement)
        line = split_lines(self.ctx.text)[statement.lineno - 1] if statement is not None \
            else ""
        indent = line[:len(line) - len(line.lstrip(" \t"))]

        def render(callee: str) -> str:
            call = cst.Call(func=cst.parse_expression(callee), args=[cst.Arg(value=argument)])
            state = CodegenState(default_indent=module.default_indent, default_newline="\n",
                                 indent_tokens=[indent] if indent else [])
            call._codegen(state)
            return "".join(state.tokens)  # edits take the file's newlines when applied

        from reviewbot.fixes.event_sync import EventSyncFixer

        ctx = self.ctx
        helper = str(self.settings.get("helper-name", HELPER_NAME.default))
        key = f"event-sync:{helper}"
        fixer = ctx.memo.get(key)
        if fixer is None:
            # The module's LibCST tree (not the functions the rules walk), parsed only when
            # a fix inserts a helper.
            fixer = EventSyncFixer(ctx.ast_tree, ctx.text, ctx.packs, helper, ctx.columns,
                                   lambda: ctx.cst_module)
            ctx.memo[key] = fixer
        func = ctx.gpu.functions.get(self._analysed()[0])
        if func is None:
            return None
        return fixer.fix(replaced, tensor, func.node, func.cls.node if func.cls else None, what,
                         render)


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_TOKEN_MODULES = frozenset({"libcst._nodes.whitespace", "libcst._nodes.op"})
_BRACKETS = frozenset({"LeftParen", "RightParen", "LeftSquareBracket", "RightSquareBracket",
                       "LeftCurlyBrace", "RightCurlyBrace"})


def child_nodes(node: Any) -> list[Any]:
    """A LibCST node's children (its fields' nodes) without whitespace, comments,
    operators and brackets. ``node.children`` holds those too and is built by a visitor of
    the node, at many times the cost; the order of the two may differ."""
    kind = type(node)
    names = _CHILD_FIELDS.get(kind)
    if names is None:
        import dataclasses

        names = _CHILD_FIELDS[kind] = tuple(f.name for f in dataclasses.fields(node))
    out: list[Any] = []
    for name in names:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            if type(value).__module__ not in _TOKEN_MODULES and \
                    type(value).__name__ not in _BRACKETS:
                out.append(value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, cst.CSTNode) and \
                        type(item).__module__ not in _TOKEN_MODULES and \
                        type(item).__name__ not in _BRACKETS:
                    out.append(item)
    return out


def method_receiver(node: ast.AST, *methods: str) -> tuple[ast.AST, ...]:
    """The receiver of ``x.method()`` for one of ``methods`` (a rule's ``cuda_sites``)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in methods:
        return (node.func.value,)
    return ()


def ast_positional(call: ast.Call) -> list[ast.expr]:
    """A call's positional arguments as :meth:`SyncRule.positional` gives them (``*args``
    as ``args``), on CPython's tree."""
    return [a.value if isinstance(a, ast.Starred) else a for a in call.args]


def ast_condition_leaves(test: ast.expr) -> Iterator[ast.expr]:
    """:func:`condition_leaves` on CPython's tree."""
    if isinstance(test, ast.BoolOp):
        for value in test.values:
            yield from ast_condition_leaves(value)
    elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        yield from ast_condition_leaves(test.operand)
    else:
        yield test


def condition_leaves(test: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The operands a test is decided by: through ``and``, ``or`` and ``not``."""
    if isinstance(test, cst.BooleanOperation):
        yield from condition_leaves(test.left)
        yield from condition_leaves(test.right)
    elif isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        yield from condition_leaves(test.expression)
    else:
        yield test


def bool_operands(node: cst.BooleanOperation) -> list[cst.BaseExpression]:
    """The operands of a chain of one boolean operator (``a and b and c``), as ``ast``
    groups them: a parenthesised part is one operand."""
    kind = type(node.operator)

    def flatten(part: cst.BaseExpression, top: bool) -> list[cst.BaseExpression]:
        if isinstance(part, cst.BooleanOperation) and type(part.operator) is kind and (
                top or not part.lpar):
            return [*flatten(part.left, False), *flatten(part.right, False)]
        return [part]

    return flatten(node, True)
