"""Which lines a change adds or touches, from unified diffs (parsed with unidiff).

The same filter serves the pull-request review (patches from the GitHub API) and
``reviewbot check --since REF`` (``git diff REF``).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from reviewbot.errors import ReviewbotError

FILTER_MODES = ("added", "diff_context", "file", "nofilter")


@dataclass
class FileChange:
    """One changed file: the lines the change adds, and every line its hunks show."""

    path: str
    status: str = "modified"  # added | modified | renamed | removed
    added: set[int] = field(default_factory=set)
    context: set[int] = field(default_factory=set)  # new-side lines in hunks (added included)


@dataclass
class ChangedLines:
    """The changed files of a diff, by path (as in the repository, POSIX)."""

    files: dict[str, FileChange] = field(default_factory=dict)

    def keeps(self, path: str, line: int, end_line: int, mode: str) -> bool:
        """Whether a finding on ``path`` lines ``line..end_line`` passes the filter mode."""
        if mode == "nofilter":
            return True
        change = self.files.get(_norm(path))
        if change is None or change.status == "removed":
            return False
        if mode == "file":
            return True
        lines = change.added if mode == "added" else change.context
        return any(number in lines for number in range(line, max(line, end_line) + 1))


def _norm(path: str) -> str:
    path = path.replace("\\", "/")
    return path[2:] if path.startswith("./") else path


def parse_patch(path: str, patch: str | None, status: str = "modified") -> FileChange:
    """A file's change from its patch text (the hunks, as GitHub's files API gives them)."""
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    change = FileChange(_norm(path), status)
    if not patch:
        return change  # binary, too large, or a pure rename: no lines to comment on
    text = f"--- a/{path}\n+++ b/{path}\n{patch}"
    if not text.endswith("\n"):
        text += "\n"
    try:
        patched = PatchSet(text)
    except UnidiffParseError as exc:
        raise ReviewbotError(f"{path}: cannot parse the patch ({exc})") from None
    for patched_file in patched:
        for hunk in patched_file:
            for line in hunk:
                if line.target_line_no is None:
                    continue
                change.context.add(line.target_line_no)
                if line.is_added:
                    change.added.add(line.target_line_no)
    return change


def from_git(ref: str, paths: Iterable[str], cwd: Path) -> ChangedLines:
    """The lines changed in the working tree since ``ref`` (``git diff ref``)."""
    from unidiff import PatchSet

    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd,
                             capture_output=True, text=True, check=True).stdout.strip()
        proc = subprocess.run(["git", "diff", "--no-color", "--no-ext-diff", "-U3",
                               "--find-renames", ref, "--", *paths], cwd=cwd,
                              capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        raise ReviewbotError("--since needs a git repository") from None
    if proc.returncode != 0:
        reason = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "git diff failed"
        raise ReviewbotError(f"--since {ref}: {reason}")
    changed = ChangedLines()
    base = Path(top)
    for patched_file in PatchSet(proc.stdout):
        if patched_file.is_removed_file:
            continue
        target = patched_file.path
        shown = _norm(str((base / target).resolve().relative_to(cwd.resolve()))
                      if (base / target).resolve().is_relative_to(cwd.resolve()) else target)
        change = FileChange(shown, "added" if patched_file.is_added_file else "modified")
        for hunk in patched_file:
            for line in hunk:
                if line.target_line_no is not None:
                    change.context.add(line.target_line_no)
                    if line.is_added:
                        change.added.add(line.target_line_no)
        changed.files[shown] = change
    # Files git does not track yet are new in every line.
    untracked = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", "--",
                                *paths], cwd=cwd, capture_output=True, text=True)
    for name in untracked.stdout.splitlines():
        file = cwd / name
        if file.suffix == ".py" and file.is_file():
            count = len(file.read_bytes().splitlines()) or 1
            lines = set(range(1, count + 1))
            changed.files[_norm(name)] = FileChange(_norm(name), "added", lines, set(lines))
    return changed
