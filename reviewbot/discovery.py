"""Which files a run checks: the paths given, their ``.py`` files, less what is excluded.

Excludes and ``.gitignore`` files are gitignore-style patterns matched with pathspec. As
in ruff, a path named on the command line is checked even when a pattern excludes it
(unless ``--force-exclude``); inside a folder named that way, a pattern that matched
the folder itself does not exclude its contents, but every other pattern still applies.
Directory links are not followed, so link loops cannot hang a run.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pathspec

from reviewbot.config import Config
from reviewbot.errors import ReviewbotError

PYTHON_SUFFIXES = (".py", ".pyi")


def relative_to_root(path: Path, root: Path) -> str:
    """``path`` as a POSIX path relative to ``root`` (absolute, without '/', if outside)."""
    text, base = str(path), str(root)
    if os.sep == "/" and text.startswith(base.rstrip("/") + "/"):  # the common case, fast
        return text[len(base.rstrip("/")) + 1:]
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix().lstrip("/")


def project_root(paths: Sequence[str], config: Config, cwd: Path) -> Path:
    """The folder a run belongs to: the configuration's folder; without a configuration
    file, the nearest folder holding ``.git`` at or above the first path, or that path's
    folder. The cache lives here, and no file outside it is read."""
    if config.source is not None:
        return config.root.resolve()
    first = Path(os.path.abspath(cwd / (paths[0] if paths else ".")))
    start = first if first.is_dir() else first.parent
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


def source_root(start: Path, project: Path | None = None) -> Path:
    """The folder that repository-relative paths start from (SARIF's ``%SRCROOT%``): the
    nearest folder holding ``.git`` at or above ``start`` (the first checked path), else
    the project root (else ``start``'s folder)."""
    first = Path(os.path.abspath(start))
    folder = (first if first.is_dir() else first.parent).resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return (project or folder).resolve()


def inside(path: Path, roots: Sequence[Path]) -> bool:
    """Whether ``path``, every link followed, is in one of ``roots`` (resolved folders)."""
    text = os.fspath(path)
    try:
        if os.path.islink(text):
            resolved = str(Path(text).resolve())
        else:  # its folder resolved once for all the files in it
            folder, name = os.path.split(text)
            resolved = os.path.join(_resolved_folder(folder), name)
    except (OSError, RuntimeError):  # a link loop
        return False
    for root in roots:
        text = str(root)
        if resolved == text or resolved.startswith(text.rstrip(os.sep) + os.sep):
            return True
    return False


@functools.lru_cache(maxsize=4096)
def _resolved_folder(folder: str) -> str:
    return os.path.realpath(folder)


def allowed_roots(paths: Sequence[str], root: Path, cwd: Path) -> tuple[Path, ...]:
    """The project root, and each folder named on the command line that is not a link."""
    roots = [root]
    for raw in paths or ["."]:
        given = Path(os.path.abspath(cwd / raw))
        if given.is_dir() and not given.is_symlink():
            roots.append(given.resolve())
    return tuple(dict.fromkeys(roots))


def display_path(path: Path, cwd: Path) -> str:
    """How a file is named in reports: relative to the working directory when possible."""
    try:
        return path.relative_to(cwd).as_posix()
    except ValueError:
        return path.as_posix()


class PatternSet:
    """Gitignore-style patterns whose matches can be told apart, pattern by pattern."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.patterns = [p for p in pathspec.GitIgnoreSpec.from_lines(lines).patterns
                         if p.include is not None]
        self._any = _any_of(self.patterns)
        self._any_but: dict[frozenset[int], "re.Pattern[str] | None"] = {}

    def _prefilter(self, skip: frozenset[int]) -> "re.Pattern[str] | None":
        """The joined expression of the patterns not in ``skip`` (a folder named on the
        command line that a pattern matches: that pattern must not make every path under
        it try each pattern in turn)."""
        if not skip or self._any is None:
            return self._any
        if skip not in self._any_but:
            rest = [p for i, p in enumerate(self.patterns) if i not in skip]
            self._any_but[skip] = _any_of(rest) if rest else _NEVER
        return self._any_but[skip]

    def matching(self, rel: str) -> frozenset[int]:
        """Indices of the patterns that match ``rel``."""
        if self._any is not None and self._any.search(rel) is None:
            return frozenset()
        return frozenset(i for i, p in enumerate(self.patterns) if p.match_file(rel) is not None)

    def verdict(self, rel: str, skip: frozenset[int] = frozenset()) -> bool | None:
        """True excluded, False re-included (``!pattern``), None no pattern matched."""
        prefilter = self._prefilter(skip)
        if prefilter is not None and prefilter.search(rel) is None:
            return None  # most paths: one scan instead of one per pattern
        result = None
        for i, pattern in enumerate(self.patterns):
            if i not in skip and pattern.match_file(rel) is not None:
                result = bool(pattern.include)
        return result


_NEVER = re.compile(r"(?!)")


def _any_of(patterns: Sequence[Any]) -> "re.Pattern[str] | None":
    """One regular expression that matches where any of the patterns does (None when they
    cannot be joined: then each is tried, as before)."""
    sources, flags = [], set()
    for pattern in patterns:
        regex = getattr(pattern, "regex", None)
        if regex is None or not isinstance(regex.pattern, str):
            return None
        sources.append(re.sub(r"\(\?P<\w+>", "(?:", regex.pattern))
        flags.add(regex.flags)
    if not sources or len(flags) != 1 or any("(?P=" in source for source in sources):
        return None
    try:
        return re.compile("|".join(f"(?:{source})" for source in sources), flags.pop())
    except re.error:
        return None


def _ancestors_rel(path: Path, top: Path) -> Iterator[str]:
    """``path`` and its ancestors below ``top``, as folder paths relative to ``top``."""
    current = path
    while current != top and top in current.parents:
        yield current.relative_to(top).as_posix() + "/"
        current = current.parent


class GitIgnores:
    """The ``.gitignore`` files (and ``.git/info/exclude``) that apply to a path."""

    def __init__(self) -> None:
        self._sets: dict[Path, PatternSet | None] = {}
        self._git_roots: dict[Path, Path | None] = {}
        self._level_cache: dict[Path, list[tuple[Path, PatternSet]]] = {}

    def git_root(self, folder: Path) -> Path | None:
        """The nearest folder at or above ``folder`` that holds ``.git``."""
        if folder not in self._git_roots:
            if (folder / ".git").exists():
                self._git_roots[folder] = folder
            elif folder.parent == folder:
                self._git_roots[folder] = None
            else:
                self._git_roots[folder] = self.git_root(folder.parent)
        return self._git_roots[folder]

    def patterns(self, folder: Path, is_root: bool) -> PatternSet | None:
        """The patterns that ``folder``'s ignore files hold, or None."""
        if folder not in self._sets:
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
                self._sets[folder] = PatternSet(lines) if lines else None
            except Exception:  # a malformed .gitignore is git's business, not ours
                self._sets[folder] = None
        return self._sets[folder]

    def _levels(self, path: Path) -> list[tuple[Path, PatternSet]]:
        folder = path.parent
        if folder not in self._level_cache:
            self._level_cache[folder] = self._compute_levels(folder)
        return self._level_cache[folder]

    def _compute_levels(self, parent: Path) -> list[tuple[Path, PatternSet]]:
        root = self.git_root(parent)
        if root is None:
            return []
        chain = []
        folder, top = parent, str(root).rstrip(os.sep) + os.sep
        while folder != root and str(folder).startswith(top):
            chain.append(folder)
            folder = folder.parent
        levels = []
        for level in [root, *reversed(chain)]:  # the nearest ignore file last
            patterns = self.patterns(level, level == root)
            if patterns is not None:
                levels.append((level, patterns))
        return levels

    def skips_for(self, given: Path) -> dict[Path, frozenset[int]]:
        """Patterns that match a folder named on the command line, or one above it."""
        skips: dict[Path, frozenset[int]] = {}
        for level, patterns in self._levels(given / "_"):
            matched: frozenset[int] = frozenset()
            for rel in _ancestors_rel(given, level):
                matched |= patterns.matching(rel)
            skips[level] = matched
        return skips

    def ignored(self, path: Path, is_dir: bool,
                skips: dict[Path, frozenset[int]] | None = None) -> bool:
        """Whether git ignores ``path`` (absolute), deeper ignore files taking precedence."""
        verdict: bool | None = None
        for level, patterns in self._levels(path):
            rel = relative_to_root(path, level) + ("/" if is_dir else "")
            result = patterns.verdict(rel, (skips or {}).get(level, frozenset()))
            if result is not None:
                verdict = result
        return bool(verdict)


def discover(paths: Sequence[str], config: Config, force_exclude: bool = False,
             cwd: Path | None = None) -> list[Path]:
    """The files to check, sorted and without duplicates (raises ReviewbotError)."""
    cwd = cwd or Path.cwd()
    exclude = PatternSet(config.exclude)
    gitignores = GitIgnores() if config.respect_gitignore else None
    found: dict[Path, None] = {}

    def excluded_with_ancestors(path: Path, is_dir: bool) -> bool:
        rels = list(_ancestors_rel(path.parent, config.root))
        rels.insert(0, relative_to_root(path, config.root) + ("/" if is_dir else ""))
        if any(exclude.verdict(rel) for rel in rels):
            return True
        if gitignores is None:
            return False
        return gitignores.ignored(path, is_dir) or any(
            gitignores.ignored(parent, True) for parent in path.parents)

    for raw in paths or ["."]:
        given = cwd / raw
        if not os.path.lexists(given):
            raise ReviewbotError(f"{raw}: no such file or directory")
        absolute = Path(os.path.abspath(given))
        is_dir = given.is_dir()
        if force_exclude and excluded_with_ancestors(absolute, is_dir):
            continue
        if not is_dir:
            found.setdefault(absolute, None)
            continue
        skip = frozenset()
        for rel in _ancestors_rel(absolute, config.root):
            skip |= exclude.matching(rel)
        git_skips = gitignores.skips_for(absolute) if gitignores else {}

        def is_excluded(path: Path, is_dir: bool, skip=skip, git_skips=git_skips) -> bool:
            rel = relative_to_root(path, config.root) + ("/" if is_dir else "")
            if exclude.verdict(rel, skip):
                return True
            return gitignores is not None and gitignores.ignored(path, is_dir, git_skips)

        for file in _walk(absolute, is_excluded):
            found.setdefault(file, None)
    return sorted(found)


def _walk(top: Path, is_excluded: Callable[[Path, bool], bool]) -> Iterator[Path]:
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue  # an unreadable folder: nothing in it can be listed
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
