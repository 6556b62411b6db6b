"""The definitions of a module (module, classes, functions) and whether each is documented.

Built on CPython's ``ast``: it is about ten times faster than a LibCST parse and is the
tree that ``interrogate`` reads, so coverage figures agree with it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from reviewbot.source import Columns

_FUNCTION_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Definition:
    """One definition: where it is, what kind, and the traits that coverage options ignore."""

    kind: str  # "module" | "class" | "function" | "method"
    name: str  # dotted within the module, e.g. "Runner.execute_model"
    line: int
    column: int  # 1-based, in characters
    documented: bool
    private: bool  # _name or __name (not dunder)
    magic: bool  # __name__ other than __init__
    init: bool  # __init__
    nested: bool  # defined inside a function
    overload: bool  # @overload / @typing.overload stub
    setter: bool  # @x.setter / @x.deleter
    parent: int | None  # index of the enclosing definition in the list


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _has_docstring(node: ast.AST) -> bool:
    doc = ast.get_docstring(node, clean=False)  # type: ignore[arg-type]
    return doc is not None and doc.strip() != ""


def collect_definitions(tree: ast.Module, columns: Columns) -> list[Definition]:
    """List the module and every class and function in it, outermost first (``columns``:
    the module's text, for the definitions' character columns)."""
    defs: list[Definition] = [
        Definition("module", "<module>", 1, 1, _has_docstring(tree), False, False, False,
                   False, False, False, None)
    ]
    _walk(defs, tree.body, 0, "", False, False, columns)
    return defs


def _walk(defs: list[Definition], body: Iterable[ast.stmt], parent: int, prefix: str,
          in_function: bool, in_class: bool, columns: Columns) -> None:
    for node in body:
        if isinstance(node, (ast.ClassDef, *_FUNCTION_TYPES)):
            name = node.name
            is_function = isinstance(node, _FUNCTION_TYPES)
            decorators = [_decorator_name(d) for d in node.decorator_list]
            dunder = name.startswith("__") and name.endswith("__") and len(name) > 4
            kind = "class" if not is_function else ("method" if in_class else "function")
            defs.append(
                Definition(
                    kind=kind,
                    name=prefix + name,
                    line=node.lineno,
                    column=columns.column(node.lineno, node.col_offset),
                    documented=_has_docstring(node),
                    private=name.startswith("_") and not dunder,
                    magic=dunder and name != "__init__",
                    init=name == "__init__",
                    nested=in_function,
                    overload=is_function and any(
                        d in ("overload", "typing.overload", "typing_extensions.overload")
                        for d in decorators),
                    setter=is_function and any(
                        d.endswith(".setter") or d.endswith(".deleter") for d in decorators),
                    parent=parent,
                )
            )
            index = len(defs) - 1
            _walk(defs, node.body, index, prefix + name + ".",
                  in_function or is_function, not is_function, columns)
        else:
            # Definitions under if/try/with/for blocks still belong to this scope.
            for child_body in _child_bodies(node):
                _walk(defs, child_body, parent, prefix, in_function, in_class, columns)


def _child_bodies(node: ast.stmt) -> Iterable[list[ast.stmt]]:
    for attr in ("body", "orelse", "finalbody"):
        value = getattr(node, attr, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            yield value
    for handler in getattr(node, "handlers", ()) or ():
        yield handler.body
    for case in getattr(node, "cases", ()) or ():
        yield case.body


# Option name -> the Definition trait it ignores.
IGNORE_OPTIONS: Mapping[str, str] = {
    "ignore-private": "private",
    "ignore-magic": "magic",
    "ignore-init": "init",
    "ignore-nested": "nested",
    "ignore-overload": "overload",
    "ignore-setters": "setter",
}


def counted(defs: list[Definition], settings: Mapping[str, Any]) -> list[Definition]:
    """The definitions that count for coverage under ``settings``.

    An ignored class or function takes what it contains with it (the methods of a
    private class are not public API); the module never hides its contents.
    """
    ignored = [False] * len(defs)
    result = []
    for i, d in enumerate(defs):
        if d.kind == "module":
            if settings.get("ignore-module", True):
                ignored[i] = True
                continue
        else:
            own = any(settings.get(opt, False) and getattr(d, trait)
                      for opt, trait in IGNORE_OPTIONS.items())
            inherited = d.parent is not None and d.parent != 0 and ignored[d.parent]
            if own or inherited:
                ignored[i] = True
                continue
        result.append(d)
    return result
