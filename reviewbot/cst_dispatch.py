"""One walk of a LibCST tree that runs many rules, isolating each rule's crashes."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Collection

import libcst

from reviewbot.rule import CstRule

_Table = dict[str, list[tuple[CstRule, Callable[[Any], Any]]]]

# Whitespace, comments, operators, commas and brackets: no built-in rule visits them, and
# they are half of a tree's nodes.
_TRIVIA_MODULES = frozenset({"libcst._nodes.whitespace", "libcst._nodes.op"})
_BRACKETS = frozenset({"LeftParen", "RightParen", "LeftSquareBracket", "RightSquareBracket",
                       "LeftCurlyBrace", "RightCurlyBrace"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def _trivia(kind: type) -> bool:
    return kind.__module__ in _TRIVIA_MODULES or kind.__name__ in _BRACKETS


def _trivia_names() -> frozenset[str]:
    names = set()
    for name in dir(libcst):
        value = getattr(libcst, name)
        if isinstance(value, type) and issubclass(value, libcst.CSTNode) and _trivia(value):
            names.add(name)
    return frozenset(names)


_TRIVIA_NAMES: list[frozenset[str]] = []


class BatchedVisitor(libcst.CSTVisitor):
    """Runs many rules in one walk of the tree; a rule that raises is dropped for the file.

    ``active(func)`` says which rules can report inside a module-level function or method
    (its nested functions share its answer): the others get no visits there but its own
    ``visit_FunctionDef``/``leave_FunctionDef``, and a function where none can report is
    not walked at all. Outside every function, and without ``active``, every rule gets
    every visit.
    """

    def __init__(self, rules: list[CstRule], on_crash: Callable[[CstRule, Exception], None],
                 walking: list[Any] | None = None,
                 active: Callable[[Any], Collection[CstRule]] | None = None):
        self.on_crash = on_crash
        self.active = active
        # The functions the walk is inside, outermost first (the providers compute spans
        # from the innermost one).
        self.walking = walking if walking is not None else []
        self.rules = rules
        self.crashed: set[int] = set()
        self._tables: dict[frozenset[int], tuple[_Table, _Table]] = {}
        self._all = self._tables_for(frozenset(id(rule) for rule in rules))
        # The tables in use: one per enclosing module-level function (or the module's).
        self._scopes: list[tuple[_Table, _Table]] = [self._all]

    def walk(self, module: libcst.CSTNode) -> None:
        """Visit a tree (a module, or a function parsed alone) in source order.
        Whitespace, comments and operator tokens are skipped unless a rule visits them (or
        visits attributes: LibCST's own walk then runs, at about twice the cost)."""
        if not _TRIVIA_NAMES:
            _TRIVIA_NAMES.append(_trivia_names())
        trivia = _TRIVIA_NAMES[0]
        for table in self._all:
            for key in table:
                if "_" in key or key in trivia:
                    module.visit(self)
                    return
        self._walk(module)

    def _walk(self, node: libcst.CSTNode) -> None:
        if self.on_visit(node):
            kind = type(node)
            names = _FIELDS.get(kind)
            if names is None:
                names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(node))
            for name in names:
                value = getattr(node, name)
                if isinstance(value, libcst.CSTNode):
                    if not _trivia(type(value)):
                        self._walk(value)
                elif isinstance(value, (list, tuple)):
                    for item in value:
                        if isinstance(item, libcst.CSTNode) and not _trivia(type(item)):
                            self._walk(item)
        self.on_leave(node)

    def _tables_for(self, ids: frozenset[int]) -> tuple[_Table, _Table]:
        known = self._tables.get(ids)
        if known is None:
            visits: _Table = {}
            leaves: _Table = {}
            for rule in self.rules:
                if id(rule) not in ids:
                    continue
                for attr in dir(rule):
                    if attr.startswith("visit_") and callable(getattr(rule, attr)):
                        visits.setdefault(attr[6:], []).append((rule, getattr(rule, attr)))
                    elif attr.startswith("leave_") and callable(getattr(rule, attr)):
                        leaves.setdefault(attr[6:], []).append((rule, getattr(rule, attr)))
            known = self._tables[ids] = (visits, leaves)
        return known

    def _call(self, table: _Table, key: str, node: Any) -> None:
        for rule, fn in table.get(key, ()):
            if id(rule) in self.crashed:
                continue
            try:
                fn(node)
            except Exception as exc:  # a rule's bug must not stop the others
                self.crashed.add(id(rule))
                self.on_crash(rule, exc)

    # The protocol libcst.CSTNode.visit expects of a visitor.
    def on_visit(self, node: Any) -> bool:
        if type(node) is libcst.FunctionDef:
            self.walking.append(node)
            self._call(self._all[0], "FunctionDef", node)
            if len(self.walking) > 1 or self.active is None:
                self._scopes.append(self._scopes[-1])  # a closure: its function's rules
                return True
            try:
                ids = frozenset(id(rule) for rule in self.active(node))
            except Exception:  # the rules report the analysis's failure as they read it
                ids = frozenset(id(rule) for rule in self.rules)
            self._scopes.append(self._tables_for(ids))
            return bool(ids)
        self._call(self._scopes[-1][0], type(node).__name__, node)
        return True

    def on_leave(self, original_node: Any) -> None:
        if type(original_node) is libcst.FunctionDef:
            self._scopes.pop()
            self._call(self._all[1], "FunctionDef", original_node)
            self.walking.pop()
            return
        self._call(self._scopes[-1][1], type(original_node).__name__, original_node)

    def on_visit_attribute(self, node: Any, attribute: str) -> None:
        self._call(self._scopes[-1][0], f"{type(node).__name__}_{attribute}", node)

    def on_leave_attribute(self, original_node: Any, attribute: str) -> None:
        self._call(self._scopes[-1][1], f"{type(original_node).__name__}_{attribute}",
                   original_node)
