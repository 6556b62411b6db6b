"""The event-sync fix: read a CUDA tensor back through a pinned buffer and an event.

``x.tolist()`` in a method becomes ``self._to_list(x)``; the class gains the helper (with
a docstring that says why) and a class attribute holding its state: a ``threading.local``
in which each thread keeps, per device, a ``torch.cuda.Event`` and a pinned host buffer,
both made on first use. Nothing is added to the instances, so they build without CUDA and
``copy.deepcopy`` and ``pickle`` work on them as before; two threads never share a buffer.
In a free function the call becomes ``_to_list(x)`` and the module gains a helper with
the same state at module level. The helper returns exactly what ``x.tolist()`` returns,
for every shape and dtype: it copies into a flat pinned buffer (``device="cpu"``, whatever
the default device) viewed in ``x``'s shape, on the current stream of ``x``'s own device,
records the event on that stream and waits for it; the buffer grows (only when it is too
small or of another dtype) instead of overflowing or truncating.

The helper and its state are LibCST statements, added to the file's LibCST tree and
written in the file's own layout (``reviewbot.fixes.cst_insert``); the imports they need
are the fix's ``imports``, which ``reviewbot fix`` adds with LibCST's ``AddImportsVisitor``.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from typing import Any, Callable

from reviewbot.analysis.walk import walk as fast_walk
from reviewbot.finding import Edit, Fix
from reviewbot.lazy import libcst as cst
from reviewbot.source import Columns, split_lines

DEFAULT_HELPER = "_to_list"

_WHY = (
    "``tolist()`` on a CUDA tensor copies into pageable memory: the host waits for every\n"
    "queued kernel, and while it waits every other host thread's CUDA calls stall too (a\n"
    "KV-transfer thread's copy took 19 ms instead of 0.16 ms on an H200). Here the copy goes\n"
    "into a pinned buffer with ``non_blocking=True`` and the host waits on an event recorded\n"
    "after it: for this copy only. The result is exactly ``tensor.tolist()``'s; CPU tensors\n"
    "and machines without CUDA take the plain path. The buffer grows only when a tensor\n"
    "does not fit, so the hot path does not allocate. Each thread has its own event and\n"
    "buffer per device, made on first use and kept outside the object."
)

_SUMMARY = "Return ``tensor.tolist()``, waiting for this copy only, not for the whole GPU."
_STATE_COMMENT = "# State of {helper}(): per thread, an event and a pinned buffer per device."

# The helper's state and the helper (its docstring is added to the parsed function). The
# code is indented by one unit of its own, so the parse records each block as indented by
# the module's unit, and the helper takes the unit of the file it joins. `{self}` is the
# first parameter (`self, ` in a method), `{local}` the state as the helper reads it.
_HELPER = '''\
{state} = threading.local()

def {helper}({self}tensor: torch.Tensor):
    if not tensor.is_cuda:
        return tensor.tolist()
    count = tensor.numel()
    states = getattr({local}, "states", None)
    if states is None:
        states = {local}.states = {{}}
    event, flat = states.get(tensor.device) or (None, None)
    if flat is None or flat.dtype != tensor.dtype or flat.numel() < count:
        size = max(count, {capacity}flat.numel() if flat is not None else 0)
        flat = torch.empty(size, dtype=tensor.dtype, device="cpu", pin_memory=True)
        if event is None:
            event = torch.cuda.Event()
        states[tensor.device] = (event, flat)
    host = flat[:count].view(tensor.shape)
    stream = torch.cuda.current_stream(tensor.device)
    with torch.cuda.stream(stream):
        host.copy_(tensor, non_blocking=True)
        event.record(stream)
    event.synchronize()
    return host.tolist()
'''

# Producers whose dtype is known: index-returning reductions give int64.
_INT64_METHODS = {"argmax", "argmin", "multinomial", "argsort", "nonzero"}
_DTYPE_CASTS = {"long": "torch.int64", "int": "torch.int32", "float": "torch.float32",
                "half": "torch.float16", "bfloat16": "torch.bfloat16", "bool": "torch.bool",
                "double": "torch.float64"}
_HELPER_SHAPE = re.compile(r"non_blocking\s*=\s*True[\s\S]*\.synchronize\(\)[\s\S]*"
                           r"return\s+[\w.\[\]:]+\.tolist\(\)")


@dataclass(frozen=True)
class Request:
    """Whether the tensor holds one row per request, and what the buffer should be."""

    capacity: str  # what the buffer holds at least: "self.max_num_reqs * 1", or ""


@functools.lru_cache(maxsize=32)
def _parsed(helper: str, state: str, local: str, capacity: str, method: bool
            ) -> tuple[Any, Any]:
    """The helper's state assignment and function, parsed once for each spelling."""
    code = _HELPER.format(helper=helper, state=state, local=local, capacity=capacity,
                          self="self, " if method else "")
    assign, func = cst.parse_module(code).body
    return assign, func


def helper_statements(module: Any, indent: str, helper: str, state: str, local: str,
                      capacity: str, method: bool) -> list[Any]:
    """The helper's state (with a comment that says what it holds) and the helper, as
    LibCST statements for ``module``, to join a block indented by ``indent`` (a method's:
    the class body; a function's: the module, ``""``). Its docstring's lines are written
    at the helper's body indentation in that module."""
    assign, func = _parsed(helper, state, local, capacity, method)
    body = func.body
    inner = indent + (module.default_indent if body.indent is None else body.indent)
    why = "".join(f"{inner}{line}\n" for line in _WHY.split("\n"))
    doc = cst.SimpleStatementLine([cst.Expr(cst.SimpleString(
        f'"""{_SUMMARY}\n\n{why}{inner}"""'))])
    comment = cst.EmptyLine(comment=cst.Comment(_STATE_COMMENT.format(helper=helper)))
    # PEP 8: methods one blank line apart, top-level definitions two.
    blanks = [cst.EmptyLine(indent=False) for _ in range(1 if method else 2)]
    return [
        assign.with_changes(leading_lines=[comment]),
        func.with_changes(leading_lines=blanks,
                          body=body.with_changes(body=(doc, *body.body))),
    ]


def is_helper(func: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str],
              params: int) -> bool:
    """A function of the event-sync helper's shape: ``params`` parameters (``self`` and a
    tensor, or a tensor), a non-blocking copy, a synchronize, a ``.tolist()`` returned."""
    args = func.args
    if len(args.posonlyargs + args.args) != params or args.vararg or args.kwarg \
            or args.kwonlyargs:
        return False
    return helper_text("\n".join(lines[func.lineno - 1:func.end_lineno or func.lineno]))


def helper_text(text: str) -> bool:
    """Whether a function's text does what the helper does: a non-blocking copy, then a
    synchronize, then a ``.tolist()`` returned."""
    return bool(_HELPER_SHAPE.search(text))


def _self_writes(cls: ast.ClassDef) -> set[str]:
    """The attributes assigned as ``self.x`` anywhere in ``cls``.

    Only statements are visited (assignment, loop and ``with`` targets): the expressions
    inside them, most of a class's nodes, cannot assign an attribute.
    """
    writes: set[str] = set()
    stack: list[ast.AST] = list(cls.body)
    while stack:
        node = stack.pop()
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)  # a copy: the tree is not ours to change
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [item.optional_vars for item in node.items if item.optional_vars]
        while targets:
            target = targets.pop()
            if isinstance(target, (ast.Tuple, ast.List)):
                targets.extend(target.elts)
            elif isinstance(target, ast.Starred):
                targets.append(target.value)
            elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                    and target.value.id == "self":
                writes.add(target.attr)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            stack.extend(getattr(node, field, None) or ())
    return writes


def _free_name(base: str, taken: set[str]) -> str:
    name, number = base, 2
    while name in taken:
        name, number = f"{base}_{number}", number + 1
    return name


def _class_names(cls: ast.ClassDef) -> set[str]:
    """The names a class body binds (attributes, methods, nested classes)."""
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _is_method(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    decorators = {ast.unparse(d) for d in func.decorator_list}
    if decorators & {"staticmethod", "classmethod"}:
        return False
    args = func.args.posonlyargs + func.args.args
    return bool(args) and args[0].arg == "self"


def _producer(func: ast.AST, name: str, before: int) -> ast.expr | None:
    """The value last assigned to ``name`` before line ``before`` in ``func``."""
    found = None
    for node in fast_walk(func):
        if isinstance(node, ast.Assign) and node.lineno < before and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if found is None or node.lineno > found.lineno:
                found = node
    return found.value if found is not None else None


def _dtype_and_rows(value: ast.expr | None) -> tuple[str | None, str | None]:
    """The dtype and the shape after the first dimension of a producer, when known."""
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
        return None, None
    method = value.func.attr
    keywords = {k.arg: k.value for k in value.keywords}
    if method in ("argmax", "argmin"):
        keep = keywords.get("keepdim")
        rows = "1" if isinstance(keep, ast.Constant) and keep.value is True else ""
        return "torch.int64", rows
    if method in _INT64_METHODS:
        return "torch.int64", None
    if method in _DTYPE_CASTS and not value.args:
        return _DTYPE_CASTS[method], None
    if method == "to" and value.args and isinstance(value.args[0], ast.Attribute) \
            and isinstance(value.args[0].value, ast.Name) and value.args[0].value.id == "torch":
        return ast.unparse(value.args[0]), None
    return None, None


class EventSyncFixer:
    """Builds the event-sync fix of a readback in one file."""

    def __init__(self, tree: ast.Module, text: str, packs: Any, helper: str = DEFAULT_HELPER,
                 columns: Columns | None = None,
                 cst_module: Callable[[], Any] | None = None):
        """``cst_module()``: LibCST's tree of the file (parsed from ``text`` without it),
        asked for only when a fix inserts a helper."""
        self.tree = tree
        self.lines = split_lines(text)
        self._cst_module = cst_module or (lambda: cst.parse_module(text))
        self._module: Any = None
        self._insertions: dict[tuple[Any, ...], Edit | None] = {}
        self.columns = columns or Columns(text)
        self.packs = packs
        self.helper = helper
        self._imported = {a.name for node in tree.body if isinstance(node, ast.Import)
                          for a in node.names if a.asname is None}
        self._writes: dict[int, set[str]] = {}  # id of a class -> the self.x it assigns

    def _self_writes(self, cls: ast.ClassDef) -> set[str]:
        """The attributes ``cls`` assigns through ``self`` (one walk per class)."""
        writes = self._writes.get(id(cls))
        if writes is None:
            writes = self._writes[id(cls)] = _self_writes(cls)
        return writes

    # What replaces the call -----------------------------------------------------
    def fix(self, call: ast.Call, tensor: ast.expr,
            func: ast.FunctionDef | ast.AsyncFunctionDef, cls: ast.ClassDef | None,
            what: str, render: Callable[[str], str] | None = None) -> Fix | None:
        """The fix that reads ``tensor`` through the helper instead of ``call``.

        ``render(callee)``: the code of the call that replaces ``call`` (a LibCST node the
        rule builds around its own receiver node, so that a receiver over several lines,
        with its comments, is kept as written); without it, ``callee(<tensor's text>)`` for
        a tensor on one line."""
        if render is None:
            source = self._segment(tensor)
            if source is None:
                return None
            self._render: Callable[[str], str] = lambda callee: f"{callee}({source})"
        else:
            self._render = render
        if cls is not None and _is_method(func):
            edits = self._method_fix(call, tensor, func, cls)
        elif cls is None:
            edits = self._function_fix(call)
        else:
            return None  # a static or class method: no `self` to hold the state
        if edits is None:
            return None
        return Fix("safe", f"Read {what} through the event-synced `{self.helper}` helper",
                   tuple(edits), imports=self._imports_for(edits))

    def _imports_for(self, edits: list[Edit]) -> tuple[str, ...]:
        """``torch``, and ``threading`` when a helper (with its state) is inserted."""
        needed = ["torch"]
        if any("threading.local()" in edit.content for edit in edits):
            needed.insert(0, "threading")
        return tuple(m for m in needed if m not in self._imported)

    def _segment(self, node: ast.expr) -> str | None:
        """The source of a one-line expression."""
        if node.end_lineno != node.lineno or node.end_col_offset is None:
            return None
        line = self.lines[node.lineno - 1].encode("utf-8")
        return line[node.col_offset:node.end_col_offset].decode("utf-8", "replace")

    def _call_edit(self, call: ast.Call, replacement: str) -> Edit:
        return Edit(*self.columns.span(call), replacement)

    # Methods ----------------------------------------------------------------------
    def _method_fix(self, call: ast.Call, tensor: ast.expr,
                    func: ast.FunctionDef | ast.AsyncFunctionDef,
                    cls: ast.ClassDef) -> list[Edit] | None:
        methods = {node.name: node for node in cls.body
                   if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        existing = next((name for name, node in methods.items()
                         if is_helper(node, self.lines, 2)), None)
        if existing is not None:
            return [self._call_edit(call, self._render(f"self.{existing}"))]
        if self.helper in methods:
            return None
        taken = self._self_writes(cls) | set(methods) | _class_names(cls)
        request = self._request(tensor, func, call, cls)
        local = _free_name(f"_{self.helper.lstrip('_')}_local", taken)
        added = self._helper_edit(cls, local, f"self.{local}", request.capacity)
        if added is None:
            return None
        return [self._call_edit(call, self._render(f"self.{self.helper}")), added]

    def _helper_edit(self, cls: ast.ClassDef | None, state: str, local: str,
                     capacity: str) -> Edit | None:
        """The edit that adds the helper and its state at the end of ``cls`` (None: after
        the module's docstring and imports), made once per place and spelling; None when
        LibCST cannot place it. Only here, when a fix inserts a helper, does LibCST parse
        the whole file."""
        key = (id(cls), state, capacity)
        if key in self._insertions:
            return self._insertions[key]
        from reviewbot.fixes.cst_insert import add_after_imports, add_to_class

        edit = None
        try:
            if self._module is None:
                self._module = self._cst_module()
            module = self._module

            def build(indent: str) -> list[Any]:
                return helper_statements(module, indent, self.helper, state, local, capacity,
                                         method=cls is not None)

            edit = add_to_class(module, self.tree, cls, self.lines, build) if cls is not None \
                else add_after_imports(module, self.lines, build)
        except cst.ParserSyntaxError:
            pass  # code CPython parses and LibCST does not: no helper, no fix
        self._insertions[key] = edit
        return edit

    def _request(self, tensor: ast.expr, func: ast.AST, call: ast.Call,
                 cls: ast.ClassDef) -> Request:
        """A first buffer sized by the class's request bound when the tensor is
        per-request; otherwise one that fits the first tensor."""
        from reviewbot.analysis.buffers import LENGTH, BoundNames

        name = tensor.id if isinstance(tensor, ast.Name) else \
            tensor.attr if isinstance(tensor, ast.Attribute) else None
        producer = _producer(func, name, call.lineno) if isinstance(tensor, ast.Name) else None
        dtype, rows = _dtype_and_rows(producer)
        writes = self._self_writes(cls)
        if name and self.packs is not None and self.packs.size_bounds:
            bound = BoundNames(self.packs).limiting(name, LENGTH)
            spec = self.packs.size_bounds.get(bound) if bound else None
            spellings = (bound, *spec.aliases) if spec else ()
            have = next((s for s in spellings if s in writes), None)
            if have:
                return Request(f"self.{have} * {rows}, " if rows else f"self.{have}, ")
        return Request("")

    # Free functions ---------------------------------------------------------------
    def _function_fix(self, call: ast.Call) -> list[Edit] | None:
        names = {node.name for node in self.tree.body
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        names |= {t.id for node in self.tree.body if isinstance(node, ast.Assign)
                  for t in node.targets if isinstance(t, ast.Name)}
        existing = next((node.name for node in self.tree.body
                         if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                         and is_helper(node, self.lines, 1)),
                        None)
        if existing is not None:
            return [self._call_edit(call, self._render(existing))]
        if self.helper in names:
            return None
        state = f"_{self.helper.lstrip('_').upper()}_LOCAL"
        if state in names:
            return None
        added = self._helper_edit(None, state, state, "")
        if added is None:
            return None
        return [self._call_edit(call, self._render(self.helper)), added]
