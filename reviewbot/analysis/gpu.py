"""Where a module's tensors live, which of its functions are hot, and where the host waits.

One pass over CPython's ``ast`` of a module (it parses about ten times faster than
LibCST, which keeps the sync rules cheap enough to run on every commit):

* **Names**: import aliases, so ``import torch as t`` and ``from torch import cuda`` still
  resolve to ``torch.cuda.synchronize``.
* **Hot paths**: entry points from the rule packs (``*ModelRunner.execute_model``,
  ``forward`` of an ``nn.Module``), then every function of the module they call, directly
  or through ``self.``, up to a depth; start-up functions stop it.
* **Devices**: each expression is labelled cuda / cpu / value (not a tensor) / unknown,
  with the reason (``output of self.sampler at line 120``), through assignments, tuple
  unpacking, arithmetic, indexing, method chains, ``torch.*`` calls, helper functions'
  returns, and ``self.`` attributes assigned anywhere in the class.
* **Copies in flight**: where a buffer that a ``non_blocking`` copy fills is read on the host
  before anything waits for the copy.

The analysis only labels: which call, test or index is a sync, and whether to report it,
is each rule's own decision (``reviewbot/rules/rb1*.py``, reading these labels through
``reviewbot.providers``).
"""

from __future__ import annotations

import ast
import bisect
import fnmatch
import re
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Iterator, NamedTuple

from reviewbot.analysis.walk import walk as fast_walk
from reviewbot.analysis.tensor_api import TENSOR_METHODS
from reviewbot.packs import PackData

CUDA, CPU, VALUE, UNKNOWN = "cuda", "cpu", "value", "unknown"
# An instance of a project class whose fields are declared (its why: the class's key).
OBJECT = "object"
DEV_CUDA, DEV_CPU, STREAM, EVENT, MODULE = "device:cuda", "device:cpu", "stream", "event", "module"
MAX_HOT_DEPTH = 6


class Label(NamedTuple):
    """What an expression holds, and why we believe it.

    A named tuple: the walks make one for nearly every expression, and a tuple is built
    faster than a frozen dataclass and carries no instance dict.
    """

    kind: str
    why: str = ""
    boolean: bool = False  # a boolean tensor, e.g. a mask built by a comparison
    # CUDA only by devices.default (no evidence of its own): a host tensor it meets wins.
    weak: bool = False

    def but(self, why: str | None = None, boolean: bool | None = None) -> "Label":
        """The same kind with another reason or boolean flag."""
        return Label(self.kind, self.why if why is None else why,
                     self.boolean if boolean is None else boolean, self.weak)


UNKNOWN_L = Label(UNKNOWN)
VALUE_L = Label(VALUE)
# Unknown: a field the project moves to the host somewhere (`out.ids = out.ids.cpu()`), so
# a test that it is a tensor says nothing of its device.
MOVED_L = Label(UNKNOWN, "moved to the host somewhere in the project")
NONE_L = Label(VALUE, "None")  # a placeholder, later replaced by the real value


def merge(labels: list[Label]) -> Label:
    """One label for a name assigned in several places.

    Placeholders (None) and assignments we know nothing about do not count against the
    others; known kinds that disagree make it unknown.
    """
    known = [label for label in labels if label.kind != UNKNOWN and label is not NONE_L
             and label != NONE_L]
    if not known:
        return VALUE_L if labels and all(label == NONE_L for label in labels) else UNKNOWN_L
    kinds = {label.kind for label in known}
    return known[0] if len(kinds) == 1 else UNKNOWN_L

TORCH_FACTORIES = {
    "zeros", "ones", "empty", "full", "arange", "range", "rand", "randn", "randint",
    "randperm", "tensor", "as_tensor", "linspace", "logspace", "eye", "empty_strided",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "randint_like", "tril_indices", "triu_indices", "asarray",
}
TENSOR_TO_VALUE_METHODS = {
    "size", "dim", "numel", "stride", "data_ptr", "element_size", "is_contiguous",
    "get_device", "nelement", "ndimension", "storage_offset", "is_pinned", "untyped_storage",
    "tolist", "item", "numpy", "__len__", "is_floating_point", "is_complex", "type",
    "storage", "nbytes", "is_shared", "is_set_to", "has_names", "is_inference",
}
BOOLEAN_METHODS = {
    "bool", "eq", "ne", "lt", "gt", "le", "ge", "logical_and", "logical_or", "logical_not",
    "logical_xor", "isnan", "isinf", "isfinite", "isin", "__eq__", "__ne__",
}
VALUE_ATTRIBUTES = {"shape", "dtype", "ndim", "is_cuda", "is_cpu", "layout", "requires_grad",
                    "itemsize", "nbytes", "names", "is_sparse", "is_leaf", "is_xpu", "is_mps",
                    "is_meta", "is_quantized", "is_nested", "is_mkldnn"}
SAME_ATTRIBUTES = {"T", "mT", "H", "mH", "data", "real", "imag", "grad"}
DATA_DEPENDENT = {"nonzero", "unique", "unique_consecutive", "masked_select", "argwhere"}
# Methods of str, list and dict: on a receiver of unknown type, a project function of the
# same name that returns a tensor says nothing about the call (`prefix.split(".")`).
_BUILTIN_METHODS = frozenset({
    "split", "rsplit", "splitlines", "strip", "lstrip", "rstrip", "join", "replace",
    "format", "startswith", "endswith", "lower", "upper", "encode", "decode", "find",
    "partition", "get", "items", "keys", "values", "pop", "popitem", "setdefault", "copy",
    "index", "count", "append", "extend", "insert", "remove", "update"})
# torch functions whose result is numbers even when an operand is a mask.
_NOT_BOOLEAN_RESULTS = frozenset({
    "cumsum", "sum", "searchsorted", "argmax", "argmin", "argsort", "bincount",
    "count_nonzero", "prod", "mean", "bucketize", "cumprod", "diff", "add", "sub", "mul",
    "multinomial", "gather", "index_select", "clamp", "arange"})


# Every pattern below starts with a literal (or a one-character set) so that Python's re
# scans for it quickly: a leading `\b` or an alternation makes a scan up to 30 times slower.
# A word boundary before a word is checked by a lookbehind once the word is found.
_SELF_ATTR = re.compile(r"self\.(\w+)")
_SELF_WRITE = re.compile(r"self\.(\w+)(?:\s*:[^=\n]*)?\s*=(?!=)")
_SELF_CALL = re.compile(r"\.(?:(?<=self\.)|(?<=cls\.)|(?<=\)\.))(\w+)\s*\(")
_OPERATORS = ("==", "!=", "<", "~", "logical_", "isnan", "isinf", "non_blocking", "mask",
              "equal(")
_GREATER = re.compile(r">(?<!->)").search  # a comparison, not a return annotation
# Text without which a function holds no sync: sync calls, data-dependent ops, tests and
# comparisons (conditions, masks), non_blocking copies, and copies onto the GPU.
_CANDIDATE_TESTS = (
    re.compile(r"if(?<=\bif)\b").search,
    lambda text: any(operator in text for operator in _OPERATORS) or None,
    re.compile(r"[wao](?<=\b[wao])(?:(?<=w)hile|(?<=a)(?:ssert|nd)|(?<=o)r)\b").search,
    _GREATER,
    lambda text: ("tensor(" in text and "device" in text) or None,  # a copy onto the GPU
    re.compile(r"\.(?:tolist|item|cpu|cuda|numpy|to|copy_|synchronize|nonzero|unique|"
               r"unique_consecutive|masked_select|argwhere|repeat_interleave|bool|any|all|eq|"
               r"ne|gt|lt|ge|le|isin)\s*\(").search,
    re.compile(r"[bifwnumars](?<=\b[bifwnumars])(?:(?<=b)ool|(?<=i)nt|(?<=f)loat|(?<=w)here|"
               r"(?<=n)onzero|(?<=u)nique|(?<=m)asked_select|(?<=a)rgwhere|"
               r"(?<=r)epeat_interleave|(?<=s)ynchronize)\s*\(").search,
)
_CLEARS_FLAG = re.compile(r"self\.(\w+)\s*=\s*False\b")


@dataclass
class Summary:
    """Facts about a function body read off its source text (far cheaper than a walk).

    They only choose what to analyse: a name found in a comment costs a little time,
    never a finding.
    """

    text: str

    @property
    def self_called(self) -> set[str]:
        """Names called as self.f(...), cls.f(...) or super().f(...)."""
        return self._cached("self_called", lambda: set(_SELF_CALL.findall(self.text)))

    @property
    def candidate(self) -> bool:
        """Whether the text could hold a sync."""
        def search() -> bool:
            body = self.text.split(":", 1)[-1] if self.text.lstrip().startswith(
                ("def", "async")) else self.text
            return any(test(body) is not None for test in _CANDIDATE_TESTS)
        return self._cached("candidate", search)

    @property
    def cleared_flags(self) -> list[str]:
        """Attributes set to False (``self.flag = False``)."""
        return self._cached("cleared_flags", lambda: _CLEARS_FLAG.findall(self.text)
                            if "False" in self.text else [])

    @property
    def self_reads(self) -> set[str]:
        """Attributes read (or written) as ``self.x``."""
        return self._cached("self_reads", lambda: set(_SELF_ATTR.findall(self.text)))

    @property
    def self_writes(self) -> set[str]:
        """Attributes assigned as ``self.x = ...``."""
        return self._cached("self_writes", lambda: set(_SELF_WRITE.findall(self.text)))

    def _cached(self, name: str, compute: Any) -> Any:
        if name not in self.__dict__:
            self.__dict__[name] = compute()
        return self.__dict__[name]

    @classmethod
    def of(cls, text: str) -> "Summary":
        """The summary of a function's source text (each fact computed when first asked)."""
        return cls(text)


class Source:
    """A module's text, split into lines only when a function's text is first asked for
    (most functions of a module without a hot path never are)."""

    __slots__ = ("text", "_lines")

    def __init__(self, text: str) -> None:
        self.text = text
        self._lines: list[str] | None = None

    @property
    def lines(self) -> list[str]:
        """The lines of the text."""
        if self._lines is None:
            self._lines = self.text.splitlines()
        return self._lines


@dataclass(eq=False)
class FunctionInfo:
    """A function or method of the module."""

    qualname: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    cls: "ClassInfo | None"
    source: "Source | None" = field(default=None, repr=False)  # the module's text
    _summary: "Summary | None" = None

    @property
    def summary(self) -> "Summary":
        """Calls and ``self.`` attributes read and written, from the source text."""
        if self._summary is None:
            end = self.node.end_lineno or self.node.lineno
            lines = self.source.lines if self.source is not None else []
            self._summary = Summary.of("\n".join(lines[self.node.lineno - 1:end]))
        return self._summary

    @property
    def name(self) -> str:
        """The function's own name."""
        return self.node.name


@dataclass(eq=False)
class ClassInfo:
    """A class of the module with what its instances hold."""

    name: str
    node: ast.ClassDef
    bases: list[str]
    methods: dict[str, FunctionInfo] = field(default_factory=dict)
    attrs: dict[str, Label] = field(default_factory=dict)
    is_module: bool = False
    on_cuda: bool = False


@dataclass
class GpuAnalysis:
    """The result for one module."""

    hot: dict[str, list[str]]  # function qualname -> the chain of calls that makes it hot
    functions: dict[str, FunctionInfo]
    classes: list[ClassInfo] = field(default_factory=list, repr=False)
    # With record_labels: each walked function's expressions, by their ast span (line,
    # byte offset, end line, end byte offset) -> (label, flags: 1 a sync is quiet there, 2
    # it is in a sync-allowed block); and the analyzer that walks the other functions when
    # they are first asked about.
    labels: dict[str, dict[tuple[int, int, int, int], tuple[Label, int]]] = field(
        default_factory=dict, repr=False)
    analyzer: "ModuleAnalyzer | None" = field(default=None, repr=False)
    # Each walked function's host reads of a buffer while a non_blocking copy into it is
    # still unwaited, by the read's ast span -> (the buffer, the copy's line).
    unwaited: dict[str, dict[tuple[int, int, int, int], tuple[str, int]]] = field(
        default_factory=dict, repr=False)
    # The module's import aliases (those of its functions' own imports included).
    names: "Names | None" = field(default=None, repr=False)

    def unwaited_of(self, qualname: str) -> dict[tuple[int, int, int, int], tuple[str, int]]:
        """A function's reads of buffers whose non_blocking copy is unwaited (walking it
        now, as :meth:`labels_of` does, when the analysis did not)."""
        self.labels_of(qualname)
        return self.unwaited.get(qualname, {})

    def labels_of(self, qualname: str) -> dict[tuple[int, int, int, int],
                                               tuple[Label, int]] | None:
        """The recorded labels of a function's expressions (its closures' included), walking
        it now when the analysis did not; None when the analysis does not label it (not
        recording, another accelerator's module, or not a function of the module)."""
        known = self.labels.get(qualname)
        if known is not None or self.analyzer is None:
            return known
        func = self.functions.get(qualname)
        if func is None:
            return None
        walker = self.analyzer.walk_for_labels(func)
        self.labels[qualname] = recorded = walker.recorded or {}
        if walker.unwaited:
            self.unwaited[qualname] = walker.unwaited
        return recorded

    def release(self) -> None:
        """Break the class <-> method links, so that the syntax tree is freed at once.

        A class holds its methods and each method its class: left alone, that cycle keeps
        the whole tree alive until the cyclic garbage collector walks it.
        """
        for cls in self.classes:
            cls.methods.clear()
        self.labels.clear()
        self.unwaited.clear()
        self.analyzer = None


# torch functions that join a sequence of tensors into one.
_JOINS = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack",
                    "column_stack", "row_stack", "block_diag", "broadcast_tensors"})
# Classes under torch.nn that are not modules (a Parameter is a tensor).
_NN_NOT_MODULES = frozenset({"Parameter", "Buffer", "UninitializedParameter",
                             "UninitializedBuffer", "ParameterList", "ParameterDict"})
# Words in the name of a Hugging Face `transformers` class that is not a model (configs,
# tokenizers, processors, outputs): the rest, built or loaded, are nn.Modules.
_HF_NOT_MODULE_WORDS = ("Config", "Tokenizer", "Processor", "Extractor", "Output", "Feature",
                        "Cache", "Criteria", "Streamer", "Mixin", "Pipeline", "Trainer")
_HF_LOADERS = ("from_config", "_from_config", "from_pretrained")


def transformers_model(qual: str) -> str | None:
    """The class a call builds or loads when it is a `transformers` model (an nn.Module):
    ``transformers.ParakeetEncoder(config)``, ``transformers.AutoModel.from_config(c)``."""
    if not qual.startswith("transformers.") or "()" in qual:
        return None
    parts = qual.split(".")
    name = parts[-2] if parts[-1] in _HF_LOADERS and len(parts) > 2 else parts[-1]
    if not name[:1].isupper() or any(word in name for word in _HF_NOT_MODULE_WORDS):
        return None
    return name


# Builtins whose result is a host value (never a tensor).
_VALUE_BUILTINS = frozenset({
    "list", "tuple", "dict", "set", "str", "sum", "min", "max", "range", "enumerate", "zip",
    "sorted", "abs", "round", "bool", "int", "float", "len", "isinstance", "hasattr",
    "id", "repr", "print", "format"})
_RETURNS_VALUE = re.compile(r"return(?<=\breturn)[ \t(\[{]*[^\s#;)]")


class _Patterns:
    """Qualified-name patterns (fnmatch syntax, case-sensitive) compiled for speed.

    Most pack patterns are a name with one ``*`` at an end (``*.step``, ``test_*``,
    ``*Linear``, ``*GPU*``): those are string tests. The rest become one regex.
    """

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.full = _PatternGroup(patterns)
        # A pattern without a dot is also tried against a qualified name's last part.
        self.bare = _PatternGroup(tuple(p for p in patterns if "." not in p))
        self.seen: dict[str, bool] = {}  # names repeat across a run: each is tested once

    def matches(self, qualname: str) -> bool:
        known = self.seen.get(qualname)
        if known is None:
            known = self.full.matches(qualname) or (
                not self.bare.empty and self.bare.matches(qualname.rpartition(".")[2]))
            if len(self.seen) > 65536:
                self.seen.clear()
            self.seen[qualname] = known
        return known


class _PatternGroup:
    def __init__(self, patterns: tuple[str, ...]) -> None:
        exact, prefixes, suffixes, infixes, other = set(), [], [], [], []
        for pattern in patterns:
            core = pattern.strip("*")
            if any(c in core for c in "*?[") or not core:
                other.append(pattern)
            elif pattern == core:
                exact.add(core)
            elif pattern == core + "*":
                prefixes.append(core)
            elif pattern == "*" + core:
                suffixes.append(core)
            elif pattern == "*" + core + "*":
                infixes.append(core)
            else:  # "**x": several stars are still one "*"
                other.append(pattern)
        self.exact = frozenset(exact)
        self.prefixes = tuple(prefixes)
        self.suffixes = tuple(suffixes)
        self.infixes = re.compile("|".join(map(re.escape, infixes))).search if infixes else None
        self.regex = re.compile("|".join(fnmatch.translate(p) for p in other)) if other else None
        self.empty = not patterns

    def matches(self, name: str) -> bool:
        return (name in self.exact or name.startswith(self.prefixes)
                or name.endswith(self.suffixes)
                or (self.infixes is not None and self.infixes(name) is not None)
                or (self.regex is not None and self.regex.match(name) is not None))


_PATTERNS: dict[int, tuple[tuple[str, ...], _Patterns]] = {}


def _matches(qualname: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``qualname`` (or, for a pattern without a dot, its last part) matches."""
    cached = _PATTERNS.get(id(patterns))
    if cached is None or cached[0] is not patterns:
        if len(_PATTERNS) > 256:
            _PATTERNS.clear()
        cached = _PATTERNS[id(patterns)] = (patterns, _Patterns(tuple(patterns)))
    return cached[1].matches(qualname)


def _holds_line(lines: list[int], first: int, last: int | None) -> bool:
    """Whether the sorted ``lines`` hold one in ``first..last``."""
    index = bisect.bisect_left(lines, first)
    return index < len(lines) and lines[index] <= (last or first)


@lru_cache(maxsize=64)
def _loop_words(patterns: tuple[str, ...]) -> tuple[str, ...]:
    """Text every call of a loop callee spells: `model(` for the pattern `*.model`."""
    words = set()
    for pattern in patterns:
        last = pattern.rsplit(".", 1)[-1]
        chunks = [c for c in last.split("*") if c]
        if not chunks:
            return ()
        words.add(chunks[-1] + "(" if last.endswith(chunks[-1]) else max(chunks, key=len))
    # A word that holds another is found whenever it is (`_model(` holds `model(`).
    return tuple(sorted(w for w in words if not any(o != w and o in w for o in words)))


_TRIGGER_WORDS: dict[int, tuple[PackData, tuple[str, ...]]] = {}


def trigger_words(packs: PackData) -> tuple[str, ...]:
    """Words one of which every file with a hot path spells (the entry points' names)."""
    cached = _TRIGGER_WORDS.get(id(packs))
    if cached is not None and cached[0] is packs:
        return cached[1]
    words = _trigger_words(packs)
    _TRIGGER_WORDS[id(packs)] = (packs, words)
    return words


def _trigger_words(packs: PackData) -> tuple[str, ...]:
    words = set()
    if packs.loop_callees:
        loop_words = _loop_words(packs.loop_callees)
        if not loop_words:
            return ()
        words.update(loop_words)
    for pattern in (*packs.hot_path_entry_points, *packs.module_entry_points):
        last = pattern.rsplit(".", 1)[-1]
        chunks = [c for c in last.replace("?", "*").split("*") if c]
        if not chunks:  # a pattern such as "Foo.*": the class name must appear
            chunks = [c for c in pattern.replace("?", "*").split("*") if c.strip(".")]
        if not chunks:
            return ()  # "*": every file may be hot
        words.add(max(chunks, key=len).strip("."))
    # A word that holds another is found whenever it is (`step` in `train_step`).
    return tuple(sorted(w for w in words if not any(o != w and o in w for o in words)))


class Names:
    """Import aliases: the qualified name behind a local name or attribute chain."""

    def __init__(self, tree: ast.Module) -> None:
        self.aliases: dict[str, str] = {}
        self.conditional: dict[str, str] = {}  # names an `if`/`try` block imports
        self.scan(tree.body)
        # What the module imports whatever the platform: the imports at its top level, not
        # in an `if is_npu():` or a `try:` block.
        self.unconditional = frozenset(
            self.aliases[alias.asname or (alias.name if isinstance(node, ast.ImportFrom)
                                          else alias.name.split(".", 1)[0])]
            for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
            and not getattr(node, "level", 0) and (isinstance(node, ast.Import) or node.module)
            for alias in node.names if alias.name != "*")

    def scan(self, body: list[ast.stmt], nested: bool = False) -> None:
        """Record the imports of a block (and of the if/try blocks in it)."""
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                before = dict(self.aliases) if nested else None
                self.add(node)
                if before is not None:
                    self.conditional.update((name, qual) for name, qual in self.aliases.items()
                                            if before.get(name) != qual)
            elif isinstance(node, (ast.If, ast.Try)):
                for attr in ("body", "orelse", "finalbody"):
                    self.scan(getattr(node, attr, []) or [], True)
                for handler in getattr(node, "handlers", []) or []:
                    self.scan(handler.body, True)

    def add(self, node: ast.Import | ast.ImportFrom) -> None:
        """Record one import statement."""
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".", 1)[0]
                    self.aliases[top] = top
        elif node.module and not node.level:
            for alias in node.names:
                self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def qualify(self, expr: ast.expr) -> str | None:
        """``torch.cuda.synchronize`` for ``t.cuda.synchronize`` after ``import torch as t``."""
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if isinstance(expr, ast.Call):  # torch.cuda.current_stream().synchronize
            inner = self.qualify(expr.func)
            if inner is None:
                return None
            return ".".join([inner + "()", *reversed(parts)])
        if not isinstance(expr, ast.Name):
            return None
        head = self.aliases.get(expr.id, expr.id)
        if not parts:
            return head
        parts.append(head)
        parts.reverse()
        return ".".join(parts)


def _root_key(expr: ast.expr) -> str | None:
    """The variable a buffer expression names: ``self.buf`` for ``self.buf[:n]``."""
    while isinstance(expr, (ast.Subscript, ast.Call)) or (
            isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Call)):
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call):
            if not isinstance(expr.func, ast.Attribute):
                return None
            expr = expr.func.value
        else:
            expr = expr.value
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        return f"{expr.value.id}.{expr.attr}"
    return None


def _not_cuda_checks(test: ast.expr) -> tuple[str, ...]:
    """Names an ``if`` test proves are off the GPU in its body: ``not t.is_cuda``, alone or
    as one alternative of an ``or``."""
    tests = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) \
        else [test]
    return tuple(t.operand.value.id for t in tests
                 if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not)
                 and isinstance(t.operand, ast.Attribute) and t.operand.attr == "is_cuda"
                 and isinstance(t.operand.value, ast.Name))


def _is_shape(expr: ast.expr) -> bool:
    """``t.shape``, ``t.size()``, ``t.stride()``: a tuple of ints whatever ``t`` is."""
    if isinstance(expr, ast.Attribute):
        return expr.attr == "shape"
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
        expr.func.attr in ("size", "stride") and not expr.args


def _scalar_expr(expr: ast.expr) -> bool:
    """A number as written: a numeric literal, arithmetic on names and numbers, or an
    ``int()``/``float()`` of something (never a list, a tuple or a comprehension)."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.UnaryOp):
        return _scalar_expr(expr.operand)
    if isinstance(expr, ast.BinOp):
        return all(isinstance(side, (ast.Name, ast.Attribute)) or _scalar_expr(side)
                   for side in (expr.left, expr.right)) and any(
            _scalar_expr(side) for side in (expr.left, expr.right))
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and \
        expr.func.id in ("int", "float") and len(expr.args) == 1


def _option_device(value: ast.expr) -> ast.expr | None:
    """The ``device`` entry of a dict of keyword arguments (``dict(device=d)``,
    ``{"device": d}``), for a call that passes it on with ``**``."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id == "dict" and not value.args:
        return _kw(value, "device")
    if isinstance(value, ast.Dict):
        for key, item in zip(value.keys, value.values):
            if isinstance(key, ast.Constant) and key.value == "device":
                return item
    return None


def _moved_field(node: ast.Assign) -> str | None:
    """The field an assignment moves to the host (``out.lp = out.lp.tolist()``, also
    inside ``tuple(...)``): the field's name, else None."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Attribute):
        return None
    target = _dotted_text(node.targets[0])
    for call in fast_walk(node.value):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                call.func.attr in ("tolist", "cpu", "numpy", "to") and \
                target is not None and _dotted_text(call.func.value) == target:
            return node.targets[0].attr
    return None


def _short(expr: ast.expr) -> str:
    parts: list[str] = []
    node = expr
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):  # the common case, without the cost of ast.unparse
        return ".".join([node.id, *reversed(parts)])
    text = ast.unparse(expr)
    return text if len(text) <= 40 else text[:37] + "..."


# Guards: a test whose block does not run per step on a CUDA device. Words are the parts
# of the test's names, split at `_`, `.` and case changes.
_DEBUG_WORDS = frozenset({"debug", "trace", "tracing", "validate", "asserts", "sanity",
                          "stats", "timing", "time", "timed", "profile", "profiling",
                          "profiler", "verbose", "envs", "environ", "getenv", "env",
                          "diagnostics", "diagnostic", "log", "logging", "loglevel",
                          # opt-in checks and recorders: `if self.enable_nan_detection:`,
                          # `if not self._record: return`
                          "detection", "record", "recording"})
_CAPTURE_WORDS = frozenset({"capture", "capturing"})
_OTHER_PLATFORMS = frozenset({"npu", "xpu", "hpu", "tpu", "hip", "rocm", "neuron", "mlu",
                              "musa", "mps", "gaudi", "ascend", "cpu"})
# Words of a switch's name that make it a test for another accelerator.
_PLATFORM_SWITCH_WORDS = (_OTHER_PLATFORMS - {"cpu"}) | {"aiter", "amx", "amd", "habana", "mlx"}
_NEGATING_WORDS = frozenset({"skip", "disable", "disabled", "no", "not", "without", "avoid"})
_WORD_SPLIT = re.compile(r"[._]+|(?<=[a-z0-9])(?=[A-Z])")


def _test_names(test: ast.expr) -> list[str]:
    return [n.id if isinstance(n, ast.Name) else n.attr for n in fast_walk(test)
            if isinstance(n, (ast.Name, ast.Attribute))]


def _platform_check(test: ast.expr) -> str | None:
    """"other" for ``is_npu()``/``current_platform.is_xpu()``/``_is_hip``, "cuda" for
    ``is_cuda()``, else None (a plain name or call of such a predicate only)."""
    target = test.func if isinstance(test, ast.Call) and not test.args else test
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    name = name.lstrip("_").lower()
    platform = name[3:] if name.startswith("is_") else ""
    if platform in _OTHER_PLATFORMS:
        return "other"
    if platform in ("cuda", "cuda_alike", "nvidia"):
        return "cuda"
    # `HAS_TRITON`, `capabilities.supports_triton`, `is_triton_available()`: a CUDA build
    # has Triton; the code for its absence is another platform's.
    words = set(_name_words(name))
    if "triton" in words and words & {"has", "supports", "available"}:
        return "cuda"
    # `if _use_aiter_gfx95:`, `if use_intel_amx_backend(layer):`, `if _is_cpu_amx_available:`:
    # a switch named for another accelerator's kernels (the CPU alone only as `is_cpu`:
    # `cpu_offload` is a CUDA engine's mode). Not one that says no to them
    # (`skip_aiter_moe`, `disable_npu_graph`): its block is the CUDA path.
    func = test.func if isinstance(test, ast.Call) else test
    named = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    words = {w.lower() for w in _WORD_SPLIT.split(named) if w}
    if words & _PLATFORM_SWITCH_WORDS and not words & _NEGATING_WORDS:
        return "other"
    return None


# Words of a module's file name that name another platform wherever they stand in it.
_PLATFORM_WORDS = frozenset({"cpu", "amx", "npu", "xpu", "hpu", "tpu", "rocm", "hip", "mlu",
                             "musa", "ascend", "gaudi", "habana", "aiter", "amd", "mps",
                             "mlx"})
# Words of a module name that say it moves data between the GPU and the host memory it
# names (`cpu_offload.py`): code of the CUDA engine, not of its CPU backend.
_MOVES_DATA = frozenset({"offload", "offloading", "swap", "swapper", "transfer", "copy",
                         "pinned", "staging"})


_CAMEL_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z]|[0-9_]|$)|[A-Z]?[a-z]+|[0-9]+")


def other_platform_class(name: str) -> bool:
    """Whether a class's name names another accelerator among its words
    (``VisionIntelXPUAttention``, ``AiterAttnBackend``, ``NPUGraphRunner``): its methods run
    there, not on the CUDA path. The CPU is left out: ``CpuGpuBuffer`` is a CUDA engine's
    paired buffer."""
    words = {w.lower() for w in _CAMEL_WORDS.findall(name)}
    return bool(words & (_PLATFORM_WORDS - {"cpu"})) and not words & _MOVES_DATA


def other_platform_function(name: str) -> bool:
    """Whether a function's name ends in another accelerator (``forward_npu``,
    ``_prepare_hip``, ``apply_aiter``), or is the CPU's method of an op that dispatches by
    platform (``forward_cpu``, beside ``forward_cuda`` and ``forward_native``): it runs
    there, not on the CUDA path. ``copy_to_cpu`` and ``offload_cpu`` move a CUDA engine's
    data."""
    words = _name_words(name)
    if not words:
        return False
    if words[-1] == "cpu":
        return words[0] == "forward"
    return words[-1] in _PLATFORM_SWITCH_WORDS


def _device_check(test: ast.expr) -> str | None:
    """"cpu" for a test that holds only for a tensor on the host (``t.device.type ==
    "cpu"``, ``t.device == torch.device("cpu")``, ``str(t.device) != "cuda"``; also any other
    device type, ``t.device.type == "mps"``; a name for one, ``device_type != "cuda"``),
    "cuda" for
    one that holds only on the GPU, else None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and
            isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
        return None
    left, right = test.left, test.comparators[0]
    if isinstance(left, ast.Constant):
        left, right = right, left
    if isinstance(right, ast.Call) and isinstance(right.func, ast.Attribute) and \
            right.func.attr == "device" and len(right.args) == 1:
        right = right.args[0]  # torch.device("cpu")
    if not (isinstance(right, ast.Constant) and right.value in _DEVICE_TYPES):
        return None
    if right.value not in ("cpu", "cuda") and not isinstance(test.ops[0], ast.Eq):
        return None  # `!= "mps"`: CUDA and the CPU alike
    if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and \
            left.func.id == "str" and len(left.args) == 1:
        left = left.args[0]
    if isinstance(left, ast.Attribute) and left.attr == "type":
        left = left.value
    named = isinstance(left, ast.Name) and left.id.lower().endswith(("device_type", "device"))
    if not (named or isinstance(left, ast.Attribute) and left.attr == "device"):
        return None  # `device_type = scores.device.type` first: a name that says so
    on_host = (right.value != "cuda") == isinstance(test.ops[0], ast.Eq)
    return "cpu" if on_host else "cuda"


_EXITS = (ast.Return, ast.Raise, ast.Break, ast.Continue)
# The nn.Module methods that walk a model's parts.
_MODULE_WALKS = frozenset({"named_modules", "named_parameters", "named_buffers",
                           "named_children", "modules", "parameters", "buffers", "children"})
# Device types of torch: a test for any but "cuda" holds off the GPU (`== "mps"`).
_DEVICE_TYPES = frozenset({"cpu", "cuda", "mps", "xpu", "npu", "hpu", "xla", "meta", "mtia"})


def _host_only_test(test: ast.expr) -> bool:
    """A test that holds only for host tensors: ``t.is_cpu``, ``not t.is_cuda``, a device
    comparison with the CPU (the CPU path of code that also takes CUDA tensors)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = test.operand
        return _platform_check(inner) == "cuda" or _device_check(inner) == "cuda"
    return _device_check(test) == "cpu"


def error_only(stmts: list[ast.stmt]) -> bool:
    """A block that ends by raising: it runs when something is wrong (it builds the error's
    message, logs, dumps state), not on the per-step path."""
    return bool(stmts) and isinstance(stmts[-1], ast.Raise)


def _names_platform(value: str) -> bool:
    """Whether a setting's value names another platform: one of its words
    (``kernel_ascend``, ``intel_xpu``), or the whole value for the CPU (``cpu_offload`` is
    a CUDA engine's mode)."""
    words = set(re.split(r"[^a-z0-9]+", value.lower()))
    return value.lower() == "cpu" or bool((_OTHER_PLATFORMS - {"cpu"}) & words)


def _platform_string(test: ast.expr) -> str | None:
    """"eq" for a setting compared with a string that names another platform
    (``io_backend == "kernel_ascend"``, ``impl in ("intel_xpu", "npu")``), "ne" for
    ``!=`` and ``not in``, else None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and
            isinstance(test.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn))):
        return None
    left, right = test.left, test.comparators[0]
    if isinstance(left, ast.Constant):
        left, right = right, left
    values = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) and \
        isinstance(test.ops[0], (ast.In, ast.NotIn)) else [right]
    if not values or isinstance(left, ast.Constant) or not all(
            isinstance(v, ast.Constant) and isinstance(v.value, str) and _names_platform(v.value)
            for v in values):
        return None
    return "eq" if isinstance(test.ops[0], (ast.Eq, ast.In)) else "ne"


_HALF_DTYPES = frozenset({"torch.float16", "torch.half"})


def _half_precision_test(test: ast.expr) -> bool:
    """``x.dtype == torch.float16``: the float16 case of code that serves in bfloat16 (the
    overflow check of an encoder ported from fp16 checkpoints), not its usual path."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and
            isinstance(test.ops[0], ast.Eq)):
        return False
    sides = (test.left, test.comparators[0])
    return any(isinstance(a, ast.Attribute) and a.attr == "dtype" and
               _dotted_text(b) in _HALF_DTYPES for a, b in (sides, sides[::-1]))


@lru_cache(maxsize=65536)
def _name_words(name: str) -> tuple[str, ...]:
    """The lower-cased words of a name, split at ``_``, ``.`` and case changes."""
    return tuple(w.lower() for w in _WORD_SPLIT.split(name) if w)


def _guard_atom(test: ast.expr) -> bool:
    """A test that holds only off the per-step CUDA path: a debug or environment flag, a
    CUDA-graph capture, another platform, a host tensor, float16 activations."""
    if _platform_check(test) == "other" or _host_only_test(test) or \
            _platform_string(test) == "eq" or _half_precision_test(test):
        return True
    words = {w for name in _test_names(test) for w in _name_words(name)}
    if isinstance(test, ast.Call):
        callee = test.func.attr if isinstance(test.func, ast.Attribute) else \
            getattr(test.func, "id", "")
        if "env" in callee.lower():
            return True
    return bool(words & (_DEBUG_WORDS | _CAPTURE_WORDS))


def guard_of(test: ast.expr) -> tuple[bool, bool]:
    """Whether an ``if`` block, and its ``else``, run only off the per-step CUDA path
    (kept on the test's node: the summary and the analysis ask for many tests more than
    once, and nothing edits a tree once parsed)."""
    known = test.__dict__.get("_guard")
    if known is None:
        known = test.__dict__["_guard"] = _guard_of(test)
    return known


def _guard_of(test: ast.expr) -> tuple[bool, bool]:
    """``guard_of`` computed."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        if isinstance(test.operand, ast.BoolOp):  # `not (a or b)` is `not a and not b`
            op: ast.boolop = ast.And() if isinstance(test.operand.op, ast.Or) else ast.Or()
            return guard_of(ast.BoolOp(op=op, values=[
                ast.UnaryOp(op=ast.Not(), operand=v) for v in test.operand.values]))
        body, orelse = guard_of(test.operand)
        checked = _platform_check(test.operand) is not None or \
            _device_check(test.operand) is not None
        return orelse and not body and checked, body and checked
    if _platform_check(test) == "cuda" or _device_check(test) == "cuda":
        return False, True
    if _device_check(test) == "cpu":
        return True, False
    if _platform_string(test) == "ne":
        return False, True
    if isinstance(test, ast.BoolOp):
        atoms = [guard_of(v)[0] if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not)
                 else _guard_atom(v) for v in test.values]
        # The `else` runs when an `or` is false, so when each of its tests is: behind any
        # one of them that holds only off the CUDA path (`if not is_npu() or ...: return`).
        elses = [guard_of(v)[1] for v in test.values]
        if isinstance(test.op, ast.And):
            return any(atoms), all(elses)
        return all(atoms), any(elses)
    return _guard_atom(test), False


_MEMO_DECORATORS = frozenset({"lru_cache", "cache"})


def is_property(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``@property``: reading the attribute runs the function."""
    return any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)


def memoised(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``@functools.lru_cache`` / ``@functools.cache``: the body runs once per distinct
    arguments (a shape, a device), not once per step."""
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in _MEMO_DECORATORS:
            return True
    return False


def captures_graph(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a function captures a CUDA graph (``with torch.cuda.graph(g):``, ``with
    graph_capture(...)``, in its own body): it runs once per graph, not once per step, and
    the syncs before a capture are its set-up."""
    for stmt in node.body:
        if not isinstance(stmt, (ast.With, ast.AsyncWith)):
            continue
        for item in stmt.items:
            expr = item.context_expr
            func = expr.func if isinstance(expr, ast.Call) else expr
            dotted = _dotted_text(func) or ""
            last = dotted.rpartition(".")[2]
            words = {w.lower() for w in _WORD_SPLIT.split(last) if w}
            if dotted.endswith("cuda.graph") or ("graph" in words and words & _CAPTURE_WORDS):
                return True
    return False


def classes_made_in(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.ClassDef]:
    """The classes a function defines in its body (a factory's ``class Builder(base):``),
    also inside its ``if``/``with``/``try`` blocks, not in nested functions."""
    found: list[ast.ClassDef] = []
    todo = deque(func.body)
    while todo:
        stmt = todo.popleft()
        if isinstance(stmt, ast.ClassDef):
            found.append(stmt)
        elif isinstance(stmt, (ast.If, ast.With, ast.Try, ast.For, ast.While)):
            for attr in ("body", "orelse", "finalbody"):
                todo.extend(getattr(stmt, attr, None) or [])
            for handler in getattr(stmt, "handlers", None) or []:
                todo.extend(handler.body)
    return found


def optional_parameters(func: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """The parameters of a function that default to None."""
    spec = func.args
    positional = [*spec.posonlyargs, *spec.args]
    names = {a.arg for a, d in zip(positional[len(positional) - len(spec.defaults):],
                                   spec.defaults)
             if isinstance(d, ast.Constant) and d.value is None}
    names.update(a.arg for a, d in zip(spec.kwonlyargs, spec.kw_defaults)
                 if isinstance(d, ast.Constant) and d.value is None)
    return frozenset(names)


def _fallback_guard(node: ast.If, optional: frozenset[str]) -> tuple[bool, bool]:
    """``if x is None: x = ...`` (and ``if x is not None: ... else: x = ...``) for a
    parameter ``x=None``: the block computes the value only when a caller did not pass it;
    the callers on the usual path do. (The block, the ``else``.) A field of another object
    filled this way (``batch.x_cpu``) is not: that object may be new every step."""
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Is, ast.IsNot))
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None):
        return False, False
    if not (isinstance(test.left, ast.Name) and test.left.id in optional):
        return False, False
    target = test.left.id
    branch = node.body if isinstance(test.ops[0], ast.Is) else node.orelse

    def assigns(stmts: list[ast.stmt]) -> bool:
        for stmt in stmts:
            for sub in fast_walk(stmt):
                targets = sub.targets if isinstance(sub, ast.Assign) else \
                    [sub.target] if isinstance(sub, (ast.AnnAssign, ast.AugAssign)) else []
                if any(_dotted_text(t) == target for t in targets):
                    # `out = torch.empty(n)`: a buffer the callers that pass none (the usual
                    # eager path) get here, not a value computed in their stead.
                    return not _allocates(getattr(sub, "value", None))
        return False

    if not branch or not assigns(branch):
        return False, False
    return (True, False) if isinstance(test.ops[0], ast.Is) else (False, True)


_BUFFER_FACTORIES = frozenset({"empty", "zeros", "ones", "full", "empty_like", "zeros_like",
                                "ones_like", "full_like", "new_empty", "new_zeros",
                                "new_ones", "new_full"})


def _allocates(value: ast.expr | None) -> bool:
    """``torch.empty(...)``, ``x.new_zeros(...)``: a new buffer."""
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
        value.func.attr in _BUFFER_FACTORIES


def _missing_argument(test: ast.expr, optional: frozenset[str]) -> bool | None:
    """For ``p is None`` (True) or ``p is not None`` (False) of a parameter ``p=None``: which
    branch runs when a caller left the argument out; None for any other test."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and \
            isinstance(test.ops[0], (ast.Is, ast.IsNot)) and \
            isinstance(test.comparators[0], ast.Constant) and \
            test.comparators[0].value is None and isinstance(test.left, ast.Name) and \
            test.left.id in optional:
        return isinstance(test.ops[0], ast.Is)
    return None


def _once_guard(node: ast.If, aliases: dict[str, str] | None = None) -> bool:
    """``if self.x is None: ... self.x = ...``: the block fills a cache once. Also through
    a local copy (``x = self.x_int``, ``pool = cls.pools.get(key)``) and for several caches
    at once (``if a is None or b is None:``); the block fills the cache, or its entry."""
    test = node.test
    atoms = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) \
        else [test]
    targets: set[str] = set()
    for atom in atoms:
        if not (isinstance(atom, ast.Compare) and len(atom.ops) == 1
                and isinstance(atom.ops[0], ast.Is) and isinstance(atom.comparators[0],
                                                                   ast.Constant)
                and atom.comparators[0].value is None):
            return False
        if isinstance(atom.left, ast.Attribute):
            target = _dotted_text(atom.left)
        elif isinstance(atom.left, ast.Name) and aliases:
            target = aliases.get(atom.left.id)
        else:
            target = None
        if target is None or not _long_lived(target):
            return False
        targets.add(target)

    def fills(stmt: ast.AST) -> set[str]:
        found: set[str] = set()
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
                found.add(_dotted_text(t.value if isinstance(t, ast.Subscript) else t) or "")
        return found

    filled: set[str] = set()
    for stmt in fast_walk(node):
        filled |= fills(stmt)
    return targets <= filled


def _return_key(func: "FunctionInfo", passed: dict[str, "Label"] | None
                ) -> tuple[Any, ...]:
    """A function's walk for its return value, by the device of each argument given (on
    the GPU or the host): the same helper called on a CUDA tensor and on its host copy
    returns each's own."""
    return (func.qualname, tuple(sorted((name, label.kind) for name, label in
                                        (passed or {}).items() if label.kind in (CUDA, CPU))))


def value_class(node: ast.ClassDef) -> bool:
    """``@dataclass`` (or ``@dataclasses.dataclass(...)``): a class of values, such as the
    metadata an engine builds every step; a cache it fills on first use fills once per
    object, so once per step."""
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def _long_lived(target: str) -> bool:
    """A long-lived object's cache (``self.x``, a layer's private ``_x``), not a per-step
    one's."""
    return target.startswith(("self.", "cls.")) or target.rpartition(".")[2].startswith("_")


def _seen_guard(stmt: ast.stmt, rest: list[ast.stmt]) -> bool:
    """``if key in self._done: return`` followed by ``self._done.add(key)``: what follows
    runs once per key."""
    if not (isinstance(stmt, ast.If) and not stmt.orelse and stmt.body and
            isinstance(stmt.body[-1], ast.Return)):
        return False
    test = stmt.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and
            isinstance(test.ops[0], ast.In)):
        return False
    container = _dotted_text(test.comparators[0])
    if container is None or not _long_lived(container):
        return False
    for later in rest:
        for sub in fast_walk(later):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                    sub.func.attr in ("add", "append", "setdefault", "update") and \
                    _dotted_text(sub.func.value) == container:
                return True
            if isinstance(sub, ast.Assign) and any(
                    isinstance(t, ast.Subscript) and _dotted_text(t.value) == container
                    for t in sub.targets):
                return True
    return False


def _parameter_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    spec = node.args
    return {a.arg for a in (*spec.posonlyargs, *spec.args, *spec.kwonlyargs,
                            *(a for a in (spec.vararg, spec.kwarg) if a is not None))}


def module_switches(tree: ast.Module) -> frozenset[str]:
    """The module's names set once at its top level from a switch that holds only off the
    per-step CUDA path (``_verify = envs.VERIFY_REAL_TENSORS.get()``, ``_on_npu =
    is_npu()``: ``guard_of``): an ``if`` on one guards its block as the test itself
    would."""
    found: dict[str, bool] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    switch = stmt.value is not None and target.id not in found and \
                        len(targets) == 1 and guard_of(stmt.value) == (True, False)
                    found[target.id] = switch
    return frozenset(name for name, switch in found.items() if switch)


def _filled_guard(stmt: ast.stmt, rest: list[ast.stmt]) -> bool:
    """``if self._model is not None: return`` followed by ``self._model = ...``: the rest
    of the block builds a cache once (a lazily loaded model), not on every call."""
    if not (isinstance(stmt, ast.If) and not stmt.orelse and stmt.body and
            isinstance(stmt.body[-1], ast.Return)):
        return False
    test = stmt.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and
            isinstance(test.ops[0], ast.IsNot) and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None):
        return False
    target = _dotted_text(test.left)
    if target is None or not _long_lived(target):
        return False
    return any(isinstance(later, ast.Assign) and any(
        _dotted_text(t) == target for t in later.targets) and not (
        isinstance(later.value, ast.Constant) and later.value.value is None)
        for later in rest)


def _dotted_text(expr: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return ".".join(reversed(parts))


_HOST_TYPES = frozenset({"int", "float", "bool", "str", "ndarray", "Number", "Integral"})
# Containers are host objects, but what they hold may be on the GPU.
_CONTAINER_TYPES = frozenset({"list", "tuple", "dict", "Sequence", "Mapping", "set"})


def _host_narrowing(test: ast.expr) -> tuple[tuple[str, ...], tuple[str, ...],
                                             tuple[str, ...]]:
    """Names a test proves are not CUDA tensors in its block, and in its ``else``:
    ``isinstance(x, (int, float))``, ``x.device.type == "cpu"``, ``x.is_cpu`` (the block);
    ``isinstance(x, torch.Tensor)``, ``torch.is_tensor(x)`` (the ``else``); and names it
    proves are Python containers in its block (``isinstance(x, dict)``: not a tensor, but
    its elements are of unknown device)."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    inner = test.operand if negated else test
    body: tuple[str, ...] = ()
    orelse: tuple[str, ...] = ()
    if isinstance(inner, ast.Call) and inner.args and isinstance(inner.args[0], ast.Name):
        name = inner.args[0].id
        callee = inner.func.attr if isinstance(inner.func, ast.Attribute) else \
            getattr(inner.func, "id", "")
        if callee == "isinstance" and len(inner.args) == 2:
            names = _isinstance_names(inner.args[1])
            if names and all(n in _CONTAINER_TYPES for n in names):
                return (), (), () if negated else (name,)
            if names and all(n in _HOST_TYPES for n in names):
                body = (name,)
            elif names == ["Tensor"]:
                orelse = (name,)
        elif callee == "is_tensor":
            orelse = (name,)
    elif isinstance(inner, ast.Compare) and len(inner.ops) == 1 and \
            isinstance(inner.ops[0], ast.Eq) and isinstance(inner.comparators[0], ast.Constant) \
            and inner.comparators[0].value == "cpu":
        left = inner.left
        if isinstance(left, ast.Attribute) and left.attr == "type":
            left = left.value
        if isinstance(left, ast.Attribute) and left.attr == "device" and \
                isinstance(left.value, ast.Name):
            body = (left.value.id,)
    elif isinstance(inner, ast.Attribute) and inner.attr == "is_cpu" and \
            isinstance(inner.value, ast.Name):
        body = (inner.value.id,)
    return ((orelse, body) if negated else (body, orelse)) + ((),)


def _cache_read(value: ast.expr) -> str | None:
    """``self.x`` or ``cls.pools.get(key)`` of a long-lived object: the cache read."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
            value.func.attr == "get" and value.args:
        value = value.func.value
    if isinstance(value, ast.Attribute):
        target = _dotted_text(value)
        if target is not None and _long_lived(target):
            return target
    return None


def _uses_names(body: list[ast.stmt], names: frozenset[str]) -> bool:
    """Whether statements read one of ``names``, outside blocks that run only on
    another platform."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and node.id in names:
            return True
        if isinstance(node, ast.If):
            quiet_body, quiet_else = guard_of(node.test)
            stack.append(node.test)
            if not quiet_body:
                stack.extend(node.body)
            if not quiet_else:
                stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _checked_host(test: ast.expr) -> str | None:
    """The name or attribute chain ``isinstance(x, (list, int, ...))`` proves is a Python
    value, not a tensor."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and
            test.func.id == "isinstance" and len(test.args) == 2):
        return None
    names = _isinstance_names(test.args[1])
    if not names or not all(n in _CONTAINER_TYPES or n in _HOST_TYPES for n in names):
        return None
    return _dotted_text(test.args[0])


def _type_test(value: ast.expr) -> bool:
    """``isinstance(x, ...)`` or ``torch.is_tensor(x)`` of a name."""
    if not (isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Name)):
        return False
    func = value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("isinstance", "is_tensor")


def _isinstance_names(kinds: ast.expr) -> list[str]:
    """The last part of each class an ``isinstance`` test names."""
    elts = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
    return [k.attr if isinstance(k, ast.Attribute) else getattr(k, "id", "") for k in elts]


def _names_array(union: ast.expr) -> bool:
    """Whether a ``A | B | ...`` annotation has a numpy array among its members."""
    if isinstance(union, ast.BinOp) and isinstance(union.op, ast.BitOr):
        return _names_array(union.left) or _names_array(union.right)
    target = union.value if isinstance(union, ast.Subscript) else union
    return isinstance(target, (ast.Name, ast.Attribute)) and \
        _short(target).rpartition(".")[2] in ("ndarray", "NDArray")


def _returns_early_unless_guarded(stmt: ast.stmt) -> bool:
    """``if not <guard>: return`` (or ``if t.is_cuda: return``): what follows in the block
    runs only behind the guard, as an ``else`` would."""
    if not (isinstance(stmt, ast.If) and not stmt.orelse and bool(stmt.body) and
            isinstance(stmt.body[-1], (ast.Return, ast.Raise))):
        return False
    if isinstance(stmt.test, ast.UnaryOp) and isinstance(stmt.test.op, ast.Not) and \
            guard_of(stmt.test.operand)[0]:
        return True
    return guard_of(stmt.test)[1]


# Words of a name that say where its memory is; `*_list` also says host, but such a name
# may hold a list of CUDA tensors.
_HOST_DEVICE_WORDS = frozenset({"cpu", "np", "numpy", "host", "pinned"})
_HOST_WORDS = _HOST_DEVICE_WORDS | {"list", "lst"}
_NAME_PARTS = re.compile(r"[._]+")


_FLAG_PREFIXES = ("is_", "has_", "use_", "uses_", "skip_", "enable_", "enabled_", "disable_",
                  "should_", "need_", "needs_", "can_", "allow_", "do_", "with_", "wants_",
                  "supports_", "applies_")


# Classes whose attributes are settings (Python values), whatever other classes declare
# under the same names.
_SETTINGS_CLASSES = ("Config", "Configs", "Args", "Arguments", "Options")


_HOST_COMMENT = re.compile(r"\b(?:cpu|host)\b", re.IGNORECASE)
_DEVICE_COMMENT = re.compile(r"\b(?:gpu|cuda|device)\b", re.IGNORECASE)


def host_comment(lines: list[str], number: int) -> bool:
    """Whether line ``number`` (1-based) ends in a comment saying its value is on the host
    (``prompt_lens: torch.Tensor  # CPU tensor``) and not also the GPU."""
    if not 0 < number <= len(lines) or "#" not in lines[number - 1]:
        return False
    code, _, comment = lines[number - 1].partition("#")
    if code.count('"') % 2 or code.count("'") % 2:
        return False  # the `#` is in a string
    return bool(_HOST_COMMENT.search(comment)) and not _DEVICE_COMMENT.search(comment)


def flag_named(name: str) -> bool:
    """Whether an attribute's name says it holds a Python flag (``is_*``, ``skip_*``,
    ``needs_*``..., with or without leading underscores): set on an object, not a tensor's
    data."""
    return name.lstrip("_").lower().startswith(_FLAG_PREFIXES)


def host_named(name: str) -> bool:
    """Whether a name says it holds a host value: ``*_cpu``, ``*_np``, ``*_host``,
    ``pinned_*``, ``*_list`` (its parts split at ``_`` and ``.``)."""
    return any(part in _HOST_WORDS for part in _NAME_PARTS.split(name.lower()))


_SHAPE_WORDS = frozenset({"shape", "sizes", "shapes", "thw", "grid", "grids"})


# Methods of a tensor (and of numpy arrays, some) that Python lists and numbers lack.
_TENSOR_ONLY = frozenset({"tolist", "item", "cpu"})


def shape_named(name: str) -> bool:
    """Whether a name says it holds the sizes of a batch's items (``image_sizes``,
    ``tgt_sizes``, ``grid_thw``) or a shape (``raw_latent_shape``): metadata that
    multimodal processors make and engines keep on the host, not a tensor to take to be on
    the GPU by default."""
    return _NAME_PARTS.split(name.lower())[-1] in _SHAPE_WORDS


def _host_name_wins(name: str, label: Label) -> Label:
    """A tensor on the GPU only by devices.default, bound to a name that says it is a host
    value (``seg_lens_cpu = lengths(batch)``): the name is the better evidence."""
    if label.kind == CUDA and label.weak and any(
            part in _HOST_DEVICE_WORDS for part in _NAME_PARTS.split(name.lower())):
        return Label(CPU, f"`{name}` is named as a host value ({label.why} only by default)")
    return label


def _moves_to_device(call: ast.Call) -> bool:
    """A call that may put its result on a device other than its inputs': it is given a
    device (``h2d(x, t.device)``, ``device=...``) or named for one (``to_gpu(x)``)."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if _DEVICE_WORDS.intersection(_WORD_SPLIT.split(name.lower())):
        return True
    values = [*call.args, *(k.value for k in call.keywords)]
    return any(k.arg is not None and "device" in k.arg for k in call.keywords) or any(
        (isinstance(v, ast.Attribute) and v.attr == "device") or
        (isinstance(v, ast.Name) and "device" in v.id) for v in values)


_DEVICE_WORDS = frozenset({"h2d", "cuda", "gpu", "device", "to", "move", "upload"})


def _kept_key(key: ast.expr, module: Any) -> bool:
    """A string key naming a field kept on the CPU (``kwargs["image_grid_thw"]``)."""
    return isinstance(key, ast.Constant) and isinstance(key.value, str) and \
        module.is_kept_on_cpu(key.value)


def _device_key(key: ast.expr, module: Any) -> bool:
    """A string key naming a field the engine moves to the device (``kwargs["num_patches"]``
    where the field is built without ``keep_on_cpu``)."""
    return isinstance(key, ast.Constant) and isinstance(key.value, str) and \
        key.value in module.device_keys


def _device_field(key: str) -> Label:
    """The label of a field the engine moves to the device, read by its key."""
    return Label(CUDA, f"`{key}` is a field the engine moves to the GPU (built without "
                       "keep_on_cpu by a factory that takes it)")


def _singular(name: str) -> str:
    """A name with each of its words in the singular (``images_sizes`` -> ``image_size``)."""
    return "_".join(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
                    for w in name.split("_"))


# `key=Class.method(` and `"key": Class.method(`: a field built by a class's factory (the
# factories that take `keep_on_cpu` are known project-wide, see keep_families).
_FIELD_CALL = re.compile(r"""(?:\b(\w+)\s*=|["'](\w+)["']\s*:)\s*([A-Z]\w*\.\w+)\(""")
# What every match of _FIELD_CALL holds: a far cheaper scan, and most files have none.
_FIELD_HINT = re.compile(r"[=:]\s*[A-Z]\w*\.\w+\(")
_KEEP_TRUE = re.compile(r"\bkeep_on_cpu\s*=\s*True\b")
# Characters the calls' ends may be looked for in, per file: a file of unclosed calls
# (`a=B.c(a=B.c(...`) cannot make each of its matches scan far.
FIELD_SCAN_BUDGET = 1_000_000


def field_calls(text: str) -> set[tuple[str, str]]:
    """(factory, key) of each field a dict or call builds with a class's factory:
    ``num_patches=MultiModalFieldConfig.batched("image")``, read off the text. The call
    must be the whole value (``x=F.batched("v").field`` is not a field built by it)."""
    found: set[tuple[str, str]] = set()
    if _FIELD_HINT.search(text) is None:
        return found
    budget = FIELD_SCAN_BUDGET
    for m in _FIELD_CALL.finditer(text):
        if budget <= 0:
            break
        end = _call_end(text, m.end(), min(2000, budget))
        budget -= (end or m.end() + 2000) - m.end()
        if end is not None and text[end:end + 80].lstrip()[:1] in (",", ")", "}") and \
                _KEEP_TRUE.search(text, m.end(), end) is None:  # not one kept on the CPU
            found.add((m.group(3), m.group(1) or m.group(2)))
    return found


def _call_end(text: str, start: int, limit: int = 2000) -> int | None:
    """The index after the ``)`` that closes the call whose ``(`` ends at ``start``
    (brackets counted, strings skipped roughly; None past ``limit`` characters)."""
    depth, i, end = 1, start, min(len(text), start + limit)
    while i < end:
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        elif c in "'\"":
            close = text.find(c, i + 1, end)
            if close < 0:
                return None
            i = close
        i += 1
    return None


def keep_families(tree: ast.Module) -> frozenset[str]:
    """The factories (``Class.method``) the module calls with ``keep_on_cpu=True``: the
    fields the others build are moved to the device."""
    found = set()
    for node in fast_walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and any(
                    k.arg == "keep_on_cpu" and isinstance(k.value, ast.Constant)
                    and k.value.value is True for k in node.keywords):
            found.add(f"{node.func.value.id}.{node.func.attr}")
    return frozenset(found)


def _names_dict(func: ast.expr) -> bool:
    """``dict``, ``dict[str, T]`` or ``fields.update``, called to build a mapping."""
    if isinstance(func, ast.Attribute):
        return func.attr == "update"
    if isinstance(func, ast.Subscript):
        func = func.value
    return isinstance(func, ast.Name) and func.id == "dict"


def _kept_on_cpu(tree: ast.Module) -> frozenset[str]:
    """Keys whose value is built with ``keep_on_cpu=True``: ``dict(k=f(..., keep_on_cpu=
    True))``, ``{"k": f(..., keep_on_cpu=True)}``, ``fields["k"] = f(..., keep_on_cpu=True)``,
    and ``fields[key] = ...`` in a ``for key in ("a", "b"):`` loop."""
    def keeps(value: ast.expr) -> bool:
        return any(isinstance(n, ast.keyword) and n.arg == "keep_on_cpu"
                   and isinstance(n.value, ast.Constant) and n.value.value is True
                   for n in fast_walk(value))

    def strings(expr: ast.expr) -> list[str]:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return [expr.value]
        if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            return [e.value for e in expr.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return []

    names: set[str] = set()
    loop_keys: dict[str, list[str]] = {}
    for node in fast_walk(tree):
        if isinstance(node, ast.Call) and _names_dict(node.func):
            names.update(k.arg for k in node.keywords if k.arg and keeps(k.value))
        elif isinstance(node, ast.Dict):
            names.update(k.value for k, v in zip(node.keys, node.values)
                         if isinstance(k, ast.Constant) and isinstance(k.value, str) and keeps(v))
        elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            loop_keys.setdefault(node.target.id, []).extend(strings(node.iter))
        elif isinstance(node, ast.Assign) and keeps(node.value):
            for target in node.targets:
                if isinstance(target, ast.Subscript):
                    key = target.slice
                    names.update(strings(key))
                    if isinstance(key, ast.Name):
                        names.update(loop_keys.get(key.id, ()))
    return frozenset(names)


def _bool_dtype(call: ast.Call) -> bool:
    """A factory asked for ``dtype=torch.bool``: its tensor is a mask."""
    dtype = _kw(call, "dtype")
    return isinstance(dtype, ast.Attribute) and dtype.attr == "bool"


def mask_named(name: str) -> bool:
    """Whether a tensor's name says it is a boolean mask (``*_mask``, ``mask``)."""
    return name.lower().endswith("mask")


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_true(expr: ast.expr | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is True


def combine(labels: Iterable[Label]) -> Label:
    """The label of a result computed from tensors with these labels."""
    labels = list(labels)
    strong = weak = None
    for label in labels:
        if label.kind == CUDA:
            if not label.weak:
                strong = label
                break
            weak = weak or label
    if strong is not None:
        return strong
    if weak is not None:
        # Tensors of one op share a device: a host tensor beside a default-CUDA one says
        # the default was wrong.
        host = next((label for label in labels if label.kind == CPU), None)
        return host if host is not None else weak
    kinds = {label.kind for label in labels}
    if CPU in kinds and kinds <= {CPU, VALUE, UNKNOWN}:
        # A host tensor in an op puts the result on the host (tensors on two devices in
        # one op are an error), whatever the unknown operands are.
        return next(label for label in labels if label.kind == CPU)
    if kinds == {VALUE}:
        return VALUE_L
    return UNKNOWN_L


def may_start_a_hot_path(tree: ast.Module, packs: PackData, text: str) -> bool:
    """Whether a function of the module may be an entry point of its own hot paths
    (:meth:`ModuleAnalyzer.hot_paths` starts from these), by the statements alone.

    Never False where the analysis finds one: every function it indexes is looked at (the
    same blocks and factory classes), a method named as a module entry point counts in
    any class with a base (the analysis also asks that the class be an ``nn.Module``), and
    a function's text that could hold a loop calling a model counts. A module with none
    and no function hot through other modules has no hot function at all, so the rules
    that report only there need not look at it again once the project is linked.
    """
    entry_points = packs.hot_path_entry_points
    module_entry_points = packs.module_entry_points
    patterns = packs.loop_callees
    words = _loop_words(patterns) if patterns else ()
    loops = bool(patterns) and (not words or any(word in text for word in words))
    lines = text.splitlines() if loops else []
    todo: list[tuple[list[ast.stmt], ast.ClassDef | None, str]] = [(tree.body, None, "")]
    while todo:
        body, cls, prefix = todo.pop()
        for node in body:
            if isinstance(node, ast.ClassDef):
                todo.append((node.body, node, prefix + node.name + "."))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if _matches(prefix + node.name, entry_points):
                    return True
                if cls is not None and cls.bases and node.name in module_entry_points:
                    return True
                if loops:
                    own = "\n".join(lines[node.lineno - 1:node.end_lineno or node.lineno])
                    if ("for " in own or "while " in own) and (
                            not words or any(word in own for word in words)):
                        return True
                made = classes_made_in(node)
                if made:
                    todo.append((made, None, prefix + node.name + "."))  # type: ignore[arg-type]
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for attr in ("body", "orelse", "finalbody"):
                    todo.append((getattr(node, attr, []) or [], cls, prefix))
                for handler in getattr(node, "handlers", []) or []:
                    todo.append((handler.body, cls, prefix))
    return False


class ModuleAnalyzer:
    """Builds the :class:`GpuAnalysis` of one module."""

    def __init__(self, tree: ast.Module, packs: PackData,
                 non_blocking_lines: Iterable[int] | None = None, text: str = "",
                 linked_hot: dict[str, list[str]] | None = None,
                 linked_devices: dict[str, list[str]] | None = None,
                 record_labels: bool = False) -> None:
        self.tree = tree
        # Keep every label the reporting walks compute, by span (for LibCST rules' device
        # facts); off by default, since the walks then keep a dict entry per expression.
        self.record_labels = record_labels
        self.recorded: dict[str, dict[tuple[int, int, int, int], tuple[Label, int]]] = {}
        # Functions the project's link phase found hot (through other modules), with chains.
        self.linked_hot = linked_hot or {}
        # A tensor with no evidence of its device is on the GPU (the engine packs).
        self.default_cuda = packs.default_device == "cuda"
        devices = linked_devices or {}
        self.tensor_fields = frozenset(devices.get("fields", ()))
        self.tensor_returns = frozenset(devices.get("returns", ()))
        # key ("pkg.mod.Class" as imported, or "local:Class") -> field -> "tensor" | "host"
        self.class_fields: dict[str, dict[str, str]] = devices.get("classes", {}) or {}
        # key -> field -> the key of the project class the field holds an object of
        self.class_attrs: dict[str, dict[str, str]] = devices.get("class_attrs", {}) or {}
        # Imported project classes that are nn.Modules (by the qualified name imported).
        self.module_keys = frozenset(devices.get("modules", ()))
        self.other_platform = bool(devices.get("other_platform"))
        # function -> tensor parameters a caller elsewhere fills with a host value
        self.host_params: dict[str, list[str]] = devices.get("host_params", {}) or {}
        # function -> parameter -> what every hot caller passes: "" (not None), "T", "F"
        self.passed_params: dict[str, dict[str, str]] = devices.get("passed_params", {}) or {}
        # Methods every hot call of which is on a host copy (`self.experts_cpu.tolists()`).
        self.host_self = frozenset(devices.get("host_self", ()))
        # Fields some code in the project sets to a host copy: their device depends on
        # when they are read, so the default device is not assumed for them.
        self.moved_to_host = frozenset(devices.get("moved_to_host", ()))
        self.moved_somewhere = self.moved_to_host | frozenset(devices.get("moved_somewhere", ()))
        # Names a module declares kept on the CPU (`dict(grid_thw=...(keep_on_cpu=True))`).
        # The module's own fields built without keep_on_cpu stay on the device here,
        # whatever another module keeps on the CPU under the name.
        own_device = frozenset(devices.get("own_device_keys", ()))
        self.kept_on_cpu = ((_kept_on_cpu(tree) if "keep_on_cpu" in text else frozenset()) |
                            frozenset(devices.get("kept_on_cpu", ()))) - own_device
        # The same names word by word in the singular: one item of a kept field
        # (`image_spatial_crop` of `images_spatial_crop`).
        self.kept_singular = frozenset(map(_singular, self.kept_on_cpu))
        # Fields the engine moves to the device (built without keep_on_cpu by a factory
        # that takes it): read by their key, they are on the GPU.
        self.device_keys = (frozenset(devices.get("device_keys", ())) | own_device) - \
            self.kept_on_cpu
        self.source = Source(text)
        words = _loop_words(packs.loop_callees) if packs.loop_callees else ()
        self._has_loop_words = not words or any(word in text for word in words)
        # Lines that spell non_blocking: only functions holding one can read a buffer while
        # a copy into it is in flight
        # (None: find them in the text).
        if non_blocking_lines is None:
            non_blocking_lines = [
                number for number, line in enumerate(self.source.lines, start=1)
                if "non_blocking" in line] if "non_blocking" in text else []
        self.non_blocking_lines = tuple(non_blocking_lines)
        self._callees: dict[str, list[FunctionInfo]] = {}
        self.packs = packs
        self.names = Names(tree)
        self.m_packs_non_cuda = packs.non_cuda_imports
        prefixes = tuple(packs.non_cuda_imports)
        self._platform_names = frozenset(
            name for name, qual in self.names.conditional.items()
            if self.names.aliases.get(name) == qual and any(
                qual == p or qual.startswith(p + ".") for p in prefixes))
        self._off_platform: dict[str, bool] = {}
        self.switch_names = module_switches(tree)
        self.classes: dict[str, ClassInfo] = {}
        self.all_classes: list[ClassInfo] = []  # with the ones a later class of the same name hides
        self.functions: dict[str, FunctionInfo] = {}
        self._returns: dict[str, Label] = {}
        self._return_items: dict[Any, list[Label]] = {}  # key of _returns -> its elements
        # function qualname -> parameter -> label, from the module's own call sites
        self.params: dict[str, dict[str, Label]] = {}
        self._mros: dict[str, list[ClassInfo]] = {}
        self._returns_active: set[str] = set()
        self._cut_short = 0  # return labels that a recursive call left unknown
        # Functions walked to label them, and the walks already made with given arguments.
        self._reporting: set[str] = set()
        self._report_walks: dict[str, list[tuple[dict[str, Label], FunctionWalker]]] = {}
        self._index(tree.body, None, "")
        for cls in self.classes.values():
            cls.is_module = self._is_module_class(cls)
            cls.on_cuda = _matches(cls.name, self.packs.cuda_classes)
        # Module-level functions, found in a caller's text as `name(`.
        self._module_functions = [q for q in self.functions if "." not in q]
        # Getters of this module's `@property` methods, by name: a read runs them.
        self._properties: dict[str, list[FunctionInfo]] = {}
        for info in self.functions.values():
            if info.cls is not None and is_property(info.node):
                self._properties.setdefault(info.node.name, []).append(info)

    # Index ------------------------------------------------------------------------
    def _index(self, body: list[ast.stmt], cls: ClassInfo | None, prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                info = ClassInfo(node.name, node, [self.names.qualify(b) or "" for b in node.bases])
                self.classes.setdefault(node.name, info)
                self.all_classes.append(info)
                self._index(node.body, info, prefix + node.name + ".")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                info_f = FunctionInfo(prefix + node.name, node, cls, self.source)
                self.functions[info_f.qualname] = info_f
                if cls is not None:
                    cls.methods.setdefault(node.name, info_f)
                made = classes_made_in(node)
                if made:  # a factory's classes: their methods are the project's too
                    self._index(made, None, prefix + node.name + ".")
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for attr in ("body", "orelse", "finalbody"):
                    self._index(getattr(node, attr, []) or [], cls, prefix)
                for handler in getattr(node, "handlers", []) or []:
                    self._index(handler.body, cls, prefix)

    def _is_module_class(self, cls: ClassInfo, seen: set[str] | None = None) -> bool:
        seen = seen or set()
        for base in cls.bases:
            last = base.rsplit(".", 1)[-1]
            if base in ("torch.nn.Module", "torch.nn.modules.module.Module") or \
                    _matches(last, self.packs.module_classes):
                return True
            local = self.classes.get(last)
            if local is not None and local.name not in seen:
                seen.add(local.name)
                if self._is_module_class(local, seen):
                    return True
        # A base imported from elsewhere: a `forward` that takes tensors gives it away.
        forward = cls.methods.get("forward")
        if forward is not None and cls.bases and any(
                self._annotated_tensor(arg.annotation) for arg in forward.node.args.args):
            return True
        return False

    def _annotated_tensor(self, annotation: ast.expr | None) -> bool:
        """Whether an annotation names ``torch.Tensor`` (or an Optional / union of it)."""
        if annotation is None:
            return False
        if isinstance(annotation, (ast.Name, ast.Attribute)):
            return self._names_tensor(_short(annotation))
        if isinstance(annotation, ast.Subscript):  # Optional[torch.Tensor]
            head = annotation.value
            if isinstance(head, ast.Name) and head.id == "Optional" or (
                    isinstance(head, ast.Attribute) and head.attr == "Optional"):
                return self._annotated_tensor(annotation.slice)
            return False
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
            if _names_array(annotation):
                return False  # `torch.Tensor | np.ndarray`: host data as often as not
            return self._annotated_tensor(annotation.left) or \
                self._annotated_tensor(annotation.right)
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            text = annotation.value
        else:
            text = ast.unparse(annotation)
        stripped = text.replace("Optional[", "").replace("]", "").replace(" ", "")
        return any(self._names_tensor(option) for option in stripped.split("|"))

    def is_kept_on_cpu(self, name: str) -> bool:
        """A field declared kept on the CPU, or one item of one (by its singular name)."""
        return name in self.kept_on_cpu or (
            bool(self.kept_singular) and _singular(name) in self.kept_singular)

    def class_key(self, expr: ast.expr | None) -> str | None:
        """The key of the declared-fields table for a class named by an expression or an
        annotation (``ForwardBatch``, ``mod.Batch``, ``Optional["Batch"]``), or None."""
        if expr is None or not self.class_fields:
            return None
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            try:
                expr = ast.parse(expr.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(expr, ast.Subscript):
            head = expr.value
            name = head.attr if isinstance(head, ast.Attribute) else getattr(head, "id", "")
            if name == "Optional":
                return self.class_key(expr.slice)
            if name == "Union" and isinstance(expr.slice, ast.Tuple):
                keys = [self.class_key(e) for e in expr.slice.elts]
                found = [k for k in keys if k]
                return "|".join(found) if found else None
            return None
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            for side in (expr.left, expr.right):
                if not (isinstance(side, ast.Constant) and side.value is None):
                    return self.class_key(side)
            return None
        if isinstance(expr, ast.Name) and expr.id in self.classes:
            key = "local:" + expr.id
            return key if key in self.class_fields else None
        qual = self.names.qualify(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else None
        return qual if qual in self.class_fields else None

    def _names_tensor(self, dotted: str) -> bool:
        """Whether a dotted name (``Tensor``, ``t.Tensor``) is ``torch.Tensor`` here."""
        head, _, rest = dotted.partition(".")
        full = self.names.aliases.get(head, head) + ("." + rest if rest else "")
        return full in ("torch.Tensor", "torch.tensor.Tensor")

    def _mro(self, cls: ClassInfo) -> list[ClassInfo]:
        """``cls`` and its base classes defined in this module, nearest first (cached)."""
        cached = self._mros.get(cls.name)
        if cached is not None and cached[0] is cls:
            return cached
        order, queue = [], [cls]
        while queue:
            current = queue.pop(0)
            if current in order:
                continue
            order.append(current)
            queue += [self.classes[b.rsplit(".", 1)[-1]] for b in current.bases
                      if b.rsplit(".", 1)[-1] in self.classes]
        self._mros[cls.name] = order
        return order

    def method(self, cls: ClassInfo, name: str) -> FunctionInfo | None:
        """The method ``name`` of ``cls`` or of a base class defined in this module."""
        for klass in self._mro(cls):
            if name in klass.methods:
                return klass.methods[name]
        return None

    # Hot paths ----------------------------------------------------------------------
    def is_startup(self, func: FunctionInfo) -> bool:
        """Whether ``func`` is start-up code, or memoised, or code for another platform
        (never hot)."""
        return _matches(func.qualname, self.packs.startup_functions) or \
            memoised(func.node) or self.off_platform(func) or captures_graph(func.node) or \
            other_platform_function(func.node.name) or \
            (func.cls is not None and other_platform_class(func.cls.name))

    def off_platform(self, func: FunctionInfo) -> bool:
        """Whether ``func`` uses another accelerator's stack that the module imports only
        on that platform (``if is_npu(): import torch_npu``), outside a platform test of
        its own."""
        names = self._platform_names
        if not names or not any(name in func.summary.text for name in names):
            return False
        found = self._off_platform.get(func.qualname)
        if found is None:
            found = self._off_platform[func.qualname] = _uses_names(func.node.body, names)
        return found

    def is_entry(self, func: FunctionInfo) -> bool:
        """Whether ``func`` is a per-step entry point."""
        if _matches(func.qualname, self.packs.hot_path_entry_points):
            return True
        return func.cls is not None and func.cls.is_module and \
            func.name in self.packs.module_entry_points

    def callees(self, func: FunctionInfo) -> list[FunctionInfo]:
        """Functions of this module that ``func`` calls (directly or through ``self``)."""
        found = self._callees.get(func.qualname)
        if found is None:
            found = self._callees[func.qualname] = list(self._find_callees(func))
        return found

    def _unguarded_text(self, func: FunctionInfo) -> str:
        """The function's text without the blocks behind guards (debug and environment
        flags, CUDA-graph capture, other platforms): what they call is not hot."""
        text = func.summary.text
        if "if" not in text and "except" not in text:
            return text
        lines = text.split("\n")
        first = func.node.lineno
        blanked = False
        for node in fast_walk(func.node):
            for block in ("body", "orelse", "finalbody"):
                stmts = getattr(node, block, None)
                if not isinstance(stmts, list):
                    continue
                for index, stmt in enumerate(stmts[:-1]):
                    if _returns_early_unless_guarded(stmt):
                        for number in range(stmts[index + 1].lineno,
                                            (stmts[-1].end_lineno or 0) + 1):
                            if 0 <= number - first < len(lines):
                                lines[number - first] = ""
                                blanked = True
                        break
            if isinstance(node, ast.Try):
                for handler in node.handlers:
                    for number in range(handler.lineno, (handler.end_lineno or 0) + 1):
                        if 0 <= number - first < len(lines):
                            lines[number - first] = ""
                            blanked = True
            if not isinstance(node, ast.If):
                continue
            quiet = guard_of(node.test)
            quiet = (quiet[0] or error_only(node.body), quiet[1] or error_only(node.orelse))
            for hushed, body in zip(quiet, (node.body, node.orelse)):
                if hushed and body:
                    for number in range(body[0].lineno, (body[-1].end_lineno or 0) + 1):
                        if 0 <= number - first < len(lines):
                            lines[number - first] = ""
                            blanked = True
        return "\n".join(lines) if blanked else text

    def _find_callees(self, func: FunctionInfo) -> Iterator[FunctionInfo]:
        text = self._unguarded_text(func)
        if func.cls is not None:
            called = func.summary.self_called if text is func.summary.text else \
                set(_SELF_CALL.findall(text))
            for name in sorted(called):
                callee = self.method(func.cls, name)
                if callee is not None:
                    yield callee
        for name in self._module_functions:
            start = text.find(name + "(")
            while start != -1:
                before = text[start - 1] if start else " "
                if not (before.isalnum() or before in "_."):
                    yield self.functions[name]
                    break
                start = text.find(name + "(", start + 1)
        for name, getters in self._properties.items():
            if len(getters) <= 3 and "." + name in text and \
                    re.search(rf"\.{name}\b(?!\s*\()(?!\s*=[^=])", text):
                yield from getters  # `meta.decode_metadata`: the getter runs

    def _one_off(self, caller: FunctionInfo, callee: FunctionInfo) -> bool:
        """A callee that clears the flag its call is guarded by runs once, not per step:
        ``if self.calculate_scales: self.calc()`` with ``self.calculate_scales = False``."""
        cleared = callee.summary.cleared_flags
        return bool(cleared) and any(re.search(rf"\bif\s+self\.{flag}\b", caller.summary.text)
                                     for flag in cleared)

    def _may_call_a_model_in_a_loop(self, func: FunctionInfo) -> bool:
        """Whether ``func``'s text has a loop and a model's call (else no walk is needed)."""
        patterns = self.packs.loop_callees
        if not patterns or not self._has_loop_words:
            return False  # no call of a model in the whole file
        text = func.summary.text
        if "for " not in text and "while " not in text:
            return False
        words = _loop_words(patterns)  # () when a pattern has no fixed text to look for
        return not words or any(word in text for word in words)

    def loop_calling_a_model(self, func: FunctionInfo) -> str | None:
        """The model a loop of ``func`` calls (a generation or decode loop), or None.
        Only asked of functions that :meth:`_may_call_a_model_in_a_loop`."""
        patterns = self.packs.loop_callees
        for node in fast_walk(func.node):
            if not isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                continue
            for child in fast_walk(node):
                if isinstance(child, ast.Call):
                    name = self.names.qualify(child.func) or ""
                    if "()" not in name and _matches(name, patterns):
                        return name
        return None

    def hot_paths(self) -> dict[str, list[str]]:
        """Each hot function with the shortest chain of calls from an entry point."""
        chains: dict[str, list[str]] = {}
        queue: list[FunctionInfo] = []
        for func in self.functions.values():
            # Most functions are neither: the start-up test waits until one is.
            if self.is_entry(func):
                if not self.is_startup(func):
                    chains[func.qualname] = [func.name]
                    queue.append(func)
            elif self._may_call_a_model_in_a_loop(func) and not self.is_startup(func):
                callee = self.loop_calling_a_model(func)
                if callee is not None:
                    chains[func.qualname] = [f"{func.name} (a loop calling {callee})"]
                    queue.append(func)
        self._spread(chains, queue)
        # Then what is hot through other modules, callers (shorter chains) first, so that
        # the walks still label a callee's parameters from its callers.
        linked = sorted((len(chain), qualname) for qualname, chain in self.linked_hot.items()
                        if qualname not in chains and qualname in self.functions)
        for _, qualname in linked:
            if qualname not in chains and not self.off_platform(self.functions[qualname]):
                chains[qualname] = list(self.linked_hot[qualname])
                self._spread(chains, [self.functions[qualname]])
        return chains

    def _spread(self, chains: dict[str, list[str]], queue: list[FunctionInfo]) -> None:
        """Make what the queued hot functions call in this module hot (breadth first)."""
        while queue:
            func = queue.pop(0)
            chain = chains[func.qualname]
            if len(chain) >= MAX_HOT_DEPTH and func.qualname not in self.linked_hot:
                continue
            for callee in self.callees(func):
                if callee.qualname not in chains and not self.is_startup(callee) \
                        and not self._one_off(func, callee):
                    chains[callee.qualname] = [*chain, callee.name]
                    queue.append(callee)

    # Devices --------------------------------------------------------------------------
    def prepare_classes(self, funcs: list[FunctionInfo]) -> None:
        """Label the ``self.`` attributes that ``funcs`` read, from the assignments to them
        in every method of their classes (and base classes)."""
        wanted: dict[ClassInfo, set[str]] = {}
        for func in funcs:
            if func.cls is None:
                continue
            for klass in self._mro(func.cls):
                wanted.setdefault(klass, set()).update(func.summary.self_reads)
        writers: list[tuple[ClassInfo, FunctionInfo]] = []
        for cls, names in wanted.items():
            for method in sorted(cls.methods.values(), key=lambda f: f.name != "__init__"):
                if method.summary.self_writes & names:
                    writers.append((cls, method))
        # One round: within a method, an attribute assigned earlier is seen by later lines.
        seen: dict[ClassInfo, dict[str, list[Label]]] = {}
        for cls, method in writers:
            walker = FunctionWalker(self, method, report=False)
            walker.run()
            for attr, labels in walker.self_assignments.items():
                seen.setdefault(cls, {}).setdefault(attr, []).extend(labels)
        for cls, attrs in seen.items():
            for attr, labels in attrs.items():
                cls.attrs[attr] = merge(labels)
        self._returns.clear()

    def return_items(self, func: FunctionInfo, passed: dict[str, Label] | None = None
                     ) -> list[Label] | None:
        """The elements of the tuple ``func`` returns on every path (after
        ``return_label`` with the same arguments), else None."""
        return self._return_items.get(_return_key(func, passed))

    def return_label(self, func: FunctionInfo, passed: dict[str, Label] | None = None) -> Label:
        """The label of what ``func`` returns when called with ``passed`` (unknown when its
        returns disagree)."""
        cuda_args = {k: v for k, v in (passed or {}).items() if v.kind in (CUDA, CPU)}
        key = _return_key(func, passed)
        if key in self._returns:
            return self._returns[key]
        if key in self._returns_active:
            self._cut_short += 1
            return UNKNOWN_L
        if not _RETURNS_VALUE.search(func.summary.text):  # returns None: no walk needed
            self._returns[key] = UNKNOWN_L
            return UNKNOWN_L
        self._returns_active.add(key)
        # A function that is walked for its labels anyway records them now: when its callers
        # then agree on these same arguments, that walk is not repeated (see analyze()).
        report = func.qualname in self._reporting
        cut_short = self._cut_short
        walker = FunctionWalker(self, func, report=report, seed=cuda_args)
        walker.run()
        self._returns_active.discard(key)
        if report and self._cut_short == cut_short:  # not cut short by a recursive call
            self._report_walks.setdefault(func.qualname, []).append((cuda_args, walker))
        labels = walker.returns
        kinds = {label.kind for label in labels}
        result = labels[0] if labels and len(kinds) == 1 else UNKNOWN_L
        tuples = walker.return_items
        if tuples and all(t is not None and len(t) == len(tuples[0]) for t in tuples):
            # `return emb, mask` on every path: what unpacking the call gives, element by
            # element (unknown where the returns disagree).
            parts = []
            for position in zip(*tuples):  # type: ignore[misc]
                part_kinds = {label.kind for label in position}
                part = position[0] if len(part_kinds) == 1 else UNKNOWN_L
                if part.kind in (DEV_CPU, DEV_CUDA):
                    # `return device, group`: a device a helper picks, often the host only
                    # under a setting (`device = "cpu"` in an `if`), is not followed.
                    part = UNKNOWN_L
                if part.kind == CUDA:
                    part = part.but(f"returned by {func.qualname}() ({part.why})")
                parts.append(part)
            self._return_items[key] = parts
        if result.kind == CUDA:
            result = result.but(f"returned by {func.qualname}() ({result.why})")
        self._returns[key] = result
        return result

    def non_cuda(self) -> bool:
        """Whether the module imports another accelerator's stack (XLA, Neuron, ...) at
        its top level, or its path names one (``hardware_backend/npu/``), or it is code
        copied in from another project (``third_party/``: ``vendored_path``). An import
        under a platform test (``if is_npu(): import torch_npu``) leaves the rest of the
        module CUDA code."""
        if self.other_platform:
            return True
        prefixes = self.m_packs_non_cuda
        if not prefixes:
            return False
        exact, dotted = set(prefixes), tuple(p + "." for p in prefixes)
        return any(qual in exact or qual.startswith(dotted)
                   for qual in self.names.unconditional)

    def _needing_walk(self, hot: list[FunctionInfo]) -> set[str]:
        """Hot functions that may hold a sync, and those that call one (to label its
        parameters)."""
        callers: dict[str, list[str]] = {}
        for func in hot:
            for callee in self.callees(func):
                callers.setdefault(callee.qualname, []).append(func.qualname)
        needed = {f.qualname for f in hot if f.summary.candidate}
        queue = list(needed)
        while queue:
            for caller in callers.get(queue.pop(), ()):
                if caller not in needed:
                    needed.add(caller)
                    queue.append(caller)
        return needed

    def analyze(self) -> GpuAnalysis:
        """Hot paths and labels of the whole module."""
        try:
            analysis = self._analyze()
        finally:
            self._report_walks.clear()  # each walker refers back to this analyzer
        if self.record_labels and not self.non_cuda():
            analysis.labels = self.recorded
            analysis.analyzer = self
        analysis.names = self.names
        return analysis

    def walk_for_labels(self, func: FunctionInfo) -> "FunctionWalker":
        """Walk a function the analysis did not walk, recording its labels (its parameters
        as its callers in the module passed them, when they were walked)."""
        self.prepare_classes([func])
        walker = FunctionWalker(self, func, report=True)
        walker.run()
        return walker

    def _analyze(self) -> GpuAnalysis:
        """Hot paths and the labels of the whole module.

        Only what can hold a finding is walked: hot functions whose text holds a sync-prone
        call, a test or a comparison, and functions that make a ``non_blocking`` copy, with
        the attributes of their classes.
        Hot functions are walked callers first, so that each one's parameters are labelled
        by what its callers pass (when every call site agrees) before it is walked.
        """
        if self.non_cuda():
            return GpuAnalysis({}, self.functions, self.all_classes)
        hot = self.hot_paths()
        lines = sorted(self.non_blocking_lines)
        async_copiers = [f for f in self.functions.values() if lines and f.qualname not in hot
                         and _holds_line(lines, f.node.lineno, f.node.end_lineno)]
        needed = self._needing_walk([self.functions[q] for q in hot])
        relevant = [self.functions[q] for q in hot if q in needed] + async_copiers
        if not relevant:
            return GpuAnalysis(hot, self.functions, self.all_classes)
        self.prepare_classes(relevant)
        self._reporting = {func.qualname for func in relevant}
        unwaited: dict[str, dict[tuple[int, int, int, int], tuple[str, int]]] = {}
        calls: dict[str, dict[str, list[Label]]] = {}
        for func in relevant:  # hot_paths() lists callers before callees
            passed = calls.get(func.qualname, {})
            params = {param: labels[0] for param, labels in passed.items()
                      if all(label.kind == CUDA for label in labels)}
            for param, labels in passed.items():  # a caller passing a host tensor
                host = next((label for label in labels if label.kind == CPU), None)
                if host is not None and param not in params:
                    params[param] = host
            if params:
                self.params[func.qualname] = params
            walker = next((w for seed, w in self._report_walks.get(func.qualname, ())
                           if seed == params), None)
            if walker is None:
                walker = FunctionWalker(self, func, report=True)
                walker.run()
            if walker.unwaited:
                unwaited[func.qualname] = walker.unwaited
            if walker.recorded is not None:
                self.recorded[func.qualname] = walker.recorded
            for callee, labels in walker.call_args:
                for param, label in labels.items():
                    calls.setdefault(callee, {}).setdefault(param, []).append(label)
        return GpuAnalysis(hot, self.functions, self.all_classes, unwaited=unwaited)


class FunctionWalker:
    """Walks one function's statements in order, labelling names and expressions."""

    def __init__(self, module: ModuleAnalyzer, func: FunctionInfo, report: bool,
                 seed: dict[str, Label] | None = None) -> None:
        self.m = module
        self.func = func
        self.report = report
        self.optional = optional_parameters(func.node) if isinstance(
            func.node, (ast.FunctionDef, ast.AsyncFunctionDef)) else frozenset()
        # Of those, the ones every hot caller passes: the block for a left-out one is not
        # on the hot path.
        given = module.passed_params.get(func.qualname, {})
        self.passed = frozenset(given) & self.optional
        # Flags every hot caller sets the same way (`no_copy_to_cpu=True`).
        self.flags = {name: value == "T" for name, value in given.items()
                      if value in ("T", "F")}
        self.env: dict[str, Label] = {}
        # Host reads of a buffer whose non_blocking copy nobody waited for (reporting walks).
        self.unwaited: dict[tuple[int, int, int, int], tuple[str, int]] = {}
        self.returns: list[Label] = []
        # Each return's elements when it returns a tuple display (`return ids, mask`).
        self.return_items: list[list[Label] | None] = []
        self.self_assignments: dict[str, list[Label]] = {}
        self.pending: dict[str, int] = {}  # buffer -> line of its unsynchronised async copy
        self.allowed = 0  # behind a debug, validation or once-only guard, or the unusual case
        self.marked = 0  # inside a `with` block of a sync-allowed context
        self.host_default = 0  # inside `with torch.device("cpu"):`
        self.async_copy_line: int | None = None  # set by `.to("cpu", non_blocking=True)`
        self.call_args: list[tuple[str, dict[str, Label]]] = []
        self.elements: dict[int, Label] = {}  # id of a list/tuple display -> its elements
        self.items: dict[int, list[Label]] = {}  # id of a tuple display -> each element's
        self.tests: dict[str, ast.expr] = {}  # `is_t = isinstance(x, torch.Tensor)`
        # Names and attribute chains the earlier operands of an `and` proved not tensors.
        self.narrowed: dict[str, Label] = {}
        self.moving: str | None = None  # the field the assignment being walked moves to the host
        self.cached: dict[str, str] = {}  # `pool = cls.pools.get(key)`: the name -> `cls.pools`
        self.switches: set[str] = set()  # local names set from a switch (`_switch_test`)
        self.options: dict[str, Label] = {}  # `opts = dict(device=d)`: the name -> the device
        self.closures: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}  # -> Tensor
        self.packed: dict[str, list[Label]] = {}  # a name bound to a tuple display -> those
        # A parameter annotated as a tuple of tensors (`tuple[Tensor, Tensor]`,
        # `tuple[Tensor, ...]`): its elements' labels (a tuple of each, or one for every
        # element).
        self.members: dict[str, tuple[Label, ...] | Label] = {}
        # Lists the function starts empty and fills (`masks = []`, `masks.append(m)`,
        # `masks += [m]`): the label every element shares so far (None: none yet).
        self.appended: dict[str, Label | None] = {}
        # Whether env holds a field of a local object set here (`out.logprobs = t[idx]`,
        # keyed "out.logprobs"): read back before what the object's class declares. By the
        # object's name, those keys (dropped when the name is bound again).
        self.object_fields = False
        self.object_keys: dict[str, set[str]] = {}
        # Each labelled expression's (label, flags: 1 quiet, 2 in a sync-allowed block), by
        # its ast span (record_labels).
        self.recorded: dict[tuple[int, int, int, int], tuple[Label, int]] | None = None
        if report and module.record_labels:
            self.recorded = {}
            if type(self) is FunctionWalker:
                # A class of its own, not a bound method kept on the instance: that would be
                # a reference cycle, keeping the tree alive until the cyclic collector runs.
                self.__class__ = _RecordingWalker
        cls = func.cls
        args = func.node.args
        passed = seed if seed is not None else module.params.get(func.qualname, {})
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            if cls is not None and arg.arg == "device" and cls.on_cuda:
                self.env[arg.arg] = Label(DEV_CUDA, f"the device of {cls.name}")
            elif arg.arg in passed:
                label = _host_name_wins(arg.arg, passed[arg.arg])
                self.env[arg.arg] = label if label.why.startswith("passed by a caller") or \
                    label.kind == CPU else label.but(f"passed by a caller: {label.why}")
            elif module.class_key(arg.annotation) is not None:
                self.env[arg.arg] = Label(OBJECT, module.class_key(arg.annotation) or "")
            elif arg.annotation is not None and self._is_module_annotation(arg.annotation):
                # `sampler: RejectionSampler`: calling it runs a module on its device.
                self.env[arg.arg] = Label(MODULE, f"`{arg.arg}` is annotated "
                                                  f"{_short(arg.annotation)}, an nn.Module")
            elif module.is_kept_on_cpu(arg.arg) or (
                    module.packs.host_names and _matches(arg.arg, module.packs.host_names)):
                self.env[arg.arg] = Label(CPU, f"`{arg.arg}` is kept on the host "
                                               "(keep_on_cpu or the packs' host-names)")
            elif self._is_tensor_annotation(arg.annotation) and host_named(arg.arg):
                self.env[arg.arg] = Label(CPU, f"`{arg.arg}` is named as a host value")
            elif arg.annotation is not None and \
                    host_comment(module.source.lines, arg.annotation.end_lineno or 0):
                self.env[arg.arg] = Label(CPU, f"`{arg.arg}` is declared a host tensor (the "
                                               "comment on its line says so)")
            elif arg.arg in module.host_params.get(func.qualname, ()):
                # Not taken to be on the GPU: a caller in the project passes a host value.
                self.env[arg.arg] = Label(UNKNOWN, f"a caller passes a host value as "
                                                   f"`{arg.arg}`")
            elif self._is_tensor_annotation(arg.annotation) and shape_named(arg.arg):
                # Not taken to be on the GPU by default: the sizes of a batch's items.
                self.env[arg.arg] = Label(UNKNOWN, f"`{arg.arg}` is named as shape metadata, "
                                                   "which processors keep on the host")
            elif cls is not None and cls.is_module and func.name in \
                    module.packs.module_entry_points and self._is_tensor_annotation(arg.annotation):
                self.env[arg.arg] = Label(CUDA, f"an input of {func.qualname}, an nn.Module "
                                                "whose outputs are taken to be on the GPU",
                                          weak=True)
            elif module.default_cuda and self._is_tensor_annotation(arg.annotation):
                self.env[arg.arg] = Label(CUDA, f"`{arg.arg}` is annotated torch.Tensor and "
                                                "nothing puts it on the CPU (devices.default: "
                                                "cuda)", mask_named(arg.arg), weak=True)
            if module.default_cuda and isinstance(arg.annotation, (ast.Subscript, ast.Constant)) \
                    and self.env.get(arg.arg, UNKNOWN_L).kind in (UNKNOWN, VALUE) and \
                    not host_named(arg.arg) and not shape_named(arg.arg):
                count = self._tensor_container(arg.annotation)
                if count is not None:
                    element = Label(CUDA, f"the elements of `{arg.arg}` are annotated "
                                          "torch.Tensor and nothing puts them on the CPU "
                                          "(devices.default: cuda)", weak=True)
                    self.members[arg.arg] = element if count == 0 else (element,) * count

    def _is_tensor_annotation(self, annotation: ast.expr | None) -> bool:
        return self.m._annotated_tensor(annotation)

    def _tensor_container(self, annotation: ast.expr) -> int | None:
        """For ``tuple[Tensor, Tensor]``: 2; for ``tuple[Tensor, ...]`` (or ``Optional`` of
        them): 0, any number; else None. A list of tensors is left out: engines keep
        per-item lists (a request's multimodal positions) on the host as often as not."""
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return None
        if not isinstance(annotation, ast.Subscript):
            return None
        head = _short(annotation.value).rpartition(".")[2]
        inner = annotation.slice
        if head == "Optional":
            return self._tensor_container(inner)
        if head not in ("tuple", "Tuple"):
            return None
        elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        if len(elts) == 2 and isinstance(elts[1], ast.Constant) and elts[1].value is Ellipsis:
            return 0 if self._is_tensor_annotation(elts[0]) else None
        if elts and all(self._is_tensor_annotation(e) for e in elts):
            return len(elts)
        return None

    # Plumbing -----------------------------------------------------------------------
    def run(self) -> None:
        """Walk the function body."""
        self.block(self.func.node.body)

    def block(self, body: list[ast.stmt]) -> None:
        """Walk statements in order."""
        hushed = 0
        for index, stmt in enumerate(body):
            self.stmt(stmt)
            if not hushed and (_returns_early_unless_guarded(stmt) or
                               _seen_guard(stmt, body[index + 1:]) or
                               (_filled_guard(stmt, body[index + 1:]) and
                                not self._per_object_cache()) or
                               self._returns_unless_switch(stmt) or
                               self._returns_when_passed(stmt)):
                hushed = 1  # the rest runs only behind a guard, or once per key
                self.allowed += 1
        self.allowed -= hushed

    def _append(self, name: str, labels: list[Label]) -> None:
        """Elements added to a list the function filled from empty: every element shares
        a label while they agree (what iterating the list gives), else unknown."""
        known = self.appended.get(name)
        for label in labels:
            if known is None:
                known = label
            elif known.kind != label.kind or known.boolean != label.boolean:
                known = UNKNOWN_L
        self.appended[name] = known
        if known is not None:
            self.members[name] = known

    def bind_loop_target(self, target: ast.expr, iterable: ast.expr) -> None:
        """Label a loop's target: the rows of a CUDA tensor (or of a module's outputs) are
        CUDA; ``zip`` and ``enumerate`` pair them up element by element."""
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and \
                isinstance(target, (ast.Tuple, ast.List)) and \
                all(k.arg == "strict" for k in iterable.keywords):
            name = iterable.func.id
            sources: list[ast.expr | None] = []
            if name == "zip" and len(iterable.args) == len(target.elts):
                sources = list(iterable.args)
            elif name == "enumerate" and len(iterable.args) == 1 and len(target.elts) == 2:
                sources = [None, iterable.args[0]]
            if sources:
                for element, source in zip(target.elts, sources):
                    label = self.label(source, read=True) if source is not None else VALUE_L
                    if isinstance(source, ast.Name) and \
                            isinstance(self.members.get(source.id), Label):
                        label = self.members[source.id]  # type: ignore[assignment]
                    self.bind(element, label if label.kind == CUDA else UNKNOWN_L)
                return
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute) and \
                iterable.func.attr in ("items", "keys", "values") and not iterable.args:
            # A mapping's keys are Python values (names, ids); its values are unknown, unless
            # the mapping is a field declared `Dict[K, Tensor]` or `Dict[K, Tuple[..]]`.
            self.label(iterable.func.value)
            method = iterable.func.attr
            if method == "keys":
                self.bind(target, VALUE_L)
            elif method == "values":
                self._bind_values(target, iterable.func.value)
            elif isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2:
                self.bind(target.elts[0], VALUE_L)
                self._bind_values(target.elts[1], iterable.func.value)
            else:
                self.bind(target, UNKNOWN_L)
            return
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute) and \
                iterable.func.attr in _MODULE_WALKS:
            # `for name, sub in model.named_modules()`: names, and parts of the model; not
            # the outputs of a call of the model.
            self.label(iterable.func.value)
            if isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2 and \
                    iterable.func.attr.startswith("named_"):
                self.bind(target.elts[0], VALUE_L)
                self.bind(target.elts[1], UNKNOWN_L)
            else:
                self.bind(target, UNKNOWN_L)
            return
        if isinstance(iterable, ast.Name) and isinstance(self.members.get(iterable.id), Label):
            self.bind(target, self.members[iterable.id])  # type: ignore[arg-type]
            return
        label = self.label(iterable, read=True)
        self.bind(target, label if label.kind == CUDA else UNKNOWN_L)

    def _bind_values(self, target: ast.expr, mapping: ast.expr) -> None:
        """Bind what iterating a mapping's values gives, by the mapping's declared type."""
        found = self._declared_of(mapping)
        spec = found[0][len("mapping:"):] if found and found[0].startswith("mapping:") else ""
        if not spec:
            self.bind(target, UNKNOWN_L)
            return
        assert isinstance(mapping, ast.Attribute) and found is not None
        tensor = self._declared_field(mapping.attr, "tensor", found[1])
        if tensor.kind == CUDA:
            tensor = tensor.but(why=f"the values of `{found[1]}.{mapping.attr}` are declared "
                                "torch.Tensor and nothing puts them on the CPU "
                                "(devices.default: cuda)")
        if spec == "tensor":
            self.bind(target, tensor)
            return
        kinds = spec.strip("()").split(",")
        if isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == len(kinds):
            for element, kind in zip(target.elts, kinds):
                self.bind(element, tensor if kind == "tensor" else UNKNOWN_L)
        else:
            self.bind(target, UNKNOWN_L)

    def _declared_of(self, node: ast.expr) -> tuple[str, str] | None:
        """The declared kind of a field read as ``self.x`` or ``obj.x`` (obj of a known
        class), and the class that declares it; None when no class declares it."""
        if not isinstance(node, ast.Attribute):
            return None
        base = node.value
        cls = self.func.cls
        if isinstance(base, ast.Name) and base.id == "self" and cls is not None:
            for klass in self.m._mro(cls):
                declared = self.m.class_fields.get("local:" + klass.name, {}).get(node.attr)
                if declared is not None:
                    return declared, klass.name
            return None
        label = self.label(base)
        if label.kind == OBJECT:
            for key in label.why.split("|"):
                declared = self.m.class_fields.get(key, {}).get(node.attr)
                if declared is not None:
                    return declared, key.rpartition(".")[2].removeprefix("local:")
        return None

    def branches(self, bodies: list[list[ast.stmt]], host_in_first: tuple[str, ...] = (),
                 quiet: tuple[bool, ...] = (), host_in_second: tuple[str, ...] = (),
                 known_in_first: dict[str, Label] | None = None) -> None:
        """Walk alternative blocks from the same state, then merge what each assigned.

        ``host_in_first``: names the first block knows are not on the GPU (``if not
        t.is_cuda:``); ``known_in_first``: labels a test proves for the first block
        (``isinstance(x, Batch)``); ``quiet``: blocks where a sync is taken to be intended."""
        before = self.env  # never written from here on: each block gets its own copy
        results = []
        for index, body in enumerate(bodies):
            checked = host_in_first if index == 0 else host_in_second if index == 1 else ()
            if not body and not checked:
                results.append(before)  # an empty block (no else): the state before
                continue
            self.env = dict(before)
            if index == 0 and known_in_first:
                self.env.update(known_in_first)
            for name in checked:
                self.env[name] = Label(CPU, f"`{name}` is checked not to be a CUDA tensor here")
            hushed = index < len(quiet) and quiet[index]
            self.allowed += hushed
            self.block(body)
            self.allowed -= hushed
            if index == 0 and known_in_first:
                # What the test proved holds inside the block only, unless the block rebound it.
                for name, label in known_in_first.items():
                    if self.env.get(name) is label:
                        if name in before:
                            self.env[name] = before[name]
                        else:
                            del self.env[name]
            results.append(self.env)
        # A block that ends in a return, raise, break or continue hands nothing on to the
        # code after the branches (`if isinstance(x, list): return x[i]`).
        live = [env for env, body in zip(results, bodies)
                if not (body and isinstance(body[-1], _EXITS))] or results
        merged = live[0]
        for env in live[1:]:
            for name in merged.keys() | env.keys():
                first, other = merged.get(name), env.get(name)
                if first is other:
                    continue  # the common case: untouched in both branches
                if merged is before:
                    merged = dict(before)
                fallback = before.get(name, UNKNOWN_L)
                merged[name] = merge([first or fallback, other or fallback])
        self.env = merged

    def bind(self, target: ast.expr, label: Label, value: ast.expr | None = None) -> None:
        """Give an assignment target the label of what is assigned."""
        if isinstance(target, ast.Name):
            label = self.env[target.id] = _host_name_wins(target.id, label)
            if self.members:
                self.members.pop(target.id, None)
            if isinstance(value, ast.List) and not value.elts:
                self.appended[target.id] = None
            elif self.appended:
                self.appended.pop(target.id, None)
            if self.object_fields and target.id in self.object_keys:
                for key in self.object_keys[target.id]:
                    self.env.pop(key, None)
            items = self.items.get(id(value)) if value is not None else None
            if items is not None:
                self.packed[target.id] = items  # `f(*inputs)` passes each of them
            else:
                self.packed.pop(target.id, None)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                and target.value.id == "self":
            label = _host_name_wins(target.attr, label)
            self.self_assignments.setdefault(target.attr, []).append(label)
            self.env["self." + target.attr] = label
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            # `out.logprobs = logprobs[idx]`: what this function reads back from the field.
            key = target.value.id + "." + target.attr
            if label.kind in (CUDA, CPU, VALUE):
                self.env[key] = _host_name_wins(target.attr, label)
                self.object_fields = True
                self.object_keys.setdefault(target.value.id, set()).add(key)
            elif self.object_fields:
                self.env.pop(key, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    self.bind(t, self.label(v), v)
            elif isinstance(value, ast.Call) and id(value) in self.items and \
                    len(self.items[id(value)]) == len(target.elts) and \
                    not any(isinstance(t, ast.Starred) for t in target.elts):
                for t, part in zip(target.elts, self.items[id(value)]):
                    self.bind(t, part)
            elif isinstance(value, ast.Name) and value.id in self.members and \
                    not any(isinstance(t, ast.Starred) for t in target.elts):
                members = self.members[value.id]
                if isinstance(members, Label):
                    members = (members,) * len(target.elts)
                if len(members) != len(target.elts):  # the annotation is wrong: no facts
                    members = (UNKNOWN_L,) * len(target.elts)
                for t, member in zip(target.elts, members):
                    if isinstance(t, ast.Name) and shape_named(t.id):
                        member = UNKNOWN_L  # shape metadata: kept on the host by processors
                    self.bind(t, member)
            else:
                # Unpacking a CUDA result (torch.split, topk, a module's outputs) gives CUDA parts.
                part = label if label.kind in (CUDA, CPU) else UNKNOWN_L
                for t in target.elts:
                    self.bind(t.value if isinstance(t, ast.Starred) else t, part)
        elif isinstance(target, ast.Subscript):
            self.label(target.value, write=True)
            self.label(target.slice)

    # Statements ---------------------------------------------------------------------
    def stmt(self, node: ast.stmt) -> None:
        """Walk one statement."""
        if isinstance(node, ast.Assign):
            self.async_copy_line = None
            # `out.logprobs = out.logprobs.tolist()`: the field is read before it is moved.
            self.moving = _moved_field(node)
            label = self.label(node.value)
            self.moving = None
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name = node.targets[0].id
                if guard_of(node.value) == (True, False) or self._switch_test(node.value):
                    self.switches.add(name)  # `verify = _verify_env and ...`
                else:
                    self.switches.discard(name)
                if _type_test(node.value):
                    self.tests[name] = node.value
                else:
                    self.tests.pop(name, None)
                cache = _cache_read(node.value)
                if cache:
                    self.cached[name] = cache
                else:
                    self.cached.pop(name, None)
                # `i32 = dict(dtype=torch.int32, device=device)`: what `**i32` passes.
                device = _option_device(node.value)
                if device is not None:
                    self.options[name] = self.label(device)
                else:
                    self.options.pop(name, None)
            for target in node.targets:
                self.bind(target, label, node.value)
                if self.async_copy_line is not None:
                    key = _root_key(target)
                    if key:
                        self.pending[key] = self.async_copy_line
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                label = self.label(node.value)
                if label.kind == UNKNOWN or label is NONE_L:
                    # `meta: Mamba2Metadata | None = None`: the annotation says what it holds.
                    key = self.m.class_key(node.annotation) if isinstance(
                        node.target, ast.Name) else None
                    if key is not None:
                        label = Label(OBJECT, key)
                self.bind(node.target, label, node.value)
            elif isinstance(node.target, ast.Attribute) and self._names_module(node.annotation):
                self.bind(node.target, Label(MODULE, f"annotated {ast.unparse(node.annotation)}"))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and \
                node.target.id in self.appended and isinstance(node.op, ast.Add) and \
                isinstance(node.value, ast.List) and node.value.elts and \
                not any(isinstance(e, ast.Starred) for e in node.value.elts):
            self._append(node.target.id, [self.label(e) for e in node.value.elts])
        elif isinstance(node, ast.AugAssign):
            label = combine([self.label(node.target), self.label(node.value)])
            if isinstance(node.target, ast.Name):
                self.env[node.target.id] = label
        elif isinstance(node, ast.Return):
            if node.value is not None:
                self.returns.append(self.label(node.value))
                self.return_items.append(self.items.get(id(node.value)))
        elif isinstance(node, ast.If):
            quiet = guard_of(node.test)
            if not any(quiet):  # `if verify:` of a name set from a switch
                test = node.test
                negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
                if self._switch_test(test.operand if negated else test):  # type: ignore
                    quiet = (False, True) if negated else (True, False)
            fallback = _fallback_guard(node, self.optional)
            if any(fallback):
                quiet = (quiet[0] or fallback[0], quiet[1] or fallback[1])
            missing = _missing_argument(node.test, self.passed) if self.passed else None
            if missing is not None:  # `if lens_cpu is None:`, and the hot callers pass it
                quiet = (quiet[0] or missing, quiet[1] or not missing)
            taken = self._flag_value(node.test) if self.flags else None
            if taken is not None:  # `if not no_copy_to_cpu:`, and every hot caller sets it
                quiet = (quiet[0] or not taken, quiet[1] or taken)
            if not quiet[0]:
                self.condition(node.test)  # evaluated every time, also before a raise
            quiet = (quiet[0] or error_only(node.body), quiet[1] or error_only(node.orelse))
            once = self._clears_own_guard(node) or (
                _once_guard(node, self.cached) and not self._per_object_cache())
            self.allowed += once
            host_body, host_else, containers = _host_narrowing(self._test_of(node.test))
            self.branches([node.body, node.orelse], _not_cuda_checks(node.test) + host_body,
                          quiet, host_else, self._narrowed(node.test, containers))
            self.allowed -= once
        elif isinstance(node, ast.While):
            self.condition(node.test)
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.bind_loop_target(node.target, node.iter)
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            allowed = any(self._sync_allowed(item.context_expr) for item in node.items)
            host = any(self._host_device_context(item.context_expr) for item in node.items)
            for item in node.items:
                label = self.label(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, label)
            self.marked += allowed
            self.host_default += host
            self.block(node.body)
            self.host_default -= host
            self.marked -= allowed
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            # An `except` block runs when something failed, not every step.
            self.branches([node.body + node.orelse, *(h.body for h in node.handlers)],
                          quiet=(False, *(True for _ in node.handlers)))
            self.block(node.finalbody)
        elif isinstance(node, ast.Match):
            self.label(node.subject)
            for case in node.cases:
                self.block(case.body)
        elif isinstance(node, ast.Assert):
            self.condition(node.test)
            host, _, containers = _host_narrowing(node.test)
            self.env.update(self._narrowed(node.test, containers))
            for name in host:  # assert x.device.type == "cpu"
                self.env[name] = Label(CPU, f"`{name}` is asserted not to be a CUDA tensor")
                # `device = x.device` read before the assert names the same, CPU, device.
                for other, label in list(self.env.items()):
                    if label.kind == DEV_CUDA and label.why == f"the device of {name}":
                        self.env[other] = Label(DEV_CPU, label.why)
        elif isinstance(node, ast.Expr):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
                    value.func.attr == "append" and isinstance(value.func.value, ast.Name) \
                    and value.func.value.id in self.appended and len(value.args) == 1 and \
                    not value.keywords:
                self._append(value.func.value.id, [self.label(value.args[0])])
            elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
                    value.func.attr in ("extend", "insert", "__setitem__") and \
                    isinstance(value.func.value, ast.Name) and \
                    value.func.value.id in self.appended:
                self._append(value.func.value.id, [UNKNOWN_L])  # elements not followed
                if self.report:
                    self.label(node.value)
            elif self.report:  # an expression statement binds nothing
                self.label(node.value)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # A closure runs where it is called: walk it with what it can see now.
            saved = dict(self.env), dict(self.pending)
            self.block(node.body)
            self.env, self.pending = saved
            if self._is_tensor_annotation(node.returns):
                self.closures[node.name] = node  # `def extract(...) -> torch.Tensor:`
            else:
                self.closures.pop(node.name, None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self.m.names.add(node)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.env.pop(target.id, None)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.label(child)

    def _flag_value(self, test: ast.expr) -> bool | None:
        """The value of ``p`` or ``not p`` for a flag every hot caller sets alike."""
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        inner = test.operand if negated else test  # type: ignore[attr-defined]
        if isinstance(inner, ast.Name) and inner.id in self.flags:
            return self.flags[inner.id] != negated
        return None

    def _returns_when_passed(self, stmt: ast.stmt) -> bool:
        """``if key is not None: return ...`` for a parameter every hot caller passes: what
        follows runs only for callers that leave it out."""
        return bool(self.passed) and isinstance(stmt, ast.If) and not stmt.orelse and \
            bool(stmt.body) and isinstance(stmt.body[-1], (ast.Return, ast.Raise)) and \
            _missing_argument(stmt.test, self.passed) is False

    def _test_of(self, test: ast.expr) -> ast.expr:
        """The type test a name was bound to (``if is_t:`` after ``is_t = isinstance(x,
        torch.Tensor)``), else the test itself."""
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        inner = test.operand if negated else test  # type: ignore[attr-defined]
        if isinstance(inner, ast.Name) and inner.id in self.tests:
            bound = self.tests[inner.id]
            return ast.UnaryOp(op=ast.Not(), operand=bound) if negated else bound
        return test

    def _narrowed(self, test: ast.expr, containers: tuple[str, ...]) -> dict[str, Label]:
        """What ``isinstance(x, C)`` proves where it holds: a Python container (a host
        object of unknown contents), or an instance of a project class whose fields are
        declared (``assert isinstance(meta, Mamba2Metadata)``)."""
        out = {name: Label(VALUE, f"`{name}` is checked to be a Python container")
               for name in containers}
        if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and \
                test.func.id == "isinstance" and len(test.args) == 2 and \
                isinstance(test.args[0], ast.Name) and not containers:
            kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
            keys = [self.m.class_key(kind) for kind in kinds]
            if keys and all(keys):
                out[test.args[0].id] = Label(OBJECT, "|".join(k for k in keys if k))
        out.update(self._device_narrowing(test))
        return out

    def _device_narrowing(self, test: ast.expr) -> dict[str, Label]:
        """What a test proves of a name of unknown device where it holds: ``x.is_cuda`` and
        ``not x.is_cpu`` put it on the GPU; ``isinstance(x, torch.Tensor)`` and
        ``torch.is_tensor(x)`` make it a tensor (on the GPU by devices.default: cuda, unless
        its name says host or shape metadata)."""
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        inner = test.operand if negated else test  # type: ignore[attr-defined]
        if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) and \
                inner.attr == ("is_cpu" if negated else "is_cuda"):
            name = inner.value.id
            if self.env.get(name, UNKNOWN_L).kind == UNKNOWN:
                return {name: Label(CUDA, f"`{name}` is checked to be on the GPU "
                                          f"(`{_short(test)}`)")}
            return {}
        if negated or not isinstance(inner, ast.Call) or not inner.args or \
                not self.m.default_cuda:
            return {}
        subject = inner.args[0]
        if isinstance(subject, ast.Name):
            name = word = subject.id
            known = self.env.get(name, UNKNOWN_L)
        elif isinstance(subject, ast.Attribute) and isinstance(subject.value, ast.Name) and \
                subject.value.id == "self" and self.func.cls is not None:
            name, word = "self." + subject.attr, subject.attr  # `self._draft_ids`
            known = self._attribute(subject)
        else:
            return {}
        callee = inner.func.attr if isinstance(inner.func, ast.Attribute) else \
            getattr(inner.func, "id", "")
        tensor = (callee == "isinstance" and len(inner.args) == 2 and
                  _isinstance_names(inner.args[1]) == ["Tensor"]) or callee == "is_tensor"
        if not tensor or host_named(word) or shape_named(word) or known.kind != UNKNOWN or \
                known == MOVED_L or self.m.is_kept_on_cpu(word):
            return {}
        return {name: Label(CUDA, f"`{name}` is checked to be a tensor and nothing puts it on "
                                  "the CPU (devices.default: cuda)", mask_named(word),
                            weak=True)}

    @staticmethod
    def _clears_own_guard(node: ast.If) -> bool:
        """``if self.flag: ...; self.flag = False``: the block runs once."""
        test = node.test
        if not (isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name)
                and test.value.id == "self"):
            return False
        return any(isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)
                   and stmt.value.value is False and any(
                       isinstance(t, ast.Attribute) and t.attr == test.attr
                       and isinstance(t.value, ast.Name) and t.value.id == "self"
                       for t in stmt.targets) for stmt in node.body)

    def _host_device_context(self, expr: ast.expr) -> bool:
        """``torch.device("cpu")`` used as a context manager: tensors made in its block
        without a device of their own, in this function or the ones it calls, are on the
        host."""
        return isinstance(expr, ast.Call) and len(expr.args) == 1 and \
            isinstance(expr.args[0], ast.Constant) and expr.args[0].value == "cpu" and \
            self.m.names.qualify(expr.func) == "torch.device"

    def _sync_allowed(self, expr: ast.expr) -> bool:
        target = expr.func if isinstance(expr, ast.Call) else expr
        qual = self.m.names.qualify(target) or ""
        return _matches(qual.rsplit(".", 1)[-1], self.m.packs.sync_allowed_contexts)

    def _is_module_annotation(self, annotation: ast.expr) -> bool:
        """An annotation naming ``nn.Module`` or a class the project makes an nn.Module
        (through its bases, in this module or another): not merely a module-like name
        (`LoRAModel` holds adapter weights)."""
        qual = self.m.names.qualify(annotation) or ""
        if qual == "torch.nn.Module" or qual in self.m.module_keys:
            return True
        local = self.m.classes.get(annotation.id) if isinstance(annotation, ast.Name) else None
        return local is not None and local.is_module

    def _names_module(self, annotation: ast.expr) -> bool:
        qual = self.m.names.qualify(annotation) or ""
        last = qual.rsplit(".", 1)[-1]
        return qual == "torch.nn.Module" or _matches(last, self.m.packs.module_classes)

    def _returns_unless_switch(self, stmt: ast.stmt) -> bool:
        """``if not done or not requires_sync: return`` of a name set from a switch
        (``requires_sync = current_platform.is_rocm() and ...``): the rest of the block
        runs only when the switch is on."""
        if not (isinstance(stmt, ast.If) and not stmt.orelse and stmt.body and
                isinstance(stmt.body[-1], (ast.Return, ast.Raise))):
            return False
        test = stmt.test
        atoms = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) \
            else [test]
        return any(isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.Not) and
                   self._switch_test(a.operand) for a in atoms)

    def _switch_test(self, test: ast.expr) -> bool:
        """A test on a name set from a switch (the function's own, or the module's; see
        ``module_switches``), alone or in an ``and``."""
        if isinstance(test, ast.Name):
            return test.id in self.switches or (
                test.id in self.m.switch_names and test.id not in self.env and
                test.id not in _parameter_names(self.func.node))
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return any(self._switch_test(value) for value in test.values)
        return False

    def _per_object_cache(self) -> bool:
        """A method of a dataclass: its ``if self._x is None:`` cache fills once per
        object, and such objects are built per step."""
        cls = self.func.cls
        return cls is not None and value_class(cls.node)

    def condition(self, test: ast.expr) -> None:
        """A test that Python needs as a bool: a CUDA tensor there is a sync."""
        if not self.report:
            return  # a test binds nothing: only the reporting walk needs it
        if isinstance(test, ast.BoolOp):
            saved = self.narrowed
            for value in test.values:
                self.condition(value)
                if isinstance(test.op, ast.And):
                    # `isinstance(x.embeds, list) and x.embeds`: what follows sees a list.
                    kept = _checked_host(value)
                    if kept is not None:
                        self.narrowed = {**self.narrowed, kept: Label(
                            VALUE, f"`{kept}` is checked to be a Python value")}
                    elif _type_test(value):
                        # `isinstance(r, Adapter) and r.end_ids`: `r` is an Adapter there.
                        proved = {name: label for name, label in
                                  self._narrowed(value, ()).items() if label.kind == OBJECT}
                        if proved:
                            self.narrowed = {**self.narrowed, **proved}
            self.narrowed = saved
            return
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            self.condition(test.operand)
            return
        self.label(test)

    # Expressions --------------------------------------------------------------------
    def label(self, node: ast.expr, read: bool = False, write: bool = False) -> Label:
        """The label of an expression (and of the expressions inside it)."""
        if self.pending and (read or not write):
            self._check_pending_read(node, read)
        kind = type(node)  # the commonest node types first: this runs for every expression
        if kind is ast.Name:
            if self.narrowed and node.id in self.narrowed:  # type: ignore[attr-defined]
                return self.narrowed[node.id]  # type: ignore[attr-defined]
            label = self.env.get(node.id, UNKNOWN_L)  # type: ignore[attr-defined]
            if self.host_default and label.weak and label.kind == CUDA:
                # Worked on under `with torch.device("cpu")`: a host value, by the
                # author's choice of device, not a CUDA one by devices.default.
                return Label(CPU, f"`{node.id}` is worked on inside `with "  # type: ignore
                                  "torch.device(\"cpu\")` and is CUDA only by devices.default")
            return label
        if kind is ast.Attribute:
            return self._attribute(node)  # type: ignore[arg-type]
        if kind is ast.Call:
            return self._call(node)  # type: ignore[arg-type]
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                if node.value.startswith("cuda"):
                    return Label(DEV_CUDA, f"the device {node.value!r}")
                if node.value == "cpu":
                    return Label(DEV_CPU, "the device 'cpu'")
            return NONE_L if node.value is None else VALUE_L
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant)
                           and isinstance(v.value, str))
            if text.startswith("cuda"):
                return Label(DEV_CUDA, "a 'cuda:N' device")
            return VALUE_L
        if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            labels = [self.label(child) for child in ast.iter_child_nodes(node)
                      if isinstance(child, ast.expr)]
            if isinstance(node, (ast.List, ast.Tuple)) and labels:
                # What torch.cat([a, b]) / torch.stack((a, b)) compute from.
                self.elements[id(node)] = combine(labels)
                if not any(isinstance(e, ast.Starred) for e in node.elts):  # type: ignore
                    self.items[id(node)] = labels
            return VALUE_L
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            saved = dict(self.env)
            for gen in node.generators:
                self.bind_loop_target(gen.target, gen.iter)
                for condition in gen.ifs:
                    self.condition(condition)
            if isinstance(node, ast.DictComp):
                self.label(node.key)
                self.label(node.value)
            else:
                self.label(node.elt)
            self.env = saved
            return VALUE_L
        if isinstance(node, ast.Subscript):
            return self._subscript(node, write)
        if isinstance(node, ast.BinOp):
            return combine([self.label(node.left), self.label(node.right)])
        if isinstance(node, ast.UnaryOp):
            operand = self.label(node.operand)
            if isinstance(node.op, ast.Not):
                return VALUE_L
            return operand.but(boolean=isinstance(node.op, ast.Invert) and operand.boolean)
        if isinstance(node, ast.Compare):
            labels = [self.label(node.left), *(self.label(c) for c in node.comparators)]
            if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
                return VALUE_L
            result = combine(labels)
            # Unknown but boolean too: a mask made on the host and moved to the GPU later.
            return result.but(boolean=True) if result.kind in (CUDA, CPU, UNKNOWN) else result
        if isinstance(node, ast.BoolOp):
            # As a value (`x = a and t`): a test of each operand but the last (a condition
            # tests them all: see condition()).
            for value in node.values:
                self.label(value)
            return UNKNOWN_L
        if isinstance(node, ast.IfExp):
            quiet = guard_of(node.test)
            missing = _missing_argument(node.test, self.passed) if self.passed else None
            if missing is not None:  # `lens_host if lens_host is not None else lens.tolist()`,
                # and every hot caller passes `lens_host`
                quiet = (quiet[0] or missing, quiet[1] or not missing)
            taken = self._flag_value(node.test) if self.flags else None
            if taken is not None:  # `row if no_copy else row.tolist()`, every hot caller sets it
                quiet = (quiet[0] or not taken, quiet[1] or taken)
            if not quiet[0]:
                self.condition(node.test)
            self.allowed += quiet[0]
            body = self.label(node.body)
            self.allowed += quiet[1] - quiet[0]
            orelse = self.label(node.orelse)
            self.allowed -= quiet[1]
            if orelse == NONE_L or body == NONE_L:  # `Embedder(c) if c else None`: optional
                return body if orelse == NONE_L else orelse
            return combine([body, orelse])
        if isinstance(node, ast.Starred):
            return self.label(node.value)
        if isinstance(node, ast.NamedExpr):
            label = self.label(node.value)
            self.env[node.target.id] = label
            return label
        if isinstance(node, ast.Await):
            self.label(node.value)
            return UNKNOWN_L
        if isinstance(node, ast.Lambda):
            return VALUE_L
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.label(child)
        return UNKNOWN_L

    def _attribute(self, node: ast.Attribute) -> Label:
        if self.narrowed:
            known = self.narrowed.get(_dotted_text(node) or "")
            if known is not None:
                return known
        base_node = node.value
        if self.object_fields and type(base_node) is ast.Name and \
                base_node.id != "self":  # type: ignore[attr-defined]
            local = self.env.get(base_node.id + "." + node.attr)  # type: ignore[attr-defined]
            if local is not None:
                self.label(base_node)
                return local
        if isinstance(base_node, ast.Name) and base_node.id == "self" and self.func.cls:
            local = self.env.get("self." + node.attr)
            if local is not None and local.kind != UNKNOWN:
                return local
            cls = self.func.cls
            for klass in self.m._mro(cls):
                if node.attr in klass.attrs:
                    label = klass.attrs[node.attr]
                    if label.kind != UNKNOWN:
                        return label
                    break
            if node.attr == "device" and cls.on_cuda:
                return Label(DEV_CUDA, f"the device of {cls.name}")
            for klass in self.m._mro(cls):
                declared = self.m.class_fields.get("local:" + klass.name, {}).get(node.attr)
                if declared is not None:
                    if declared == "tensor" and self.func.qualname in self.m.host_self:
                        return Label(CPU, f"`{klass.name}.{node.attr}` of a host copy: every "
                                          f"hot call of `{self.func.name}` is on an object "
                                          "named as a host value")
                    return self._declared_field(node.attr, declared, klass.name)
            return self._named_attribute(node, own=True)
        if isinstance(base_node, ast.Name) and base_node.id in self.env and \
                self.env[base_node.id].kind == MODULE:
            return self.env[base_node.id]
        if not isinstance(base_node, ast.Call) and self._under_torch(node):
            return VALUE_L  # torch.float16, torch.cuda, ...
        base = self.label(base_node)
        if node.attr in VALUE_ATTRIBUTES:
            return VALUE_L
        if base.kind == OBJECT:
            for key in base.why.split("|"):  # Union[A, B]: the first that declares it
                declared = self.m.class_fields.get(key, {}).get(node.attr)
                if declared is not None:
                    return self._declared_field(node.attr, declared, key.rpartition(".")[2]
                                                .removeprefix("local:"))
                held = self.m.class_attrs.get(key, {}).get(node.attr)
                if held is not None and held in self.m.class_fields:
                    return Label(OBJECT, held)  # `result.logits_output`: an Output
            if all(key.rpartition(".")[2].endswith(_SETTINGS_CLASSES)
                   for key in base.why.split("|")):
                # `self.config.post_norm`: a configuration holds Python values.
                return Label(VALUE, f"`.{node.attr}` of a configuration object")
            return self._named_attribute(node)
        if node.attr == "device":
            if base.kind == CUDA:
                return Label(DEV_CUDA, f"the device of {_short(base_node)}")
            if base.kind == CPU:
                return Label(DEV_CPU, f"the device of {_short(base_node)}")
            return UNKNOWN_L
        if base.kind == CUDA and flag_named(node.attr) and node.attr not in SAME_ATTRIBUTES:
            return VALUE_L  # `t._needs_fusion`, `layer.skip_bias_add`: a Python flag
        if base.kind in (CUDA, CPU) and (node.attr in SAME_ATTRIBUTES or base.kind == CUDA):
            return base
        if base.kind == MODULE:
            return base  # a submodule or a bound method of a module
        if base.kind in (CPU, VALUE):
            return UNKNOWN_L
        return self._named_attribute(node)

    def _declared_field(self, attr: str, declared: str, owner: str) -> Label:
        """A field whose class declares it: a host value, or a tensor (on the GPU when
        devices.default is cuda and its name does not say host)."""
        if declared == "host" or declared.startswith("mapping:"):
            return Label(VALUE, f"`{owner}.{attr}` is declared a host value")
        if declared == "python":  # weak: unless the code calls a tensor's method on it
            return Label(VALUE, f"`{owner}.{attr}` is declared a Python value",
                         weak=not host_named(attr))  # `lens_cpu`: a host value all the same
        if declared == "cpu":
            return Label(CPU, f"`{owner}.{attr}` is declared a host tensor (the comment on "
                              "its declaration says so)")
        if declared == "moved":  # `self.ids = self.ids.cpu()` somewhere in the class
            if attr != self.moving or not self.m.default_cuda or shape_named(attr):
                return MOVED_L  # on the host after the move, on the GPU before it
            return Label(CUDA, f"`{owner}.{attr}` is moved to the host here, so it was a "
                               "tensor (devices.default: cuda)", mask_named(attr), weak=True)
        if host_named(attr):
            return Label(CPU, f"`{attr}` is named as a host value")
        if attr in self.m.moved_to_host and attr != self.moving:
            return MOVED_L  # where it is not the copy that moves it to the host
        if self.m.default_cuda and not shape_named(attr):
            return Label(CUDA, f"`{owner}.{attr}` is declared torch.Tensor and nothing puts it "
                               "on the CPU (devices.default: cuda)", mask_named(attr), weak=True)
        return UNKNOWN_L

    def _named_attribute(self, node: ast.Attribute, own: bool = False) -> Label:
        """An attribute of an object of unknown device, by what its name says: the halves of
        a paired host/device buffer (``.cpu``/``.np``, ``.gpu``), a host name (``*_cpu``),
        or (devices.default: cuda) a field the project declares only as torch.Tensor."""
        attr = node.attr
        if attr in ("cpu", "np"):
            return Label(CPU, f"`.{attr}`, the host half of a paired buffer")
        if attr == "gpu":
            return Label(CUDA, "`.gpu`, the device half of a paired buffer")
        if host_named(attr):
            return Label(CPU, f"`{attr}` is named as a host value")
        if self.m.is_kept_on_cpu(attr) or (self.m.packs.host_names and
                                            _matches(attr, self.m.packs.host_names)):
            return Label(CPU, f"`{attr}` is kept on the host (keep_on_cpu or the packs' "
                              "host-names)")
        # The project-wide table is for other objects: a class's own attributes are known
        # from its own assignments and annotations.
        # By name alone only for a name of several words: one word (`state`, `buffer`,
        # `weight`) names unrelated fields of many classes.
        if self.m.default_cuda and attr in self.m.tensor_fields and not own and \
                "_" in attr.strip("_") and not shape_named(attr):
            return Label(CUDA, f"`{attr}` is declared torch.Tensor in the project and nothing "
                               "puts it on the CPU (devices.default: cuda)", mask_named(attr),
                         weak=True)
        if attr in self.m.moved_somewhere:
            return MOVED_L
        return UNKNOWN_L

    def _under_torch(self, node: ast.Attribute) -> bool:
        """Whether an attribute chain names something in the torch package."""
        root: ast.expr = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):  # the common case, without building the name
            head = self.m.names.aliases.get(root.id, root.id)
            return head == "torch" or head.startswith("torch.")
        qual = self.m.names.qualify(node)
        return bool(qual) and qual.split(".")[0] == "torch"

    def _subscript(self, node: ast.Subscript, write: bool) -> Label:
        base = self.label(node.value, write=write)
        self.label(node.slice)
        if type(node.value) is ast.Name and node.value.id in self.members and not write:
            members = self.members[node.value.id]  # type: ignore[attr-defined]
            if isinstance(members, Label):
                return members if not isinstance(node.slice, ast.Slice) else UNKNOWN_L
            index = node.slice.value if isinstance(node.slice, ast.Constant) else \
                -node.slice.operand.value if isinstance(node.slice, ast.UnaryOp) and \
                isinstance(node.slice.op, ast.USub) and \
                isinstance(node.slice.operand, ast.Constant) and \
                type(node.slice.operand.value) is int else None
            if isinstance(index, int) and -len(members) <= index < len(members):
                return members[index]
            return UNKNOWN_L
        if self.m.kept_on_cpu and _kept_key(node.slice, self.m):
            return Label(CPU, f"`{node.slice.value}` is kept on the host "  # type: ignore
                              "(keep_on_cpu)")
        if self.m.device_keys and _device_key(node.slice, self.m):
            return _device_field(node.slice.value)  # type: ignore[attr-defined]
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return UNKNOWN_L  # a tensor takes no string key: `inputs["type"]` of a mapping
        if base.kind in (CUDA, CPU):
            return base.but(boolean=False)
        if base.kind == VALUE and _is_shape(node.value):
            return VALUE_L  # `t.shape[0]`, `t.size()[1]`: an int
        if base is MOVED_L:
            return MOVED_L  # an item of a field moved to the host somewhere
        return UNKNOWN_L

    def _check_pending_read(self, node: ast.expr, read: bool) -> None:
        """A host read of a buffer whose async copy nobody waited for (kept by the read's
        span, in the reporting walk; the copy counts as waited for from then on)."""
        if not self.pending:
            return
        is_read = read or isinstance(node, ast.Subscript) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("tolist", "numpy", "item", "__array__"))
        if not is_read:
            return
        key = _root_key(node)
        if key in self.pending:
            line = self.pending.pop(key)
            if self.report:
                self.unwaited[(node.lineno, node.col_offset, node.end_lineno or node.lineno,
                               node.end_col_offset if node.end_col_offset is not None
                               else node.col_offset)] = (key, line)

    def _misdeclared(self, node: ast.expr, declared: Label, method: str) -> Label:
        """A field declared a Python value (``next_ids: List[int]``) that the code calls a
        tensor's method on (``.tolist()``): the declaration is wrong, the value a tensor,
        taken to be on the GPU (devices.default: cuda)."""
        label = Label(CUDA, f"{declared.why} but `.{method}()` is called on it: a tensor, "
                            "and nothing puts it on the CPU (devices.default: cuda)", weak=True)
        if self.recorded is not None:
            span = (node.lineno, node.col_offset, node.end_lineno or node.lineno,
                    node.end_col_offset if node.end_col_offset is not None
                    else node.col_offset)
            known = self.recorded.get(span)
            self.recorded[span] = (label, known[1] if known else 0)
        return label

    def _call(self, node: ast.Call) -> Label:
        label = self._call_result(node)
        if self.host_default and label.kind == CUDA and _kw(node, "device") is None:
            func = node.func
            made = isinstance(func, ast.Name) or (
                isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and (
                    func.value.id == "self" or func.value.id in self.m.names.aliases))
            if made and not (self.m.names.qualify(func) or "").startswith("torch."):
                # A function's result, made under the host default device.
                return Label(CPU, f"returned by `{_short(func)}()` inside `with "
                                  f"torch.device(\"cpu\")` ({label.why})")
        return label

    def _call_result(self, node: ast.Call) -> Label:
        func = node.func
        qual = self.m.names.qualify(func) or ""
        if isinstance(func, ast.Attribute):
            method = func.attr
            if method in ("get", "pop") and node.args and self.m.kept_on_cpu and \
                    _kept_key(node.args[0], self.m):
                self.label(func.value)
                for arg in node.args[1:]:
                    self.label(arg)
                return Label(CPU, f"`{node.args[0].value}` is kept on the host "  # type: ignore
                                  "(keep_on_cpu)")
            if method in ("get", "pop") and node.args and self.m.device_keys and \
                    _device_key(node.args[0], self.m):
                self.label(func.value)
                for arg in node.args[1:]:
                    self.label(arg)
                return _device_field(node.args[0].value)  # type: ignore[attr-defined]
            if method == "copy_":
                receiver = self.label(func.value, write=True)
            elif qual.startswith("torch.") and not isinstance(func.value, ast.Call):
                receiver = VALUE_L
            else:
                receiver = self.label(func.value)
                if receiver.weak and receiver.kind == VALUE and method in _TENSOR_ONLY \
                        and self.m.default_cuda:
                    receiver = self._misdeclared(func.value, receiver, method)
        else:
            method, receiver = "", UNKNOWN_L
        if self.report or self._uses_arguments(func, qual, method) or \
                (method and receiver.kind == MODULE):
            args = [self.label(a) for a in node.args]
            kwargs = {k.arg: self.label(k.value) for k in node.keywords}
            for k in node.keywords:
                if k.arg is None and isinstance(k.value, ast.Name) and \
                        k.value.id in self.options and "device" not in kwargs:
                    kwargs["device"] = self.options[k.value.id]
        else:  # a walk for labels only, of a call whose result does not depend on them
            args = [UNKNOWN_L] * len(node.args)
            kwargs = {k.arg: UNKNOWN_L for k in node.keywords}

        model = transformers_model(qual)
        if model is not None:
            return Label(MODULE, f"{model} (a transformers model, an nn.Module)")
        if qual.startswith("torch."):
            if qual.startswith("torch.nn.") and "()" not in qual:
                last = qual.rsplit(".", 1)[-1]
                if last[:1].isupper() and last not in _NN_NOT_MODULES:  # nn.Linear(...)
                    return Label(MODULE, f"{last}() (an nn.Module)")
            if "()" not in qual or qual.endswith(").synchronize"):
                return self._torch_call(node, qual, args, kwargs)
        if qual == "getattr":
            return UNKNOWN_L  # an attribute, of any kind: a tensor field included
        if qual in _VALUE_BUILTINS or qual.startswith(("numpy.", "math.")):
            if qual in ("list", "tuple", "sorted") and node.args:
                self._check_pending_read(node.args[0], read=True)
            return VALUE_L
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id == "self" and self.func.cls is not None:
            # self.x(...): a method of the class, or an attribute holding a module.
            callee = self.m.method(self.func.cls, func.attr)
            if callee is not None:
                return self._returned(callee, node, self._record_call(
                    callee, node, args, kwargs, skip_self=True))
            held = self._attribute(func)
            if held.kind == MODULE or (held.kind == OBJECT and any(
                    key in self.m.module_keys for key in held.why.split("|") if key)):
                # An attribute holding a module (`self.sampler: RejectionSampler`): its
                # call runs on the model's device.
                return Label(CUDA, f"output of {_short(func)} at line {node.lineno}")
            return self._annotated_return(func.attr)
        if method in ("to", "cuda", "half", "float", "bfloat16", "eval", "train",
                      "requires_grad_") and receiver.kind == MODULE:
            return receiver  # a module moved or cast is still the module
        if method and receiver.kind in (CUDA, CPU, UNKNOWN):
            result = self._tensor_method(node, method, receiver, args, kwargs)
            if result is not None:
                return result
        if method and receiver.kind == STREAM and method == "synchronize":
            self.pending.clear()
            return VALUE_L
        if method and receiver.kind == EVENT:
            if method == "synchronize":
                self.pending.clear()
            return VALUE_L
        if method == "synchronize":
            self.pending.clear()  # whatever it is, it waits: later reads are safe
        if receiver.kind == MODULE and (method in TENSOR_TO_VALUE_METHODS or
                                        (method and flag_named(method))):
            return VALUE_L  # `layer.weight.dim()`, `mlp.wants_fp32_input(n)`: Python values
        # Calls of nn.Module objects (and their methods) run on the model's device; but a
        # helper method given only host tensors (`self.tower._output_lengths(mask.sum(-1))`
        # of a mask kept on the CPU) computes on the host: the model's weights on the GPU
        # could not take them.
        if receiver.kind == MODULE and method not in ("forward", "__call__"):
            given = [a for a in (*args, *kwargs.values()) if a.kind in (CUDA, CPU)]
            if given and all(a.kind == CPU for a in given):
                return Label(CPU, f"output of {_short(func)} at line {node.lineno}, "
                                  f"given host tensors only ({given[0].why})")
        if receiver.kind == MODULE or (not method and self.label(func).kind == MODULE):
            source = _short(func)
            return Label(CUDA, f"output of {source} at line {node.lineno}")
        if not method and qual and _matches(qual, self.m.packs.loop_callees):
            return Label(CUDA, f"output of {qual} at line {node.lineno}")
        key = self.m.class_key(func) if self.m.class_fields and \
            isinstance(func, (ast.Name, ast.Attribute)) else None
        if key is not None:
            return Label(OBJECT, key)
        if isinstance(func, ast.Name) and func.id in self.closures:
            # A closure annotated `-> torch.Tensor`: computed from its tensor arguments.
            given = combine([*args, *kwargs.values()])
            if given.kind in (CUDA, CPU):
                return given.but(f"returned by `{func.id}()` from {given.why}")
            if self.m.default_cuda:
                return Label(CUDA, f"returned by `{func.id}()`, annotated torch.Tensor "
                                   "(devices.default: cuda)", weak=True)
            return UNKNOWN_L
        if isinstance(func, ast.Name):
            local_class = self.m.classes.get(func.id)
            if local_class is not None and local_class.is_module:
                return Label(MODULE, f"{func.id}() (an nn.Module)")
            callee = self.m.functions.get(func.id)
            if callee is not None:
                return self._returned(callee, node, self._record_call(
                    callee, node, args, kwargs, skip_self=False))
            if _matches(func.id, self.m.packs.module_classes) and func.id[:1].isupper():
                return Label(MODULE, f"{func.id}()")
            if _matches(func.id, self.m.packs.module_factories):
                return Label(MODULE, f"{func.id}()")
        if isinstance(func, ast.Attribute):
            last = qual.rsplit(".", 1)[-1]
            if last[:1].isupper() and _matches(last, self.m.packs.module_classes):
                return Label(MODULE, f"{last}()")
            if _matches(qual, self.m.packs.module_factories) and not method == "to":
                return Label(MODULE, f"{qual}()")
        if receiver.kind in (CPU, VALUE):
            return UNKNOWN_L
        return self._annotated_return(method or (func.id if isinstance(func, ast.Name) else ""),
                                      None if _moves_to_device(node) else
                                      [*args, *kwargs.values()])

    def _annotated_return(self, name: str, args: list[Label] | None = None) -> Label:
        """(devices.default: cuda) the result of a function every definition of which in the
        project is annotated ``-> torch.Tensor``: on the host when it is computed from host
        tensors only (``get_local_lens(lens_cpu, n)``)."""
        if name and name in self.m.tensor_returns and args and \
                any(a.kind == CPU for a in args) and not any(a.kind == CUDA for a in args):
            host = next(a for a in args if a.kind == CPU)
            return Label(CPU, f"returned by `{name}()` of a host tensor ({host.why})")
        if name and self.m.default_cuda and name in self.m.tensor_returns and \
                not host_named(name) and name not in _BUILTIN_METHODS:
            return Label(CUDA, f"returned by `{name}()`, annotated torch.Tensor in the project "
                               "(devices.default: cuda)", weak=True)
        return UNKNOWN_L

    def _uses_arguments(self, func: ast.expr, qual: str, method: str) -> bool:
        """Whether the label of a call depends on its arguments' labels: torch functions,
        tensor methods that take a device or a source, and this module's own functions
        (their parameters)."""
        if qual.startswith("torch.") or method in ("to", "copy_", "repeat_interleave"):
            return True
        name = method or (func.id if isinstance(func, ast.Name) else "")
        if name in self.m.tensor_returns:
            return True  # computed from its tensor arguments, on their device
        if isinstance(func, ast.Name):
            return func.id in self.m.functions or func.id in self.closures
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id == "self" and self.func.cls is not None:
            return self.m.method(self.func.cls, func.attr) is not None
        return False

    def _record_call(self, callee: FunctionInfo, node: ast.Call, args: list[Label],
                     kwargs: dict[str, Label], skip_self: bool) -> dict[str, Label]:
        """Map a call's arguments to the callee's parameters (kept for propagation)."""
        if len(node.args) == 1 and isinstance(node.args[0], ast.Starred) and \
                isinstance(node.args[0].value, ast.Name) and \
                node.args[0].value.id in self.packed:
            args = self.packed[node.args[0].value.id]  # `f(*inputs)` of a tuple display
        elif any(isinstance(a, ast.Starred) for a in node.args):
            return {}
        spec = callee.node.args
        names = [a.arg for a in (*spec.posonlyargs, *spec.args)]
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod"
                     for d in callee.node.decorator_list)
        if skip_self and names and not static:
            names = names[1:]
        labels = dict(zip(names, args))
        labels.update({k: v for k, v in kwargs.items() if k is not None})
        if self.report:
            self.call_args.append((callee.qualname, labels))
        return labels

    def _device_of(self, node: ast.Call, args: list[Label], kwargs: dict[str, Label],
                   position: int | None) -> Label | None:
        if "device" in kwargs:
            return kwargs["device"]
        if position is not None and len(args) > position:
            return args[position]
        return None

    def _torch_call(self, node: ast.Call, qual: str, args: list[Label],
                    kwargs: dict[str, Label]) -> Label:
        name = qual.rsplit(".", 1)[-1]
        if qual in ("torch.cuda.synchronize", "torch.accelerator.synchronize",
                    "torch.cuda.current_stream().synchronize",
                    "torch.cuda.default_stream().synchronize",
                    "torch.accelerator.current_stream().synchronize"):
            self.pending.clear()
            return VALUE_L
        if qual in ("torch.cuda.Event", "torch.Event"):
            return Label(EVENT, f"torch.cuda.Event at line {node.lineno}")
        if qual in ("torch.cuda.Stream", "torch.cuda.current_stream", "torch.cuda.default_stream",
                    "torch.Stream", "torch.accelerator.current_stream"):
            return Label(STREAM, f"{qual} at line {node.lineno}")
        if qual in ("torch.device",):
            return args[0] if args and args[0].kind in (DEV_CUDA, DEV_CPU) else UNKNOWN_L
        if qual.startswith("torch.cuda.") or qual.startswith("torch.accelerator."):
            if name in ("current_device",):
                return Label(DEV_CUDA, "the current CUDA device")
            return VALUE_L
        if qual == "torch.from_numpy":
            return Label(CPU, f"torch.from_numpy at line {node.lineno}")
        if name in TORCH_FACTORIES:
            if _is_true(_kw(node, "pin_memory")):
                return Label(CPU, f"a pinned host buffer (line {node.lineno})")
            device = self._device_of(node, args, kwargs, None)
            if device is not None:
                if device.kind == DEV_CUDA:
                    return Label(CUDA, f"allocated on {device.why or 'a CUDA device'} at line "
                                       f"{node.lineno}", _bool_dtype(node))
                if device.kind == DEV_CPU:
                    return Label(CPU, f"allocated on the CPU at line {node.lineno}",
                                 _bool_dtype(node))
                if device.kind in (CUDA, CPU):  # device=other_tensor.device spelled oddly
                    return device
                if self.m.default_cuda and device.kind == UNKNOWN:
                    given = _kw(node, "device")
                    spread = next((f"the device in `**{_short(k.value)}`" for k in node.keywords
                                   if k.arg is None), "an unknown device")
                    return Label(CUDA, f"allocated on "
                                       f"{f'`{_short(given)}`' if given else spread} at "
                                       f"line {node.lineno}, taken to be the GPU "
                                       "(devices.default: cuda)", weak=True)
                return UNKNOWN_L
            if name.endswith("_like") and args:
                return args[0]
            if self.func.cls is not None and self.func.cls.is_module and \
                    self.m.is_startup(self.func):
                return UNKNOWN_L  # models are often built under torch.device("cuda")
            if any(k.arg is None for k in node.keywords):
                return UNKNOWN_L  # `**options` may name the device
            if name in ("tensor", "as_tensor") and node.args and _scalar_expr(node.args[0]):
                # `torch.tensor(window + 1)`: a 0-dim host tensor, which an op on CUDA
                # tensors takes as a number (the result stays on the GPU).
                return VALUE_L
            return Label(CPU, f"{qual} without a device is on the CPU", _bool_dtype(node))
        if name == "equal" and len(args) >= 2 and any(a.kind == CUDA for a in args[:2]):
            return VALUE_L
        if name in DATA_DEPENDENT or (name == "where" and len(node.args) == 1):
            return combine(args[:1]).but(boolean=False)  # indices or values, not a mask
        if name in ("is_tensor", "numel", "is_floating_point", "get_default_dtype",
                    "is_grad_enabled", "compile", "no_grad", "inference_mode", "set_grad_enabled"):
            return VALUE_L
        if name in ("eq", "ne", "lt", "gt", "le", "ge", "isin", "logical_and", "logical_or",
                    "logical_not", "isnan", "isinf", "isfinite"):
            result = combine(args)
            return result.but(boolean=True) if result.kind in (CUDA, CPU) else result
        args = [self.elements.get(id(arg), label) if name in _JOINS else label
                for arg, label in zip(node.args, args)]
        result = combine([*args, *kwargs.values()])
        if result.kind == VALUE:
            # `torch.cat(luts)` of a list of unknown tensors: a tensor, not a Python value.
            return UNKNOWN_L
        if result.boolean and (name in _NOT_BOOLEAN_RESULTS or (
                name == "where" and len(args) == 3)):
            # `torch.where(mask, rows, 0)`, `torch.cumsum(mask, 0)`: values or counts, not a
            # mask (a `where` of two masks is still one).
            keeps = name == "where" and any(a.boolean for a in args[1:3])
            result = result.but(boolean=keeps)
        if result.kind == CUDA and "device" not in kwargs:
            return result.but(f"computed by {qual} from {result.why}" if not
                              result.why.startswith("computed by") else result.why)
        return result

    def _returned(self, callee: FunctionInfo, node: ast.Call,
                  passed: dict[str, Label] | None) -> Label:
        """What a call of the module's own function returns; a tuple's elements are kept
        for unpacking (``emb, mask = get_mask(ids)``)."""
        label = self.m.return_label(callee, passed)
        items = self.m.return_items(callee, passed)
        if items is not None:
            self.items[id(node)] = items
        return label

    def _tensor_method(self, node: ast.Call, method: str, receiver: Label, args: list[Label],
                       kwargs: dict[str, Label]) -> Label | None:
        non_blocking = (method == "to" or method == "copy_") and (
            _is_true(_kw(node, "non_blocking"))
            or (len(node.args) >= 2 and _is_true(node.args[-1])))
        if method in ("tolist", "item", "numpy"):
            return VALUE_L
        mask = receiver.boolean  # a mask moved between devices is still a mask
        if method == "cpu":
            return Label(CPU, f".cpu() at line {node.lineno}", mask) \
                if receiver.kind != UNKNOWN else UNKNOWN_L
        if method == "cuda":
            return Label(CUDA, f"moved with .cuda() at line {node.lineno}", mask)
        if method == "pin_memory":
            return Label(CPU, f"pinned at line {node.lineno}", mask)
        if method == "to":
            target = self._device_of(node, args, kwargs, 0)
            if target is None:
                return receiver
            if target.kind in (DEV_CUDA, CUDA):
                return Label(CUDA, f"moved to {target.why or 'the GPU'} at line {node.lineno}",
                             mask)
            if target.kind in (DEV_CPU, CPU):
                if receiver.kind == CUDA and non_blocking:
                    self.async_copy_line = node.lineno
                    return Label(CPU, f"non_blocking copy at line {node.lineno}", mask)
                return Label(CPU, f"copied to the CPU at line {node.lineno}", mask)
            if target.kind == UNKNOWN:  # .to(device): wherever that is, not where it was
                if self.m.default_cuda:
                    return Label(CUDA, f"moved to `{_short(_kw(node, 'device') or node.args[0])}`"
                                       f" at line {node.lineno}, taken to be the GPU "
                                       "(devices.default: cuda)", mask, weak=True)
                return UNKNOWN_L
            return receiver
        if method == "copy_":
            source = args[0] if args else UNKNOWN_L
            host_named = receiver.kind == UNKNOWN and any(
                word in (_root_key(node.func.value) or "").lower()  # type: ignore[attr-defined]
                for word in ("cpu", "pinned", "host"))
            if (receiver.kind == CPU or host_named) and source.kind == CUDA and non_blocking:
                key = _root_key(node.func.value)  # type: ignore[attr-defined]
                if key:
                    self.pending[key] = node.lineno
            return receiver
        if receiver.kind == UNKNOWN:
            return None if method not in TENSOR_TO_VALUE_METHODS else VALUE_L
        if method in DATA_DEPENDENT:
            return receiver.but(boolean=False)
        if method == "synchronize":
            return None
        if method in TENSOR_TO_VALUE_METHODS:
            return VALUE_L
        if method in BOOLEAN_METHODS:
            return receiver.but(boolean=True)
        if method in ("float", "half", "bfloat16", "long", "int", "double", "short", "byte",
                      "char"):
            return receiver.but(boolean=False)
        if method not in TENSOR_METHODS:
            # `norm.supports_fused_kernel(x)`: no tensor has that method, so the receiver
            # is some other object taken for a tensor, and the result is not its device.
            return UNKNOWN_L
        return receiver


def analyze(tree: ast.Module, packs: PackData, text: str = "",
            linked_hot: dict[str, list[str]] | None = None,
            linked_devices: dict[str, list[str]] | None = None,
            record_labels: bool = False) -> GpuAnalysis:
    """The :class:`GpuAnalysis` of a module (``text``: its source, to find non_blocking copies;
    ``linked_hot``: its functions that the project's link phase found hot;
    ``linked_devices``: the project's tensor fields and tensor-returning methods;
    ``record_labels``: keep the labels of the walked expressions, see ``labels_of``)."""
    return ModuleAnalyzer(tree, packs, text=text, linked_hot=linked_hot,
                          linked_devices=linked_devices, record_labels=record_labels).analyze()


class _RecordingWalker(FunctionWalker):
    """A walker that keeps each label it computes by the node's span (the class of the
    reporting walks when labels are recorded, so that the usual walk pays nothing)."""

    def label(self, node: ast.expr, read: bool = False, write: bool = False) -> Label:
        result = FunctionWalker.label(self, node, read, write)
        assert self.recorded is not None
        flags = (self.allowed > 0) | (self.marked > 0) << 1
        self.recorded[(node.lineno, node.col_offset, node.end_lineno or node.lineno,
                       node.end_col_offset if node.end_col_offset is not None
                       else node.col_offset)] = (result, flags)
        return result
