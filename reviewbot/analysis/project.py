"""The project index and the link phase: which functions are hot across modules.

A per-step entry point rarely does its work in its own module: a model runner calls the
sampler's module, the sampler calls its ops, a scheduler calls a worker held in an
attribute. So every ``.py`` file of the project is summarised by CPython's ``ast``
(imports, classes with their bases and the types of their ``self.x`` attributes,
functions with the calls they make), and the summaries are linked:

* **Entry points** are the packs' patterns, ``forward`` of classes that are ``nn.Module``s
  through bases in any module, and functions whose loop calls a model (the serving idiom).
* **Calls** resolve through import aliases (relative imports and re-exports included),
  ``self.`` methods up the class's bases in other modules, ``self.attr.method()`` through
  the attribute's class, locals and parameters of a known class, and, for a receiver of
  no known class, the project's few methods of that name.
* A hot method makes its overrides in subclasses hot (an interface the loop calls).
* Start-up functions stop the walk; the walk is breadth-first with a depth bound, so
  import cycles and recursion cannot make it hang.

The result is, per module, each hot function's chain from its entry point: neutral facts
that the per-module analysis starts from. Summaries are plain data (JSON), cached by the
file's content hash.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import hmac
import json
import os
import re
import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from reviewbot.analysis.walk import walk as fast_walk
from reviewbot.analysis.gpu import (_fallback_guard, _once_guard,
                                    _returns_early_unless_guarded, captures_graph,
                                    classes_made_in, error_only, guard_of, host_comment,
                                    is_property, memoised, optional_parameters,
                                    other_platform_class, other_platform_function,
                                    value_class, _MOVES_DATA, _PLATFORM_WORDS)
from reviewbot.analysis.tensor_api import TENSOR_METHODS
from reviewbot.packs import PackData

SUMMARY_VERSION = 68
MAX_INDEX_BYTES = 512 << 20  # a larger index file is ignored (and rebuilt)
# Summaries made since the last full write that are kept apart (or an eighth of the
# project's, if more) before all of them are written again; and four times as many (or a
# quarter of the project's) no longer used.
RECENT_SUMMARIES = 64
MAX_LINK_DEPTH = 12
# A call on a receiver of no known class resolves by name only to this many methods.
MAX_NAME_CANDIDATES = 3
_CAMEL_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")
# ... or to every implementation of one interface, up to this many.
MAX_INTERFACE_IMPLEMENTATIONS = 16
# How many project classes one module's device facts describe (those it imports or
# defines, and the classes their fields hold).
MAX_SUBCLASS_FIELDS_WALK = 64  # subclasses read for the fields an interface leaves out
MAX_PROPERTY_READS = 32  # attribute names a function's summary keeps
MAX_PRED_BLOCKS = 16  # blocks behind a call of a project function a summary keeps apart
MAX_HELD_CLASSES = 256
ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")
# Method names too common to resolve by name alone (containers, files, tensors, threads).
_COMMON_METHODS = frozenset({
    "get", "set", "put", "pop", "append", "extend", "update", "add", "remove", "clear",
    "copy", "items", "keys", "values", "join", "split", "strip", "format", "read", "write",
    "close", "open", "start", "stop", "run", "wait", "send", "recv", "item", "tolist", "cpu",
    "cuda", "to", "numpy", "view", "reshape", "sum", "mean", "max", "min", "size", "index",
    "count", "sort", "insert", "acquire", "release", "result", "cancel", "done", "submit",
    "encode", "decode", "fill_", "copy_", "zero_", "record", "synchronize", "forward",
    "__call__", "__init__", "reset", "init", "build", "apply", "call", "step", "process",
    "execute", "load", "save", "flush", "next", "send_pyobj", "recv_pyobj", "info", "debug",
    "warning", "error", "exception", "lower", "upper", "replace", "startswith", "endswith",
    "setdefault", "discard", "popleft", "appendleft", "poll", "is_set",
})


# Methods of Python's built-in types and of torch.Tensor: a call of one of these names on
# an object of unknown type (`self.hash.to_bytes(8)`, `x.index_select(0, i)`) is most
# likely that method, not a project method that happens to share the name.
_BUILTIN_METHODS = frozenset(
    name for kind in (int, float, complex, str, bytes, bytearray, list, tuple, dict, set,
                      frozenset, memoryview, range, slice)
    for name in dir(kind) if not name.startswith("__")) | TENSOR_METHODS


def _specific_method_name(name: str) -> bool:
    """Whether a method's name says which method it is when the receiver's class is not
    known: not a one-word name, a dunder, a common one or a built-in type's."""
    return not (name in _COMMON_METHODS or name in _BUILTIN_METHODS or
                name.startswith("__") or "_" not in name.strip("_"))


# `get_group().save_layer(...)`: a method called on what a function (no arguments) returns.
_CHAINED_CALL = re.compile(r"(?<![\w.)\]])((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\(\)\.(\w+)\s*\(")
# `meta.decode_metadata`: an attribute read that is not a call (nor an assignment to it).
_READ = re.compile(r"(?:(?<![\w.])([A-Za-z_]\w*))?\.([A-Za-z_]\w*)\b(?!\s*\()(?!\s*=[^=])")
_CALL = re.compile(r"(?<![\w.)\]])((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\s*\(|super\(\)\.(\w+)\s*\(")
# A bound method handed to a call as a callback (`run(reqs, self._apply, self.mgr.sync)`):
# the callee calls it.
_CALLBACK = re.compile(r"(?:^|[(,])\s*((?:self|cls)(?:\.[A-Za-z_]\w*)+)\s*(?=[,)])")
_ATTRIBUTE = re.compile(r"\.([A-Za-z_]\w*)")
_KEYWORDS = frozenset({"if", "elif", "while", "for", "return", "and", "or", "not", "in", "is",
                       "assert", "yield", "await", "lambda", "with", "del", "raise", "print",
                       "except", "import", "from", "else", "def", "class"})
# Classmethods that build an instance of their class.
_FACTORY_METHODS = frozenset({"make", "create", "build", "new", "init_new", "instance",
                              "get_instance"})


def project_root(paths: Iterable[Path]) -> Path:
    """The root of the project the checked paths belong to: the nearest folder above them
    holding a project marker, else the top of their chain of packages (``__init__.py``)."""
    resolved = [os.path.abspath(p) for p in paths] or [os.getcwd()]
    common = Path(os.path.commonpath(resolved))
    start = common if common.is_dir() else common.parent
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in ROOT_MARKERS):
            return folder
    top = start
    while (top / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    return top


SOURCE_FOLDERS = ("src", "python", "lib")  # where a repository often keeps its packages


def module_name(path: Path, package_tops: dict[Path, Path] | None = None,
                root: Path | None = None) -> str:
    """The dotted module name of a file.

    Under a project root: its path from the root, or from the root's ``src/``, ``python/``
    or ``lib/`` folder (namespace packages without ``__init__.py`` included). Otherwise:
    its path from the top of its chain of packages."""
    folder = path.parent
    if package_tops is not None:  # the dotted name of the folder, once per folder
        prefix = package_tops.get(("name", folder))  # type: ignore[call-overload]
        if prefix is not None:
            stem = path.stem
            return prefix if stem == "__init__" else (f"{prefix}.{stem}" if prefix else stem)
    top = None if package_tops is None else package_tops.get(folder)
    if top is None:
        top = None
        if root is not None:
            text = str(folder)
            for name in SOURCE_FOLDERS:
                source = root / name
                if _under(text, str(source)) and not _is_package(source, package_tops):
                    top = source
                    break
            if top is None and _under(text, str(root)):
                top = root
        if top is None:
            top = folder
            while (top / "__init__.py").is_file() and top.parent != top:
                top = top.parent
        if package_tops is not None:
            package_tops[folder] = top
    rel = path.relative_to(top).with_suffix("")
    parts = list(rel.parts)
    if package_tops is not None:
        package_tops[("name", folder)] = ".".join(parts[:-1])  # type: ignore[index]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _under(folder: str, top: str) -> bool:
    """Whether a folder is ``top`` or below it (both spelt alike: the test is lexical, as
    ``Path.parents`` is)."""
    return folder == top or folder.startswith(top.rstrip(os.sep) + os.sep)


def _is_package(folder: Path, known: dict[Any, Any] | None) -> bool:
    """Whether a folder holds ``__init__.py`` (asked once per folder when ``known`` is
    given)."""
    if known is None:
        return (folder / "__init__.py").is_file()
    answer = known.get(("package", folder))
    if answer is None:
        answer = known[("package", folder)] = (folder / "__init__.py").is_file()
    return answer


# Summaries ------------------------------------------------------------------------------
# Text without which no argument is a host value by its spelling (see _host_argument).
# (`*_list` names are left out: a Python list is rarely passed for a tensor parameter, and
# `List[...]` annotations would send nearly every function to the walk.)
_HOST_HINT = re.compile(r"(?<![A-Za-z0-9])(?:cpu|np|numpy|host|pinned|tolist)"
                        r"(?![A-Za-z0-9])", re.IGNORECASE)


def _last_word(name: str) -> str:
    """The last CapWords word of a class name (``Builder`` of ``FastPrefillAttentionBuilder``)."""
    words = re.findall(r"[A-Z][a-z0-9]+", name)
    return words[-1] if words else ""


def _host_copy(expr: ast.expr) -> bool:
    """A value that is a host copy of a tensor: ``t.cpu()``, ``t.to("cpu")``,
    ``t.numpy()``, ``t.tolist()``, or the result of a helper named for it (``_d2h(t)``,
    ``to_cpu(t)``)."""
    from reviewbot.analysis.gpu import host_named

    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    if isinstance(func, ast.Attribute):
        if func.attr in ("cpu", "numpy", "tolist") and not expr.args:
            return True
        if func.attr == "to" and any(isinstance(a, ast.Constant) and a.value == "cpu"
                                     for a in (*expr.args, *(k.value for k in expr.keywords
                                                             if k.arg == "device"))):
            return True
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    lowered = name.lower()
    return "d2h" in lowered or "to_cpu" in lowered or "to_host" in lowered or (
        host_named(name) and not name.startswith(("is_", "has_")))


def _copied_value(call: ast.Call) -> ast.expr:
    """What a host copy copies: ``t`` of ``t.cpu()`` or of ``_d2h(t)``."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("cpu", "numpy", "tolist", "to"):
        return func.value
    return call.args[0] if call.args else call


def _unquoted(annotation: ast.expr | None) -> ast.expr | None:
    """An annotation with a string one (``"Foo"``) parsed (None when it does not parse)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            return ast.parse(annotation.value, mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    return annotation


def _host_argument(expr: ast.expr) -> bool:
    """An argument that is a host value by its spelling: a host-named variable or field,
    or a ``.cpu()`` / ``.numpy()`` / ``.tolist()`` result."""
    from reviewbot.analysis.gpu import host_named

    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        return expr.func.attr in ("cpu", "numpy", "tolist") and not expr.args
    name = expr.id if isinstance(expr, ast.Name) else \
        expr.attr if isinstance(expr, ast.Attribute) else None
    return name is not None and _HOST_HINT.search(name) is not None and host_named(name)


def _dotted(expr: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


class _Summariser:
    """Builds the summary of one module (plain data)."""

    def __init__(self, tree: ast.Module, module: str, is_package: bool, text: str) -> None:
        # Calls are read off each function's lines (a statement-level walk marks its loops
        # and guarded blocks): several times faster than a walk of every expression.
        self.lines = text.splitlines()
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.imports: dict[str, str] = {}
        self.classes: dict[str, dict[str, Any]] = {}
        self.functions: dict[str, dict[str, Any]] = {}
        self.local_defs: set[str] = set()
        # Names whose values are declared kept on the CPU (`dict(k=...(keep_on_cpu=True))`).
        self.kept: frozenset[str] = frozenset()
        # The factories called with `keep_on_cpu=True`, and the fields built by any factory
        # of a class (`num_patches=Config.batched("image")`): the link finds those the
        # engine moves to the device.
        self.keep_families: frozenset[str] = frozenset()
        if "keep_on_cpu" in text:
            from reviewbot.analysis.gpu import _kept_on_cpu, keep_families

            self.kept = _kept_on_cpu(tree)
            self.keep_families = keep_families(tree)
        from reviewbot.analysis.gpu import field_calls

        self.field_calls = field_calls(text)
        # Fields this module sets to a host copy (`out.ids = out.ids.cpu()`, `= _d2h(x)`).
        self.moved: set[str] = set()
        # Attribute names the module reads or calls (to pick the project facts it needs).
        self.names = set(_ATTRIBUTE.findall(text))
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                self.local_defs.add(node.name)
        self._imports(tree.body)
        self._aliases(tree.body)
        self._index(tree.body, None, "")

    def summary(self) -> dict[str, Any]:
        out = {"imports": self.imports, "classes": self.classes, "functions": self.functions,
               "names": sorted(self.names)}
        if self.kept:
            out["kept_on_cpu"] = sorted(self.kept)
        if self.keep_families:
            out["keep_families"] = sorted(self.keep_families)
        if self.field_calls:
            out["field_calls"] = sorted(map(list, self.field_calls))
        if self.moved:
            out["moved_to_host"] = sorted(self.moved)
        return out

    def _imports(self, body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".", 1)[0]
                        self.imports.setdefault(top, top)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = self.package.split(".") if self.package else []
                    if node.level > 1:
                        parts = parts[:len(parts) - (node.level - 1)] if len(parts) >= node.level - 1 else []
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                for alias in node.names:
                    if alias.name != "*":
                        self.imports[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
            elif isinstance(node, (ast.If, ast.Try)):
                for attr in ("body", "orelse", "finalbody"):
                    self._imports(getattr(node, attr, []) or [])
                for handler in getattr(node, "handlers", []) or []:
                    self._imports(handler.body)

    def _aliases(self, body: list[ast.stmt]) -> None:
        """Module-level aliases of classes (``ConnectorType = ConnectorBase``), kept as
        re-exports: an annotation or a return type naming the alias reaches the class."""
        for node in body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name) and \
                    isinstance(node.value, (ast.Name, ast.Attribute)):
                name = node.targets[0].id
                target = self.qualify(_dotted(node.value))
                if target and name[:1].isupper() and \
                        target.rpartition(".")[2].lstrip("_")[:1].isupper() and \
                        name not in self.imports and name not in self.local_defs:
                    self.imports[name] = target

    def qualify(self, dotted: str | None) -> str | None:
        """The qualified name of a dotted name read in this module."""
        if not dotted:
            return None
        head, _, rest = dotted.partition(".")
        if head in self.imports:
            base = self.imports[head]
        elif head in self.local_defs:
            base = f"{self.module}.{head}"
        else:
            return None
        return f"{base}.{rest}" if rest else base

    def _type_of(self, annotation: ast.expr | None) -> str | None:
        """The class an annotation names (``Foo``, ``Optional[Foo]``, ``"Foo"``, ``Foo | None``)."""
        annotation = _unquoted(annotation)
        if annotation is None:
            return None
        if isinstance(annotation, ast.Subscript):
            head = _dotted(annotation.value) or ""
            if head.rsplit(".", 1)[-1] == "Optional":
                return self._type_of(annotation.slice)
            return None
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
            for side in (annotation.left, annotation.right):
                if not (isinstance(side, ast.Constant) and side.value is None):
                    return self._type_of(side)
            return None
        dotted = _dotted(annotation)
        if dotted is None or not dotted.rsplit(".", 1)[-1].lstrip("_")[:1].isupper():
            return None
        return self.qualify(dotted)

    def value_kind(self, annotation: ast.expr | None) -> str | None:
        """"tensor" for an annotation naming ``torch.Tensor`` (or Optional of it), "host"
        for numpy arrays, Python numbers, strings and containers; else None."""
        annotation = _unquoted(annotation)
        if annotation is None:
            return None
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
            return self._union_kind(_union_members(annotation))
        if isinstance(annotation, ast.Subscript):
            head = (_dotted(annotation.value) or "").rsplit(".", 1)[-1]
            if head == "Optional":
                return self.value_kind(annotation.slice)
            if head == "Union":
                members = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) \
                    else [annotation.slice]
                return self._union_kind(members)
            if head in ("list", "List", "tuple", "Tuple", "dict", "Dict", "set", "Set",
                        "frozenset", "FrozenSet", "AbstractSet", "Sequence", "Mapping",
                        "Iterable"):
                return "host"
            if head in ("NDArray", "ndarray"):
                return "host"
            return None
        dotted = _dotted(annotation)
        if dotted is None:
            return None
        qual = self.qualify(dotted) or dotted
        if qual in ("torch.Tensor", "torch.tensor.Tensor"):
            return "tensor"
        if qual in ("numpy.ndarray", "numpy.typing.NDArray", "int", "float", "bool", "str",
                    "list", "tuple", "dict", "set", "frozenset", "bytes"):
            return "host"
        return None

    def _mapping_values(self, annotation: ast.expr | None) -> str | None:
        """For a dict whose values are tensors, or tuples holding tensors: "mapping:tensor"
        or "mapping:(,tensor)" (the kind of each element, "tensor" or empty). A host value
        itself, but what iterating its values gives is known. None for anything else."""
        annotation = _unquoted(annotation)
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
            members = [m for m in _union_members(annotation)
                       if not (isinstance(m, ast.Constant) and m.value is None)]
            return self._mapping_values(members[0]) if len(members) == 1 else None
        if not isinstance(annotation, ast.Subscript):
            return None
        head = (_dotted(annotation.value) or "").rsplit(".", 1)[-1]
        if head == "Optional":
            return self._mapping_values(annotation.slice)
        if head not in ("dict", "Dict", "Mapping", "MutableMapping", "OrderedDict",
                        "DefaultDict", "defaultdict") or \
                not isinstance(annotation.slice, ast.Tuple) or len(annotation.slice.elts) != 2:
            return None
        value = _unquoted(annotation.slice.elts[1])
        if self.value_kind(value) == "tensor":
            return "mapping:tensor"
        if isinstance(value, ast.Subscript) and \
                (_dotted(value.value) or "").rsplit(".", 1)[-1] in ("tuple", "Tuple") and \
                isinstance(value.slice, ast.Tuple):
            kinds = ["tensor" if self.value_kind(e) == "tensor" else "" for e in value.slice.elts]
            if "tensor" in kinds:
                return "mapping:(" + ",".join(kinds) + ")"
        return None

    def _union_kind(self, members: list[ast.expr]) -> str | None:
        """The kind of a union: its members' one kind, or "tensor" for a tensor or
        containers (of tensors, of ids): where the code calls a tensor's method on it, only
        the tensor has one."""
        members = [m for m in members if not (isinstance(m, ast.Constant) and m.value is None)]
        kinds = [self.value_kind(m) for m in members]
        if len(set(kinds)) == 1:
            return kinds[0]
        if "tensor" in kinds and all(kind == "tensor" or _container(m)
                                     for m, kind in zip(members, kinds)):
            return "tensor"
        return None

    def _constructed(self, value: ast.expr | None) -> str | None:
        """The class a value is an instance of, when it is built by ``Class(...)`` or a
        factory classmethod (``Class.make(...)``, ``Class.from_config(...)``)."""
        if isinstance(value, ast.Call):
            dotted = _dotted(value.func)
            if not dotted:
                return None
            last = dotted.rsplit(".", 1)[-1]
            if last.lstrip("_")[:1].isupper():
                return self.qualify(dotted)
            owner, _, method = dotted.rpartition(".")
            if owner and owner.rsplit(".", 1)[-1].lstrip("_")[:1].isupper() and (
                    method in _FACTORY_METHODS or method.startswith(("from_", "create_"))):
                return self.qualify(owner)
            if last.lstrip("_")[:1].islower() and dotted.split(".", 1)[0] not in ("self", "cls"):
                # `create_dispatcher(...)`: the class its return annotation names (the
                # link resolves the "()" reference).
                qual = self.qualify(dotted)
                return "()" + qual if qual else None
        return None

    def _index(self, body: list[ast.stmt], cls: dict[str, Any] | None, prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                info = {"bases": [self.qualify(_dotted(b)) or (_dotted(b) or "") for b in node.bases],
                        "attrs": {}, "fields": {}, "line": node.lineno}
                if value_class(node):
                    info["values"] = 1
                self.classes.setdefault(prefix + node.name, info)
                for stmt in node.body:  # class-level annotations: `runner: ModelRunner`
                    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) \
                            and isinstance(stmt.value.value, (bool, int, float, str)):
                        for target in stmt.targets:  # `supports_fp8 = True`: a Python value
                            if isinstance(target, ast.Name):
                                info["fields"].setdefault(target.id, "host")
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                        typ = self._type_of(stmt.annotation)
                        if typ:
                            info["attrs"].setdefault(stmt.target.id, typ)
                        kind = self._field_kind(stmt)
                        if kind:
                            info["fields"][stmt.target.id] = kind
                self._index(node.body, info, prefix + node.name + ".")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[prefix + node.name] = self._function_from_text(node, cls)
                backing = _property_backing(node) if cls is not None else None
                if backing is not None:  # `@property def worker(self): return self._worker`
                    cls.setdefault("properties", {})[node.name] = backing
                if cls is not None and node.returns is not None and is_property(node):
                    # `@property def end_ids(self) -> frozenset[int]`: read as a field.
                    kind = self.value_kind(node.returns)
                    if kind == "host":
                        cls["fields"].setdefault(
                            node.name, "python" if _python_typed(node.returns) else "host")
                made = classes_made_in(node)
                if made:  # a factory's class (`class Builder(base_cls):` in a function)
                    self._index(made, None, prefix + node.name + ".")
                    for made_class in made:
                        self.classes[prefix + node.name + "." + made_class.name]["made"] = 1
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for attr in ("body", "orelse", "finalbody"):
                    self._index(getattr(node, attr, []) or [], cls, prefix)
                for handler in getattr(node, "handlers", []) or []:
                    self._index(handler.body, cls, prefix)

    def _host_arguments(self, node: ast.FunctionDef | ast.AsyncFunctionDef,
                        types: dict[str, str]) -> list[list[Any]]:
        """The calls of a function that pass a host value (``x_cpu``, ``t.cpu()``,
        ``t.numpy()``) as an argument: [callee ref, positions, keywords]. A tensor
        parameter a caller fills with a host value is not taken to be on the GPU."""
        out: list[list[Any]] = []
        first, last = node.lineno, node.end_lineno or node.lineno
        if not _HOST_HINT.search("\n".join(self.lines[first - 1:last])):
            return out  # no host-looking argument can be spelled: no walk
        for call in fast_walk(node):
            if not isinstance(call, ast.Call) or not (call.args or call.keywords):
                continue
            positions = [i for i, a in enumerate(call.args) if _host_argument(a)]
            keywords = [k.arg for k in call.keywords if k.arg and _host_argument(k.value)]
            if not (positions or keywords):
                continue
            dotted = _dotted(call.func)
            if dotted is None:
                continue
            ref = self._text_ref(dotted, types, False)
            if ref is not None:
                out.append([ref, positions, keywords])
            if len(out) >= 64:
                break
        return out

    def _function_from_text(self, node: ast.FunctionDef | ast.AsyncFunctionDef,
                            cls: dict[str, Any] | None) -> dict[str, Any]:
        """A function's summary, with the names the function imports itself (`from pkg.ops
        import helper` in its body, common against import cycles) qualified as well."""
        first, last = node.lineno, node.end_lineno or node.lineno
        if not any("import " in line for line in self.lines[first - 1:last]):
            return self._function_summary(node, cls)
        local = [n for n in fast_walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))]
        if not local:
            return self._function_summary(node, cls)
        module_imports = self.imports
        self.imports = dict(module_imports)
        try:
            self._imports(local)  # type: ignore[arg-type]
            return self._function_summary(node, cls)
        finally:
            self.imports = module_imports

    def _function_summary(self, node: ast.FunctionDef | ast.AsyncFunctionDef,
                          cls: dict[str, Any] | None) -> dict[str, Any]:
        """A function's summary: types from its statements, calls from its lines."""
        types: dict[str, str] = {}
        args = node.args
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            typ = self._type_of(arg.annotation)
            if typ:
                types[arg.arg] = typ
        first = node.body[0].lineno if node.body else node.lineno
        last = node.end_lineno or node.lineno
        # Per line of the body: 0 plain, 1 in a loop, 2 behind a guard (skipped).
        flags = [0] * (last - first + 1)
        # Per line: the block of an `if` on a call of a project function (`if
        # use_reference(device):`) that the line is in, as (block, 2 for its body or 3 for its
        # `else`): whether that function tests for another platform or a switch is known
        # only in the link, so the calls there are kept apart (see ``pred_blocks``).
        pred_at: list[tuple[int, int] | None] = [None] * len(flags)
        predicates: list[tuple[str, bool]] = []

        def mark(stmts: list[ast.stmt], value: int) -> None:
            if stmts:
                for number in range(stmts[0].lineno, (stmts[-1].end_lineno or 0) + 1):
                    if 0 <= number - first < len(flags) and flags[number - first] < value:
                        flags[number - first] = value

        stack: list[ast.stmt] = list(node.body)
        _mark_after_guard(node.body, mark)
        optional = optional_parameters(node)
        self_returns: list[ast.Return] = []
        returned_values: list[ast.expr | None] = []
        while stack:
            stmt = stack.pop()
            if isinstance(stmt, ast.Return):
                returned_values.append(stmt.value)
            if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Attribute) and \
                    isinstance(stmt.value.value, ast.Name) and stmt.value.value.id == "self":
                self_returns.append(stmt)  # `return self.forward_cuda`: a bound method
            if isinstance(stmt, ast.If):
                quiet_body, quiet_else = guard_of(stmt.test)
                fallback = _fallback_guard(stmt, optional)
                quiet_body, quiet_else = quiet_body or fallback[0], quiet_else or fallback[1]
                # A block that fills a cache once (`if self._mask is None: self._mask =
                # make_mask()`) runs on the first step only: what it calls is not hot.
                quiet_body = quiet_body or error_only(stmt.body) or (
                    _once_guard(stmt) and not (cls is not None and cls.get("values")))
                quiet_else = quiet_else or error_only(stmt.orelse)
                if quiet_body:
                    mark(stmt.body, 2)
                if quiet_else:
                    mark(stmt.orelse, 2)
                if not (quiet_body or quiet_else):
                    tested = _predicate_call(stmt.test)
                    ref = self._text_ref(tested[0], types, False) if tested else None
                    if ref is not None and ref.startswith("Q:"):
                        predicates.append((ref, tested[1]))  # type: ignore[index]
                        for block, part in ((stmt.body, 2), (stmt.orelse, 3)):
                            if block:
                                for number in range(block[0].lineno,
                                                    (block[-1].end_lineno or 0) + 1):
                                    if 0 <= number - first < len(flags):
                                        pred_at[number - first] = (len(predicates) - 1, part)
            elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                mark(stmt.body, 1)
            elif isinstance(stmt, ast.Try):
                for handler in stmt.handlers:  # runs when something failed
                    mark(handler.body, 2)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                self._note_types(stmt, types, cls)
            for field in ("body", "orelse", "finalbody"):
                block = getattr(stmt, field, None)
                if isinstance(block, list):
                    stack.extend(b for b in block if isinstance(b, ast.stmt))
                    _mark_after_guard(block, mark)
            for holder in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
                stack.extend(holder.body)
        calls: list[str] = []
        loop_calls: list[str] = []
        seen: set[str] = set()
        # The calls of each predicate block, its body's and its `else`'s.
        held: list[tuple[list[str], list[str]]] = [([], []) for _ in predicates]
        block: tuple[int, int] | None = None

        def add(ref: str) -> None:
            if block is not None:
                kept = held[block[0]][block[1] - 2]
                if ref not in kept:
                    kept.append(ref)
            elif ref not in seen:
                seen.add(ref)
                calls.append(ref)
        # A decorator of the project (`@maybe_transfer_kv_layer`) wraps every call: what its
        # wrapper calls runs with the function.
        for decorator in node.decorator_list:
            dotted = _dotted(decorator.func if isinstance(decorator, ast.Call) else decorator)
            ref = self._text_ref(dotted, {}, False) if dotted else None
            if ref is not None and ref.startswith("Q:") and ref not in seen:
                seen.add(ref)
                calls.append(ref)
        reads: set[str] = set()  # attributes read, not called: a property runs its getter
        for offset, flag in enumerate(flags):
            if flag == 2:
                continue
            line = self.lines[first - 1 + offset] if first - 1 + offset < len(self.lines) else ""
            block = pred_at[offset]
            if "." in line and len(reads) < MAX_PROPERTY_READS:
                for match in _READ.finditer(line.split("#", 1)[0] if "#" in line else line):
                    head, name = match.group(1), match.group(2)
                    if "_" in name.strip("_"):
                        # `meta.decode_metadata` of an annotated `meta`: that class's getter.
                        reads.add(f"{name}@{types[head]}" if head in types else name)
            if "self." in line or "cls." in line:
                code = line.split("#", 1)[0] if "#" in line else line
                for match in _CALLBACK.finditer(code):
                    ref = self._text_ref(match.group(1), types, False)
                    if ref is not None:
                        add(ref)
            if "(" not in line:
                continue
            code = line.split("#", 1)[0] if "#" in line else line
            for match in _CALL.finditer(code):
                on_super = match.group(1) is None
                dotted = match.group(2) if on_super else match.group(1)
                head = dotted.split(".", 1)[0]
                if head in _KEYWORDS or (match.start() >= 4 and code[:match.start()].rstrip()
                                         .endswith(("def", "class"))):
                    continue
                ref = self._text_ref(dotted, types, on_super)
                if ref is None:
                    continue
                add(ref)
                if flag == 1 and ref not in loop_calls:
                    loop_calls.append(ref)
            if "()." in code:
                for match in _CHAINED_CALL.finditer(code):
                    qual = self.qualify(match.group(1)) if not match.group(1).startswith(
                        ("self.", "cls.")) else None
                    ref = f"T:(){qual}:{match.group(2)}" if qual else None
                    if ref is not None:
                        add(ref)
        out: dict[str, Any] = {"line": node.lineno, "calls": calls, "loop_calls": loop_calls}
        blocks = [[ref, int(negated), [c for c in body if c not in seen],
                   [c for c in orelse if c not in seen]]
                  for (ref, negated), (body, orelse) in zip(predicates, held)]
        blocks = [b for b in blocks if b[2] or b[3]]
        for extra in blocks[MAX_PRED_BLOCKS:]:  # beyond the bound: plain calls
            calls.extend(c for c in (*extra[2], *extra[3]) if c not in calls)
        if blocks:
            out["pred_blocks"] = blocks[:MAX_PRED_BLOCKS]
        predicate = _predicate_of(node)
        if predicate is not None:
            out["predicate"] = predicate
        if cls is not None and is_property(node):
            out["property"] = 1
        if reads:
            out["reads"] = sorted(reads)[:MAX_PROPERTY_READS]
        # What a dispatcher returns off guarded (other-platform, debug) branches.
        returned = sorted({r.value.attr for r in self_returns  # type: ignore[union-attr]
                           if 0 <= r.lineno - first < len(flags) and flags[r.lineno - first] != 2})
        if returned:
            out["self_returns"] = returned
        if node.decorator_list:
            if memoised(node):
                out["memo"] = True  # runs once per distinct arguments: never hot
        if captures_graph(node):
            out["memo"] = True  # runs once per captured graph: never hot
        positional = [*args.posonlyargs, *args.args]
        tensors = [[i, a.arg] for i, a in enumerate(positional)
                   if a.annotation is not None and self.value_kind(a.annotation) == "tensor"]
        tensors += [[-1, a.arg] for a in args.kwonlyargs
                    if a.annotation is not None and self.value_kind(a.annotation) == "tensor"]
        if tensors:
            out["tensor_params"] = tensors
        hints = self._host_arguments(node, types)
        if hints:
            out["host_args"] = hints
        body_text = "\n".join(self.lines[first - 1:last])
        guards = sorted(p for p in optional if p in body_text and "None" in body_text and
                        _none_test(p).search(body_text))
        if guards:
            out["none_guards"] = guards  # `if p is None:` of a parameter `p=None`
        flags = sorted(p for p in _flag_parameters(node) if p in body_text and
                       "if" in body_text and _flag_test(p).search(body_text))
        if flags:
            out["flag_guards"] = flags  # `if not p:` of a parameter `p: bool = False`
        passed = _passed_keywords(body_text, optional | _flag_parameters(node))
        if passed:
            _drop_left_out(node, passed)
        if passed:
            out["passes"] = passed
        returns = self.value_kind(node.returns)
        if returns == "tensor" and returned_values and all(map(_python_number, returned_values)):
            returns = "host"  # `-> torch.Tensor` over `return total.item()`: the code wins
        if returns:
            out["returns"] = returns
        elif node.returns is not None:
            made = self._type_of(node.returns)  # `-> BaseDispatcher`: what a factory makes
            if made:
                out["returns_class"] = made
        return out

    def _field_kind(self, stmt: ast.AnnAssign) -> str | None:
        """What a field's annotation declares: tensor, cpu, host, python or mapping."""
        kind = self._mapping_values(stmt.annotation) or self.value_kind(stmt.annotation)
        if kind == "host" and _python_typed(stmt.annotation):
            kind = "python"  # `next_ids: List[int]`: no tensor method
        if kind == "tensor" and host_comment(self.lines, stmt.end_lineno or 0):
            kind = "cpu"  # `prompt_lens: torch.Tensor  # CPU tensor`
        return kind

    def _note_types(self, stmt: ast.Assign | ast.AnnAssign, types: dict[str, str],
                    cls: dict[str, Any] | None) -> None:
        value = stmt.value
        typ = self._constructed(value)
        if isinstance(stmt, ast.AnnAssign):
            typ = self._type_of(stmt.annotation) or typ
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if value is not None and _host_copy(value):
            # Only a field moved in place (`out.lp = out.lp.tolist()`): a host copy put in
            # another object's field of the same name (`meta.seq_lens =
            # batch.seq_lens.tolist()`) says nothing of the field it was copied from.
            copied = _dotted(_copied_value(value))  # type: ignore[arg-type]
            for t in targets:
                if not isinstance(t, ast.Attribute) or copied is None or _dotted(t) != copied:
                    continue
                if cls is not None and isinstance(t.value, ast.Name) and t.value.id == "self":
                    # A class moving its own field says nothing of other classes' fields
                    # of the same name.
                    cls["fields"][t.attr] = "moved"
                elif cls is not None and isinstance(t.value, ast.Attribute) and \
                        isinstance(t.value.value, ast.Name) and t.value.value.id == "self":
                    # `self.out.ids = copy(self.out.ids)`: a field of the class `self.out`
                    # holds (the link resolves it; unresolved, the name is moved anywhere).
                    moves = cls.setdefault("moves", {}).setdefault(t.value.attr, [])
                    if t.attr not in moves:
                        moves.append(t.attr)
                else:
                    self.moved.add(t.attr)
        for target in targets:
            if isinstance(target, ast.Name):
                if typ:
                    types[target.id] = typ
                elif isinstance(value, ast.Name) and value.id in types:
                    types[target.id] = types[value.id]
            elif cls is not None and isinstance(target, ast.Attribute) and \
                    isinstance(target.value, ast.Name) and target.value.id == "self":
                if not (isinstance(value, ast.Constant) and value.value is None):
                    # `self.mask = out.mask.to_cpu_nonblocking()`: a host copy, and only
                    # that (see ``Linker.host_copy_attr``); anything else set there spoils it.
                    copies = cls.setdefault("copies", {})
                    copies[target.attr] = copies.get(target.attr, True) and _host_copy(value)
                made = self._allocated_kind(value)
                if made is not None:  # `self.req_to_token = torch.zeros(..., device=device)`
                    cls["fields"].setdefault(target.attr, made)
                if isinstance(stmt, ast.AnnAssign):  # `self.buf: Optional[Tensor] = None`
                    kind = self._field_kind(stmt)
                    if kind:
                        cls["fields"].setdefault(target.attr, kind)
                found = typ or (types.get(value.id) if isinstance(value, ast.Name) else None)
                if found:
                    known = cls["attrs"].get(target.attr)
                    # A class the code builds (`self.x = Proposer()`) wins over a factory's
                    # return annotation (`self.x = get_proposer()`), wherever each is.
                    if known is None or (known.startswith("()") and not found.startswith("()")):
                        cls["attrs"][target.attr] = found
                elif isinstance(value, ast.Constant) and isinstance(
                        value.value, (bool, int, float, str)) and \
                        not isinstance(stmt, ast.AnnAssign):
                    # `self.is_prefilling = True`: a Python value, whatever other classes
                    # declare under the same name.
                    cls["fields"].setdefault(target.attr, "host")
                elif isinstance(value, ast.Attribute) and \
                        isinstance(value.value, ast.Name) and value.value.id == "self":
                    aliases = cls.setdefault("aliases", {}).setdefault(target.attr, [])
                    if value.attr not in aliases:
                        aliases.append(value.attr)
                elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
                        value.func.id.lstrip("_")[:1].isupper() and \
                        self.qualify(value.func.id) is None:
                    # `self.worker = WorkerClass(...)`, a class chosen at run time: a call
                    # on it may reach any of the project's implementations of the method.
                    dynamic = cls.setdefault("dynamic", [])
                    if target.attr not in dynamic:
                        dynamic.append(target.attr)
                elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                        and isinstance(value.func.value, ast.Name) and \
                        value.func.value.id == "self":
                    # `self._forward = self.dispatch()`: the methods `dispatch` returns.
                    aliases = cls.setdefault("aliases", {}).setdefault(target.attr, [])
                    if "()" + value.func.attr not in aliases:
                        aliases.append("()" + value.func.attr)

    def _allocated_kind(self, value: ast.expr | None) -> str | None:
        """What a torch factory given a device makes: "cpu" on the host (`device="cpu"`,
        pinned), "tensor" on a device it names (a variable: the default device decides);
        None for anything else, and for a factory without a device (a module may be built
        under `with torch.device(...)`)."""
        if not isinstance(value, ast.Call) or not value.keywords:
            return None
        from reviewbot.analysis.gpu import TORCH_FACTORIES

        qual = self.qualify(_dotted(value.func) or "") or ""
        if not qual.startswith("torch.") or qual.rpartition(".")[2] not in TORCH_FACTORIES:
            return None
        keywords = {k.arg: k.value for k in value.keywords if k.arg}
        pinned = keywords.get("pin_memory")
        if isinstance(pinned, ast.Constant) and pinned.value is True:
            return "cpu"
        device = keywords.get("device")
        if device is None:
            return None
        if isinstance(device, ast.Constant):
            return "cpu" if device.value == "cpu" else "tensor" if isinstance(
                device.value, str) and device.value.startswith("cuda") else None
        return "tensor"

    def _text_ref(self, dotted: str, types: Mapping[str, str], on_super: bool) -> str | None:
        """The call reference (`S:`, `A:`, `T:`, `Q:`, `F:`, `M:`) of a dotted callee."""
        parts = dotted.split(".")
        if on_super:
            return f"S:{parts[-1]}"
        if len(parts) == 1:
            qual = self.qualify(parts[0])
            return f"Q:{qual}" if qual else None
        head, name = parts[0], parts[-1]
        if head in ("self", "cls"):
            if len(parts) == 2:
                return f"S:{name}"
            if len(parts) == 3:
                return f"A:{parts[1]}:{name}"
            return f"M:{name}:{parts[-2]}"
        if len(parts) == 2 and head in types:
            return f"T:{types[head]}:{name}"
        qual = self.qualify(".".join(parts[:-1])) if head not in types else None
        if qual:
            if qual.startswith("torch.ops."):
                return f"F:{name}"
            return f"Q:{qual}.{name}"
        return f"M:{name}:{parts[-2]}"  # with the receiver's name, to choose among classes


def _mark_after_guard(block: list[ast.stmt], mark: Callable[[list[ast.stmt], int], None]
                      ) -> None:
    """``if not envs.DEBUG_METRICS.get(): return`` in a block: the rest of it runs only
    behind the guard, so what it calls is not hot (as the module's own analysis reads it,
    see ``_returns_early_unless_guarded``)."""
    for index, stmt in enumerate(block[:-1]):
        if isinstance(stmt, ast.If) and _returns_early_unless_guarded(stmt):
            mark(block[index + 1:], 2)
            return


def _predicate_call(test: ast.expr) -> tuple[str, bool] | None:
    """The dotted callee of a test that is one call (``use_reference(x.device)``), and
    whether the test negates it (``not ...``)."""
    negated = False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, True
    if not isinstance(test, ast.Call):
        return None
    dotted = _dotted(test.func)
    return (dotted, negated) if dotted else None


def _predicate_of(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int] | None:
    """For a function whose body returns one test (``return device.type != "cuda"``,
    ``return envs.USE_REF.get()``), whether an ``if`` on its call runs its body, and its
    ``else``, only off the per-step CUDA path (``guard_of`` of that test), as two 0/1
    flags; None for any other function, or a test that says neither."""
    body = [stmt for stmt in node.body if not (
        isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    quiet_body, quiet_else = guard_of(body[0].value)
    return [int(quiet_body), int(quiet_else)] if quiet_body or quiet_else else None


@functools.lru_cache(maxsize=4096)
def _none_test(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.]){re.escape(name)}\s+is\s+(?:not\s+)?None\b")


@functools.lru_cache(maxsize=4096)
def _flag_test(name: str) -> re.Pattern[str]:
    # `if not p:` and the conditional expression `a if p else b`.
    return re.compile(rf"(?<![\w.])if\s+(?:not\s+)?{re.escape(name)}\s*(?::|else\b)")


def _flag_parameters(func: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """The parameters of a function that default to True or False."""
    spec = func.args
    positional = [*spec.posonlyargs, *spec.args]
    pairs = [*zip(positional[len(positional) - len(spec.defaults):], spec.defaults),
             *zip(spec.kwonlyargs, spec.kw_defaults)]
    return frozenset(a.arg for a, d in pairs
                     if isinstance(d, ast.Constant) and isinstance(d.value, bool))


# `f(x, seq_lens_cpu=lens_list)`: a keyword argument and the start of its value.
_KEYWORD_ARGUMENT = re.compile(r"[(,]\s*([A-Za-z_]\w*)\s*=(?!=)\s*([^,\n)]*)")
_DEFINITE_VALUE = re.compile(r"(?:[-+0-9\"'\[({~]|(?:True|False)\b|[A-Za-z_][\w.]*\s*\()")
_NAME_VALUE = re.compile(r"[A-Za-z_]\w*")
_EQUALS_NONE = re.compile(r"=\s*None\b")
_NAME_BEFORE = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*(?::[^=\n]*)?$")


def _set_to_none(text: str) -> set[str]:
    """The names a text assigns None (``x = None``, ``x: T | None = None``)."""
    found: set[str] = set()
    for match in _EQUALS_NONE.finditer(text):
        at = match.start()
        if at and text[at - 1] in "=!<>":
            continue  # `== None`
        line_start = text.rfind("\n", 0, at) + 1
        name = _NAME_BEFORE.search(text, line_start, at)
        if name is not None:
            found.add(name.group(1))
    return found


def _open_call(text: str, at: int) -> int:
    """Where the innermost parenthesis still open at ``at`` opens (-1: none, or not found
    within 32 closed calls before it)."""
    end = at
    for _ in range(32):
        start = text.rfind("(", 0, end)
        if start < 0:
            return -1
        if text.count(")", start, at) <= text.count("(", start + 1, at):
            return start  # what opened after it closed before `at`, it did not
        end = start
    return -1


def _drop_left_out(node: ast.AST, passed: dict[str, str]) -> None:
    """Forget a keyword that another call of the same callee in the function leaves out
    (``f(x, host=h)`` here, ``f(x)`` there: the callee may get None)."""
    callees = {key.partition(":")[0] for key in passed}
    for call in fast_walk(node):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else None
        if name not in callees:
            continue
        given = {k.arg for k in call.keywords}
        if None in given:
            continue  # `f(**options)`: may pass anything
        for key in [k for k in passed if k.partition(":")[0] == name]:
            if key.partition(":")[2] not in given:
                del passed[key]


def _switch_text(value: str) -> bool:
    """Whether an argument's text is a test that holds only off the per-step CUDA path (a
    debug or environment switch, another platform: ``guard_of``): a flag passed so is
    false on the usual path, as if the caller passed False."""
    if not value or not any(c.isalpha() for c in value):
        return False
    try:
        expr = ast.parse(value, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return False
    return not isinstance(expr, ast.Constant) and guard_of(expr) == (True, False)


def _switch_local(text: str, name: str) -> bool:
    """Whether every assignment of a local name in a function's text is such a switch
    (``check = ps > 1 and self.pool.debug_mode``), and there is one."""
    # Not a keyword argument on a line of its own (`    check=check,`).
    values = [v for v in _assignment(name).findall(text) if not v.rstrip().endswith(",")]
    return bool(values) and all(_switch_text(v.strip()) for v in values)


@functools.lru_cache(maxsize=4096)
def _assignment(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?m)^[ \t]*{re.escape(name)}[ \t]*(?::[^=\n]*)?=(?!=)([^\n]*)$")


def _passed_keywords(text: str, params: frozenset[str]) -> dict[str, str]:
    """The keyword arguments a function's calls pass, as "callee:name" (the callee's last
    name), with a value that is not None: a literal, a display, a call, or a local name
    never set to None ("" for those; "T" and "F" for True and False), or one of its own
    ``p=None`` (or flag) parameters passed on ("=p": known when its own callers pass it).
    An attribute, ``getattr``, a name set to None, a conditional: maybe None."""
    if "=" not in text:
        return {}
    out: dict[str, str] = {}
    maybe: set[str] = set()
    set_to_none: list[set[str]] = []  # the names the text sets to None, once asked for
    for number, match in enumerate(_KEYWORD_ARGUMENT.finditer(text)):
        if number >= 1024:
            break  # a generated table of calls: enough is known
        start = _open_call(text, match.start() + 1)
        if start < 0:
            continue
        end = start
        while end > 0 and text[end - 1] in " \t":
            end -= 1
        begin = end
        while begin > 0 and (text[begin - 1].isalnum() or text[begin - 1] == "_"):
            begin -= 1
        if begin == end or text[begin].isdigit():
            continue  # `(a, b=1)` is no call
        key = f"{text[begin:end]}:{match.group(1)}"
        if key in maybe:
            continue
        value = match.group(2).strip()
        verdict: str | None = None
        if " if " in value or value.startswith(("None", "getattr(", "kwargs", "**")):
            verdict = None
        elif value in ("True", "False"):
            verdict = value[0]
        elif _switch_text(value):
            verdict = "F"  # `check=self.debug_mode`: false on the usual path
        elif _NAME_VALUE.fullmatch(value):
            if value in params:
                verdict = "=" + value
            elif _switch_local(text, value):
                verdict = "F"  # `check = ps > 1 and self.debug_mode`, then `check=check`
            else:
                if not set_to_none:
                    set_to_none.append(_set_to_none(text) if "None" in text else set())
                if value not in set_to_none[0]:
                    verdict = ""
        elif _DEFINITE_VALUE.match(value) and ".get(" not in value:
            verdict = ""
        if verdict is None or out.get(key, verdict) != verdict:
            maybe.add(key)  # somewhere passed a value that may be None, or another one
            out.pop(key, None)
        else:
            out[key] = verdict
        if len(out) >= 64:
            break
    return out


_PYTHON_TYPES = frozenset({"list", "List", "tuple", "Tuple", "dict", "Dict", "set", "Set",
                           "Sequence", "Mapping", "Iterable", "int", "float", "bool"})


def _python_typed(annotation: ast.expr | None) -> bool:
    """An annotation naming only Python builtin values (``List[int]``, ``Optional[int]``):
    types with no ``.tolist()``, ``.item()`` or ``.cpu()`` (numpy arrays have some)."""
    annotation = _unquoted(annotation)
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        members = [m for m in _union_members(annotation)
                   if not (isinstance(m, ast.Constant) and m.value is None)]
        return bool(members) and all(_python_typed(m) for m in members)
    if isinstance(annotation, ast.Subscript):
        head = (_dotted(annotation.value) or "").rsplit(".", 1)[-1]
        if head == "Optional":
            return _python_typed(annotation.slice)
        return head in _PYTHON_TYPES
    return (_dotted(annotation) or "") in _PYTHON_TYPES


def _union_members(annotation: ast.expr) -> list[ast.expr]:
    """The members of ``A | B | C``."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return [*_union_members(annotation.left), *_union_members(annotation.right)]
    return [annotation]


def _container(annotation: ast.expr) -> bool:
    """``list[...]``, ``List[...]``, ``tuple``, ``Sequence[...]``: a Python container."""
    target = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return (_dotted(target) or "").rsplit(".", 1)[-1] in (
        "list", "List", "tuple", "Tuple", "Sequence")


def _python_number(value: ast.expr | None) -> bool:
    """A returned expression that is a Python number or list whatever its operands are:
    ``t.item()``, ``t.tolist()``, ``int(...)``, ``len(...)``, a numeric constant."""
    if isinstance(value, ast.Constant):
        return isinstance(value.value, (int, float)) and not isinstance(value.value, bool)
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Attribute):
        return func.attr in ("item", "tolist") and not value.args
    return isinstance(func, ast.Name) and func.id in ("int", "float", "len")


def summarise(text: str, module: str, is_package: bool = False) -> dict[str, Any] | None:
    """The summary of a module's source, or None when it does not parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        return _Summariser(tree, module, is_package, text).summary()
    except RecursionError:
        return None


# Folder and file names of code for another accelerator than CUDA (a backend's own tree).
OTHER_PLATFORM_PARTS = frozenset({"npu", "xpu", "hpu", "tpu", "mlx", "mps", "rocm", "hip",
                                  "mlu", "musa", "neuron", "ascend", "gaudi", "habana",
                                  "aiter", "amd"})


def other_platform_path(rel: str) -> bool:
    """Whether a file's path names another accelerator: a folder or file name that is one
    (``hardware_backend/npu/``, ``tpu_model_runner.py`` by its first part), not a word
    inside a name (``hipflash.py`` is not); or a CPU-backend, test or benchmark folder."""
    if off_path(rel):
        return True  # the CPU backend's own folder (`ops/cpu/`), tests, benchmarks
    parts = rel.removesuffix(".py").split("/")
    words = parts[-1].split("_")
    if _PLATFORM_WORDS.intersection(words) and not _MOVES_DATA.intersection(words):
        return True  # a backend's module (`cpu_attn.py`, `intel_amx_backend.py`, `x_hip.py`)
    return any(part in OTHER_PLATFORM_PARTS or part.split("_", 1)[0] in OTHER_PLATFORM_PARTS
               for part in parts)


def off_path(rel: str) -> bool:
    """Whether a file is in a CPU-backend, test or benchmark folder, or is a test module:
    code that never runs in a CUDA engine's serving steps, so no hot path starts there."""
    parts = rel.removesuffix(".py").split("/")
    return any(part in OFF_PATH_FOLDERS for part in parts[:-1]) or \
        parts[-1].startswith("test_") or parts[-1] == "conftest"


def vendored_path(rel: str) -> bool:
    """Whether a file is in a folder of code copied in from another project
    (``vllm/third_party/``, ``_vendor/``): its author does not review it in this project's
    pull requests, and much of it is never reached here, so no finding is made there."""
    return any(part.lower() in VENDORED_FOLDERS for part in rel.split("/")[:-1])


VENDORED_FOLDERS = frozenset({"third_party", "thirdparty", "third-party", "3rdparty", "vendor",
                              "vendored", "_vendor"})
# Folders of code that never runs in a CUDA engine's serving steps: the CPU backend's own
# implementations, tests (a test's model `forward` is not the engine's) and benchmarks
# (their loops call the engine's step and synchronise on purpose, to time it).
OFF_PATH_FOLDERS = frozenset({"cpu", "test", "tests", "testing", "benchmark", "benchmarks"})
# The project a run indexes --------------------------------------------------------------
ENGINES = ("vllm", "sglang")  # engines with a pack of their own, by package name


def engine_pack_names(config: Any, root: Path | None, files: Sequence[Path],
                      memo: "IndexCache | None" = None) -> list[str]:
    """The engine packs for a project that is (a package of that name at its top) or
    imports (``import vllm``, ``from sglang...``) an engine with a pack of its own.
    ``memo``: an index cache that remembers, per file of the same path, size, times and
    inode, which engines it imports, so that only new or edited files are read for it."""
    if not config.engine_packs or root is None:
        return []
    found = [name for name in ENGINES if name not in config.rule_packs and (
        (root / name / "__init__.py").is_file() or (root / "python" / name / "__init__.py").is_file()
        or (root / "src" / name / "__init__.py").is_file())]
    wanted = [name for name in ENGINES if name not in found and name not in config.rule_packs]
    if not wanted:
        return found
    import re

    from reviewbot.source import UnreadableSource, read_bytes

    needles = {name: re.compile(rb"^[ \t]*(?:import|from)[ \t]+" + name.encode() + rb"\b",
                                re.MULTILINE) for name in wanted}
    salt = f"{wanted}\0{config.max_file_size}\0"
    known = memo.engine_files(salt) if memo is not None and memo.file is not None else None
    seen: dict[str, list[str]] = {}
    recent = time.time_ns() - 2_000_000_000
    imported: set[str] = set()
    for path in files:
        stamp = _stat_stamp(path, recent) if known is not None else None
        hits = known.get(stamp) if known is not None and stamp is not None else None
        if hits is None:
            try:
                # Regular files only (never waits on a pipe), within the size limit.
                data = read_bytes(str(path), config.max_file_size)
            except UnreadableSource:
                continue
            hits = [name for name, needle in needles.items()
                    if name.encode() in data and needle.search(data)]
        if stamp is not None:
            seen[stamp] = hits
        imported.update(hits)
        if known is None and len(imported) == len(wanted):
            break  # nothing to remember: every engine is found
    if known is not None and memo is not None:
        memo.set_engine_files(salt, seen)
    return found + [name for name in wanted if name in imported]


def _stat_stamp(path: Path, recent: int) -> str | None:
    """A short digest of a file's path, size, times and inode (None when it cannot be
    stat'ed, or was modified at or after ``recent``, within the file system's clock)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if info.st_mtime_ns >= recent or info.st_ctime_ns >= recent:
        return None
    return hashlib.blake2b(f"{path}\0{info.st_dev}\0{info.st_ino}\0{info.st_size}\0"
                           f"{info.st_mtime_ns}\0{info.st_ctime_ns}".encode(),
                           digest_size=8).hexdigest()


def project_index_files(files: Sequence[Path], config: Any, cwd: Path,
                        given: Sequence[str] = (), enabled: Iterable[str] | None = None,
                        ) -> tuple[Path | None, list[Path]]:
    """The project the checked files belong to and every Python file in it (the index),
    when a rule that reads project facts is on (in ``config``, or among ``enabled``: what
    the files' own configurations enable); links out of the project are left out."""
    from reviewbot import registry
    from reviewbot.discovery import discover

    codes = set(config.enabled if enabled is None else enabled)
    if not files or not any(r.project_facts and r.code in codes for r in registry.RULES):
        return None, []
    from reviewbot.discovery import inside

    root = project_root(files)
    try:
        real_root = root.resolve()
    except (OSError, RuntimeError):
        return None, []
    # Folder links are not followed by discovery: only a file link can lead outside.
    if any(Path(os.path.abspath(cwd / p)) == root for p in given):
        found = list(files)  # the root itself was checked: its files are the project's
    else:
        found = discover([str(root)], config, cwd=cwd)
    return root, [path for path in found if inside(path, (real_root,))]


# The index ------------------------------------------------------------------------------
@dataclass
class ModuleEntry:
    """One module of the project."""

    name: str
    rel: str  # path relative to the project root (POSIX)
    digest: str
    summary: dict[str, Any] | None
    # A hash of what the link reads of the summary (all of it but line numbers): an edit
    # that leaves it as it was (a comment, a docstring, a changed constant) links the same
    # project. Empty: not known, so the content digest stands for it.
    link_key: str = ""


@dataclass
class ProjectIndex:
    """Every module of a project, summarised."""

    root: Path
    modules: dict[str, ModuleEntry] = field(default_factory=dict)  # module name -> entry
    by_rel: dict[str, ModuleEntry] = field(default_factory=dict)
    summarised: int = 0  # summaries computed (not taken from the cache) in this run

    def add(self, entry: ModuleEntry) -> None:
        """Add one module (the first file of a module name wins)."""
        self.modules.setdefault(entry.name, entry)
        self.by_rel[entry.rel] = entry


def inert_functions(summary: Any) -> list[str]:
    """The module-level functions of a summary that call nothing and carry no fact (``def
    fmt(x): return str(x)``): the link reads nothing from them, so one added or removed
    links nothing again, unless the last link saw its name spelled or the packs name it
    an entry point (see ``IndexCache.inert_changes_unseen``)."""
    functions = summary.get("functions") if isinstance(summary, dict) else None
    if not isinstance(functions, dict):
        return []
    return [name for name, info in functions.items()
            if isinstance(info, dict) and not name.startswith("__") and "." not in name
            and not info.get("calls") and not info.get("loop_calls")
            and set(info) <= _INERT_KEYS]


_INERT_KEYS = frozenset({"line", "calls", "loop_calls"})
_WORD = re.compile(r"[A-Za-z_]\w*")


def referenced_names(summary: Any) -> set[str]:
    """The names a summary's values spell (its calls, imports, aliases...): what an inert
    function's name must not be for the last link to hold without it."""
    found: set[str] = set()
    stack = [summary]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found.update(_WORD.findall(value))
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return found


def link_key(summary: Any) -> str:
    """The hash of a summary without its line numbers (see ``ModuleEntry.link_key``) and
    without its inert functions."""
    if not isinstance(summary, dict):
        return "unparsed"
    plain = dict(summary)
    inert = set(inert_functions(summary))
    for part in ("classes", "functions"):
        if isinstance(plain.get(part), dict):
            plain[part] = {name: {k: v for k, v in info.items() if k != "line"}
                           if isinstance(info, dict) else info
                           for name, info in plain[part].items()
                           if part == "classes" or name not in inert}
    text = json.dumps(plain, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def digest_of(data: bytes) -> str:
    """The content hash a summary is cached under."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class IndexCache:
    """Summaries by content hash (data only, never code), each file with a MAC made with the
    result cache's key, kept outside any checkout: a summary committed or edited by anyone
    without that key (to make a function look cold, say) is never believed.

    Three files: the index (each module's key and link key, and the link digests of the
    checked files), read by every run; the summaries, read only when the project is linked
    again; and the summaries made since, which a run that needs no link writes instead of
    rewriting them all. A key is a file's content hash and module name, so any copy of its
    summary is the right one, and one that is missing is made again."""

    def __init__(self, folder: Path | None) -> None:
        from reviewbot.cache import _is_link, signing_key

        self.file = None if folder is None else folder / f"index-v{SUMMARY_VERSION}.json"
        self._keys: dict[str, str] | None = None  # key -> link key, as the index holds them
        self._links: Any = None
        self._links_checked = False  # the recorded link was made or checked by this run
        self._engines: Any = None
        self._stored: dict[str, Any] | None = None  # key -> summary, read on first use
        self._recent: dict[str, Any] | None = None  # those of them made since a full write
        self.used: dict[str, str] = {}  # key -> link key, of the modules of this run
        self.fresh: dict[str, Any] = {}  # key -> summary, made in this run
        self.dirty = False
        self._facts: dict[str, Any] | None = None
        self.key = signing_key() if folder is not None else None
        if self.file is None or self.key is None or _is_link(folder):
            self.file = None

    @property
    def keys(self) -> dict[str, str]:
        """The index's keys, read on first use (a run the memo answers never reads them)."""
        if self._keys is None:
            self._keys = {}
            data = self._read_side(self.file, b"index\0")
            if isinstance(data, dict) and isinstance(data.get("keys"), dict):
                self._keys = {k: v for k, v in data["keys"].items()
                              if isinstance(k, str) and isinstance(v, str)}
                self._links = data.get("links")
                self._engines = data.get("engines")
        return self._keys

    def engine_files(self, salt: str) -> dict[str, list[str]]:
        """Which engines each file imports, by the stamp of the file (see
        ``engine_pack_names``), as recorded for the same engines sought."""
        self.keys  # noqa: B018 (read with the keys)
        record = self._engines
        if isinstance(record, dict) and record.get("salt") == salt and \
                isinstance(record.get("files"), dict):
            return {k: v for k, v in record["files"].items()
                    if isinstance(v, list) and all(isinstance(n, str) for n in v)}
        return {}

    def set_engine_files(self, salt: str, files: dict[str, list[str]]) -> None:
        """Record which engines each file imports (written by ``save``)."""
        self.keys  # noqa: B018
        record = {"salt": salt, "files": files}
        if record != self._engines:
            self._engines = record
            self.dirty = True

    def known(self, key: str) -> bool:
        """Whether the index holds a summary for a file's digest and module name (one that
        does not parse included); the summary itself is read only when asked for."""
        if key in self.used:
            return True
        linked = self.keys.get(key)
        if linked is None:
            return False
        self.used[key] = linked
        return True

    def get(self, key: str) -> Any:
        """The summary stored for a file's digest and module name (None when absent; a
        file that does not parse is stored as None too: see ``used``)."""
        if key in self.fresh:
            return self.fresh[key]
        if not self.known(key):
            return None
        stored = self.stored.get(key, _ABSENT)
        if stored is _ABSENT or not _valid_summary(stored):
            del self.used[key]  # lost or damaged: made again
            return None
        return stored

    @property
    def stored(self) -> dict[str, Any]:
        """Every stored summary (the summaries file, then those made since)."""
        if self._stored is None:
            data = self._read_side(self._summaries_file(), b"summaries\0")
            self._stored = data if isinstance(data, dict) else {}
            recent = self._read_side(self._recent_file(), b"recent\0")
            self._recent = recent if isinstance(recent, dict) else {}
            self._stored.update(self._recent)
        return self._stored

    def put(self, key: str, summary: Any) -> str:
        """Remember a fresh summary; returns its link key."""
        linked = link_key(summary)
        self.used[key] = linked
        self.fresh[key] = summary
        self.dirty = True
        return linked

    def link_key(self, key: str) -> str:
        """The link key of a summary the index holds ("" if none is)."""
        linked = self.used.get(key)
        return linked if isinstance(linked, str) and len(linked) == 32 else ""

    def link_facts(self, project_key: str) -> dict[str, Any] | None:
        """The linked facts (hot functions and devices) each checked file read, as the last
        run that linked this very project recorded them: a file edited without changing
        what the link reads is checked again with them, and no link is needed."""
        body = self._read_side(self._side("links"), b"links\0", as_bytes=True)
        if body is None:
            return None
        head, _, rest = body.partition(b"\n")
        try:
            if json.loads(head) != project_key:
                return None
        except ValueError:
            return None
        return _FileLines(rest)

    def set_link_facts(self, project_key: str, files: dict[str, Any]) -> None:
        """Record the linked facts of this run's checked files (written by ``save``): one
        line per file, so that a run reads only the lines of the files it checks again."""
        lines = [json.dumps(project_key).encode()]
        lines.extend(json.dumps(rel).encode() + b"\t" + json.dumps(value, separators=(",", ":")
                                                                  ).encode()
                     for rel, value in files.items())
        self._facts = b"\n".join(lines)  # type: ignore[assignment]

    def _side(self, kind: str) -> Path | None:
        return None if self.file is None else self.file.with_name(
            f"{kind}-v{SUMMARY_VERSION}.json")

    def _summaries_file(self) -> Path | None:
        return self._side("summaries")

    def _recent_file(self) -> Path | None:
        return self._side("summaries-recent")

    def _read_side(self, target: Path | None, domain: bytes, as_bytes: bool = False) -> Any:
        from reviewbot.cache import _is_link

        if target is None:
            return None
        try:
            if _is_link(target):
                return None
            with open(target, "rb") as handle:
                raw = handle.read(MAX_INDEX_BYTES + 1)
            header, _, body = raw.partition(b"\n")
            meta = json.loads(header) if len(raw) <= MAX_INDEX_BYTES else None
            if isinstance(meta, dict) and meta.get("version") == SUMMARY_VERSION and \
                    isinstance(meta.get("mac"), str) and \
                    hmac.compare_digest(meta["mac"], self._mac(domain + body)):
                return body if as_bytes else json.loads(body)
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            pass
        return None

    def _mac(self, body: bytes) -> str:
        assert self.key is not None
        return hmac.new(self.key, b"reviewbot-index\0" + body, "sha256").hexdigest()

    def links(self, project_key: str) -> dict[str, str] | None:
        """The digests of the linked facts each checked file read, when the last run that
        linked this very project (the same summaries and packs) recorded them."""
        self.keys  # noqa: B018 (read with the keys)
        record = self._links
        if isinstance(record, dict) and record.get("project") == project_key and \
                isinstance(record.get("digests"), dict):
            return record["digests"]
        return None

    def set_links(self, project_key: str, digests: dict[str, str],
                  referenced: Iterable[str] = (),
                  inert: Mapping[str, Iterable[str]] | None = None) -> None:
        """Record the facts' digests of this run's checked files, the names the
        project's summaries spell, and each module's inert functions (``inert_functions``:
        left out of the project key)."""
        self.keys  # noqa: B018 (a recorded one is replaced)
        self._links_checked = True
        self._links = {"project": project_key, "digests": digests,
                       # one string: read by every run, split only by one that needs it
                       "referenced": " ".join(sorted(referenced)),
                       "inert": {name: sorted(found) for name, found in (inert or {}).items()}}
        self.dirty = True

    def inert_changes_unseen(self, project_key: str,
                             is_entry: Callable[[str], bool] = lambda name: True) -> bool:
        """Whether the link recorded for this project holds for this run's summaries: the
        inert functions added or removed since (in the summaries made in this run) have
        names no summary spelled when it was made (else a call may now reach one), and
        none added is an entry point (``is_entry`` of its qualified name)."""
        self.keys  # noqa: B018 (read with the keys)
        record = self._links
        if not (isinstance(record, dict) and record.get("project") == project_key):
            return False
        if self._inert_agree(record, is_entry):
            self._links_checked = True
            return True
        return False

    def _inert_agree(self, record: Mapping[str, Any],
                     is_entry: Callable[[str], bool]) -> bool:
        referenced, inert = record.get("referenced"), record.get("inert")
        if not (isinstance(referenced, str) and isinstance(inert, dict)):
            return False
        seen: frozenset[str] | None = None
        for key, summary in self.fresh.items():
            module = key.partition(":")[2]
            before = inert.get(module, [])
            now = inert_functions(summary)
            if not isinstance(before, list):
                return False
            changed = set(now).symmetric_difference(before)
            if not changed:
                continue
            if seen is None:
                seen = frozenset(referenced.split())
            if changed & seen:
                return False
            if any(is_entry(f"{module}.{name}") for name in set(now) - set(before)):
                return False
        return True

    def save(self) -> None:
        """Write what this run made and used, atomically (unless nothing changed): all the
        summaries when many were made or dropped since they were last written in full, else
        only those made since."""
        if self.file is None:
            return
        if self.fresh and not self._links_checked:
            self.keys  # noqa: B018 (the recorded link is read with the keys)
        if self.fresh and not self._links_checked and isinstance(self._links, dict) and \
                not self._inert_agree(self._links, lambda name: True):
            # Summaries made without a link (`reviewbot explain`, a run without the project
            # rules): once stored they are not fresh, so a later run could not see that
            # their inert functions differ from the recorded link's. Drop it.
            self._links = None
            self.dirty = True
        facts, self._facts = self._facts, None
        if facts is not None:
            self._write(self._side("links"), facts, b"links\0")
        if not (self.dirty or self.used.keys() != self.keys.keys()):
            return
        recent = self._recent if self._recent is not None else \
            self._read_side(self._recent_file(), b"recent\0")
        recent = {k: v for k, v in recent.items() if k in self.used} \
            if isinstance(recent, dict) else {}
        recent.update((k, v) for k, v in self.fresh.items() if k in self.used)
        stale = 0 if self._stored is None else sum(k not in self.used for k in self._stored)
        if len(recent) > max(RECENT_SUMMARIES, len(self.used) // 8) or \
                stale > max(4 * RECENT_SUMMARIES, len(self.used) // 4):
            # Many summaries made since the last full write, or many no longer used.
            stored = self.stored
            every = {k: self.fresh[k] if k in self.fresh else stored.get(k)
                     for k in self.used if k in self.fresh or k in stored}
            if self._write(self._summaries_file(), every, b"summaries\0"):
                self._write(self._recent_file(), {}, b"recent\0")
        elif self.fresh:
            self._write(self._recent_file(), recent, b"recent\0")
        self._write(self.file, {"keys": self.used, "links": self._links,
                                "engines": self._engines}, b"index\0")

    def _write(self, target: Path | None, data: Any, domain: bytes) -> bool:
        from reviewbot.cache import _ensure_gitignore, _is_link, _write_atomic

        assert self.file is not None and target is not None
        folder = self.file.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if _is_link(folder):
                return False
            _ensure_gitignore(folder)
            body = data if isinstance(data, bytes) else \
                json.dumps(data, separators=(",", ":")).encode()
            header = json.dumps({"version": SUMMARY_VERSION,
                                 "mac": self._mac(domain + body)}).encode()
            _write_atomic(folder, target, header + b"\n" + body)
            return True
        except OSError:
            return False  # a cache that cannot be written is not an error


_ABSENT: Any = object()


class _FileLines:
    """Lines of ``"rel"<TAB>json``, each value decoded only when its file asks for it."""

    def __init__(self, body: bytes) -> None:
        self._lines: dict[str, bytes] = {}
        for line in body.split(b"\n"):
            name, tab, value = line.partition(b"\t")
            if tab:
                try:
                    rel = json.loads(name)
                except ValueError:
                    continue
                if isinstance(rel, str):
                    self._lines[rel] = value

    def get(self, rel: str) -> Any:
        value = self._lines.get(rel)
        if value is None:
            return None
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return None

    def __bool__(self) -> bool:
        return bool(self._lines)


def project_key(index: "ProjectIndex", packs: PackData) -> str:
    """What the link phase's output depends on: every module's summary, the packs, and
    reviewbot's own code (a new link phase must not reuse the facts an old one recorded)."""
    from reviewbot.cache import code_fingerprint

    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{SUMMARY_VERSION}\0{code_fingerprint()}\0{packs!r}".encode())
    for name in sorted(index.modules):
        entry = index.modules[name]
        digest.update(f"\0{name}\0{entry.rel}\0{entry.link_key or entry.digest}".encode())
    for rel in sorted(index.by_rel):
        other = index.by_rel[rel]
        digest.update(f"\0{rel}\0{other.link_key or other.digest}".encode())
    return digest.hexdigest()


def _property_backing(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The attribute a property only hands out: ``_worker`` for ``@property def worker(self):
    return self._worker`` (a docstring before the return is allowed), else None."""
    if not any(_dotted(d) in ("property", "functools.cached_property", "cached_property")
               for d in node.decorator_list):
        return None
    body = node.body[1:] if node.body and isinstance(node.body[0], ast.Expr) and \
        isinstance(node.body[0].value, ast.Constant) else node.body
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    value = body[0].value
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and \
            value.value.id == "self" and value.attr != node.name:
        return value.attr
    return None


def _valid_summary(value: Any) -> bool:
    """A cached summary has the shape this version writes (anything else is recomputed)."""
    if value is None:
        return True  # a file that does not parse
    if not isinstance(value, dict):
        return False
    imports, classes, functions = value.get("imports"), value.get("classes"), value.get("functions")
    if not (isinstance(imports, dict) and isinstance(classes, dict) and isinstance(functions, dict)):
        return False
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in imports.items()):
        return False
    if not isinstance(value.get("names"), list):
        return False
    for info in classes.values():
        if not (isinstance(info, dict) and isinstance(info.get("bases"), list)
                and isinstance(info.get("attrs"), dict)
                and isinstance(info.get("dynamic", []), list)
                and all(isinstance(n, str) for n in info.get("dynamic", []))
                and isinstance(info.get("copies", {}), dict)
                and all(isinstance(v, bool) for v in info.get("copies", {}).values())
                and isinstance(info.get("properties", {}), dict)
                and all(isinstance(k, str) and isinstance(v, str)
                        for k, v in info.get("properties", {}).items())):
            return False
    for info in functions.values():
        if not (isinstance(info, dict) and isinstance(info.get("calls"), list)
                and isinstance(info.get("loop_calls"), list) and isinstance(info.get("line"), int)
                and all(isinstance(n, str) for n in info.get("self_returns", ()))):
            return False
        blocks = info.get("pred_blocks", [])
        if not (_flag_pair(info.get("predicate", [0, 0])) and isinstance(blocks, list) and all(
                isinstance(b, list) and len(b) == 4 and isinstance(b[0], str) and b[1] in (0, 1)
                and isinstance(b[2], list) and isinstance(b[3], list)
                and all(isinstance(c, str) for c in (*b[2], *b[3])) for b in blocks)):
            return False
        passes = info.get("passes", {})
        if not (isinstance(passes, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in passes.items())
                and all(isinstance(n, str) for n in (*info.get("none_guards", ()),
                                                     *info.get("flag_guards", ())))):
            return False
    return True


def _flag_pair(value: Any) -> bool:
    """Two 0/1 flags (a predicate's, see ``_predicate_of``)."""
    return isinstance(value, list) and len(value) == 2 and all(v in (0, 1) for v in value)


# The link phase ---------------------------------------------------------------------------
def _host_receiver(ref: str) -> bool:
    """Whether a call reference's receiver is named as a host value (``A:x_cpu:m``,
    ``M:m:x_cpu``)."""
    from reviewbot.analysis.gpu import host_named

    kind, _, rest = ref.partition(":")
    if kind == "A":
        return host_named(rest.partition(":")[0])
    if kind == "M":
        return host_named(rest.partition(":")[2])
    return False


@dataclass
class HotFacts:
    """What the link phase found: per module, each hot function's chain."""

    hot: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # rel -> qualname -> chain
    is_module_class: set[str] = field(default_factory=set)  # qualified names of nn.Module classes
    # Attribute names that the project's classes declare only as torch.Tensor fields, and
    # method names that every definition in the project annotates as returning one.
    tensor_fields: frozenset[str] = frozenset()
    tensor_returns: frozenset[str] = frozenset()
    names: dict[str, frozenset[str]] = field(default_factory=dict)  # rel -> names it reads
    kept_on_cpu: frozenset[str] = frozenset()  # names declared keep_on_cpu anywhere
    device_keys: frozenset[str] = frozenset()  # fields built without it: on the device
    keep_families: frozenset[str] = frozenset()  # the factories that take keep_on_cpu
    moved_to_host: frozenset[str] = frozenset()  # fields set to a host copy somewhere
    moved_anywhere: frozenset[str] = frozenset()  # the same and those of known classes
    # rel -> methods every hot call of which is on a host copy (`self.experts_cpu.tolists()`)
    host_self: dict[str, list[str]] = field(default_factory=dict)
    # rel -> local names of the tensor-returning project functions the file imports
    imported_returns: dict[str, frozenset[str]] = field(default_factory=dict)
    # rel -> function -> tensor parameters some caller fills with a host value
    host_params: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # rel -> function -> parameter -> what every hot caller passes: "" (not None), "T", "F"
    passed_params: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    # Names the summaries spell, and each module's inert functions: an inert function of
    # one of these names added or removed later links again.
    referenced: frozenset[str] = frozenset()
    inert: dict[str, list[str]] = field(default_factory=dict)  # module name -> its inert

    def for_file(self, rel: str) -> dict[str, list[str]]:
        """The hot functions of one file (relative path) and their chains."""
        return self.hot.get(rel, {})

    linker: Any = field(default=None, repr=False)

    def devices_for(self, rel: str) -> dict[str, Any]:
        """The device facts one file reads: the tensor fields and tensor-returning methods
        among the names it spells, and the declared fields (tensor or host) of the project
        classes it imports or defines, by the name the file knows them by."""
        names = self.names.get(rel, frozenset())
        out: dict[str, Any] = {"fields": sorted(names & self.tensor_fields),
                               "returns": sorted(names & self.tensor_returns
                                                 | self.imported_returns.get(rel, frozenset()))}
        classes = self.linker.fields_seen_from(rel) if self.linker is not None else {}
        modules = self.linker.modules_seen_from(rel) if self.linker is not None else []
        if modules:  # `sampler: RejectionSampler`: an nn.Module class of another module
            out["modules"] = modules
        if classes:
            out["classes"] = classes
            held = self.linker.classes_held_by(classes, self.linker.index.by_rel[rel].name)
            if held:  # `result.logits_output.next_token_logprobs`: a field's own fields
                out["class_attrs"] = held
        if other_platform_path(rel) or vendored_path(rel):
            out["other_platform"] = True  # no finding there: see non_cuda()
        if self.kept_on_cpu:
            out["kept_on_cpu"] = sorted(self.kept_on_cpu)
        if self.device_keys:
            out["device_keys"] = sorted(self.device_keys)
        entry = self.linker.index.by_rel.get(rel) if self.linker is not None else None
        if entry is not None and entry.summary and self.keep_families:
            # The module's own fields built without keep_on_cpu: on the device here even
            # where another module keeps a field of the name on the CPU.
            own_kept = set(entry.summary.get("kept_on_cpu", ()))
            own = {pair[1] for pair in entry.summary.get("field_calls", ())
                   if isinstance(pair, list) and len(pair) == 2
                   and all(isinstance(part, str) for part in pair)
                   and pair[0] in self.keep_families and pair[1] not in own_kept}
            if own:
                out["own_device_keys"] = sorted(own)
        if rel in self.host_params:
            out["host_params"] = self.host_params[rel]
        if rel in self.passed_params:
            out["passed_params"] = self.passed_params[rel]
        if rel in self.host_self:
            out["host_self"] = sorted(self.host_self[rel])
        moved = names & self.moved_to_host
        if moved:
            out["moved_to_host"] = sorted(moved)
        moved_somewhere = (names & self.moved_anywhere) - moved
        if moved_somewhere:
            out["moved_somewhere"] = sorted(moved_somewhere)
        return out

    def digest(self, rel: str, devices: dict[str, Any] | None = None) -> str:
        """What the file's checked result depends on, beyond its own text."""
        return facts_digest(self.hot.get(rel) or {},
                            self.devices_for(rel) if devices is None else devices)


def facts_digest(hot: dict[str, Any], devices: dict[str, Any]) -> str:
    """The digest of the linked facts one file reads (its hot functions and devices)."""
    text = json.dumps([sorted(hot.items()), devices], separators=(",", ":"), sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class Linker:
    """Links the summaries of a project's modules into hot paths."""

    def __init__(self, index: ProjectIndex, packs: PackData) -> None:
        from reviewbot.analysis.gpu import _matches

        self.matches = _matches
        self.index = index
        self.packs = packs
        self._imported: dict[str, str | None] = {}  # an import's target -> its function
        self._tops = {m.split(".", 1)[0] for m in index.modules}  # the project's packages
        # The method part of each `Class.method` entry pattern.
        self._entry_methods = tuple(p.rpartition(".")[2]
                                    for p in packs.hot_path_entry_points if "." in p)
        # qualified name -> (module entry, local qualname)
        self.functions: dict[str, tuple[ModuleEntry, str]] = {}
        self.classes: dict[str, tuple[ModuleEntry, str, dict[str, Any]]] = {}
        self.by_method: dict[str, list[str]] = {}
        self.by_function: dict[str, list[str]] = {}  # module-level functions by name
        self.properties: dict[str, list[str]] = {}  # getters of `@property` methods by name
        for name, entry in index.modules.items():
            summary = entry.summary
            if not summary:
                continue
            for local, info in summary["classes"].items():
                self.classes[f"{name}.{local}"] = (entry, local, info)
            for local in summary["functions"]:
                qual = f"{name}.{local}"
                self.functions[qual] = (entry, local)
                owner, _, method = local.rpartition(".")
                if owner and f"{name}.{owner}" in self.classes:
                    self.by_method.setdefault(method, []).append(qual)
                    if summary["functions"][local].get("property"):
                        self.properties.setdefault(method, []).append(qual)
                elif not owner:
                    self.by_function.setdefault(local, []).append(qual)
        self.subclasses: dict[str, list[str]] = {}
        unplaced: list[str] = []  # a factory's classes whose base is a run-time value
        for qual, (entry, local, info) in self.classes.items():
            found = False
            for base in info["bases"]:
                resolved = self.resolve_class(base)
                if resolved:
                    self.subclasses.setdefault(resolved, []).append(qual)
                    found = True
            if not found and info.get("made") and info["bases"]:
                unplaced.append(qual)
        if unplaced:
            self._place_made_classes(unplaced)
        self._mro_cache: dict[str, list[str]] = {}
        self._fields_cache: dict[str, dict[str, str]] = {}
        # Fields moved to the host through an attribute (`self.out.ids = copy(...)`): of the
        # attribute's class where the link knows it, else of any object.
        self.moved_fields: dict[str, set[str]] = {}
        self.unresolved_moves: set[str] = set()
        for qual, (entry, local, info) in self.classes.items():
            for attr, fields in info.get("moves", {}).items():
                typ = next((self.classes[k][2]["attrs"][attr] for k in self.mro(qual)
                            if k in self.classes and attr in self.classes[k][2]["attrs"]), "")
                held = self.resolve_class(typ) if typ and not typ.startswith("()") else None
                if held:
                    self.moved_fields.setdefault(held, set()).update(fields)
                else:
                    self.unresolved_moves.update(fields)
        self._module_cache: dict[str, bool] = {}
        self._by_snake_name: dict[str, list[str]] | None = None
        self._by_snake_tail: dict[str, list[str]] | None = None
        self._by_last_word: dict[str, list[str]] | None = None
        self._off_cuda: dict[str, bool] = {}

    def _place_made_classes(self, made: list[str]) -> None:
        """``class FastPrefillBuilder(underlying_builder):`` in a factory function subclasses
        a class chosen at run time. It is placed under the project's interfaces its name
        ends like (the root classes with subclasses named ``*Builder``): a hot call of the
        interface's method reaches its override."""
        roots: dict[str, list[str]] = {}
        for base in self.subclasses:
            info = self.classes[base][2]
            if not info.get("made") and not any(self.resolve_class(b) for b in info["bases"]):
                word = _last_word(base.rpartition(".")[2])
                if word:
                    roots.setdefault(word, []).append(base)
        for qual in made:
            # Not capped: only an override of a hot method of one of them becomes hot, and
            # a cap of 16 left vLLM 0.33.0's local-attention builder out.
            for root in roots.get(_last_word(qual.rpartition(".")[2]), ()):
                self.subclasses[root].append(qual)

    # Names ---------------------------------------------------------------------------
    def _follow(self, qual: str, table: Mapping[str, Any], depth: int = 0) -> str | None:
        """``qual`` if it is in ``table``, else through re-exports (``from .x import y``)."""
        if qual in table:
            return qual
        if depth > 6:
            return None
        module, _, rest = qual.rpartition(".")
        # Find the longest prefix that is a module, and look its name up in its imports.
        parts = qual.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            mod = ".".join(parts[:cut])
            entry = self.index.modules.get(mod)
            if entry is None or not entry.summary:
                continue
            head, tail = parts[cut], parts[cut + 1:]
            target = entry.summary["imports"].get(head)
            if target is None:
                return None
            return self._follow(".".join([target, *tail]), table, depth + 1)
        del module, rest
        return None

    def resolve_class(self, qual: str) -> str | None:
        """The qualified name of a class defined in the project, or None; ``()mod.f``: the
        class that the project function ``mod.f`` is annotated to return."""
        if qual.startswith("()"):
            found = self.resolve_function(qual[2:])
            if found is None:
                return None
            entry, local = self.functions[found]
            made = entry.summary["functions"][local].get("returns_class")
            return self._follow(made, self.classes) if isinstance(made, str) and made and \
                not made.startswith("()") else None
        return self._follow(qual, self.classes) if qual else None

    def resolve_function(self, qual: str) -> str | None:
        """A function or method defined in the project (``mod.f``, ``mod.Class.m``)."""
        found = self._follow(qual, self.functions)
        if found:
            return found
        owner, _, method = qual.rpartition(".")
        cls = self.resolve_class(owner)
        if cls:
            return self.method_of(cls, method)
        return None

    def mro(self, cls: str) -> list[str]:
        """The class and its project bases, nearest first (bounded)."""
        cached = self._mro_cache.get(cls)
        if cached is not None:
            return cached
        order: list[str] = []
        queue = deque([cls])
        while queue and len(order) < 32:
            current = queue.popleft()
            if current in order:
                continue
            order.append(current)
            info = self.classes.get(current)
            if info is None:
                continue
            for base in info[2]["bases"]:
                resolved = self.resolve_class(base)
                if resolved and resolved not in order:
                    queue.append(resolved)
        self._mro_cache[cls] = order
        return order

    def method_of(self, cls: str, name: str) -> str | None:
        """``cls.name`` where it is defined: the class or a project base."""
        for klass in self.mro(cls):
            qual = f"{klass}.{name}"
            if qual in self.functions:
                return qual
        return None

    def methods_of(self, cls: str, name: str) -> list[str]:
        """The method ``cls.name`` resolves to, or the methods an attribute of that name
        is set to (``self.update = self.update_decode``)."""
        found = self.method_of(cls, name)
        out: list[str] = [found] if found else []
        for klass in self.mro(cls):
            info = self.classes.get(klass)
            for alias in (info[2].get("aliases", {}).get(name, ()) if info else ()):
                names = [alias]
                if alias.startswith("()"):  # set to what a method of the class returns
                    maker = self.method_of(cls, alias[2:])
                    names = []
                    if maker is not None:
                        entry, local = self.functions[maker]
                        names = entry.summary["functions"][local].get("self_returns", [])
                for method in names:
                    target = self.method_of(cls, method)
                    if target and target not in out:
                        out.append(target)
        return out

    def attr_type(self, cls: str, attr: str) -> str | None:
        """The class of ``self.attr`` in ``cls`` (or a base), also through a property that
        hands out another attribute (``self.worker`` -> ``self._worker``)."""
        for _ in range(4):  # properties handing out each other end somewhere
            for klass in self.mro(cls):
                info = self.classes.get(klass)
                if info is not None:
                    typ = info[2]["attrs"].get(attr)
                    if typ:
                        return self.resolve_class(typ) or None
            backing = self.property_backing(cls, attr)
            if backing is None:
                return None
            attr = backing
        return None

    def property_backing(self, cls: str, attr: str) -> str | None:
        """The attribute a property of ``cls`` (or a base) named ``attr`` returns, when it
        only returns one (the object a subclass stores there is what a call reaches)."""
        for klass in self.mro(cls):
            info = self.classes.get(klass)
            backing = info[2].get("properties", {}).get(attr) if info is not None else None
            if backing:
                return backing
        return None

    def class_fields(self, cls: str) -> dict[str, str]:
        """The fields a class (and its project bases) declares as tensor or host values."""
        cached = self._fields_cache.get(cls)
        if cached is not None:
            return cached
        merged: dict[str, str] = {}
        self._fields_cache[cls] = merged
        for klass in reversed(self.mro(cls)):
            info = self.classes.get(klass)
            if info is not None:
                merged.update(info[2].get("fields", {}))
            for name in self.moved_fields.get(klass, ()):
                merged[name] = "moved"
        # An object typed by an interface (`spec_info: SpecInput`) holds one of its
        # subclasses: a field only they declare, and all of them alike, is of that kind.
        below: dict[str, set[str]] = {}
        todo, seen = list(self.subclasses.get(cls, ())), {cls}
        while todo and len(seen) < MAX_SUBCLASS_FIELDS_WALK:
            sub = todo.pop()
            if sub in seen:
                continue
            seen.add(sub)
            todo.extend(self.subclasses.get(sub, ()))
            info = self.classes.get(sub)
            for name, kind in (info[2].get("fields", {}) if info is not None else {}).items():
                if name not in merged:
                    below.setdefault(name, set()).add(kind)
        for name, kinds in below.items():
            if len(kinds) == 1 and "moved" not in kinds:
                merged[name] = next(iter(kinds))
        return merged

    def fields_seen_from(self, rel: str) -> dict[str, dict[str, str]]:
        """Declared fields of the classes a module imports (keyed by the imported name's
        qualified spelling) or defines (keyed ``local:Name``)."""
        entry = self.index.by_rel.get(rel)
        if entry is None or not entry.summary:
            return {}
        out: dict[str, dict[str, str]] = {}
        for target in set(entry.summary["imports"].values()):
            if not target.rpartition(".")[2].lstrip("_")[:1].isupper():
                continue  # classes are named in CapWords; the rest need no lookup
            cls = self.resolve_class(target)
            if cls:
                fields = self.class_fields(cls)
                if fields or self._holds_objects(cls):
                    out[target] = fields
        for local in entry.summary["classes"]:
            fields = self.class_fields(f"{entry.name}.{local}")
            if fields:
                out["local:" + local] = fields
        return out

    def _holds_objects(self, cls: str) -> bool:
        """Whether a class (or a project base) declares a field holding another object
        (``spec_info: Optional[SpecInput]``), whose fields the walk can then read."""
        return any(klass in self.classes and self.classes[klass][2]["attrs"]
                   for klass in self.mro(cls))

    def modules_seen_from(self, rel: str) -> list[str]:
        """The classes a module imports (by the imported name's qualified spelling) that
        are nn.Modules through their bases in the project."""
        entry = self.index.by_rel.get(rel)
        if entry is None or not entry.summary:
            return []
        found = []
        for target in set(entry.summary["imports"].values()):
            if target.rpartition(".")[2].lstrip("_")[:1].isupper():
                cls = self.resolve_class(target)
                if cls and self.is_module_class(cls):
                    found.append(target)
        return sorted(found)

    def classes_held_by(self, seen: dict[str, dict[str, str]],
                        module: str) -> dict[str, dict[str, str]]:
        """For the classes ``module`` sees (``fields_seen_from``, which this extends), the
        fields each declares or builds as an object of another project class (``out:
        Output``, ``self.sampler = Sampler()``): key -> field -> that class's key, with the
        held classes' own declared fields added to ``seen``, two levels deep and bounded."""
        held: dict[str, dict[str, str]] = {}
        todo = [(key, 0) for key in list(seen)]
        while todo and len(seen) < MAX_HELD_CLASSES:
            key, depth = todo.pop(0)
            if key.startswith("local:"):  # a class the module itself defines
                cls = f"{module}.{key[6:]}" if f"{module}.{key[6:]}" in self.classes else None
            else:
                cls = self.resolve_class(key)
            if cls is None:
                continue
            for klass in self.mro(cls):
                info = self.classes.get(klass)
                for attr, typ in (info[2]["attrs"].items() if info is not None else ()):
                    if typ.startswith("()") or attr in held.get(key, {}):
                        continue
                    target = self.resolve_class(typ)
                    if target is None:
                        continue
                    if target not in seen:
                        fields = self.class_fields(target)
                        if not fields:
                            continue
                        seen[target] = fields
                        if depth + 1 < 2:
                            todo.append((target, depth + 1))
                    held.setdefault(key, {})[attr] = target
        return held

    def is_module_class(self, cls: str) -> bool:
        """Whether a project class is an ``nn.Module`` (through bases in any module, up the
        bounded order of :meth:`mro`: a chain of any depth cannot overflow the stack)."""
        cached = self._module_cache.get(cls)
        if cached is not None:
            return cached
        result = False
        for klass in self.mro(cls):
            info = self.classes.get(klass)
            if info is None:
                continue
            if any(base in ("torch.nn.Module", "torch.nn.modules.module.Module") or
                   self.matches(base.rsplit(".", 1)[-1], self.packs.module_classes)
                   for base in info[2]["bases"]):
                result = True
                break
        self._module_cache[cls] = result
        return result

    def _platform_owner(self, qual: str) -> bool:
        """A method of a class named for another accelerator (``other_platform_class``), or
        a function named for one (``other_platform_function``)."""
        if other_platform_function(self.functions[qual][1].rpartition(".")[2]):
            return True
        cls = self.owner(qual)
        return cls is not None and other_platform_class(cls.rpartition(".")[2])

    def host_copy_attr(self, cls: str, attr: str) -> bool:
        """Whether every value a class (or its bases) sets as ``self.<attr>`` is a host
        copy (``x.to_cpu_nonblocking()``, ``t.cpu()``): a method called on it reads host
        fields."""
        seen = False
        for klass in self.mro(cls):
            info = self.classes.get(klass)
            copies = info[2].get("copies", {}) if info is not None else {}
            if attr in copies:
                if not copies[attr]:
                    return False
                seen = True
        return seen

    def owner(self, qual: str) -> str | None:
        """The class a method belongs to."""
        entry, local = self.functions[qual]
        owner, _, _ = local.rpartition(".")
        cls = f"{entry.name}.{owner}" if owner else None
        return cls if cls in self.classes else None

    def callees(self, qual: str, receivers: dict[str, bool] | None = None) -> list[str]:
        """The project functions a function calls. ``receivers``: for each callee, whether
        every call seen so far is on a receiver named as a host value
        (``self.experts_cpu.tolists()``), updated here."""
        entry, local = self.functions[qual]
        info = entry.summary["functions"][local]
        cls = self.owner(qual)
        out: list[str] = []
        for ref in (*info["calls"], *self._unguarded_calls(info, cls)):
            found = self._resolve_ref(ref, cls)
            out.extend(found)
            if receivers is not None and found:
                host = _host_receiver(ref) or (
                    cls is not None and ref.startswith("A:") and
                    self.host_copy_attr(cls, ref[2:].partition(":")[0]))
                for callee in found:
                    receivers[callee] = receivers.get(callee, True) and host
        for read in info.get("reads", ()):
            name, _, typ = read.partition("@")
            getters = self.properties.get(name, ())
            if not getters:
                continue
            resolved = self.resolve_class(typ) if typ and not typ.startswith("()") else None
            if resolved:  # `meta: TreeAttentionMetadata`: its own getter
                found = self.method_of(resolved, name)
                out.extend([found] if found in getters else [])
            elif len(getters) <= MAX_NAME_CANDIDATES:  # `meta.seq_lens_cpu`, few getters
                out.extend(getters)
            if receivers is not None:
                for callee in getters:
                    receivers[callee] = False
        return out

    def _unguarded_calls(self, info: dict[str, Any], cls: str | None) -> list[str]:
        """The calls in a function's blocks behind a call of a project function (``if
        use_reference(device):``) that run on the per-step CUDA path: all of them, but the
        body's (or the ``else``'s) where that function returns a test for another platform
        or a switch (``return device.type != "cuda"``, ``return envs.X.get()``)."""
        out: list[str] = []
        for ref, negated, body, orelse in info.get("pred_blocks", ()):
            found = self._resolve_ref(ref, cls)
            quiet = [0, 0]
            if len(found) == 1:
                entry, local = self.functions[found[0]]
                quiet = entry.summary["functions"][local].get("predicate") or quiet
            quiet_body, quiet_else = quiet[::-1] if negated else quiet
            out.extend((*(() if quiet_body else body), *(() if quiet_else else orelse)))
        return out

    def _resolve_ref(self, ref: str, cls: str | None) -> list[str]:
        kind, _, rest = ref.partition(":")
        if kind == "S":
            # In a function outside a class, `self` is an object fetched at run time.
            return self.methods_of(cls, rest) if cls is not None else self._by_name(rest)
        if kind == "F":
            candidates = self.by_function.get(rest, ())
            return list(candidates) if 0 < len(candidates) <= MAX_NAME_CANDIDATES else []
        if kind == "Q":
            found = self.resolve_function(rest)
            if found:
                return [found]
            # Building a dataclass runs its `__post_init__` (a metadata object built every
            # step checks or derives its fields there); `__init__` is start-up code.
            built = self.resolve_class(rest)
            post = self.method_of(built, "__post_init__") if built else None
            return [post] if post else []
        if kind == "T":
            typ, _, name = rest.rpartition(":")
            resolved = self.resolve_class(typ)
            if resolved:
                return self._methods_or_like(resolved, name)
            if typ.startswith("()"):
                # A call's result of a type the project does not say: only a method of a
                # class the called function's name speaks of (`self.get_sampler().x()`),
                # not any method of that name (`_jit_module().run()` is a kernel's).
                return self._named_like(self._by_name(name), typ[2:].rpartition(".")[2],
                                        strict=True)
            return self._by_name(name)
        if kind == "A":
            attr, _, name = rest.partition(":")
            typ = self.attr_type(cls, attr) if cls else None
            if typ:
                return self._methods_or_like(typ, name)
            if cls and self._run_time_class(cls, attr):
                return self._implementations(name)
            return self._by_name(name)
        if kind == "M":
            name, _, receiver = rest.partition(":")
            return self._named_like(self._by_name(name), receiver) or \
                self._named_after(name, receiver)
        return []

    def _methods_or_like(self, cls: str, name: str) -> list[str]:
        """``cls.name``; where neither the declared class nor a base has the method, the
        object is of another class than its annotation says (`allocator: Allocator`
        holding a `PagedAllocator` that shares no base): the subclasses' methods of that
        name, else the project's few methods of that name."""
        found = self.methods_of(cls, name)
        if found:
            return found
        below = [qual for sub in self.subclasses.get(cls, ())
                 if (qual := self.method_of(sub, name)) is not None]
        return below or self._by_name(name)

    def _named_after(self, name: str, receiver: str) -> list[str]:
        """The method ``name`` of the class an object is named after
        (``logprobs_tensors.tolists()`` -> ``LogprobsTensors.tolists``), however common
        the method's name."""
        wanted = receiver.strip("_").lower()
        if "_" not in wanted:
            return self._named_for_word(name, wanted)
        if self._by_snake_name is None:  # `LogprobsTensors` -> "logprobs_tensors"
            self._by_snake_name = {}
            for cls in self.classes:
                key = "_".join(w.lower() for w in _CAMEL_WORD.findall(cls.rpartition(".")[2]))
                self._by_snake_name.setdefault(key, []).append(cls)
        found = [f"{cls}.{name}" for cls in self._by_snake_name.get(wanted, ())
                 if f"{cls}.{name}" in self.functions]
        if found:
            return found
        # `verify_input.verify()` of an `NgramVerifyInput` or an `EagleVerifyInput`: the
        # classes whose names end in the receiver's words, when few.
        if self._by_snake_tail is None:  # "ngram_verify_input" -> under "verify_input"
            self._by_snake_tail = {}
            for key, classes in self._by_snake_name.items():
                words = key.split("_")
                for start in range(1, len(words) - 1):
                    self._by_snake_tail.setdefault("_".join(words[start:]), []).extend(classes)
        found = [f"{cls}.{name}" for cls in self._by_snake_tail.get(wanted, ())
                 if f"{cls}.{name}" in self.functions]
        return found if len(found) <= MAX_INTERFACE_IMPLEMENTATIONS else []

    def _named_for_word(self, name: str, word: str) -> list[str]:
        """``penalizer.apply()``: the method ``name`` of the class whose name ends in the
        receiver's one word (``_BatchedPenalizer.apply``), only when one such class defines
        it: a common word (``tensors.tolists()`` of three unrelated ``*Tensors``, on the GPU
        or on host copies) names no class for sure."""
        if len(word) < 5 or not word.isalpha():
            return []
        if self._by_last_word is None:
            self._by_last_word = {}
            for cls in self.classes:
                words = _CAMEL_WORD.findall(cls.rpartition(".")[2])
                if words:
                    self._by_last_word.setdefault(words[-1].lower(), []).append(cls)
        found = [f"{cls}.{name}" for cls in self._by_last_word.get(word, ())
                 if f"{cls}.{name}" in self.functions]
        return found if len(found) == 1 else []

    def _named_like(self, candidates: list[str], receiver: str,
                    strict: bool = False) -> list[str]:
        """Of the methods a call on an unknown object may reach, those of the classes the
        object's name speaks of (``markov_head.init_state`` -> ``GatedMarkovHead``), or
        all when its name speaks of none of them (``strict``: none)."""
        if (len(candidates) < 2 and not strict) or not candidates or not receiver:
            return candidates
        words = {w for w in receiver.lower().split("_") if len(w) > 2}
        if not words:
            return [] if strict else candidates
        chosen = [c for c in candidates if words & {
            w.lower() for w in _CAMEL_WORD.findall((self.owner(c) or "").rpartition(".")[2])}]
        return chosen if chosen or strict else candidates

    def _run_time_class(self, cls: str, attr: str) -> bool:
        """Whether ``self.attr`` holds (directly or through another attribute it is set
        to, ``self.model_worker = self.draft_worker``) an object of a class chosen at run
        time (``self.draft_worker = WorkerClass(...)``)."""
        infos = [info[2] for klass in self.mro(cls) if (info := self.classes.get(klass))]
        names = {attr}
        backing = self.property_backing(cls, attr)
        if backing:
            names.add(backing)
        for info in infos:
            names.update(info.get("aliases", {}).get(attr, ()))
        return any(names.intersection(info.get("dynamic", ())) for info in infos)

    def _implementations(self, name: str) -> list[str]:
        """Every project method of this name, when there are not too many: what a call on
        an object of a class chosen at run time may reach."""
        if not _specific_method_name(name):
            return []
        candidates = self.by_method.get(name, ())
        return list(candidates) if len(candidates) <= MAX_INTERFACE_IMPLEMENTATIONS else []

    def _by_name(self, name: str) -> list[str]:
        """The project's methods of this name, when few, or all implementations of one
        interface (every one inherits the name from the same project class)."""
        if not _specific_method_name(name):
            return []
        candidates = self.by_method.get(name, ())
        if 0 < len(candidates) <= MAX_NAME_CANDIDATES:
            return list(candidates)
        if not candidates or len(candidates) > MAX_INTERFACE_IMPLEMENTATIONS:
            return []
        tops = set()
        for qual in candidates:
            owner = self.owner(qual)
            if owner is None:
                return []
            top = owner
            for klass in self.mro(owner)[1:]:
                if f"{klass}.{name}" in self.functions:
                    top = klass
            tops.add(top)
            if len(tops) > 1:
                return []
        return list(candidates)

    def _project_function(self, qual: str) -> str | None:
        """resolve_function for an import's target, remembered; names outside the
        project's packages are not looked up."""
        if qual not in self._imported:
            self._imported[qual] = self.resolve_function(qual) if "." in qual and \
                qual.split(".", 1)[0] in self._tops else None
        return self._imported[qual]

    def _inherited_as_entry(self, owner: str, name: str) -> str | None:
        """``Scheduler.event_loop_x`` for a mixin's ``event_loop_x`` that the class
        ``Scheduler`` inherits without overriding, when the packs name that as an entry
        point (subclasses to any depth, bounded)."""
        patterns = self.packs.hot_path_entry_points
        if not self.subclasses.get(owner) or not self.matches(name, self._entry_methods):
            return None
        queue, seen = deque(self.subclasses.get(owner, ())), set()
        while queue and len(seen) < 256:
            sub = queue.popleft()
            if sub in seen or f"{sub}.{name}" in self.functions:
                continue  # overridden: the subclass's own method is judged on its own
            seen.add(sub)
            spelled = f"{sub.rpartition('.')[2]}.{name}"
            if self.matches(spelled, patterns):
                return spelled
            queue.extend(self.subclasses.get(sub, ()))
        return None

    def overrides(self, qual: str) -> list[str]:
        """The same method in the subclasses of its class (any depth, bounded)."""
        cls = self.owner(qual)
        if cls is None:
            return []
        name = qual.rpartition(".")[2]
        out, queue, seen = [], deque(self.subclasses.get(cls, ())), set()
        while queue and len(seen) < 256:
            sub = queue.popleft()
            if sub in seen:
                continue
            seen.add(sub)
            own = f"{sub}.{name}"
            if own in self.functions:
                out.append(own)
            queue.extend(self.subclasses.get(sub, ()))
        return out

    def only_off_cuda(self, qual: str) -> bool:
        """A method of an abstract base class (``*Base``, ``Abstract*``, an ``ABC``) that
        every subclass overrides, but those of other platforms (``punica_cpu.py``): a call
        dispatched through the base runs it only off CUDA."""
        known = self._off_cuda.get(qual)
        if known is not None:
            return known
        cls = self.owner(qual)
        found = False
        if cls is not None and self.subclasses.get(cls) and self._abstract(cls):
            name = qual.rpartition(".")[2]
            found = True
            queue, seen = deque(self.subclasses[cls]), set()
            while queue and len(seen) < 256:
                sub = queue.popleft()
                if sub in seen or f"{sub}.{name}" in self.functions:
                    continue  # overridden: its own subclasses inherit the override
                seen.add(sub)
                if not other_platform_path(self.classes[sub][0].rel):
                    found = False
                    break
                queue.extend(self.subclasses.get(sub, ()))
        self._off_cuda[qual] = found
        return found

    def _abstract(self, cls: str) -> bool:
        """A class named as a base (``PunicaWrapperBase``, ``AbstractRunner``) or declared
        with ``abc.ABC`` among its own bases: not what the engine constructs (a subclass of
        an abstract class is not abstract for that)."""
        short = cls.rpartition(".")[2]
        if "Base" in short or "Abstract" in short or short.endswith("ABC"):
            return True
        return any(base.rpartition(".")[2] in ("ABC", "Protocol")
                   for base in self.classes[cls][2]["bases"])

    def _below(self, sub: str | None, cls: str | None) -> bool:
        """Whether ``sub`` is ``cls`` or derives from it (``super().m()`` runs the base's)."""
        return sub is not None and cls is not None and cls in self.mro(sub)

    # Hot paths ----------------------------------------------------------------------
    def is_startup(self, qual: str) -> bool:
        entry, local = self.functions[qual]
        if entry.summary["functions"][local].get("memo"):
            return True
        return self.matches(local, self.packs.startup_functions)

    def is_entry(self, qual: str) -> str | None:
        """Why a function is an entry point, or None."""
        entry, local = self.functions[qual]
        if self.matches(local, self.packs.hot_path_entry_points):
            return local
        owner = self.owner(qual)
        name = local.rpartition(".")[2]
        inherited = self._inherited_as_entry(owner, name) if owner else None
        if inherited:
            return f"{inherited} (inherited {local})"
        if owner and name in self.packs.module_entry_points and self.is_module_class(owner):
            return local
        loop_patterns = self.packs.loop_callees
        if loop_patterns:
            info = entry.summary["functions"][local]
            summary = entry.summary
            for ref in info["loop_calls"]:
                kind, _, rest = ref.partition(":")
                name_called = rest.rsplit(":", 1)[-1] if kind in ("T", "A") else \
                    rest.partition(":")[0]
                if kind == "S":
                    name_called = "self." + rest
                if kind == "A":
                    name_called = "self." + rest.replace(":", ".")
                if self.matches(name_called, loop_patterns):
                    return f"{local} (a loop calling {name_called})"
            del summary
        return None

    def link(self) -> HotFacts:
        """Hot functions of every module, with the chain from an entry point."""
        chains: dict[str, list[str]] = {}
        hot_callers: dict[str, set[str]] = {}  # function -> the hot functions calling it
        receivers: dict[str, bool] = {}  # function -> every hot call is on a host copy
        queue: deque[str] = deque()
        off = {rel for rel in self.index.by_rel if off_path(rel) or vendored_path(rel)}
        for qual in self.functions:
            if self.functions[qual][0].rel in off:
                continue  # a benchmark's or a test's loop calls the step on purpose
            why = self.is_entry(qual)
            if why is not None and not self.is_startup(qual) and not self._platform_owner(qual):
                chains[qual] = [why]
                queue.append(qual)
        while queue:
            qual = queue.popleft()
            chain = chains[qual]
            if len(chain) >= MAX_LINK_DEPTH:
                continue
            called = self.callees(qual, receivers)
            for callee in called:
                hot_callers.setdefault(callee, set()).add(qual)
            callees = [*called, *self.overrides(qual)]
            for callee in callees:
                if callee in chains or self.is_startup(callee) or \
                        self._platform_owner(callee) or \
                        vendored_path(self.functions[callee][0].rel):
                    continue
                if self.only_off_cuda(callee) and not self._below(self.owner(qual),
                                                                   self.owner(callee)):
                    # Dispatched: every CUDA subclass runs its own override.
                    callees.extend(o for o in self.overrides(callee) if o not in callees)
                    continue
                chains[callee] = [*chain, self._display(callee, qual)]
                queue.append(callee)
        facts = HotFacts(linker=self)
        field_kinds: dict[str, set[str]] = {}
        return_kinds: dict[str, set[str]] = {}
        kept: set[str] = set()
        families: set[str] = set()  # factories of fields that take keep_on_cpu
        built: list[list[str]] = []  # [factory, key] of fields built by a class's factory
        moved: set[str] = set()
        anywhere: set[str] = set()  # fields moved to the host by any class
        referenced: set[str] = set()
        for entry in self.index.modules.values():
            summary = entry.summary
            if not summary:
                continue
            facts.names[entry.rel] = frozenset(summary.get("names", ()))
            referenced.update(referenced_names(
                {k: v for k, v in summary.items() if k not in ("functions", "names")}))
            for info in summary["functions"].values():
                referenced.update(referenced_names(info))
            inert = inert_functions(summary)
            if inert:
                facts.inert[entry.name] = inert
            # Functions imported by name (`from pkg.layout import get_lens`) that the project
            # annotates `-> torch.Tensor`: known to the file by its local name.
            imported = set()
            for local, qual in summary["imports"].items():
                found = self._project_function(qual)
                if found is not None:
                    target, name = self.functions[found]
                    if target.summary["functions"][name].get("returns") == "tensor":
                        imported.add(local)
            if imported:
                facts.imported_returns[entry.rel] = frozenset(imported)
            kept.update(summary.get("kept_on_cpu", ()))
            families.update(summary.get("keep_families", ()))
            built.extend(summary.get("field_calls", ()))
            moved.update(summary.get("moved_to_host", ()))
            for info in summary["classes"].values():
                for name, kind in info.get("fields", {}).items():
                    if kind == "moved":
                        # That class's own (see _declared_field); an object of unknown class
                        # read under the name may be it: no field of the name is taken
                        # for a tensor by name alone.
                        anywhere.add(name)
                        continue
                    field_kinds.setdefault(name, set()).add(kind)
                    if kind == "cpu" and "_" in name.strip("_"):
                        kept.add(name)  # declared a host tensor: so are its copies' names
            for local, info in summary["functions"].items():
                if local in inert:
                    continue  # the link reads nothing of them (see inert_functions)
                name = local.rpartition(".")[2]
                return_kinds.setdefault(name, set()).add(info.get("returns", ""))
        facts.kept_on_cpu = frozenset(kept)
        # Fields a factory that could keep them on the CPU builds without it: the engine
        # moves them to the device (a name kept on the CPU anywhere stays there).
        facts.keep_families = frozenset(families)
        facts.device_keys = frozenset(
            pair[1] for pair in built if isinstance(pair, list) and len(pair) == 2
            and all(isinstance(part, str) for part in pair)
            and pair[0] in families and pair[1] not in kept)
        facts.referenced = frozenset(referenced)
        facts.moved_to_host = frozenset(moved | self.unresolved_moves)
        anywhere.update(facts.moved_to_host)
        for fields in self.moved_fields.values():
            anywhere.update(fields)
        facts.moved_anywhere = frozenset(anywhere)
        facts.tensor_fields = frozenset(n for n, kinds in field_kinds.items()
                                        if kinds == {"tensor"} and n not in kept
                                        and n not in anywhere)
        facts.tensor_returns = frozenset(n for n, kinds in return_kinds.items()
                                         if kinds == {"tensor"} and not n.startswith("__"))
        for qual, chain in chains.items():
            entry, local = self.functions[qual]
            facts.hot.setdefault(entry.rel, {})[local] = chain
        facts.host_params = self.host_parameters(hot_callers)
        facts.passed_params = self.passed_parameters(hot_callers)
        for qual, host in receivers.items():
            if host and qual in chains and len(chains[qual]) > 1 and qual in self.functions:
                entry, local = self.functions[qual]
                facts.host_self.setdefault(entry.rel, []).append(local)
        facts.is_module_class = {c for c in self.classes if self._module_cache.get(c)}
        return facts

    def host_parameters(self, hot_callers: Mapping[str, set[str]] | None = None
                        ) -> dict[str, dict[str, list[str]]]:
        """rel -> function -> its tensor parameters that a caller in the project fills with
        a host value (by the argument's spelling), unless another hot caller passes
        something else there: then the parameter may hold a GPU tensor on a hot path."""
        hot_callers = hot_callers or {}
        hosted: dict[tuple[str, str], set[str]] = {}  # (callee, parameter) -> callers
        out: dict[str, dict[str, set[str]]] = {}
        for qual, (entry, local) in self.functions.items():
            hints = entry.summary["functions"][local].get("host_args")
            if not hints:
                continue
            cls = self.owner(qual)
            for ref, positions, keywords in hints:
                callees = self._resolve_ref(ref, cls)
                if not callees and ref.startswith("S:") and cls is not None:
                    # `self.projector(x, shapes_cpu)`: an attribute holding a module.
                    typ = self.attr_type(cls, ref[2:])
                    callees = self.methods_of(typ, "forward") if typ else []
                for callee in callees:
                    target, name = self.functions[callee]
                    info = target.summary["functions"][name]
                    params = info.get("tensor_params")
                    if not params:
                        continue
                    # A method called on an object: its first parameter is the object.
                    shift = 1 if self.owner(callee) is not None and ref[:2] in (
                        "S:", "T:", "A:", "M:") else 0
                    wanted = {i + shift for i in positions}
                    for index, param in params:
                        if index in wanted or param in keywords:
                            hosted.setdefault((callee, param), set()).add(qual)
        for (callee, param), callers in hosted.items():
            if hot_callers.get(callee, set()) - callers:
                continue  # a hot caller passes something that is not spelled as a host value
            target, name = self.functions[callee]
            out.setdefault(target.rel, {}).setdefault(name, set()).add(param)
        return {rel: {name: sorted(params) for name, params in funcs.items()}
                for rel, funcs in out.items()}

    def passed_parameters(self, hot_callers: Mapping[str, set[str]]
                          ) -> dict[str, dict[str, dict[str, str]]]:
        """rel -> function -> parameter -> what every hot caller passes there by keyword:
        "" for a value that is not None (a literal, a call, a local name never set to None,
        or the caller's own such parameter that its callers pass), "T" or "F" for the same
        flag. Only for ``p=None`` parameters tested ``p is None`` (the block for a left-out
        ``p`` is then not on the hot path) and flags tested ``if p:``."""
        known: dict[tuple[str, str], frozenset[str] | None] = {}

        def given(callee: str, param: str, depth: int) -> frozenset[str] | None:
            """What the hot callers pass as ``param`` ("", "T", "F"), or None when one of
            them may leave it out or pass None."""
            key = (callee, param)
            if key not in known:
                known[key] = None  # a cycle proves nothing
                callers = hot_callers.get(callee) or ()
                values: set[str] = set()
                for caller in callers:
                    value = passed(caller, callee, param, depth)
                    if value is None:
                        break
                    values |= value
                else:
                    known[key] = frozenset(values) if values else None
            return known[key]

        def passed(caller: str, callee: str, param: str, depth: int
                   ) -> frozenset[str] | None:
            entry, local = self.functions[caller]
            name = callee.rpartition(".")[2]
            how = entry.summary["functions"][local].get("passes", {}).get(f"{name}:{param}")
            if how is None:
                return None
            if not how.startswith("="):
                return frozenset({how})
            return given(caller, how[1:], depth + 1) if depth < 8 else None

        out: dict[str, dict[str, dict[str, str]]] = {}
        for qual in hot_callers:
            entry, local = self.functions[qual]
            info = entry.summary["functions"][local]
            for param in info.get("none_guards", ()):
                if given(qual, param, 0) is not None:  # always passed, never None
                    out.setdefault(entry.rel, {}).setdefault(local, {})[param] = ""
            for param in info.get("flag_guards", ()):
                values = given(qual, param, 0)
                if values in (frozenset({"T"}), frozenset({"F"})):
                    out.setdefault(entry.rel, {}).setdefault(local, {})[param] = \
                        next(iter(values))  # type: ignore[arg-type]
        return out

    def _display(self, callee: str, caller: str) -> str:
        entry, local = self.functions[callee]
        if self.functions[caller][0] is entry:
            return local
        return f"{local} ({entry.rel})"


def build_index(root: Path, files: Iterable[Path], cache: IndexCache,
                summarise_many: Any = None) -> ProjectIndex:
    """Summarise every file (from the cache where its content is unchanged).

    ``summarise_many``: a callable mapping [(text, module, is_package)] to summaries, so a
    caller can spread the work over processes; by default they are computed here."""
    from reviewbot.source import UnreadableSource, decode, read_bytes

    index = ProjectIndex(root)
    tops: dict[Path, Path] = {}
    todo: list[tuple[ModuleEntry, str, bool]] = []
    for path in files:
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            continue
        try:
            data = read_bytes(str(path))
        except UnreadableSource:
            continue
        digest = digest_of(data)
        name = module_name(path, tops, root)
        entry = ModuleEntry(name, rel, digest, None)
        cached = cache.get(digest + ":" + name)
        if cached is not None or (digest + ":" + name) in cache.used:
            entry.summary = cached
            entry.link_key = cache.link_key(digest + ":" + name)
        else:
            try:
                text = decode(data).text
            except UnreadableSource:
                text = None
            if text is not None:
                todo.append((entry, text, path.name == "__init__.py"))
        index.add(entry)
    if todo:
        jobs = [(text, entry.name, is_pkg) for entry, text, is_pkg in todo]
        results = summarise_many(jobs) if summarise_many else [summarise(*job) for job in jobs]
        for (entry, _, _), summary in zip(todo, results):
            entry.summary = summary
            entry.link_key = cache.put(entry.digest + ":" + entry.name, summary)
        index.summarised = len(todo)
    return index
