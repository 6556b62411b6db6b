"""What the allocation rules (RB202, RB203) share: which LibCST calls pin host memory or
create a CUDA event or stream, and which tests guard them.

The rules match the calls themselves; the analysis only gives qualified names
(``ImportedNameProvider``, so ``from torch.cuda import Event`` still matches) and hot paths.
"""

from __future__ import annotations

from typing import Any, Iterator, NamedTuple

from reviewbot.lazy import libcst as cst

# What creates CUDA synchronisation objects (each is a driver call, not a cached allocation).
SYNC_OBJECTS = frozenset({"torch.cuda.Event", "torch.cuda.Stream", "torch.Event",
                          "torch.Stream", "torch.cuda.streams.Event",
                          "torch.cuda.streams.Stream"})
# Tensor methods that allocate and take `pin_memory=` themselves.
_PINNING_METHODS = frozenset({"to", "empty_like", "zeros_like", "ones_like", "full_like"})
# Literals that are never a true `pin_memory=` flag.
_FALSE_LITERALS = ("Integer", "Float", "Imaginary", "SimpleString", "ConcatenatedString")
# Nodes whose body runs at another time than the code around them.
_SCOPES = ("FunctionDef", "ClassDef", "Lambda")


class Allocation(NamedTuple):
    """One call that pins host memory or creates a CUDA event or stream."""

    what: str  # "pin_memory=True", ".pin_memory()", "torch.cuda.Event()"
    literal_pin: bool  # pin_memory=True spelled as a literal
    # The call itself allocates (a torch factory or tensor method), rather than passing
    # `pin_memory=` on to a helper that does (the helper's own call is the allocation).
    direct: bool = True


def code_of(node: cst.CSTNode) -> str:
    """The source of a node as written (comments and line breaks inside it included)."""
    return cst.Module(body=[]).code_for_node(node)


def allocation(call: cst.Call, qualified: str | None) -> Allocation | None:
    """The allocation ``call`` makes, if any; ``qualified``: the callee's qualified name
    through the module's imports (``torch.empty``), when it has one."""
    func = call.func
    pin = next((arg.value for arg in call.args
                if arg.keyword is not None and arg.keyword.value == "pin_memory"), None)
    if pin is not None:
        direct = (qualified or "").startswith("torch.") or (
            isinstance(func, cst.Attribute) and (
                func.attr.value.startswith("new_") or func.attr.value in _PINNING_METHODS))
        if isinstance(pin, cst.Name) and pin.value in ("True", "False", "None"):
            if pin.value == "True":
                return Allocation("pin_memory=True", True, direct)
            return None
        if type(pin).__name__ in _FALSE_LITERALS:
            return None  # `pin_memory=1` is no literal True either
        return Allocation(f"pin_memory={code_of(pin)}", False, direct)
    if isinstance(func, cst.Attribute) and func.attr.value == "pin_memory" and not any(
            arg.keyword is None for arg in call.args):
        return Allocation(".pin_memory()", False)
    if qualified in SYNC_OBJECTS:
        return Allocation(f"{qualified}()", False)
    return None


def calls_under(*nodes: cst.CSTNode | None) -> Iterator[cst.Call]:
    """The calls inside ``nodes`` (themselves included), not inside a nested function,
    class or lambda: those run at another time."""
    stack = [node for node in nodes if node is not None]
    while stack:
        node = stack.pop()
        if type(node).__name__ in _SCOPES:
            continue
        if isinstance(node, cst.Call):
            yield node
        stack.extend(node.children)


def is_grow_guard(test: cst.BaseExpression) -> bool:
    """``if buf is None`` or ``if buf.shape[0] < n``: allocate once, or only to grow."""
    stack: list[Any] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Comparison):
            for target in node.comparisons:
                operator, value = target.operator, target.comparator
                if isinstance(operator, (cst.Is, cst.IsNot)) and isinstance(value, cst.Name) \
                        and value.value == "None":
                    return True
            if any(isinstance(t.operator, (cst.LessThan, cst.LessThanEqual, cst.GreaterThan,
                                           cst.GreaterThanEqual)) for t in node.comparisons):
                text = code_of(node)
                if any(word in text for word in (".shape", ".numel(", "len(", ".size(")):
                    return True
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not) and \
                isinstance(node.expression, (cst.Name, cst.Attribute)):
            return True  # if not self._buf:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and \
                node.func.value == "hasattr":
            return True
        if type(node).__name__ not in _SCOPES:
            stack.extend(node.children)
    return False


def pins_into_cache(node: cst.If) -> bool:
    """``if not buf.is_pinned(): cache[key] = buf.pin_memory()``: the pinned copy replaces
    a cached one, so the next call finds it pinned. Pinning a local copy
    (``t = t.pin_memory()``) happens on every call."""
    if not _tests_not_pinned(node.test):
        return False
    for statement in _statements(node.body):
        if isinstance(statement, cst.Assign) and any(
                isinstance(t.target, (cst.Subscript, cst.Attribute)) for t in statement.targets):
            return True
    return False


def _tests_not_pinned(test: cst.BaseExpression) -> bool:
    stack: list[Any] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            operand = node.expression
            if isinstance(operand, cst.Call) and isinstance(operand.func, cst.Attribute) and \
                    operand.func.attr.value == "is_pinned":
                return True
        if type(node).__name__ not in _SCOPES:
            stack.extend(node.children)
    return False


def _statements(block: Any) -> Iterator[Any]:
    """The small statements of a block (not of blocks nested in it)."""
    for line in getattr(block, "body", ()):
        if isinstance(line, cst.SimpleStatementLine):
            yield from line.body
