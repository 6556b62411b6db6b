"""``reviewbot check --trace trace.json``: the run's syncs beside the static findings.

A trace file is input like any other (a pull request can hold one): it is read as data,
at most 64 MiB, checked entry by entry. A field of the wrong type, an unknown kind, or a
document that is not a trace of this schema is one line and exit 2. An entry naming a
path that is absolute, climbs out of the project (``..``), holds control characters or
characters no Python file name needs (a markdown link, HTML, a ``::`` workflow command),
or a function or operation that is not a Python name, is dropped and counted. Paths are
matched against the checked files only, so no text of the trace is shown unless it
names a checked file, and then it is shown escaped as every reporter escapes.

For each place the run saw (path and line):

- a static RB1xx finding on that line gets "seen N times at run time, X ms waited" in
  its message and a ``runtime`` entry in its details;
- a place no rule reported becomes an RB108 finding when it lies in a hot function (per
  the analysis) or ran at least RB108's ``min-count`` times;
- an entry whose line hash no longer matches the file is stale: reported, not attached;
- syncs inside an allow region (``gpu_sync_allowed()``) are intended: counted only.
"""

from __future__ import annotations

import dataclasses
import os
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence, TextIO

from reviewbot.errors import ReviewbotError
from reviewbot.finding import Finding
from reviewbot.textsafe import line_start, printable
from reviewbot.trace.merge import KINDS, SCHEMA_VERSION, STALLS, TOOL

MAX_BYTES = 64 * 1024 * 1024
MAX_ENTRIES = 200_000
MAX_STACK = 64
# Codes of the static sync rules whose findings a trace confirms.
SYNC_CODES = ("RB101", "RB102", "RB103", "RB104", "RB105", "RB106", "RB107", "RB109")
_PART = re.compile(r"[\w.\-+=,~ ]+")
_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_SPECIAL = ("<module>", "<locals>", "<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>",
            "<genexpr>")
_OP = re.compile(r"\[\]|[A-Za-z_][A-Za-z0-9_]{0,80}")
_HASH = re.compile(r"[0-9a-f]{16}")
_SHOWN = 10  # stale places named on standard error


def line_hash(text: str) -> str:
    """The hash the tracer records for a line (the same as ``_hook.line_hash``)."""
    return hashlib.sha256(text.strip().encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass
class Entry:
    """One place and kind of sync from the trace."""

    path: str
    line: int
    line_hash: str
    kind: str
    op: str | None
    function: str | None
    intended: bool
    count: int
    samples: int
    total_ms: float
    max_ms: float
    processes: int
    stack: list[dict[str, Any]]


@dataclass
class Trace:
    """A checked trace file."""

    entries: list[Entry]
    dropped: int = 0
    source: str = ""


def safe_path(value: Any) -> bool:
    """A project-relative POSIX path of a Python file, with nothing odd in it."""
    if not isinstance(value, str) or not 0 < len(value) <= 1024 or printable(value) != value:
        return False
    if value.startswith("/") or not value.endswith(".py"):
        return False
    parts = value.split("/")
    return all(p not in ("", ".", "..") and _PART.fullmatch(p) for p in parts)


def safe_function(value: Any) -> bool:
    """A Python qualified name (``Runner.step.<locals>.inner``, ``<module>``)."""
    if not isinstance(value, str) or not 0 < len(value) <= 300:
        return False
    plain = value
    for special in _SPECIAL:
        plain = plain.replace(special, "x")
    return bool(_NAME.fullmatch(plain))


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> ReviewbotError:
        return ReviewbotError(f"{printable(self.source)}: {where}: {problem}")

    def get(self, data: dict[str, Any], key: str, types: tuple[type, ...], where: str,
            optional: bool = False) -> Any:
        value = data.get(key)
        if value is None and optional:
            return None
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            names = " or ".join(t.__name__ for t in types)
            raise self.fail(f"{where}.{key}", f"expected {names}")
        return value


def load(path: str) -> Trace:
    """Read and check a trace file (exit 2 with one line when it is not a valid trace)."""
    shown = printable(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ReviewbotError(f"{shown}: cannot read the trace ({exc.strerror})") from None
    if len(data) > MAX_BYTES:
        raise ReviewbotError(f"{shown}: the trace is larger than {MAX_BYTES >> 20} MiB")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ReviewbotError(f"{shown}: not a trace (not JSON)") from None
    return parse(document, path)


def parse(document: Any, source: str = "trace") -> Trace:
    """Check a trace document entry by entry."""
    reader = _Reader(source)
    if not isinstance(document, dict) or document.get("tool") != TOOL:
        raise reader.fail("tool", f"not a trace written by `{TOOL}`")
    version = document.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise reader.fail("schema_version", f"expected {SCHEMA_VERSION}")
    syncs = document.get("syncs")
    if not isinstance(syncs, list):
        raise reader.fail("syncs", "expected a list")
    if len(syncs) > MAX_ENTRIES:
        raise reader.fail("syncs", f"more than {MAX_ENTRIES:,} entries")
    trace = Trace([], 0, source)
    for index, raw in enumerate(syncs):
        where = f"syncs[{index}]"
        if not isinstance(raw, dict):
            raise reader.fail(where, "expected an object")
        entry = _entry(reader, raw, where)
        if entry is None:
            trace.dropped += 1
        else:
            trace.entries.append(entry)
    return trace


def _entry(reader: _Reader, raw: dict[str, Any], where: str) -> Entry | None:
    get = reader.get
    path = get(raw, "path", (str,), where)
    line = get(raw, "line", (int,), where)
    digest = get(raw, "line_hash", (str,), where)
    kind = get(raw, "kind", (str,), where)
    if kind not in KINDS:
        raise reader.fail(f"{where}.kind", f"expected one of {', '.join(KINDS)}")
    op = get(raw, "op", (str,), where, optional=True)
    function = get(raw, "function", (str,), where, optional=True)
    intended = get(raw, "intended", (bool,), where)
    count = get(raw, "count", (int,), where)
    processes = get(raw, "processes", (int,), where, optional=True) or 1
    waited = get(raw, "waited", (dict,), where, optional=True) or {}
    samples = get(waited, "samples", (int,), where + ".waited", optional=True) or 0
    total = get(waited, "total_ms", (int, float), where + ".waited", optional=True) or 0.0
    longest = get(waited, "max_ms", (int, float), where + ".waited", optional=True) or 0.0
    stack = get(raw, "stack", (list,), where, optional=True) or []
    if line < 1 or count < 0 or samples < 0 or processes < 0 or total < 0 or longest < 0 \
            or total != total or longest != longest or total == float("inf"):
        raise reader.fail(where, "a negative count, line or time")
    if len(stack) > MAX_STACK:
        raise reader.fail(f"{where}.stack", f"more than {MAX_STACK} frames")
    frames: list[dict[str, Any]] = []
    hostile = not safe_path(path) or not _HASH.fullmatch(digest) or \
        (op is not None and not _OP.fullmatch(op)) or \
        (function is not None and not safe_function(function))
    for number, frame in enumerate(stack):
        at = f"{where}.stack[{number}]"
        if not isinstance(frame, dict):
            raise reader.fail(at, "expected an object")
        if "outside" in frame:
            outside = get(frame, "outside", (int,), at)
            if outside < 0:
                raise reader.fail(at, "a negative count")
            frames.append({"outside": outside})
            continue
        frame_path = get(frame, "path", (str,), at)
        frame_line = get(frame, "line", (int,), at)
        frame_function = get(frame, "function", (str,), at, optional=True)
        if frame_line < 0:
            raise reader.fail(at, "a negative line")
        if not safe_path(frame_path) or (frame_function is not None
                                         and not safe_function(frame_function)):
            hostile = True
        frames.append({"path": frame_path, "line": frame_line, "function": frame_function})
    if hostile:
        return None
    return Entry(path, line, digest, kind, op, function, intended, count, samples,
                 float(total), float(longest), processes, frames)


# Attaching ---------------------------------------------------------------------------
@dataclass
class Place:
    """Every entry of one path, line and intent, summed."""

    rel: str
    line: int
    intended: bool
    entries: list[Entry] = field(default_factory=list)

    @property
    def count(self) -> int:
        """How many times the run saw this place."""
        return sum(e.count for e in self.entries)

    @property
    def samples(self) -> int:
        """How many of those syncs were profiled."""
        return sum(e.samples for e in self.entries)

    @property
    def waited_ms(self) -> float:
        """The wait of the profiled ones, in milliseconds."""
        return sum(e.total_ms for e in self.entries)

    @property
    def kinds(self) -> list[str]:
        """The kinds of sync seen here, the most frequent first."""
        counts: dict[str, int] = {}
        for entry in self.entries:
            counts[entry.kind] = counts.get(entry.kind, 0) + entry.count
        return sorted(counts, key=lambda k: -counts[k])

    @property
    def main(self) -> Entry:
        """The entry seen most often (its stack and operation are shown)."""
        return max(self.entries, key=lambda e: e.count)

    def runtime(self) -> dict[str, Any]:
        """The ``runtime`` details of a finding this place confirms or makes."""
        return {"count": self.count, "waited_ms": round(self.waited_ms, 3),
                "wait_samples": self.samples,
                "max_wait_ms": round(max(e.max_ms for e in self.entries), 3),
                "kinds": self.kinds,
                "stalls_other_threads": any(STALLS[k] for k in self.kinds),
                "intended": self.intended,
                "processes": sum(e.processes for e in self.entries),
                "op": self.main.op, "stack": self.main.stack}


KIND_TEXT = {
    "copy-to-pageable": "a copy to pageable host memory: the host waits for the GPU and "
                        "every other thread's CUDA calls stall with it",
    "copy-to-pinned": "a copy to pinned host memory (what .item() makes): the host waits "
                      "for the GPU; other threads are not stalled",
    "copy-to-device": "a blocking copy from pageable host memory to the GPU: the host "
                      "waits for the stream and other threads' CUDA calls stall",
    "stream-sync": "a stream synchronisation: the host waits for every kernel queued on "
                   "the stream; other threads are not stalled",
    "device-sync": "a device synchronisation: the host waits for every stream; other "
                   "threads are not stalled",
    "event-sync": "an event synchronisation: the host waits for that event only (the "
                  "event-sync helper's wait); other threads are not stalled",
}
SHORT = {
    "copy-to-pageable": "a copy to pageable memory: other threads stall",
    "copy-to-pinned": "a copy to pinned memory: the host waits, other threads do not stall",
    "copy-to-device": "a blocking copy to the GPU: other threads stall",
    "stream-sync": "a stream sync: other threads do not stall",
    "device-sync": "a device sync: other threads do not stall",
    "event-sync": "an event sync: other threads do not stall",
}


def seen_text(place: Place) -> str:
    """``seen 1,024 times at run time, 19.3 ms waited in 64 profiled``."""
    text = f"seen {place.count:,} time{'s' if place.count != 1 else ''} at run time"
    if place.samples:
        text += f", {place.waited_ms:,.1f} ms waited in {place.samples:,} profiled"
    return text


def stack_text(stack: Sequence[dict[str, Any]], limit: int = 6) -> str:
    """The stack, innermost first: ``Runner.step (runner.py:12) <- main (run.py:30)``."""
    shown: list[str] = []
    for frame in stack:
        if len(shown) == limit:
            shown.append("...")
            break
        if "outside" in frame:
            count = frame["outside"]
            shown.append(f"{count} frame{'s' if count != 1 else ''} outside the project")
        else:
            shown.append(f"{frame.get('function') or '?'} ({frame['path']}:{frame['line']})")
    return " <- ".join(shown)


@dataclass
class Outcome:
    """What attaching a trace did, for the notes on standard error."""

    attached: int = 0
    new: int = 0
    intended: int = 0
    stale: list[tuple[str, int]] = field(default_factory=list)
    unmatched: int = 0  # places in files that were not checked
    below: int = 0  # places no rule reported, neither hot nor frequent enough
    suppressed: int = 0


@dataclass
class Project:
    """What the hot-path test needs: the packs and, when there is one, the project index."""

    packs: Any
    root: Path | None = None
    files: Sequence[Path] | None = None
    index_cache: Any = None
    _facts: Any = None

    def hot_facts(self) -> Any:
        """The link phase's facts of the project, linked once (None without an index)."""
        if self._facts is None and self.root is not None:
            from reviewbot.analysis.project import IndexCache
            from reviewbot.explain import linked_facts

            self._facts = linked_facts(self.root, list(self.files or ()), self.packs,
                                       self.index_cache or IndexCache(None))
        return self._facts


class _File:
    """A checked file's lines, read under the same rules as the reporters."""

    def __init__(self, path: Path, shown: str, rel: str, max_bytes: int) -> None:
        from reviewbot.source import UnreadableSource, decode, read_bytes, split_lines

        self.path, self.shown, self.rel = path, shown, rel
        try:
            self.text: str | None = decode(read_bytes(str(path), max_bytes)).text
        except UnreadableSource:
            self.text = None
        self.lines = split_lines(self.text) if self.text is not None else []
        self._hot: tuple[dict[str, list[str]], list[tuple[int, int, str]]] | None = None

    def matches(self, line: int, digest: str) -> bool:
        """Whether the line still holds the text the trace saw there."""
        return 0 < line <= len(self.lines) and line_hash(self.lines[line - 1]) == digest

    def hot(self, project: Project, index_rel: str | None) -> tuple[dict, list]:
        """The file's hot functions (with chains) and every function's line span."""
        if self._hot is None:
            from reviewbot.analysis.gpu import ModuleAnalyzer
            from reviewbot.source import parse_quietly

            hot: dict[str, list[str]] = {}
            spans: list[tuple[int, int, str]] = []
            try:
                tree = parse_quietly(self.text or "")
            except (SyntaxError, ValueError, RecursionError):
                tree = None
            if tree is not None:
                facts = project.hot_facts()
                linked = facts.for_file(index_rel) if facts is not None and index_rel else None
                analyzer = ModuleAnalyzer(tree, project.packs, (), self.text or "",
                                          linked_hot=linked)
                hot = analyzer.hot_paths()
                for qualname, info in analyzer.functions.items():
                    node = info.node
                    spans.append((node.lineno, node.end_lineno or node.lineno, qualname))
            self._hot = (hot, spans)
        return self._hot


def attach(findings: Sequence[Finding], trace: Trace, files: Sequence[Path], cwd: Path,
           config: Any, project: Project, err: TextIO | None = None,
           quiet: bool = False) -> list[Finding]:
    """The findings with the trace's confirmations and RB108's new findings."""
    from reviewbot.discovery import display_path, relative_to_root
    from reviewbot.suppression import Suppressions
    from reviewbot.trace.run import project_root

    root = project_root(cwd)
    checked: dict[str, _File] = {}
    for path in files:
        absolute = Path(os.path.abspath(path)).resolve()
        try:
            rel = absolute.relative_to(root).as_posix()
        except ValueError:
            continue
        checked[rel] = _File(Path(path), display_path(Path(path), cwd), rel,
                             config.max_file_size)
    places: dict[tuple[str, int, bool], Place] = {}
    outcome = Outcome()
    for entry in trace.entries:
        if entry.path not in checked:
            outcome.unmatched += 1
            continue
        key = (entry.path, entry.line, entry.intended)
        places.setdefault(key, Place(entry.path, entry.line, entry.intended)).entries.append(
            entry)
    by_line: dict[tuple[str, int], list[int]] = {}
    for index, finding in enumerate(findings):
        if finding.code in SYNC_CODES and not finding.run_level:
            for line in range(finding.line, max(finding.end_line, finding.line) + 1):
                by_line.setdefault((finding.path, line), []).append(index)
    result = list(findings)
    new: list[Finding] = []
    from reviewbot.rules.rb108_runtime_sync import RuntimeSync

    settings = config.settings.get(RuntimeSync.code, RuntimeSync.default_settings())
    min_count = int(settings.get("min-count", 100))
    enabled = RuntimeSync.code in config.enabled
    ignore_specs = config.per_file_ignore_specs()
    project_root_index = project.root
    for (rel, line, intended), place in sorted(places.items(),
                                               key=lambda item: (item[0][0], item[0][1])):
        file = checked[rel]
        fresh = [e for e in place.entries if file.matches(line, e.line_hash)]
        if len(fresh) < len(place.entries):
            outcome.stale.append((file.shown, line))
        if not fresh:
            continue
        place.entries = fresh
        if intended:
            outcome.intended += 1
            continue
        matched = by_line.get((file.shown, line), [])
        if matched:
            outcome.attached += 1
            for index in matched:
                finding = result[index]
                details = tuple((k, v) for k, v in finding.details if k != "runtime")
                result[index] = dataclasses.replace(
                    finding, message=f"{finding.message} ({seen_text(place)}; "
                                     f"{SHORT[place.kinds[0]]})",
                    details=(*details, ("runtime", place.runtime())))
            continue
        if not enabled:
            continue
        chain = _hot_chain(place, checked, project, root, project_root_index)
        if chain is None and place.count < min_count:
            outcome.below += 1
            continue
        ignored = set()
        for spec, codes in ignore_specs:
            if spec.match_file(relative_to_root(file.path.resolve(), config.root.resolve())):
                ignored |= codes
        if RuntimeSync.code in ignored:
            continue
        finding = RuntimeSync.finding(file.shown, line, file.lines[line - 1], place, chain,
                                      min_count)
        if Suppressions.parse(file.text or "").filter([finding]):
            new.append(finding)
            outcome.new += 1
        else:
            outcome.suppressed += 1
    if err is not None and not quiet:
        _notes(outcome, trace, err)
    return sorted([*result, *new], key=Finding.sort_key)


def _hot_chain(place: Place, checked: dict[str, _File], project: Project, root: Path,
               index_root: Path | None) -> list[str] | None:
    """The chain of calls that makes a frame of the place's stack hot (None: none is)."""
    for frame in place.main.stack:
        rel = frame.get("path")
        if rel not in checked:
            continue
        file = checked[rel]
        index_rel = None
        if index_root is not None:
            try:
                index_rel = file.path.resolve().relative_to(index_root.resolve()).as_posix()
            except ValueError:
                index_rel = None
        hot, spans = file.hot(project, index_rel)
        line = frame.get("line") or 0
        holding = [s for s in spans if s[0] <= line <= s[1]]
        if not holding:
            continue
        innermost = max(holding, key=lambda s: s[0])
        if innermost[2] in hot:
            return hot[innermost[2]]
    return None


def _notes(outcome: Outcome, trace: Trace, err: TextIO) -> None:
    source = printable(trace.source)
    if trace.dropped:
        err.write(f"reviewbot: warning: {source}: {trace.dropped} trace "
                  f"entr{'ies' if trace.dropped != 1 else 'y'} dropped (a path outside the "
                  "project or not a file name, or a name that is not Python's)\n")
    if outcome.stale:
        shown = ", ".join(f"{line_start(p)}:{n}" for p, n in outcome.stale[:_SHOWN])
        more = f" and {len(outcome.stale) - _SHOWN} more" if len(outcome.stale) > _SHOWN else ""
        err.write(f"reviewbot: warning: {source}: {len(outcome.stale)} stale trace "
                  f"entr{'ies' if len(outcome.stale) != 1 else 'y'} (the line changed since "
                  f"the run; not attached): {shown}{more}\n")
    err.write(f"reviewbot: trace: {outcome.attached} finding"
              f"{'s' if outcome.attached != 1 else ''} confirmed at run time, {outcome.new} "
              f"new RB108, {outcome.intended} intended (allow regions), {outcome.below} "
              f"below RB108's thresholds, {outcome.unmatched} in files not checked\n")
