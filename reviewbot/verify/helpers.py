"""Finding the event-sync helpers in fixed files, and building callables from them.

A helper is found by its shape (a ``non_blocking=True`` copy, an ``.synchronize()``, a
``return ....tolist()``), as the fixer recognises one. Each call of it in the same file is
a fixed site. A method helper is called on a stand-in ``self`` that holds the state its
class gives it: the class attributes it reads (the per-thread state of the helpers
``reviewbot fix`` inserts) and what ``__init__`` assigns (a project's own event and pinned
buffer), with size bounds such as ``max_num_reqs`` set small so that growth is exercised
too.
"""

from __future__ import annotations

import ast
import textwrap
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from reviewbot.fixes.event_sync import is_helper
from reviewbot.source import UnreadableSource, decode, parse_quietly, read_bytes, split_lines

# The first line of the docstring of the helpers `reviewbot fix` inserts.
INSERTED_MARK = "Return ``tensor.tolist()``, waiting for this copy only"
# The value given to size bounds (self.max_num_reqs, ...) on the stand-in ``self``.
STAND_IN_BOUND = 8


class VerifyError(Exception):
    """Bad input for ``reviewbot verify``; the message is one line."""


@dataclass
class Site:
    """One call of a helper: what the fixer rewrote."""

    line: int
    text: str


@dataclass
class Helper:
    """An event-sync helper found in a file."""

    path: str
    name: str
    cls: str | None
    line: int
    source: str  # the function's source, dedented
    init_source: str  # the __init__ statements that assign the state it reads
    module_state: str  # module-level assignments it reads (for a free-function helper)
    inserted: bool = True  # written by `reviewbot fix` (else: the project's own)
    sites: list[Site] = field(default_factory=list)
    class_source: str = ""  # the class-level assignments of the attributes it reads

    @property
    def qualname(self) -> str:
        """``Class.method`` or ``function``."""
        return f"{self.cls}.{self.name}" if self.cls else self.name


def _text(path: Path) -> str:
    try:
        return decode(read_bytes(str(path))).text
    except UnreadableSource as exc:
        raise VerifyError(f"{path}: {exc}") from None


def _is_bound(name: str) -> bool:
    """A size bound (``max_num_reqs``): the stand-in ``self`` gives it a small value."""
    return name.startswith("max_") or name.endswith(("_len", "_reqs", "_seqs", "_tokens"))


def _state_attributes(func: ast.AST) -> set[str]:
    return {node.attr for node in ast.walk(func) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "self"
            and not _is_bound(node.attr)}


def find_helpers(files: list[Path], shown: Callable[[Path], str]) -> list[Helper]:
    """Every event-sync helper in the files, with the lines that call it."""
    helpers: list[Helper] = []
    for path in files:
        text = _text(path)
        try:
            tree = parse_quietly(text)
        except SyntaxError as exc:
            raise VerifyError(f"{shown(path)}: does not parse ({exc.msg}, line {exc.lineno})") \
                from None
        lines = split_lines(text)
        found: list[Helper] = []
        scopes: list[tuple[ast.ClassDef | None, list[ast.stmt]]] = [(None, tree.body)]
        scopes += [(node, node.body) for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
        for cls, body in scopes:
            for func in body:
                if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                        or not is_helper(func, lines, 1 if cls is None else 2):
                    continue
                source = textwrap.dedent(ast.get_source_segment(text, func) or "")
                init, state, class_state = "", "", ""
                if cls is not None:
                    init = _init_statements(cls, _state_attributes(func), text)
                    class_state = _class_statements(cls, _state_attributes(func), text)
                else:
                    state = _module_state(tree, func, text)
                doc = ast.get_docstring(func) or ""
                found.append(Helper(shown(path), func.name, cls.name if cls else None,
                                    func.lineno, source, init, state,
                                    doc.startswith(INSERTED_MARK),
                                    class_source=class_state))
        for helper in found:
            helper.sites = _calls(tree, helper, text)
        helpers.extend(found)
    return helpers


def _init_statements(cls: ast.ClassDef, attributes: set[str], text: str) -> str:
    init = next((node for node in cls.body if isinstance(node, ast.FunctionDef)
                 and node.name == "__init__"), None)
    if init is None:
        return ""
    lines = []
    for stmt in init.body:
        if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                and t.value.id == "self" and t.attr in attributes for t in stmt.targets):
            lines.append(textwrap.dedent(ast.get_source_segment(text, stmt) or ""))
    return "\n".join(lines)


def _class_statements(cls: ast.ClassDef, attributes: set[str], text: str) -> str:
    lines = []
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in attributes for t in stmt.targets):
            lines.append(textwrap.dedent(ast.get_source_segment(text, stmt) or ""))
    return "\n".join(lines)


def _module_state(tree: ast.Module, func: ast.AST, text: str) -> str:
    names = {node.id for node in ast.walk(func) if isinstance(node, ast.Name)}
    lines = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names
                                                for t in stmt.targets):
            lines.append(ast.get_source_segment(text, stmt) or "")
    return "\n".join(lines)


def _calls(tree: ast.Module, helper: Helper, text: str) -> list[Site]:
    sites = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or len(node.args) != 1:
            continue
        func = node.func
        if helper.cls is not None:
            hit = isinstance(func, ast.Attribute) and func.attr == helper.name and \
                isinstance(func.value, ast.Name) and func.value.id == "self"
        else:
            hit = isinstance(func, ast.Name) and func.id == helper.name
        if hit:
            sites.append(Site(node.lineno, ast.get_source_segment(text, node) or ""))
    return sorted(sites, key=lambda s: s.line)


class _StandIn:
    """``self`` for a method helper: size bounds are small numbers, the rest is set."""

    def __getattr__(self, name: str) -> Any:
        if _is_bound(name):
            return STAND_IN_BOUND
        raise AttributeError(name)


def build(helper: Helper, torch: Any) -> Callable[[Any], Any]:
    """A callable ``f(tensor)`` that runs the helper as its class or module would."""
    namespace: dict[str, Any] = {"torch": torch, "threading": threading}
    try:
        exec(compile(helper.source, f"<{helper.path}: {helper.qualname}>", "exec"), namespace)
    except Exception as exc:
        raise VerifyError(f"{helper.path}:{helper.line}: cannot build {helper.qualname}: "
                          f"{exc.__class__.__name__}: {exc}") from None
    function = namespace[helper.name]
    if helper.cls is None:
        if helper.module_state:
            exec(compile(helper.module_state, f"<{helper.path}>", "exec"), namespace)
        return function
    owner = _StandIn()
    local = {"self": owner, "torch": torch, "threading": threading}
    try:
        attributes: dict[str, Any] = {"torch": torch, "threading": threading}
        exec(compile(helper.class_source, f"<{helper.path}: {helper.cls}>", "exec"),
             attributes)
        for name, value in attributes.items():
            if name not in ("torch", "threading", "__builtins__"):
                setattr(owner, name, value)
        exec(compile(helper.init_source, f"<{helper.path}: __init__>", "exec"), local)
    except Exception as exc:
        raise VerifyError(f"{helper.path}: cannot set up the state of {helper.qualname} from "
                          f"__init__: {exc.__class__.__name__}: {exc}") from None
    return lambda tensor: function(owner, tensor)
