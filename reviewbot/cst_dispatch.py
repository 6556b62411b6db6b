"""One walk of a LibCST tree that runs many rules, isolating each rule's crashes."""

from __future__ import annotations

from typing import Any, Callable

import libcst

from reviewbot.rule import CstRule


class BatchedVisitor(libcst.CSTVisitor):
    """Runs many rules in one walk of the tree; a rule that raises is dropped for the file."""

    def __init__(self, rules: list[CstRule], on_crash: Callable[[CstRule, Exception], None],
                 walking: list[Any] | None = None,
                 cold: Callable[[Any], bool] | None = None):
        self.on_crash = on_crash
        # Whether a function's body can be skipped (every rule reports only in hot code,
        # and neither it nor a function around it is hot); its visit and leave still run.
        self.cold = cold
        # The functions the walk is inside, outermost first (the providers compute spans
        # from the innermost one).
        self.walking = walking if walking is not None else []
        self.visits: dict[str, list[tuple[CstRule, Callable[[Any], Any]]]] = {}
        self.leaves: dict[str, list[tuple[CstRule, Callable[[Any], Any]]]] = {}
        self.crashed: set[int] = set()
        for rule in rules:
            for attr in dir(rule):
                if attr.startswith("visit_") and callable(getattr(rule, attr)):
                    self.visits.setdefault(attr[6:], []).append((rule, getattr(rule, attr)))
                elif attr.startswith("leave_") and callable(getattr(rule, attr)):
                    self.leaves.setdefault(attr[6:], []).append((rule, getattr(rule, attr)))

    def _call(self, table: dict[str, list[tuple[CstRule, Callable[[Any], Any]]]], key: str,
              node: Any) -> None:
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
            self._call(self.visits, "FunctionDef", node)
            return self.cold is None or not self.cold(node)
        self._call(self.visits, type(node).__name__, node)
        return True

    def on_leave(self, original_node: Any) -> None:
        self._call(self.leaves, type(original_node).__name__, original_node)
        if type(original_node) is libcst.FunctionDef:
            self.walking.pop()

    def on_visit_attribute(self, node: Any, attribute: str) -> None:
        self._call(self.visits, f"{type(node).__name__}_{attribute}", node)

    def on_leave_attribute(self, original_node: Any, attribute: str) -> None:
        self._call(self.leaves, f"{type(original_node).__name__}_{attribute}", original_node)
