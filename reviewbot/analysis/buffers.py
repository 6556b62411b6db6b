"""Buffers held by a class and the size bounds of their allocations and uses.

A buffer is an attribute assigned a shaped allocation (``self.buf = torch.empty((n, 1))``,
``np.zeros(n)``). Its *allocation bound* is the size bound (a rule pack's ``size-bounds``
key, such as ``max_model_len``) its leading dimension spells. Its *use bounds* come from
every place the class's methods touch it: the stop of a leading slice (``buf[:num_reqs]``,
``buf[:x.shape[0]]``), an index (``buf[positions]``), and the source of a copy into it
(``buf[:n].copy_(sampled_token_ids)``). What a count or an index is bounded by is read from
its name, through the pack's ``names`` of each bound.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterator

from reviewbot.analysis.walk import walk as fast_walk
from reviewbot.analysis.gpu import Names
from reviewbot.packs import PackData
from reviewbot.source import split_lines

_ALLOCATORS = frozenset({"empty", "zeros", "ones", "full", "rand", "randn", "randint"})
_LIBRARIES = ("torch", "numpy")
_DTYPE_BYTES = {
    "bool": 1, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int16": 2, "short": 2, "float16": 2, "half": 2, "bfloat16": 2,
    "int32": 4, "int": 4, "float32": 4, "float": 4, "uint32": 4,
    "int64": 8, "long": 8, "float64": 8, "double": 8, "uint64": 8,
}
# Default element types: torch's default float, numpy's float64.
_DEFAULT_DTYPE = {"torch": ("float32", 4), "numpy": ("float64", 8)}
_MAX_DEPTH = 4  # how many local assignments a count is followed through
# What a bound limits about a name: the value it holds, or the length of the array it holds.
VALUE, LENGTH = "value", "length"


@dataclass
class Use:
    """One place a method touches a buffer, and the bounds that place shows."""

    line: int
    text: str
    bounds: set[str] = field(default_factory=set)
    known: bool = True  # False: the buffer escapes or is used whole
    sources: list[str] = field(default_factory=list)  # what is copied into it

    def describe(self) -> str:
        """``line 9 `buf[:n]` (filled from `ids`)``."""
        text = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        filled = f" (filled from `{'`, `'.join(self.sources)}`)" if self.sources else ""
        return f"line {self.line} `{text}`{filled}"


@dataclass
class Buffer:
    """A buffer a class allocates, with its leading dimension's bound."""

    cls: str
    attr: str
    call: ast.Call
    dim: ast.expr  # the leading dimension's expression
    bound: str
    bound_nodes: list[ast.expr]  # the Name / Attribute nodes that spell the bound
    method: ast.FunctionDef | ast.AsyncFunctionDef
    library: str
    dtype: str
    itemsize: int
    row_elements: int | None  # product of the other dimensions, when they are literals
    pinned: bool
    uses: list[Use] = field(default_factory=list)
    reassigned: bool = False


class BoundNames:
    """Which size bound an identifier names or is limited by, from the rule packs."""

    def __init__(self, packs: PackData) -> None:
        self.bounds = packs.size_bounds
        self.spellings: dict[str, str] = {}
        self.names: dict[str, list[tuple[tuple[str, ...], str]]] = {VALUE: [], LENGTH: []}
        for bound, spec in self.bounds.items():
            self.spellings[bound] = bound
            for alias in spec.aliases:
                self.spellings[alias] = bound
            for name in spec.names:
                self.names[VALUE].append((tuple(name.split("_")), bound))
            for name in spec.arrays:
                self.names[LENGTH].append((tuple(name.split("_")), bound))

    def spelled(self, identifier: str) -> str | None:
        """The bound an identifier spells itself (``max_num_reqs``, ``max_num_seqs``)."""
        return self.spellings.get(identifier.lstrip("_"))

    def limiting(self, identifier: str, kind: str) -> str | None:
        """The bound that limits the value (``VALUE``: ``num_reqs`` -> ``max_num_reqs``) or
        the length (``LENGTH``: ``req_ids`` -> ``max_num_reqs``) of what this name holds,
        or None when no bound's names match or several do."""
        spelled = self.spelled(identifier) if kind == VALUE else None
        if spelled is not None:
            return spelled
        words = tuple(w for w in identifier.lower().split("_") if w)
        found = {bound for name, bound in self.names[kind] if _contains(words, name)}
        return found.pop() if len(found) == 1 else None


def _contains(words: tuple[str, ...], part: tuple[str, ...]) -> bool:
    size = len(part)
    return any(words[i:i + size] == part for i in range(len(words) - size + 1))


def _last_name(expr: ast.expr) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def _self_attr(expr: ast.expr) -> str | None:
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) \
            and expr.value.id == "self":
        return expr.attr
    return None


def _int(expr: ast.expr) -> int | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int) \
            and not isinstance(expr.value, bool):
        return expr.value
    return None


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _functions(cls: ast.ClassDef) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a block and of the blocks inside it (not nested definitions)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                yield from _statements(inner)
        for handler in getattr(stmt, "handlers", None) or []:
            yield from _statements(handler.body)


def _classes(body: list[ast.stmt]) -> Iterator[ast.ClassDef]:
    """Every class of a module, nested ones included, each once."""
    for stmt in _statements(body):
        if isinstance(stmt, ast.ClassDef):
            yield stmt
            yield from _classes(stmt.body)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _classes(stmt.body)


class BufferAnalyzer:
    """Finds the buffers of a module's classes and the bounds of their uses."""

    def __init__(self, tree: ast.Module, packs: PackData, text: str = "") -> None:
        self.tree = tree
        self.lines = split_lines(text) if text else None  # None: no text to prefilter by
        self.names = Names(tree)
        self.bounds = BoundNames(packs)

    # Allocations ----------------------------------------------------------------
    def allocation(self, call: ast.Call) -> str | None:
        """``torch`` or ``numpy`` when ``call`` allocates a shaped array there."""
        qual = self.names.qualify(call.func) or ""
        library, _, last = qual.rpartition(".")
        if last in _ALLOCATORS and library in _LIBRARIES:
            return library
        return None

    def dims(self, call: ast.Call) -> list[ast.expr] | None:
        """The dimensions an allocation call spells."""
        shape = _kw(call, "size") or _kw(call, "shape")
        if shape is None and call.args:
            first = call.args[0]
            if isinstance(first, (ast.Tuple, ast.List)):
                return list(first.elts)
            qual = self.names.qualify(call.func) or ""
            if qual.endswith("full"):  # torch.full(size, value)
                return [first]
            return [a for a in call.args if not isinstance(a, ast.Starred)]
        if isinstance(shape, (ast.Tuple, ast.List)):
            return list(shape.elts)
        return [shape] if shape is not None else None

    def bound_of_dim(self, dim: ast.expr) -> tuple[str, list[ast.expr]] | None:
        """The one bound a leading dimension spells, and the nodes that spell it."""
        found: dict[str, list[ast.expr]] = {}
        for node in fast_walk(dim):
            if isinstance(node, (ast.Name, ast.Attribute)):
                name = _last_name(node)
                bound = self.bounds.spelled(name) if name else None
                if bound is not None:
                    found.setdefault(bound, []).append(node)
        if len(found) != 1:
            return None
        bound, nodes = next(iter(found.items()))
        return bound, nodes

    def buffer(self, cls: ast.ClassDef, func: ast.FunctionDef | ast.AsyncFunctionDef,
               attr: str, call: ast.Call) -> Buffer | None:
        """The buffer ``self.attr = call`` allocates, when its leading dimension is a bound."""
        library = self.allocation(call)
        dims = self.dims(call) if library else None
        if not library or not dims:
            return None
        spelled = self.bound_of_dim(dims[0])
        if spelled is None:
            return None
        dtype, itemsize = _DEFAULT_DTYPE[library]
        dtype_expr = _kw(call, "dtype")
        if dtype_expr is not None:
            name = _last_name(dtype_expr) or (dtype_expr.value if isinstance(
                dtype_expr, ast.Constant) and isinstance(dtype_expr.value, str) else None)
            dtype = str(name) if name else "unknown"
            itemsize = _DTYPE_BYTES.get(dtype, 0)
        rows: int | None = 1
        for dim in dims[1:]:
            value = _int(dim)
            rows = rows * value if rows is not None and value is not None else None
        pin = _kw(call, "pin_memory")
        pinned = pin is not None and not (isinstance(pin, ast.Constant) and not pin.value)
        return Buffer(cls.name, attr, call, dims[0], spelled[0], spelled[1], func, library,
                      dtype, itemsize, rows, pinned)

    # Uses -----------------------------------------------------------------------
    def count_bound(self, expr: ast.expr | None, local: dict[str, ast.expr],
                    depth: int = 0, kind: str = VALUE) -> set[str] | None:
        """The bounds that limit a count or an index (``VALUE``), or the length of an array
        (``LENGTH``); None when not known."""
        if expr is None or depth > _MAX_DEPTH:
            return None
        if _int(expr) is not None:
            return set()
        if isinstance(expr, (ast.Name, ast.Attribute)):
            bound = self.bounds.limiting(_last_name(expr) or "", kind)
            if bound:  # the name says it: num_reqs = len(batch) is a request count
                return {bound}
            if isinstance(expr, ast.Name) and expr.id in local:
                return self.count_bound(local[expr.id], local, depth + 1, kind)
            return None
        if kind == LENGTH:
            while isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice) \
                    or isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
                    and expr.func.attr in ("to", "cpu", "cuda", "contiguous", "clone"):
                # ids[:n] is no longer than ids; ids.to(device) is as long
                expr = expr.value if isinstance(expr, ast.Subscript) else expr.func.value
            if isinstance(expr, (ast.Name, ast.Attribute)):
                return self.count_bound(expr, local, depth + 1, kind)
            return None
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) \
                and expr.value.attr == "shape" and _int(expr.slice) == 0:
            return self.count_bound(expr.value.value, local, depth + 1, LENGTH)  # x.shape[0]
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Name) and func.id == "len" and len(expr.args) == 1:
                return self.count_bound(expr.args[0], local, depth + 1, LENGTH)
            if isinstance(func, ast.Attribute) and func.attr == "size" and expr.args \
                    and _int(expr.args[0]) == 0:
                return self.count_bound(func.value, local, depth + 1, LENGTH)  # x.size(0)
            if isinstance(func, ast.Name) and func.id in ("int", "min") and expr.args:
                parts = [self.count_bound(a, local, depth + 1) for a in expr.args]
                known = [p for p in parts if p]
                if func.id == "min" and known:
                    return known[0] if len(known) == 1 else None
                return parts[0] if len(parts) == 1 else None
            return None
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
            left = self.count_bound(expr.left, local, depth + 1)
            right = self.count_bound(expr.right, local, depth + 1)
            if left is None or right is None:
                return None
            both = left | right
            return both if len(both) <= 1 else None
        return None

    def slice_use(self, sub: ast.Subscript, local: dict[str, ast.expr]) -> Use:
        """The bounds one subscript of a buffer shows."""
        lead = sub.slice.elts[0] if isinstance(sub.slice, ast.Tuple) and sub.slice.elts \
            else sub.slice
        text = ast.unparse(sub)
        if isinstance(lead, ast.Slice):
            if lead.upper is None:
                return Use(sub.lineno, text, known=False)  # buf[:] or buf[n:]: whole
            bounds = self.count_bound(lead.upper, local)
        else:
            bounds = self.count_bound(lead, local)
        if bounds is None:
            return Use(sub.lineno, text, known=False)
        return Use(sub.lineno, text, bounds)

    def uses_in(self, func: ast.FunctionDef | ast.AsyncFunctionDef,
                buffers: dict[str, Buffer]) -> None:
        """Record every use of the buffers in one method (one walk of its tree)."""
        parents: dict[ast.AST, ast.AST] = {}
        seen: dict[str, ast.expr | None] = {}  # locals assigned once, to follow counts
        hits: list[ast.Attribute] = []
        copies: list[ast.Call] = []
        stack: list[ast.AST] = [func]
        while stack:
            node = stack.pop()
            for child in ast.iter_child_nodes(node):
                parents[child] = node
                stack.append(child)
            if isinstance(node, ast.Attribute):
                if node.attr in buffers and _self_attr(node):
                    hits.append(node)
            elif isinstance(node, ast.Assign):
                if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    name = node.targets[0].id
                    seen[name] = None if name in seen else node.value
            elif isinstance(node, (ast.AugAssign, ast.For, ast.AnnAssign)):
                target = node.target
                if isinstance(target, ast.Name):
                    value = node.value if isinstance(node, ast.AnnAssign) else None
                    seen[target.id] = None if target.id in seen else value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "copy_" and isinstance(node.func.value, ast.Name) \
                    and node.args:
                copies.append(node)
        local = {name: value for name, value in seen.items() if value is not None}
        aliases: dict[str, Use] = {}
        for node in sorted(hits, key=lambda n: (n.lineno, n.col_offset)):
            self._use(buffers[node.attr], node, parents, local, aliases)
        # Copies into an alias of a slice: pinned = self.buf[:n]; pinned.copy_(src)
        for call in copies:
            name = call.func.value.id  # type: ignore[attr-defined]
            if name in aliases:
                self._add_source(aliases[name], call.args[0], local)

    def _use(self, buffer: Buffer, node: ast.Attribute, parents: dict[ast.AST, ast.AST],
             local: dict[str, ast.expr], aliases: dict[str, Use]) -> None:
        parent = parents.get(node)
        if isinstance(node.ctx, ast.Store):
            if not (isinstance(parent, ast.Assign) and parent.value is buffer.call):
                buffer.reassigned = True
            return
        if isinstance(parent, ast.Subscript) and parent.value is node:
            use = self.slice_use(parent, local)
            holder = parents.get(parent)
            if isinstance(holder, ast.Attribute) and holder.attr == "copy_":
                call = parents.get(holder)
                if isinstance(call, ast.Call) and call.args:
                    self._add_source(use, call.args[0], local)
            elif isinstance(holder, ast.Assign) and len(holder.targets) == 1 \
                    and isinstance(holder.targets[0], ast.Name):
                aliases[holder.targets[0].id] = use
            buffer.uses.append(use)
            return
        buffer.uses.append(Use(node.lineno, f"self.{buffer.attr}", known=False))

    def _add_source(self, use: Use, source: ast.expr, local: dict[str, ast.expr]) -> None:
        bounds = self.count_bound(source, local, kind=LENGTH)
        if bounds:
            use.bounds |= bounds
            use.known = True
            use.sources.append(ast.unparse(source))

    # The module -------------------------------------------------------------------
    def buffers(self) -> list[Buffer]:
        """Every bound-sized buffer of every class, with its uses."""
        result: list[Buffer] = []
        for cls in _classes(self.tree.body):
            found: dict[str, Buffer] = {}
            doubled: set[str] = set()
            methods = list(_functions(cls))
            for func in methods:
                for node in _statements(func.body):
                    if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                            and isinstance(node.value, ast.Call):
                        attr = _self_attr(node.targets[0])
                        if attr is None:
                            continue
                        buffer = self.buffer(cls, func, attr, node.value)
                        if buffer is None:
                            continue
                        if attr in found:
                            doubled.add(attr)
                        found[attr] = buffer
            for attr in doubled:  # allocated twice: which size holds is not clear
                found[attr].reassigned = True
            if not found:
                continue
            for func in methods:
                if self.lines is None:
                    wanted = found
                else:
                    text = "\n".join(self.lines[func.lineno - 1:func.end_lineno or func.lineno])
                    wanted = {a: b for a, b in found.items() if f".{a}" in text}
                if wanted:
                    self.uses_in(func, wanted)
            for buffer in found.values():
                buffer.uses.sort(key=lambda use: use.line)
            result.extend(found.values())
        return result


def size_words(packs: PackData) -> tuple[str, ...]:
    """Words a file must spell for a bound-sized buffer to be in it."""
    return tuple(dict.fromkeys(word for bound, spec in packs.size_bounds.items()
                               for word in (bound, *spec.aliases)))

