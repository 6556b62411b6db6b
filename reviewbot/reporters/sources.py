"""The checked files' lines, for the reports that show or fingerprint them (``full``,
``gitlab``, ``rdjson``) and for the baseline.

A file is read again after the check, as the engine reads it: at most ``max-file-size``
bytes, decoded as Python would, and only when it lies inside the project (a link out of
it is never followed). A file that cannot be read has no lines; the reports then do
without them.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
# Findings come sorted by file, so a few files at a time are enough to keep.
_KEPT_FILES = 8


def normalised(text: str) -> str:
    """A line as its fingerprint sees it: whitespace at either end dropped, every inner
    run of whitespace one space (re-indenting or re-spacing a line keeps its identity)."""
    return " ".join(text.split())


def digest(*parts: str, size: int = 16) -> str:
    """``size`` hex digits of the SHA-256 of ``parts``, each kept apart from the next."""
    sha = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        sha.update(len(data).to_bytes(8, "big"))
        sha.update(data)
    return sha.hexdigest()[:size]


class Sources:
    """Lines of the files that findings name (display paths: relative to ``cwd`` or
    absolute), and those paths relative to the repository root."""

    def __init__(self, cwd: Path, roots: Sequence[Path] = (), root: Path | None = None,
                 max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
        self.cwd = Path(os.path.abspath(cwd))
        self.roots = tuple(roots)
        self.root = Path(os.path.abspath(root)) if root is not None else self.cwd
        self.max_bytes = max_bytes
        self._files: OrderedDict[str, list[str] | None] = OrderedDict()

    def _absolute(self, path: str) -> str:
        return os.path.normpath(os.path.join(self.cwd, path))

    def lines(self, path: str) -> list[str] | None:
        """The lines of the file ``path`` names (without their ends), or None."""
        if path in self._files:
            self._files.move_to_end(path)
            return self._files[path]
        found = self._read(self._absolute(path))
        self._files[path] = found
        if len(self._files) > _KEPT_FILES:
            self._files.popitem(last=False)
        return found

    def line(self, path: str, number: int) -> str | None:
        """Line ``number`` (1-based) of ``path``, or None."""
        lines = self.lines(path)
        if lines is None or not 0 < number <= len(lines):
            return None
        return lines[number - 1]

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` names a folder (a finding about the whole checked set)."""
        return os.path.isdir(self._absolute(path))

    def _read(self, absolute: str) -> list[str] | None:
        from reviewbot.discovery import inside
        from reviewbot.source import UnreadableSource, decode, read_bytes, split_lines

        if not os.path.isfile(absolute):
            return None
        if self.roots and not inside(Path(absolute), self.roots):
            return None
        try:
            return split_lines(decode(read_bytes(absolute, self.max_bytes)).text)
        except (UnreadableSource, ValueError):
            return None

    def relative(self, path: str) -> str | None:
        """``path`` relative to the repository root, with ``/`` (``.`` for the root
        itself); None when it lies outside."""
        try:
            rel = os.path.relpath(self._absolute(path), self.root)
        except ValueError:  # another drive
            return None
        rel = posixpath.normpath(rel.replace(os.sep, "/"))
        if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
            return None
        return rel


def repository_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` holding ``.git``; ``start`` without one."""
    start = Path(os.path.abspath(start))
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start
