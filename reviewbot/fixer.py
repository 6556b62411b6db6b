"""Applying fixes: edits, then imports with LibCST, re-checked until nothing is left.

A file is fixed in passes. Each pass checks the current text, takes the fixes whose
applicability is allowed, keeps those that do not overlap an earlier one, applies their
edits and their imports, and makes sure the result still parses and compiles. Passes
repeat until no fix is left (at most ``MAX_PASSES``); a file that does not converge, or
whose result would not compile, is left exactly as it was, with a message.

Writes are atomic: a temporary file in the same folder, fsync, the original's mode, then
a rename, and only when the file on disk still holds the bytes that were read.
"""

from __future__ import annotations

import codecs
import difflib
import os
import re
import stat
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from reviewbot.config import Config
from reviewbot.engine import Checker, FileJob
from reviewbot.finding import Edit, Finding, Fix
from reviewbot.packs import PackData
from reviewbot.rule import Rule
from reviewbot.source import UnreadableSource, decode, line_starts, newline_of, read_bytes
from reviewbot.textsafe import printable

MAX_PASSES = 8


class FixError(Exception):
    """A file could not be fixed; the message says why, in one line."""


_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


@dataclass
class FileFix:
    """What fixing one file gave."""

    path: str
    old: str = ""
    new: str = ""
    applied: list[Finding] = field(default_factory=list)
    error: str | None = None
    data: bytes = b""  # the bytes read, to detect a change on disk before writing
    encoding: str = "utf-8"
    bom: bool = False

    @property
    def changed(self) -> bool:
        """Whether the fixes changed the text."""
        return self.error is None and self.new != self.old

    def diff(self) -> str:
        """A unified diff of the change."""
        # Lines end where Python's do (a form feed or U+2028 inside a line is not an end).
        old = _LINES.findall(self.old)
        new = _LINES.findall(self.new)
        shown = printable(self.path)
        lines = difflib.unified_diff(old, new, f"a/{shown}", f"b/{shown}")
        return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end "
                       "of file\n" for line in lines)


def allowed(fix: Fix | None, unsafe: bool) -> bool:
    """Whether a fix is applied: safe ones always, unsafe ones on request, never display."""
    if fix is None or not fix.edits:
        return False
    return fix.applicability == "safe" or (unsafe and fix.applicability == "unsafe")


def _offset(starts: list[int], text: str, line: int, column: int) -> int:
    if line - 1 >= len(starts):
        return len(text)
    return min(starts[line - 1] + column - 1, len(text))


def _spans(fix: Fix, starts: list[int], text: str) -> list[tuple[int, int]]:
    return [(_offset(starts, text, e.line, e.column), _offset(starts, text, e.end_line,
                                                               e.end_column))
            for e in fix.edits]


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    if a[0] == a[1] or b[0] == b[1]:  # insertions: at the same point, or inside
        return a[0] == b[0] or b[0] < a[0] < b[1] or a[0] < b[0] < a[1]
    return a[0] < b[1] and b[0] < a[1]


def choose(fixes: Sequence[Fix], text: str) -> list[Fix]:
    """The fixes of one pass: each whose edits overlap none of an earlier chosen one."""
    starts = line_starts(text)
    chosen: list[Fix] = []
    taken: list[tuple[int, int]] = []
    for fix in fixes:
        spans = _spans(fix, starts, text)
        if any(_overlaps(s, t) for s in spans for t in taken):
            continue
        if any(_overlaps(s, t) for i, s in enumerate(spans) for t in spans[i + 1:]):
            continue  # a fix whose own edits collide is malformed
        chosen.append(fix)
        taken.extend(spans)
    return chosen


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply non-overlapping edits; inserted text takes the file's newline style."""
    starts = line_starts(text)
    newline = newline_of(text)
    spans = sorted(((_offset(starts, text, e.line, e.column),
                     _offset(starts, text, e.end_line, e.end_column), e.content)
                    for e in edits), key=lambda s: (s[0], s[1]), reverse=True)
    for start, end, content in spans:
        if newline != "\n":
            content = content.replace("\n", newline)
        text = text[:start] + content + text[end:]
    return text


def add_imports(text: str, modules: Sequence[str]) -> str:
    """Add ``import module`` for each module the fixed code needs, with LibCST."""
    if not modules:
        return text
    import libcst
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor

    module = libcst.parse_module(text)
    context = CodemodContext()
    for name in modules:
        AddImportsVisitor.add_needed_import(context, name)
    return AddImportsVisitor(context).transform_module(module).code


def _compiles(text: str, path: str) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            compile(text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return f"{exc.__class__.__name__}: {getattr(exc, 'msg', exc)}"
    return None


class Fixer:
    """Fixes files with the run's configuration, or each with its own (``configs``, a
    reviewbot.config.Configs)."""

    def __init__(self, config: Config, packs: PackData, rules: Sequence[type[Rule]],
                 unsafe: bool = False, configs: Any = None, facts: Any = None) -> None:
        self.checker = Checker(config, packs, rules,
                               configs=configs.all if configs is not None else ())
        self.configs = configs
        self.unsafe = unsafe
        # shown path -> (hot functions, device facts) from the project's link, so that a
        # finding hot only through another module is fixed as it is reported.
        self.facts = facts

    def fix_text(self, path: str, rel: str, text: str, encoding: str = "utf-8",
                 config: int = 0) -> FileFix:
        """Fix a file's text in passes; ``new`` is the result (or ``error`` says why not)."""
        result = FileFix(path, old=text, new=text, encoding=encoding)
        hot, devices = self.facts(path) if self.facts is not None else (None, None)
        current = text
        for _ in range(MAX_PASSES):
            try:  # the bytes as the file stores them: its coding cookie must still hold
                data = current.encode(encoding)
            except UnicodeEncodeError:
                result.error = (f"the fixed text cannot be written in the file's encoding "
                                f"({encoding}); the file is left as it was")
                return result
            findings = self.checker.check(FileJob(path, rel, data, config=config,
                                                  linked_hot=hot,
                                                  linked_devices=devices)).findings
            fixable = [f for f in findings if allowed(f.fix, self.unsafe)]
            if not fixable:
                result.new = current
                return result
            fixable.sort(key=lambda f: (f.line, f.column, f.code))
            chosen = choose([f.fix for f in fixable if f.fix], current)
            edited = apply_edits(current, [e for fix in chosen for e in fix.edits])
            imports = tuple(dict.fromkeys(m for fix in chosen for m in fix.imports))
            try:
                edited = add_imports(edited, imports)
            except Exception as exc:  # LibCST could not parse the edited text
                result.error = (f"the fixes did not give valid Python "
                                f"({exc.__class__.__name__}); the file is left as it was")
                return result
            problem = _compiles(edited, path)
            if problem is not None:
                codes = ", ".join(sorted({f.code for f in fixable if f.fix in chosen}))
                result.error = (f"fixing {codes} would give code that does not compile "
                                f"({problem}); the file is left as it was")
                return result
            if edited == current:
                result.new = current
                return result
            result.applied.extend(f for f in fixable if f.fix in chosen)
            current = edited
        result.error = (f"fixes did not converge after {MAX_PASSES} passes; the file is "
                        "left as it was")
        return result

    def fix_file(self, path: Path, shown: str, rel: str) -> FileFix:
        """Read and fix one file (nothing is written). ``rel``: its path from the run's
        configuration's folder (from its own configuration's, with ``configs``)."""
        config = 0
        if self.configs is not None:
            from reviewbot.discovery import relative_to_root

            config = self.configs.index(path)
            rel = relative_to_root(path, self.configs.all[config].root)
        try:
            data = read_bytes(str(path), self.checker.config.max_file_size)
            source = decode(data)
        except UnreadableSource as exc:
            return FileFix(shown, error=f"skipped: {exc}")
        result = self.fix_text(shown, rel, source.text, source.encoding, config)
        # Each pass checked its text in the file's encoding, the last one included.
        result.data, result.encoding, result.bom = data, source.encoding, source.bom
        return result


def write_atomic(path: Path, fixed: FileFix) -> None:
    """Replace ``path`` with the fixed text, atomically, keeping its mode, encoding and BOM
    (raises FixError when the file is a link or changed since it was read)."""
    if path.is_symlink():
        raise FixError(f"{fixed.path}: is a symbolic link; not rewritten")
    data = fixed.new.encode(fixed.encoding)
    if fixed.bom:
        data = codecs.BOM_UTF8 + data
    folder = path.parent
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".reviewbot-tmp",
                                        dir=folder)
    except OSError as exc:
        raise FixError(f"{fixed.path}: cannot write ({exc.strerror})") from None
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        try:
            current = read_bytes(str(path))
        except UnreadableSource as exc:
            raise FixError(f"{fixed.path}: {exc}; not rewritten") from None
        if current != fixed.data:
            raise FixError(f"{fixed.path}: changed on disk while it was being fixed; "
                           "not rewritten")
        os.replace(temp, path)
        temp = ""
        try:
            dir_fd = os.open(folder, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dir_fd)
        except OSError:
            pass
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise FixError(f"{fixed.path}: cannot write ({exc.strerror})") from None
    finally:
        if temp:
            try:
                os.unlink(temp)
            except OSError:
                pass
