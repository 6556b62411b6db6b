"""A project's own rules: the ``CstRule`` classes of the modules ``rule-modules`` names.

Importing a module runs its code, so the modules come only from configuration the user
trusts: ``check`` and ``fix`` read them from the project's own configuration, never with
``--isolated`` or ``REVIEWBOT_NO_PROJECT_CODE=1``, and ``review`` never from the pull
request's checkout. Every mistake (a name that is not a module name, a module that does
not import, a class that is not a CstRule, a code that clashes) is one line, exit 2.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import keyword
import os
import re
import sys
from pathlib import Path
from typing import Sequence

from reviewbot.errors import ConfigError
from reviewbot.rule import CstRule, Rule

NO_PROJECT_CODE = "REVIEWBOT_NO_PROJECT_CODE"
CODE = re.compile(r"[A-Z]+[0-9]+")
NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def project_code_allowed() -> bool:
    """Whether the environment lets a run import the project's own rule modules."""
    return os.environ.get(NO_PROJECT_CODE, "").strip().lower() in ("", "0", "false", "no")


def module_name_problem(name: str) -> str | None:
    """Why ``name`` is not a dotted module name (None when it is one)."""
    parts = name.split(".")
    if not name or not all(part.isidentifier() and not keyword.iskeyword(part)
                           for part in parts):
        return (f"expected a dotted module name such as my_project.lint_rules, got "
                f"{name!r}")
    return None


def load_rule_modules(names: Sequence[str], root: Path, source: str,
                      key: str) -> tuple[tuple[type[CstRule], ...], str]:
    """Import the modules (``root`` first on ``sys.path``) and return their CstRule
    classes, with a digest of the modules' files (so that an edit of a rule is a new
    cache key). Raises ConfigError with one line for any mistake."""
    from reviewbot.registry import BUILTIN

    builtin_codes = {r.code for r in BUILTIN}
    builtin_names = {r.name for r in BUILTIN}
    folder = str(root.resolve())
    if folder not in sys.path:
        # Kept there for the run: worker processes unpickle the rules by module name.
        sys.path.insert(0, folder)
    importlib.invalidate_caches()
    found: list[type[CstRule]] = []
    digest = hashlib.blake2b(digest_size=12)
    for name in names:
        problem = module_name_problem(name)
        if problem is not None:
            raise ConfigError(source, key, problem)
        module = _import(name, root, source, key)
        file = getattr(module, "__file__", None)
        if file:
            try:
                digest.update(name.encode() + b"\0" + Path(file).read_bytes())
            except OSError:
                pass
        own = [obj for obj in vars(module).values()
               if inspect.isclass(obj) and issubclass(obj, Rule) and obj.__module__ == name
               and obj not in (Rule, CstRule) and getattr(obj, "code", None) is not None]
        for cls in own:
            if not issubclass(cls, CstRule):
                raise ConfigError(source, key, f"{name}.{cls.__name__} is not a CstRule "
                                  "(a project's own rules are LibCST rules: subclass "
                                  "reviewbot.rule.CstRule)")
        if not own:
            raise ConfigError(source, key, f"module {name!r} defines no CstRule with a code")
        for cls in own:
            _check_rule(cls, name, source, key, builtin_codes, builtin_names, found)
            found.append(cls)
    return tuple(found), digest.hexdigest()


def _import(name: str, root: Path, source: str, key: str) -> object:
    loaded = sys.modules.get(name)
    if loaded is not None:
        file = getattr(loaded, "__file__", None)
        inside = file is not None and Path(file).resolve().is_relative_to(root.resolve())
        if not inside:
            raise ConfigError(source, key, f"module {name!r} is already imported from "
                              f"{file or 'Python itself'}, not from the project")
        return loaded
    try:
        return importlib.import_module(name)
    except BaseException as exc:  # its code is the project's: whatever it raises is one line
        if isinstance(exc, KeyboardInterrupt):
            raise
        text = str(exc).splitlines()[0] if str(exc) else ""
        raise ConfigError(source, key, f"cannot import {name!r}: "
                          f"{exc.__class__.__name__}{': ' + text if text else ''}") from None


def _check_rule(cls: type[CstRule], module: str, source: str, key: str,
                builtin_codes: set[str], builtin_names: set[str],
                found: list[type[CstRule]]) -> None:
    where = f"{module}.{cls.__name__}"
    code, name = getattr(cls, "code", None), getattr(cls, "name", None)
    if not isinstance(code, str) or not CODE.fullmatch(code):
        raise ConfigError(source, key, f"{where}: code {code!r}: expected capital letters "
                          "then digits, such as ENG101")
    if code in builtin_codes or code.startswith("RB"):
        raise ConfigError(source, key, f"{where}: code {code} is reviewbot's (RB codes are "
                          "reserved for built-in rules)")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ConfigError(source, key, f"{where}: name {name!r}: expected a kebab-case name "
                          "such as numpy-on-cuda-tensor")
    if name in builtin_names:
        raise ConfigError(source, key, f"{where}: name {name!r} is a built-in rule's")
    for other in found:
        if other.code == code or other.name == name:
            shared = f"the code {code}" if other.code == code else f"the name {name}"
            raise ConfigError(source, key, f"{where} and {other.__module__}."
                              f"{other.__name__} share {shared}")
    if not isinstance(getattr(cls, "summary", None), str):
        cls.summary = (inspect.getdoc(cls) or name).splitlines()[0].rstrip(".")
