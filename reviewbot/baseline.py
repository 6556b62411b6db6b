"""Baselines: the findings a tree had when it adopted reviewbot, so that a run reports only
the new ones.

``reviewbot check --write-baseline FILE`` records each finding as its rule, its path
relative to the repository root and two hashes: of the reported line's text (whitespace
normalised), and of that text with the nearest non-blank lines above and below it. No
line number is kept: a finding is still known when lines are added or removed above it.
``--baseline FILE`` then matches findings to entries, each entry at most once (the same
finding twice on identical lines needs two entries): first by rule, path and both hashes,
then, for what is left, by rule, path and the line's own hash (so an edit next to the line
does not bring it back). What matches is not reported; entries of the checked files that
match nothing are stale (the finding was fixed, or its line changed) and are listed.

The file is JSON::

    {"tool": "reviewbot", "version": 1,
     "findings": [{"code": "RB101", "path": "src/runner.py",
                   "line_hash": "…16 hex…", "context_hash": "…16 hex…",
                   "message": "…, for people reading the file; not matched"}]}

A baseline may come from anyone who can commit: it is read as data, at most
``MAX_BYTES``, checked entry by entry (anything malformed is one line and exit 2), and an
entry whose path is absolute or climbs out of the repository is ignored. Nothing in it is
ever opened or printed unescaped.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import tempfile
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Iterable, Sequence, TextIO

from reviewbot.errors import ReviewbotError
from reviewbot.finding import Finding
from reviewbot.reporters.sources import Sources, digest, normalised
from reviewbot.textsafe import line_start, printable

VERSION = 1
MAX_BYTES = 64 * 1024 * 1024
MAX_ENTRIES = 1_000_000
# How far to look for a non-blank neighbour of the reported line.
_NEIGHBOUR_REACH = 20
_HASH = re.compile(r"[0-9a-f]{16}")
_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
_MAX_PATH, _MAX_MESSAGE = 4096, 10_000


@dataclass(frozen=True)
class Entry:
    """One known finding."""

    code: str
    path: str  # relative to the repository root, with '/'
    line_hash: str
    context_hash: str
    message: str = ""

    def to_json(self) -> dict[str, str]:
        """The entry as the file holds it."""
        return {"code": self.code, "path": self.path, "line_hash": self.line_hash,
                "context_hash": self.context_hash, "message": self.message}


@dataclass
class Baseline:
    """The entries of a baseline file, and how many were ignored as outside the project."""

    entries: list[Entry]
    source: str
    outside: int = 0


@dataclass
class Applied:
    """What matching a run's findings against a baseline gave."""

    new: list[Finding] = field(default_factory=list)
    suppressed: int = 0
    stale: list[Entry] = field(default_factory=list)


def _neighbour(lines: Sequence[str], index: int, step: int) -> str:
    for _ in range(_NEIGHBOUR_REACH):
        index += step
        if not 0 <= index < len(lines):
            return ""
        text = normalised(lines[index])
        if text:
            return text
    return ""


def hashes(lines: Sequence[str] | None, line: int) -> tuple[str, str]:
    """(line hash, context hash) of 1-based ``line`` of ``lines`` (empty text without)."""
    if lines is None or not 0 < line <= len(lines):
        text = above = below = ""
    else:
        text = normalised(lines[line - 1])
        above = _neighbour(lines, line - 1, -1)
        below = _neighbour(lines, line - 1, 1)
    return digest(text), digest(above, text, below)


def entry_for(finding: Finding, sources: Sources) -> Entry | None:
    """The entry that records ``finding``; None when its file is outside the repository."""
    path = sources.relative(finding.path)
    if path is None:
        return None
    line_hash, context_hash = hashes(sources.lines(finding.path), finding.line)
    return Entry(finding.code, path, line_hash, context_hash, finding.message[:_MAX_MESSAGE])


# Reading and writing ----------------------------------------------------------------------
def write(target: str, findings: Iterable[Finding], sources: Sources) -> tuple[int, int]:
    """Write a baseline of ``findings`` to ``target`` (atomically); return how many were
    recorded and how many were left out as outside the repository."""
    entries, outside = [], 0
    for finding in findings:
        entry = entry_for(finding, sources)
        if entry is None:
            outside += 1
        else:
            entries.append(entry)
    entries.sort(key=lambda e: (e.path, e.code, e.line_hash, e.context_hash, e.message))
    document = {"tool": "reviewbot", "version": VERSION,
                "findings": [e.to_json() for e in entries]}
    text = json.dumps(document, indent=2, ensure_ascii=True) + "\n"
    folder = os.path.dirname(os.path.abspath(target))
    try:
        handle, temp = tempfile.mkstemp(prefix=".reviewbot-baseline-", dir=folder)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
            os.chmod(temp, 0o644)  # a file to commit, not a secret
            os.replace(temp, target)
        except BaseException:
            os.unlink(temp)
            raise
    except OSError as exc:
        raise ReviewbotError(f"{target}: cannot write the baseline "
                             f"({exc.strerror or exc.__class__.__name__})") from None
    return len(entries), outside


def read(path: str, shown: str | None = None) -> Baseline:
    """Read and check the baseline file ``path`` (ReviewbotError on anything wrong);
    ``shown`` names it in messages (default: ``path``)."""
    from reviewbot.source import UnreadableSource, read_bytes

    shown = path if shown is None else shown
    try:
        data = read_bytes(path, MAX_BYTES)
    except UnreadableSource as exc:
        raise ReviewbotError(f"{shown}: cannot read the baseline: {exc}") from None
    return parse(data, shown)


def parse(data: bytes, shown: str) -> Baseline:
    """Check a baseline's bytes; ``shown`` names it in errors."""

    def fail(why: str) -> ReviewbotError:
        return ReviewbotError(f"{shown}: not a reviewbot baseline: {why}")

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(f"not UTF-8 (byte offset {exc.start})") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"invalid JSON at line {exc.lineno}, column {exc.colno}") from None
    except (ValueError, RecursionError):  # nesting or a number past Python's limits
        raise fail("invalid JSON (nested too deeply, or a number too long)") from None
    if not isinstance(document, dict):
        raise fail("expected a JSON object")
    version = document.get("version")
    if type(version) is not int:
        raise fail("no 'version' number")
    if version != VERSION:
        raise fail(f"version {version} is not supported (this reviewbot reads version "
                   f"{VERSION}); write it again with --write-baseline")
    items = document.get("findings")
    if not isinstance(items, list):
        raise fail("'findings' must be a list")
    if len(items) > MAX_ENTRIES:
        raise fail(f"more than {MAX_ENTRIES} findings")
    entries: list[Entry] = []
    outside = 0
    for index, item in enumerate(items):
        where = f"findings[{index}]"
        if not isinstance(item, dict):
            raise fail(f"{where} must be an object")
        code, path = item.get("code"), item.get("path")
        if not isinstance(code, str) or not _CODE.fullmatch(code):
            raise fail(f"{where}.code must be a rule code")
        if not isinstance(path, str) or not path or len(path) > _MAX_PATH or "\x00" in path:
            raise fail(f"{where}.path must be a path")
        for key in ("line_hash", "context_hash"):
            value = item.get(key)
            if not isinstance(value, str) or not _HASH.fullmatch(value):
                raise fail(f"{where}.{key} must be 16 hexadecimal digits")
        message = item.get("message", "")
        if not isinstance(message, str) or len(message) > _MAX_MESSAGE:
            raise fail(f"{where}.message must be a string of at most {_MAX_MESSAGE} "
                       "characters")
        rel = _inside(path)
        if rel is None:
            outside += 1
            continue
        entries.append(Entry(code, rel, item["line_hash"], item["context_hash"], message))
    return Baseline(entries, shown, outside)


def _inside(path: str) -> str | None:
    """``path`` normalised, or None when it is absolute or climbs out of the repository."""
    if path.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", path):
        return None
    rel = posixpath.normpath(path)
    if rel == ".." or rel.startswith("../"):
        return None
    return rel


# Matching ---------------------------------------------------------------------------------
def _in_scope(path: str, scopes: Sequence[str]) -> bool:
    return any(scope == "." or path == scope or path.startswith(scope.rstrip("/") + "/")
               for scope in scopes)


def apply(findings: Sequence[Finding], baseline: Baseline, sources: Sources,
          scopes: Sequence[str] = (".",)) -> Applied:
    """Split ``findings`` into the new ones and those the baseline knows; the entries
    under ``scopes`` (repository-relative paths that were checked) that match nothing
    are stale."""
    exact: dict[tuple[str, str, str, str], deque[int]] = defaultdict(deque)
    loose: dict[tuple[str, str, str], deque[int]] = defaultdict(deque)
    for index, e in enumerate(baseline.entries):
        exact[(e.code, e.path, e.line_hash, e.context_hash)].append(index)
        loose[(e.code, e.path, e.line_hash)].append(index)
    used = [False] * len(baseline.entries)

    def take(candidates: deque[int] | None) -> bool:
        while candidates:
            index = candidates.popleft()
            if not used[index]:
                used[index] = True
                return True
        return False

    keys = [entry_for(finding, sources) for finding in findings]
    known = [False] * len(findings)
    for i, entry in enumerate(keys):
        if entry is not None:
            known[i] = take(exact.get((entry.code, entry.path, entry.line_hash,
                                       entry.context_hash)))
    for i, entry in enumerate(keys):
        if entry is not None and not known[i]:
            known[i] = take(loose.get((entry.code, entry.path, entry.line_hash)))
    result = Applied()
    for finding, is_known in zip(findings, known):
        if is_known:
            result.suppressed += 1
        else:
            result.new.append(finding)
    result.stale = [e for e, hit in zip(baseline.entries, used)
                    if not hit and _in_scope(e.path, scopes)]
    return result


def scopes_of(paths: Sequence[str], sources: Sources) -> list[str]:
    """The checked paths relative to the repository root (those inside it)."""
    found = [sources.relative(p) for p in paths or ["."]]
    return [p for p in found if p is not None]


# What `reviewbot check` says ---------------------------------------------------------------
STALE_SHOWN = 20


def record_run(target: str, findings: Sequence[Finding], sources: Sources, err: TextIO,
               quiet: bool = False) -> None:
    """``--write-baseline``: write the file and say so on standard error."""
    written, outside = write(target, findings, sources)
    if outside:
        err.write(f"reviewbot: warning: {outside} findings outside the repository "
                  f"{printable(str(sources.root))} are not in the baseline\n")
    if not quiet:
        noun = "finding" if written == 1 else "findings"
        err.write(f"reviewbot: wrote {written} {noun} to the baseline "
                  f"{printable(target)}\n")


def filter_run(baseline: Baseline, findings: Sequence[Finding], sources: Sources,
               paths: Sequence[str], err: TextIO, quiet: bool = False) -> list[Finding]:
    """``--baseline``: the findings it does not know; on standard error, how many it
    suppressed and which of its entries match nothing any more."""
    applied = apply(findings, baseline, sources, scopes_of(paths, sources))
    shown = printable(baseline.source)
    if baseline.outside:
        err.write(f"reviewbot: warning: {shown}: {baseline.outside} baseline entries name "
                  "paths outside the repository; ignored\n")
    if quiet:
        return applied.new
    stale = applied.stale
    err.write(f"reviewbot: baseline {shown}: {applied.suppressed} known "
              f"finding{'s' if applied.suppressed != 1 else ''} suppressed, "
              f"{len(stale)} entr{'ies' if len(stale) != 1 else 'y'} no longer "
              f"match{'' if len(stale) != 1 else 'es'} anything"
              f"{' (fixed, or the line changed):' if stale else ''}\n")
    for entry in stale[:STALE_SHOWN]:
        err.write(f"reviewbot:   {line_start(entry.path)}: {printable(entry.code)} "
                  f"{printable(entry.message)}\n")
    if len(stale) > STALE_SHOWN:
        err.write(f"reviewbot:   ... and {len(stale) - STALE_SHOWN} more; "
                  "--write-baseline writes the file again without them\n")
    return applied.new
