"""A cache of per-file results keyed by file content, configuration and reviewbot's version.

One JSON file per configuration under ``.reviewbot_cache/`` at the project root, read once
at the start and written once (atomically) at the end. The cache is data only: a format
version, a schema checked entry by entry, and a MAC made with a key kept outside the
checked tree (in the user's cache folder), so that a cache committed into a repository,
or written by anyone without that key, is never believed. A damaged, forged or
unreadable cache is ignored, never an error; a cache folder that is a symbolic link is
not used at all.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

from reviewbot import __version__

CACHE_DIR_NAME = ".reviewbot_cache"
FORMAT = "reviewbot-cache"
FORMAT_VERSION = 3
_IGNORE_TEXT = "# Created by reviewbot; never commit this folder.\n*\n"
# A cache larger than this is not read (it would cost more than checking again).
MAX_CACHE_BYTES = 256 * 1024 * 1024


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


def _key_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "reviewbot" / "cache-key"


def signing_key() -> bytes | None:
    """This user's secret for the cache's MAC, made on first use (None: none can be kept,
    so no cache is trusted)."""
    path = _key_file()
    try:
        if not path.is_symlink() and path.is_file():
            key = path.read_bytes()
            if len(key) >= 32:
                return key
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = secrets.token_bytes(32)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".key-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(key)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        return path.read_bytes()
    except OSError:
        return None


# Results as plain data ------------------------------------------------------------------
class _Invalid(Exception):
    """An entry does not have the schema this version writes."""


def _need(condition: bool) -> None:
    if not condition:
        raise _Invalid


def _int(value: Any) -> int:
    _need(isinstance(value, int) and not isinstance(value, bool))
    return value


def _str(value: Any) -> str:
    _need(isinstance(value, str))
    return value


def _plain(value: Any, depth: int = 0) -> Any:
    """A JSON value made only of the types facts and details hold (lists for tuples)."""
    _need(depth < 8)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {_str(k): _plain(v, depth + 1) for k, v in value.items()}
    raise _Invalid


def _tuples(value: Any) -> Any:
    """JSON lists back into the tuples the rules recorded."""
    kind = type(value)
    if kind is list:
        return tuple([_tuples(v) if type(v) in _NESTED else v for v in value])
    if kind is dict:
        return {k: _tuples(v) if type(v) in _NESTED else v for k, v in value.items()}
    return value


_NESTED = (list, dict)


def result_to_data(result: Any) -> dict[str, Any]:
    """A FileResult as JSON data (raises _Invalid for what JSON cannot hold)."""
    findings = []
    for f in result.findings:
        fix = None
        if f.fix is not None:
            fix = {"applicability": f.fix.applicability, "message": f.fix.message,
                   "edits": [[e.line, e.column, e.end_line, e.end_column, e.content]
                             for e in f.fix.edits],
                   "imports": list(f.fix.imports)}
        findings.append({"code": f.code, "name": f.name, "message": f.message,
                         "path": f.path, "span": [f.line, f.column, f.end_line, f.end_column],
                         "severity": f.severity, "fix": fix,
                         "details": [[k, _plain(v)] for k, v in f.details]})
    gate = None if result.gate is None else [bool(result.gate[0]), bool(result.gate[1])]
    return {"path": result.path, "findings": findings, "facts": _plain(result.facts),
            "gate": gate}


def result_from_data(data: Any) -> Any:
    """A FileResult from JSON data, every field checked (raises _Invalid)."""
    from reviewbot.engine import FileResult
    from reviewbot.finding import Edit, Finding, Fix

    _need(isinstance(data, dict) and set(data) == {"path", "findings", "facts", "gate"})
    gate = data["gate"]
    _need(gate is None or (isinstance(gate, list) and len(gate) == 2
                           and all(isinstance(g, bool) for g in gate)))
    _need(isinstance(data["findings"], list) and isinstance(data["facts"], dict))
    findings = []
    for item in data["findings"]:
        _need(isinstance(item, dict) and set(item) == {
            "code", "name", "message", "path", "span", "severity", "fix", "details"})
        span = item["span"]
        _need(isinstance(span, list) and len(span) == 4)
        _need(item["severity"] in ("error", "warning"))
        fix = None
        if item["fix"] is not None:
            raw = item["fix"]
            _need(isinstance(raw, dict) and set(raw) == {"applicability", "message", "edits",
                                                         "imports"})
            _need(raw["applicability"] in ("safe", "unsafe", "display"))
            _need(isinstance(raw["edits"], list) and isinstance(raw["imports"], list))
            edits = []
            for edit in raw["edits"]:
                _need(isinstance(edit, list) and len(edit) == 5)
                edits.append(Edit(*(_int(v) for v in edit[:4]), _str(edit[4])))
            fix = Fix(raw["applicability"], _str(raw["message"]), tuple(edits),
                      tuple(_str(m) for m in raw["imports"]))
        details = item["details"]
        _need(isinstance(details, list) and all(
            isinstance(d, list) and len(d) == 2 and isinstance(d[0], str) for d in details))
        findings.append(Finding(
            _str(item["code"]), _str(item["name"]), _str(item["message"]), _str(item["path"]),
            *(_int(v) for v in span), item["severity"], fix,
            tuple((k, list(v) if isinstance(v, list) else v) for k, v in details)))
    # A rule's facts are a list of records (tuples), as RB301 records its definitions.
    facts = {_str(code): [_tuples(v) for v in value] if isinstance(value, list)
             else _tuples(value) for code, value in data["facts"].items()}
    return FileResult(_str(data["path"]), findings, facts,
                      gate=None if gate is None else (gate[0], gate[1]))


class ResultCache:
    """Per-file results of earlier runs with the same configuration."""

    def __init__(self, folder: Path, fingerprint: str) -> None:
        digest = hashlib.blake2b(f"{__version__}\0{code_fingerprint()}\0{fingerprint}".encode(),
                                 digest_size=12).hexdigest()
        self.folder = folder
        self.file = folder / f"results-{__version__}-{digest}.json"
        self.digest = digest
        self._entries: dict[str, Any] | None = None  # key -> JSON data; read on first use
        self.used: dict[str, Any] = {}
        self.key = signing_key()
        self.usable = self.key is not None and not _is_link(folder)

    @property
    def entries(self) -> dict[str, Any]:
        """The stored results, read from the file the first time they are asked for (a run
        answered by the run memo never reads them)."""
        if self._entries is None:
            self._entries = self._load() if self.usable else {}
        return self._entries

    def _mac(self, body: bytes) -> str:
        assert self.key is not None
        return hmac.new(self.key, self.digest.encode() + b"\0" + body, "sha256").hexdigest()

    def _load(self) -> dict[str, Any]:
        entries = self._read(self.file, self._mac)
        if not isinstance(entries, dict):
            return {}  # missing, old or damaged: empty
        return {k: v for k, v in entries.items() if isinstance(k, str)}

    def get(self, key: str) -> Any:
        """The stored result (a FileResult), or None."""
        data = self.entries.get(key)
        if data is None:
            return None
        try:
            result = result_from_data(data)
        except (_Invalid, TypeError, ValueError):
            self.entries.pop(key, None)
            return None
        self.used[key] = data
        return result

    def put(self, key: str, result: Any) -> None:
        """Remember a fresh result."""
        try:
            self.used[key] = result_to_data(result)
        except _Invalid:
            pass  # not cached: checked again next time

    def save(self) -> None:
        """Write the results atomically: this run's, and other files' from earlier runs."""
        if not self.usable:
            return
        seen = {key.split("\0", 1)[0] for key in self.used}
        merged = {k: v for k, v in self.entries.items() if k.split("\0", 1)[0] not in seen}
        merged.update(self.used)
        if merged.keys() == self.entries.keys():
            return
        self._write(self.file, merged, self._mac)

    def _write(self, target: Path, data: Any, mac: Any) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if _is_link(self.folder):
                return
            _ensure_gitignore(self.folder)
            body = json.dumps(data, ensure_ascii=True, separators=(",", ":")).encode()
            header = json.dumps({"format": FORMAT, "version": FORMAT_VERSION,
                                 "mac": mac(body)}).encode()
            _write_atomic(self.folder, target, header + b"\n" + body)
        except OSError:
            pass  # a read-only checkout still gets its findings, just no cache

    def _read(self, target: Path, mac: Any) -> Any:
        """The signed body of ``target`` as JSON data (None: missing, damaged or forged)."""
        try:
            if _is_link(target):
                return None
            with open(target, "rb") as handle:
                raw = handle.read(MAX_CACHE_BYTES + 1)
            if len(raw) > MAX_CACHE_BYTES:
                return None
            header, _, body = raw.partition(b"\n")
            meta = json.loads(header)
            if not (isinstance(meta, dict) and meta.get("format") == FORMAT
                    and meta.get("version") == FORMAT_VERSION
                    and isinstance(meta.get("mac"), str)
                    and hmac.compare_digest(meta["mac"], mac(body))):
                return None
            return json.loads(body)
        except (OSError, ValueError, RecursionError):
            return None

    # The run memo ------------------------------------------------------------------------
    # A run whose files all have the size, times and inode they had in the last run (and the
    # same configuration, reviewbot and working folder: the digest and the signature) gets
    # that run's per-file results back without reading a file, as ruff's cache trusts
    # modification times. Any difference, a damaged memo or one signed by another key:
    # the files are read and checked as usual (and their content-keyed results reused).
    def _memo_file(self) -> Path:
        return self.folder / f"run-{__version__}-{self.digest}.json"

    def _memo_mac(self, body: bytes) -> str:
        return self._mac(b"run-memo\0" + body)

    def memo(self, signature: str) -> dict[str, Any] | None:
        """The last run's results by displayed path, when its signature is ``signature``."""
        if not self.usable:
            return None
        data = self._read(self._memo_file(), self._memo_mac)
        if not (isinstance(data, dict) and data.get("signature") == signature
                and isinstance(data.get("results"), dict)):
            return None
        results = {}
        try:
            for shown, item in data["results"].items():
                result = result_from_data(item)
                _need(result.path == shown)
                results[shown] = result
        except (_Invalid, TypeError, ValueError):
            return None
        return results

    def set_memo(self, signature: str, results: dict[str, Any]) -> None:
        """Remember this run's results under its signature (replacing the last run's)."""
        if not self.usable:
            return
        try:
            data = {shown: result_to_data(result) for shown, result in results.items()}
        except _Invalid:
            return
        self._write(self._memo_file(), {"signature": signature, "results": data},
                    self._memo_mac)


def _is_link(path: Path) -> bool:
    try:
        return path.is_symlink()
    except OSError:
        return True


def _ensure_gitignore(folder: Path) -> None:
    """The folder's ``.gitignore``, rewritten (atomically) unless it is already whole."""
    ignore = folder / ".gitignore"
    try:
        if not _is_link(ignore) and ignore.read_text(encoding="utf-8") == _IGNORE_TEXT:
            return
    except (OSError, UnicodeDecodeError):
        pass
    _write_atomic(folder, ignore, _IGNORE_TEXT.encode(), mode=0o644)


def _write_atomic(folder: Path, target: Path, data: bytes, mode: int | None = None) -> None:
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
