"""A cache of per-file results keyed by file content, configuration and reviewbot's version.

One file per configuration under ``.reviewbot_cache/`` beside the configuration, read
once at the start and written once (atomically) at the end. A damaged or unreadable
cache is ignored, never an error.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

from reviewbot import __version__

CACHE_DIR_NAME = ".reviewbot_cache"


def code_fingerprint() -> str:
    """Changes whenever reviewbot's own code changes, also without a new version number
    (an editable install being worked on): sizes and mtimes of its modules."""
    package = Path(__file__).resolve().parent
    entries = []
    for module in sorted(package.rglob("*.py")):
        try:
            info = module.stat()
        except OSError:
            continue
        entries.append(f"{module.relative_to(package)}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.blake2b("\n".join(entries).encode(), digest_size=8).hexdigest()


def content_key(path: str, data: bytes) -> str:
    """The key of one file's result: its path and a hash of its bytes."""
    return path + "\0" + hashlib.blake2b(data, digest_size=16).hexdigest()


class ResultCache:
    """Per-file results of earlier runs with the same configuration."""

    def __init__(self, folder: Path, fingerprint: str) -> None:
        digest = hashlib.blake2b(f"{__version__}\0{code_fingerprint()}\0{fingerprint}".encode(),
                                 digest_size=12).hexdigest()
        self.folder = folder
        self.file = folder / f"results-{__version__}-{digest}.pickle"
        self.entries: dict[str, Any] = {}
        self.used: dict[str, Any] = {}
        try:
            with open(self.file, "rb") as handle:
                loaded = pickle.load(handle)
            if isinstance(loaded, dict):
                self.entries = loaded
        except Exception:  # a missing, old or damaged cache is just empty
            self.entries = {}

    def get(self, key: str) -> Any:
        """The stored result, or None."""
        result = self.entries.get(key)
        if result is not None:
            self.used[key] = result
        return result

    def put(self, key: str, result: Any) -> None:
        """Remember a fresh result."""
        self.used[key] = result

    def save(self) -> None:
        """Write the results atomically: this run's, and other files' from earlier runs."""
        seen = {key.split("\0", 1)[0] for key in self.used}
        merged = {k: v for k, v in self.entries.items() if k.split("\0", 1)[0] not in seen}
        merged.update(self.used)
        if merged.keys() == self.entries.keys():
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            ignore = self.folder / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# Created by reviewbot; never commit this folder.\n*\n")
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".pickle")
            try:
                with os.fdopen(fd, "wb") as handle:
                    pickle.dump(merged, handle, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(tmp, self.file)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass  # a read-only checkout still gets its findings, just no cache
