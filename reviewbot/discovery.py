"""Which files a run checks: the paths given, their ``.py`` files, less what is excluded.

Excludes and ``.gitignore`` files are gitignore-style patterns matched with pathspec.
Directory links are not followed (so link loops cannot hang a run); a path named on
the command line is always taken as given.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Sequence

import pathspec

from reviewbot.config import Config
from reviewbot.errors import ReviewbotError

PYTHON_SUFFIXES = (".py", ".pyi")


def relative_to_root(path: Path, root: Path) -> str:
    """``path`` as a POSIX path relative to ``root`` (absolute, without '/', if outside)."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix().lstrip("/")


def display_path(path: Path, cwd: Path) -> str:
    """How a file is named in reports: relative to the working directory when possible."""
    try:
        return path.relative_to(cwd).as_posix()
    except ValueError:
        return path.as_posix()


class GitIgnores:
    """The ``.gitignore`` files (and ``.git/info/exclude``) that apply to a path."""

    def __init__(self) -> None:
        self._specs: dict[Path, pathspec.GitIgnoreSpec | None] = {}
        self._git_roots: dict[Path, Path | None] = {}

    def _git_root(self, folder: Path) -> Path | None:
        if folder not in self._git_roots:
            if (folder / ".git").exists():
                self._git_roots[folder] = folder
            elif folder.parent == folder:
                self._git_roots[folder] = None
            else:
                self._git_roots[folder] = self._git_root(folder.parent)
        return self._git_roots[folder]

    def _spec(self, folder: Path, is_root: bool) -> pathspec.GitIgnoreSpec | None:
        if folder not in self._specs:
            lines: list[str] = []
            sources = [folder / ".gitignore"]
            if is_root:
                sources.append(folder / ".git" / "info" / "exclude")
            for source in sources:
                try:
                    lines += source.read_text(encoding="utf-8", errors="replace").splitlines()
                except OSError:
                    pass
            try:
                self._specs[folder] = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
            except Exception:  # a malformed .gitignore is git's business, not ours
                self._specs[folder] = None
        return self._specs[folder]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Whether git ignores ``path`` (an absolute, resolved path)."""
        root = self._git_root(path.parent)
        if root is None:
            return False
        chain = []
        folder = path.parent
        while folder != root:
            chain.append(folder)
            folder = folder.parent
        folders = [root, *reversed(chain)]
        verdict: bool | None = None
        for folder in folders:
            spec = self._spec(folder, folder == root)
            if spec is None:
                continue
            rel = path.relative_to(folder).as_posix() + ("/" if is_dir else "")
            result = spec.check_file(rel).include
            if result is not None:
                verdict = result
        return bool(verdict)


def discover(paths: Sequence[str], config: Config, force_exclude: bool = False,
             cwd: Path | None = None) -> list[Path]:
    """The files to check, sorted and without duplicates (raises ReviewbotError)."""
    cwd = cwd or Path.cwd()
    exclude = config.exclude_spec()
    gitignores = GitIgnores() if config.respect_gitignore else None
    found: dict[Path, None] = {}

    def is_excluded(path: Path, is_dir: bool) -> bool:
        rel = relative_to_root(path, config.root) + ("/" if is_dir else "")
        if exclude.match_file(rel):
            return True
        return gitignores is not None and gitignores.ignored(path, is_dir)

    def ancestors_excluded(path: Path) -> bool:
        for parent in path.parents:
            if parent == config.root or config.root not in parent.parents:
                break
            if is_excluded(parent, True):
                return True
        return False

    for raw in paths or ["."]:
        given = (cwd / raw)
        if not os.path.lexists(given):
            raise ReviewbotError(f"{raw}: no such file or directory")
        absolute = Path(os.path.abspath(given))
        if given.is_dir():
            if force_exclude and (is_excluded(absolute, True) or ancestors_excluded(absolute)):
                continue
            for file in _walk(absolute, is_excluded):
                found.setdefault(file, None)
        else:
            if force_exclude and (is_excluded(absolute, False) or ancestors_excluded(absolute)):
                continue
            found.setdefault(absolute, None)
    return sorted(found)


def _walk(top: Path, is_excluded) -> Iterator[Path]:
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue  # unreadable folder: nothing in it can be checked or listed
        subfolders = []
        for entry in entries:
            path = folder / entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if not is_excluded(path, True):
                        subfolders.append(path)
                    continue
            except OSError:
                continue
            if entry.name.endswith(PYTHON_SUFFIXES) and not is_excluded(path, False):
                yield path
        stack.extend(reversed(subfolders))
