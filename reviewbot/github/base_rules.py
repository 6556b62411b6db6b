"""The base commit's own rule modules, for ``review --base-rule-modules``.

The modules that the base commit's configuration names (``rule-modules``) are read from the
base commit through the contents API, with the ``__init__.py`` of each package above them,
written into a new folder outside the checkout and imported from there. While they are in
use the checkout (the pull request's files) is not on ``sys.path``, so a module that imports
another module of the project that was not read fails (one line, exit 2) instead of
importing the pull request's copy.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from reviewbot.errors import ConfigError, ReviewbotError
from reviewbot.github.base_config import _inside, base_file

MAX_MODULE_BYTES = 1024 * 1024  # one rule module or package __init__.py
MAX_MODULES = 32


def module_files(name: str, folder: str) -> tuple[list[str], list[str]]:
    """The files of module ``name`` relative to the configuration's ``folder`` (the folder
    that ``check`` puts first on ``sys.path``): the ``__init__.py`` of each package above
    it, and the module's own candidates in the order Python tries them (``a/b/c/__init__.py``,
    then ``a/b/c.py``). Each is a repository path checked to stay inside the repository."""
    parts = name.split(".")
    packages = [posixpath.join(folder, *parts[:end], "__init__.py")
                for end in range(1, len(parts))]
    own = [posixpath.join(folder, *parts, "__init__.py"),
           posixpath.join(folder, *parts[:-1], parts[-1] + ".py")]
    return ([_inside(rel, "rule module file") for rel in packages],
            [_inside(rel, "rule module file") for rel in own])


def _temp_parent(cwd: Path) -> str | None:
    """``$RUNNER_TEMP`` unless it is unset or inside the checkout (then the system's)."""
    temp = os.environ.get("RUNNER_TEMP")
    if not temp:
        return None
    try:
        resolved, tree = Path(temp).resolve(), cwd.resolve()
    except (OSError, RuntimeError):
        return None
    return None if resolved == tree or tree in resolved.parents else temp


def _inside_tree(entry: str, tree: Path) -> bool:
    try:
        path = Path(os.path.abspath(entry or os.curdir)).resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    return path == tree or tree in path.parents


class BaseRuleModules:
    """The fetched modules' folder; ``activate`` makes it the place they are imported
    from (the checkout off ``sys.path``), ``close`` undoes that and removes it."""

    def __init__(self, root: Path, names: Sequence[str], digest: str) -> None:
        self.root = root
        self.names = tuple(names)
        self.digest = digest  # of every file read, package __init__.py files included
        self._removed: list[tuple[int, str]] = []
        self._active = False

    def activate(self, cwd: Path) -> None:
        """Put the folder first on ``sys.path`` and take off every entry in the checkout
        (``''`` and ``.`` included), for the whole run: worker processes import the rules
        by module name with this ``sys.path``."""
        import reviewbot

        tree = cwd.resolve()
        if _inside_tree(str(Path(reviewbot.__file__).parent), tree):
            raise ReviewbotError("--base-rule-modules: reviewbot itself is imported from the "
                                 "checkout; install it outside the checkout")
        kept = []
        for index, entry in enumerate(sys.path):
            if _inside_tree(entry, tree):
                self._removed.append((index, entry))
            else:
                kept.append(entry)
        sys.path[:] = [str(self.root), *kept]
        self._active = True
        for name in self.names:
            _not_imported_elsewhere(name, self.root)

    def close(self) -> None:
        """Forget the modules imported from the folder, restore ``sys.path``, remove it."""
        from reviewbot import registry

        if self._active:
            for name, module in list(sys.modules.items()):
                if _from(module, self.root):
                    del sys.modules[name]
            registry.set_project_rules(())
            while str(self.root) in sys.path:
                sys.path.remove(str(self.root))
            for index, entry in self._removed:
                sys.path.insert(index, entry)
            self._removed.clear()
            self._active = False
        shutil.rmtree(self.root, ignore_errors=True)


def _from(module: Any, root: Path) -> bool:
    """Whether a module (or a namespace package) was imported from inside ``root``."""
    places = [getattr(module, "__file__", None)]
    places += list(getattr(module, "__path__", None) or []) if places[0] is None else []
    try:
        return any(p is not None and Path(p).resolve().is_relative_to(root.resolve())
                   for p in places)
    except (OSError, RuntimeError, TypeError, ValueError):
        return False


def _not_imported_elsewhere(name: str, root: Path) -> None:
    """Each package of ``name`` already imported must come from ``root``: a package of the
    same name imported from elsewhere would decide where its modules are found."""
    parts = name.split(".")
    for end in range(1, len(parts)):
        package = ".".join(parts[:end])
        loaded = sys.modules.get(package)
        if loaded is not None and not _from(loaded, root):
            where = getattr(loaded, "__file__", None) or "Python itself"
            raise ReviewbotError(f"cannot import rule module {name!r}: package {package!r} "
                                 f"is already imported from {where}, not from the base commit")


def fetch_rule_modules(repo: Any, sha: str, folder: str, names: Sequence[str], source: str,
                       key: str, cwd: Path) -> BaseRuleModules:
    """Read the modules ``names`` (and their packages' ``__init__.py`` files) at commit
    ``sha``, relative to the configuration's ``folder``, into a new folder outside the
    checkout. ConfigError or ReviewbotError, one line, for a file that is missing, too
    large, or outside the repository, and for too many modules."""
    from reviewbot.project_rules import module_name_problem

    if len(names) > MAX_MODULES:
        raise ConfigError(source, key, f"at most {MAX_MODULES} modules are read from the "
                          f"base commit, got {len(names)}")
    root = Path(tempfile.mkdtemp(prefix="reviewbot-rule-modules-",
                                 dir=_temp_parent(cwd))).resolve()
    try:
        read: dict[str, bytes | None] = {}
        digest = hashlib.blake2b(digest_size=12)

        def get(rel: str) -> bytes | None:
            if rel not in read:
                data = base_file(repo, sha, rel, MAX_MODULE_BYTES,
                                 "too large for a rule module")
                read[rel] = data
                if data is not None:
                    local = posixpath.relpath(rel, folder or ".")
                    target = root / local
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
                    digest.update(rel.encode() + b"\0" + data + b"\0")
            return read[rel]

        for name in names:
            problem = module_name_problem(name)
            if problem is not None:
                raise ConfigError(source, key, problem)
            packages, own = module_files(name, folder)
            for rel in packages:
                get(rel)
            if all(get(rel) is None for rel in own):
                raise ConfigError(source, key, f"cannot import {name!r}: neither {own[1]} nor "
                                  f"{own[0]} is a file at the base commit {sha[:12]}")
        return BaseRuleModules(root, names, digest.hexdigest())
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
