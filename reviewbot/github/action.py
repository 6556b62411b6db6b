"""The GitHub Action's inputs, turned into ``reviewbot review`` arguments.

action.yml passes every input through the environment (``INPUT_*``) and runs
``python -I -m reviewbot.github.action``; nothing an input holds reaches a shell. The
inputs follow reviewdog's conventions (``level``, ``workdir``, ``tool_name``,
``fail_level``, ``fail_on_error``, the ``github-pr-check`` reporter), and the earlier
names and values keep working. ``reviewbot_flags`` is split as a shell would split it
(``shlex``), never run by one, and may hold only the check flags in :data:`FLAGS`.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import sys
from typing import Mapping, Sequence, TextIO

from reviewbot.errors import ReviewbotError
from reviewbot.textsafe import printable

# reviewdog's reporter names -> reviewbot's; reviewbot's own names stay valid.
REPORTERS = {"github-pr-review": "github-pr-review", "github-pr-check": "github-check",
             "github-check": "github-check", "annotations": "annotations"}
# reviewdog's fail levels, without `info` (no finding is at that level); `none` as before.
FAIL_LEVELS = {"none": "none", "any": "any", "warning": "warning", "error": "error"}
LEVELS = ("info", "warning", "error")
FILTER_MODES = ("added", "diff_context", "file", "nofilter")
CONFIG_FROM = ("head", "base")
# The extra `reviewbot` flags `reviewbot_flags` may hold, each with a value.
FLAGS = ("--select", "--extend-select", "--ignore", "--option", "--exclude",
         "--extend-exclude")
_TOOL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}")
_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off", "")


def _get(env: Mapping[str, str], *names: str) -> str:
    """The first of ``names`` that is set and not blank (an input's name, then its
    aliases), stripped."""
    for name in names:
        value = env.get(f"INPUT_{name.upper()}")
        if value is not None and value.strip():
            return value.strip()
    return ""


def _choice(value: str, allowed: Sequence[str], name: str) -> str:
    if value not in allowed:
        raise ReviewbotError(f"input {name}: expected one of {', '.join(allowed)}, "
                             f"got {value!r}")
    return value


def _relative(value: str, name: str) -> str:
    """A path inside the repository (no absolute path, no ``..``, no control character)."""
    if any(ord(c) < 32 or c == "\x7f" for c in value):
        raise ReviewbotError(f"input {name}: control characters are not allowed")
    norm = posixpath.normpath(value.replace("\\", "/"))
    if norm.startswith("/") or norm == ".." or norm.startswith("../") or ":" in norm:
        raise ReviewbotError(f"input {name}: expected a path inside the repository, "
                             f"got {value!r}")
    return norm


def extra_flags(text: str) -> list[str]:
    """``reviewbot_flags`` as arguments: shlex-split, each a known check flag with its
    value (``--select RB1`` or ``--select=RB1``)."""
    try:
        words = shlex.split(text, comments=False, posix=True)
    except ValueError as exc:
        raise ReviewbotError(f"input reviewbot_flags: cannot be split ({exc})") from None
    out: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        flag, equals, value = word.partition("=")
        if flag not in FLAGS:
            raise ReviewbotError(f"input reviewbot_flags: {word!r} is not one of the flags "
                                 f"it may hold ({', '.join(FLAGS)})")
        if not equals:
            index += 1
            if index >= len(words) or words[index].startswith("-"):
                raise ReviewbotError(f"input reviewbot_flags: {flag} needs a value")
            value = words[index]
        if any(ord(c) < 32 or c == "\x7f" for c in value):
            raise ReviewbotError(f"input reviewbot_flags: {flag}: control characters are "
                                 "not allowed")
        out += [flag, value]
        index += 1
    return out


def review_argv(env: Mapping[str, str]) -> list[str]:
    """The arguments of ``reviewbot review`` for the action's inputs in ``env``."""
    args: list[str] = []
    filter_mode = _choice(_get(env, "filter_mode") or "added", FILTER_MODES, "filter_mode")
    fail_level = _get(env, "fail_level") or "error"
    if fail_level == "info":
        raise ReviewbotError("input fail_level: info is not a level of reviewbot's findings; "
                             "expected one of none, any, warning, error")
    fail_level = FAIL_LEVELS[_choice(fail_level, tuple(FAIL_LEVELS), "fail_level")]
    fail_on_error = (_get(env, "fail_on_error") or "false").lower()
    if fail_on_error not in _TRUE + _FALSE:
        raise ReviewbotError(f"input fail_on_error: expected true or false, got "
                             f"{fail_on_error!r}")
    if fail_on_error in _TRUE:  # reviewdog's older switch: fail on any finding
        fail_level = "any"
    reporter = REPORTERS[_choice(_get(env, "reporter") or "github-pr-review",
                                 tuple(REPORTERS), "reporter")]
    max_comments = _get(env, "max_comments") or "25"
    if not re.fullmatch(r"[1-9][0-9]{0,5}", max_comments):
        raise ReviewbotError(f"input max_comments: expected a whole number from 1, got "
                             f"{max_comments!r}")
    config_from = _choice(_get(env, "config_from") or "head", CONFIG_FROM, "config_from")
    args += ["--filter-mode", filter_mode, "--fail-level", fail_level, "--reporter", reporter,
             "--max-comments", max_comments, "--config-from", config_from]
    base_rule_modules = (_get(env, "base_rule_modules") or "false").lower()
    if base_rule_modules not in _TRUE + _FALSE:
        raise ReviewbotError(f"input base_rule_modules: expected true or false, got "
                             f"{base_rule_modules!r}")
    if base_rule_modules in _TRUE:
        if config_from != "base":
            raise ReviewbotError("input base_rule_modules: needs config_from base (the "
                                 "modules are read from the base commit)")
        args += ["--base-rule-modules"]
    level = _get(env, "level")
    if level:
        args += ["--level", _choice(level, LEVELS, "level")]
    tool_name = _get(env, "tool_name")
    if tool_name:
        if not _TOOL_NAME.fullmatch(tool_name):
            raise ReviewbotError("input tool_name: expected letters, digits, spaces, '.', "
                                 "'_' or '-' (at most 64)")
        args += ["--tool-name", tool_name]
    workdir = _relative(_get(env, "workdir") or ".", "workdir")
    config = _get(env, "config")
    if config:
        args += ["--config", _relative(posixpath.join(workdir, config), "config")]
    threshold = _get(env, "docstring_threshold")
    if threshold:
        if not re.fullmatch(r"[0-9]{1,3}(\.[0-9]+)?", threshold) or float(threshold) > 100:
            raise ReviewbotError(f"input docstring_threshold: expected a percentage, got "
                                 f"{threshold!r}")
        args += ["--docstring-threshold", threshold]
    baseline = _get(env, "baseline")
    if baseline:
        args += ["--baseline", _relative(posixpath.join(workdir, baseline), "baseline")]
    args += extra_flags(_get(env, "reviewbot_flags"))
    paths = _get(env, "paths").split() or ["."]
    args += ["--", *(_relative(posixpath.join(workdir, p), "paths") for p in paths)]
    return args


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
         out: TextIO | None = None) -> int:
    """Run ``reviewbot review`` with the action's inputs (``--dry-run``: print the
    arguments, one a line, instead)."""
    import os

    from reviewbot import cli

    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    try:
        args = review_argv(os.environ if env is None else env)
    except ReviewbotError as exc:
        sys.stderr.write(f"reviewbot: error: {printable(str(exc))}\n")
        return cli.EXIT_ERROR
    if argv == ["--dry-run"]:
        out.write("".join(f"{printable(a)}\n" for a in ["review", *args]))
        return cli.EXIT_CLEAN
    return cli.main(["review", *args])


if __name__ == "__main__":
    sys.exit(main())
