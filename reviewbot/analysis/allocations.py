"""Calls that allocate pinned host memory or CUDA events and streams (RB202, RB203)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from reviewbot.analysis.walk import walk as fast_walk
from reviewbot.analysis.gpu import Names

# What creates CUDA synchronisation objects (each is a driver call, not a cached allocation).
_SYNC_OBJECTS = frozenset({"torch.cuda.Event", "torch.cuda.Stream", "torch.Event",
                           "torch.Stream", "torch.cuda.streams.Event",
                           "torch.cuda.streams.Stream"})
# Guards that make pinning conditional on a CUDA machine.
_PIN_GUARDS = ("is_available", "is_pin_memory_available", "pin_memory", "is_cuda",
               "device_count", "cuda.is_initialized")


@dataclass(frozen=True)
class Allocation:
    """One call that pins host memory or creates a CUDA event or stream."""

    node: ast.Call
    what: str  # "pin_memory=True", ".pin_memory()", "torch.cuda.Event()"
    literal_pin: bool  # pin_memory=True spelled as a literal
    # The call itself allocates (a torch factory or tensor method), rather than passing
    # `pin_memory=` on to a helper that does (the helper's own call is the allocation).
    direct: bool = True


def _pin_argument(call: ast.Call) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == "pin_memory"), None)


def allocation(call: ast.Call, names: Names) -> Allocation | None:
    """The allocation ``call`` makes, if any."""
    pin = _pin_argument(call)
    func = call.func
    if pin is not None:
        direct = (names.qualify(func) or "").startswith("torch.") or (
            isinstance(func, ast.Attribute) and (func.attr.startswith("new_") or func.attr in (
                "to", "empty_like", "zeros_like", "ones_like", "full_like")))
        if isinstance(pin, ast.Constant):
            if pin.value is True:
                return Allocation(call, "pin_memory=True", True, direct)
            return None
        return Allocation(call, f"pin_memory={ast.unparse(pin)}", False, direct)
    if isinstance(func, ast.Attribute) and func.attr == "pin_memory" and not call.args:
        return Allocation(call, ".pin_memory()", False)
    qual = names.qualify(func) or ""
    if qual in _SYNC_OBJECTS:
        return Allocation(call, f"{qual}()", False)
    return None


def _is_grow_guard(test: ast.expr) -> bool:
    """``if buf is None`` or ``if buf.shape[0] < n``: allocate once, or only to grow."""
    for node in fast_walk(test):
        if isinstance(node, ast.Compare):
            if any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops) and any(
                    isinstance(c, ast.Constant) and c.value is None for c in node.comparators):
                return True
            if any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in node.ops):
                text = ast.unparse(node)
                if any(word in text for word in (".shape", ".numel(", "len(", ".size(")):
                    return True
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            if isinstance(node.operand, (ast.Name, ast.Attribute)):
                return True  # if not self._buf:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "hasattr":
            return True
    return False


def _is_pin_guard(test: ast.expr) -> bool:
    text = ast.unparse(test)
    return any(word in text for word in _PIN_GUARDS)


def allocations(func: ast.AST, names: Names,
                guarded: bool = False) -> Iterator[tuple[Allocation, bool, bool]]:
    """Each allocation in ``func``'s body (nested functions excluded), with whether it is
    under a grow-or-create-once guard and whether it is under a CUDA / pin-memory guard."""
    yield from _walk(getattr(func, "body", []), names, grow=False, pin=guarded)


def _walk(body: list[ast.stmt], names: Names, grow: bool,
          pin: bool) -> Iterator[tuple[Allocation, bool, bool]]:
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(stmt, (ast.If, ast.While)):
            inner_grow = grow or _is_grow_guard(stmt.test)
            inner_pin = pin or _is_pin_guard(stmt.test)
            yield from _exprs(stmt.test, names, grow, pin)
            yield from _walk(stmt.body, names, inner_grow, inner_pin)
            yield from _walk(stmt.orelse, names, grow, inner_pin)
            continue
        children = [getattr(stmt, a) for a in ("body", "orelse", "finalbody")
                    if isinstance(getattr(stmt, a, None), list)]
        handlers = getattr(stmt, "handlers", None) or []
        if children or handlers:
            for field, value in ast.iter_fields(stmt):
                if field not in ("body", "orelse", "finalbody", "handlers"):
                    for item in value if isinstance(value, list) else [value]:
                        if isinstance(item, ast.AST):
                            yield from _exprs(item, names, grow, pin)
            for child in children:
                yield from _walk(child, names, grow, pin)
            for handler in handlers:
                yield from _walk(handler.body, names, grow, pin)
            continue
        yield from _exprs(stmt, names, grow, pin)


def _exprs(node: ast.AST, names: Names, grow: bool,
           pin: bool) -> Iterator[tuple[Allocation, bool, bool]]:
    stack = [(node, pin)]
    while stack:
        current, guarded = stack.pop()
        if isinstance(current, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(current, ast.IfExp):
            inner = guarded or _is_pin_guard(current.test)
            stack.extend([(current.test, guarded), (current.body, inner),
                          (current.orelse, inner)])
            continue
        if isinstance(current, ast.Call):
            found = allocation(current, names)
            if found is not None:
                yield found, grow, guarded
        stack.extend((child, guarded) for child in ast.iter_child_nodes(current))
