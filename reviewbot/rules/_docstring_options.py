"""Options shared by the docstring rules (RB301, RB302), so both count the same definitions."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

import pathspec

from reviewbot.rule import AstRule, Option

# Tests are left out by default: their functions are named for what they test.
DEFAULT_TEST_EXCLUDES = ["tests/", "test/", "test_*.py", "*_test.py", "conftest.py"]


def _check_globs(value: list[str]) -> str | None:
    try:
        pathspec.GitIgnoreSpec.from_lines(value)
    except Exception as exc:  # pathspec raises several types for bad patterns
        return f"not a valid gitignore-style pattern list ({exc})"
    return None


DOCSTRING_OPTIONS: tuple[Option, ...] = (
    Option("ignore-module", True, "Do not count module docstrings.", (bool,)),
    Option("ignore-private", False, "Do not count `_private` and `__mangled` names.", (bool,)),
    Option("ignore-magic", True, "Do not count `__dunder__` methods other than `__init__`.", (bool,)),
    Option("ignore-init", True, "Do not count `__init__` (documented by its class).", (bool,)),
    Option("ignore-nested", True, "Do not count classes and functions defined inside functions.", (bool,)),
    Option("ignore-overload", True, "Do not count `@overload` stubs.", (bool,)),
    Option("ignore-setters", True, "Do not count `@x.setter` / `@x.deleter` methods.", (bool,)),
    Option("exclude", DEFAULT_TEST_EXCLUDES,
           "Gitignore-style patterns (relative to the configuration's folder) of files "
           "left out of the count; tests by default. Set `[]` to count tests.",
           (list,), _check_globs),
)


def excluded(rel_path: str, settings: Mapping[str, Any]) -> bool:
    """Whether the docstring rules leave this file out under ``settings``."""
    patterns = settings.get("exclude") or []
    if not patterns:
        return False
    return _spec(tuple(patterns)).match_file(rel_path)


@lru_cache(maxsize=32)
def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def may_define(text: str, settings: Mapping[str, Any]) -> bool:
    """Whether a file can hold a definition the docstring rules count (exact, never False
    for a file that has one: ``def`` and ``class`` are keywords that every one spells)."""
    return not settings.get("ignore-module", True) or "def" in text or "class" in text


class DocstringRule(AstRule):
    """What RB301 and RB302 share: the options, the file shortcut, the counted definitions."""

    options: tuple[Option, ...] = DOCSTRING_OPTIONS

    @classmethod
    def applies_to(cls, text: str, settings: Mapping[str, Any], packs: Any = None) -> bool:
        """Only a file with a class or function (or a counted module) has anything to count."""
        return may_define(text, settings)

    def counted_definitions(self, ctx: Any) -> list[Any] | None:
        """The file's definitions that count under this rule's settings (None: file left out)."""
        from reviewbot.analysis.definitions import counted

        if excluded(ctx.rel_path, self.settings):
            return None
        return counted(ctx.definitions, self.settings)
