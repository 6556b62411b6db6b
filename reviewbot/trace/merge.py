"""Merge the per-process JSON-lines files of a traced run into one trace document.

Each traced process appends to its own file, one event a line (see ``_hook.py``):
``process`` (its header), ``armed`` (torch imported: which detectors are on), ``note``,
``recording`` (warm-up over), ``site`` (a new place and kind of sync, with its stack),
``hit`` (one sync at a site), ``window`` and ``wait`` (the profiler window and the wait
of each sync in it) and ``exit``. A worker killed while writing leaves a last line cut
short: it is left out and counted; so is any other line that is not an event.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
TOOL = "reviewbot trace"
KINDS = ("copy-to-pageable", "copy-to-pinned", "copy-to-device", "stream-sync",
         "device-sync", "event-sync")
# Whether each kind stalls other threads' CUDA calls (see the README's measurements).
STALLS = {"copy-to-pageable": True, "copy-to-device": True, "copy-to-pinned": False,
          "stream-sync": False, "device-sync": False, "event-sync": False}
MAX_LINE = 1 << 20  # an event line longer than this is not one of ours


class _Process:
    """What one process's file says."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.header: dict[str, Any] = {}
        self.armed: dict[str, Any] | None = None
        self.recording: str | None = None
        self.sites: dict[int, dict[str, Any]] = {}
        self.hits: dict[int, int] = {}
        self.waits: dict[int, list[tuple[float | None, str | None]]] = {}
        self.notes: list[str] = []
        self.exit: dict[str, Any] | None = None
        self.windows: list[dict[str, Any]] = []
        self.truncated = 0
        self.unreadable = 0

    def add(self, event: dict[str, Any]) -> None:
        """Take in one event line."""
        kind = event.get("t")
        site = event.get("s")
        if kind == "process":
            self.header = event
        elif kind == "armed":
            self.armed = event
        elif kind == "recording":
            self.recording = str(event.get("how"))
        elif kind == "site" and isinstance(site, int):
            self.sites[site] = event
        elif kind == "hit" and isinstance(site, int):
            self.hits[site] = self.hits.get(site, 0) + 1
        elif kind == "wait" and isinstance(site, int):
            wait = event.get("us")
            found = event.get("kind")
            self.waits.setdefault(site, []).append(
                (float(wait) if isinstance(wait, (int, float)) else None,
                 found if found in KINDS else None))
        elif kind == "note" and isinstance(event.get("text"), str):
            self.notes.append(event["text"])
        elif kind == "window":
            self.windows.append(event)
        elif kind == "exit":
            self.exit = event
        else:
            self.unreadable += 1


def read_process(path: Path) -> _Process:
    """One process's events; a cut-short last line and lines that are not events are
    counted, not read."""
    process = _Process(path.name)
    data = path.read_bytes()
    lines = data.split(b"\n")
    complete = data.endswith(b"\n")
    if complete:
        lines.pop()
    for number, raw in enumerate(lines):
        last = number == len(lines) - 1
        if last and not complete:
            process.truncated += 1
            continue
        if len(raw) > MAX_LINE:
            process.unreadable += 1
            continue
        try:
            event = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            process.unreadable += 1
            continue
        if isinstance(event, dict):
            process.add(event)
        else:
            process.unreadable += 1
    return process


def _site_key(site: dict[str, Any], kind: str) -> str:
    return json.dumps([site.get("path"), site.get("line"), site.get("hash"), kind,
                       bool(site.get("intended")), site.get("op"), site.get("stack")],
                      sort_keys=True)


def merge(folder: Path, settings: dict[str, Any] | None = None,
          exit_status: int | None = None, duration: float | None = None) -> dict[str, Any]:
    """The trace document of the events files in ``folder`` (``proc-*.jsonl``)."""
    processes = [read_process(p) for p in sorted(folder.glob("proc-*.jsonl"))]
    merged: dict[str, dict[str, Any]] = {}
    outside: dict[str, int] = {}
    notes: dict[str, int] = {}
    for process in processes:
        for text in dict.fromkeys(process.notes):
            notes[text] = notes.get(text, 0) + 1
        for number, site in process.sites.items():
            count = process.hits.get(number, 0)
            if not count:
                continue
            waits = process.waits.get(number, [])
            kind = str(site.get("kind"))
            kind_from = str(site.get("kind_from") or "default")
            found = [k for _, k in waits if k is not None]
            if found and site.get("kind") not in ("device-sync", "event-sync"):
                kind = max(set(found), key=found.count)
                kind_from = "profiler"
            if kind not in KINDS:
                continue
            if not isinstance(site.get("path"), str):
                outside[kind] = outside.get(kind, 0) + count
                continue
            key = _site_key(site, kind)
            entry = merged.get(key)
            if entry is None:
                entry = merged[key] = {
                    "path": site["path"], "line": site.get("line"), "line_hash": site.get("hash"),
                    "function": site.get("function"), "op": site.get("op"), "kind": kind,
                    "kind_from": kind_from, "stalls_other_threads": STALLS[kind],
                    "intended": bool(site.get("intended")), "detected_by": [],
                    "count": 0, "processes": 0,
                    "waited": {"samples": 0, "total_ms": 0.0, "max_ms": 0.0},
                    "stack": site.get("stack") or []}
            entry["count"] += count
            entry["processes"] += 1
            by = site.get("by")
            if isinstance(by, str) and by not in entry["detected_by"]:
                entry["detected_by"].append(by)
            waited = entry["waited"]
            for wait, _ in waits:
                if wait is None:
                    continue
                waited["samples"] += 1
                waited["total_ms"] += wait / 1000.0
                waited["max_ms"] = max(waited["max_ms"], wait / 1000.0)
    syncs = sorted(merged.values(), key=lambda e: (-e["count"], e["path"], e["line"] or 0))
    for entry in syncs:
        waited = entry["waited"]
        waited["total_ms"] = round(waited["total_ms"], 3)
        waited["max_ms"] = round(waited["max_ms"], 3)
    return {
        "tool": TOOL,
        "schema_version": SCHEMA_VERSION,
        "exit_status": exit_status,
        "duration_s": round(duration, 3) if duration is not None else None,
        "settings": dict(settings or {}),
        "processes": [_process_summary(p) for p in processes],
        "notes": [{"text": text, "processes": count} for text, count in notes.items()],
        "syncs": syncs,
        "outside_project": {"count": sum(outside.values()), "by_kind": outside},
    }


def _process_summary(process: _Process) -> dict[str, Any]:
    header, armed, ended = process.header, process.armed or {}, process.exit
    return {
        "pid": header.get("pid"), "ppid": header.get("ppid"),
        "python": header.get("python"),
        "torch": armed.get("torch"),
        "debug_mode": armed.get("debug_mode"), "gpu_trace": armed.get("gpu_trace"),
        "recording": process.recording or ("from the start" if header.get("recording")
                                           else None),
        "syncs_seen": ended.get("seen") if ended else None,
        "warm_up_skipped": ended.get("skipped") if ended else None,
        "recorded": sum(process.hits.values()),
        "profiler_windows": [w for w in process.windows if w.get("state") == "closed"],
        "ended": ended is not None,
        "truncated_lines": process.truncated,
        "unreadable_lines": process.unreadable,
    }
