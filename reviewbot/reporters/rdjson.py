"""reviewdog's Diagnostic Format (``rdjson``: one ``DiagnosticResult`` object), for
``reviewdog -f=rdjson`` to post as review comments, with the safe fixes as suggestions.

reviewdog reads it with protobuf's JSON parser, which refuses a key the format does not
define: nothing else is written (no version key; the format's own version is
reviewdog's). Columns are 1-based UTF-8 byte offsets, as the format defines them, counted
on the file's lines (characters when the file cannot be read again). reviewdog puts each
message into a Markdown comment, so messages are written escaped for Markdown: no link,
HTML, heading or mention can come out of them.
"""

from __future__ import annotations

import os
from typing import Any, Sequence, TextIO

from reviewbot.finding import Edit, Finding
from reviewbot.reporters.safe_json import dump
from reviewbot.reporters.sources import Sources

SOURCE = {"name": "reviewbot", "url": "https://github.com/reviewbot-dev/reviewbot"}
_SEVERITY = {"error": "ERROR", "warning": "WARNING"}


def _column(text: str | None, column: int) -> int:
    """The 1-based UTF-8 byte column of 1-based character ``column`` on a line."""
    if text is None:
        return max(column, 1)
    index = max(column - 1, 0)
    before = text[:index].encode("utf-8", "surrogatepass")
    return len(before) + max(index - len(text), 0) + 1


def _position(source: Sources | None, path: str, line: int, column: int) -> dict[str, int]:
    text = source.line(path, line) if source is not None else None
    return {"line": max(line, 1), "column": _column(text, column)}


def _range(source: Sources | None, path: str, line: int, column: int, end_line: int,
           end_column: int) -> dict[str, Any]:
    return {"start": _position(source, path, line, column),
            "end": _position(source, path, end_line, end_column)}


def _suggestions(f: Finding, source: Sources | None) -> list[dict[str, Any]]:
    """The fix's edits, when it is safe and needs no import (a suggestion cannot add one)."""
    fix = f.fix
    if fix is None or fix.applicability != "safe" or not fix.edits or fix.imports:
        return []
    edits: tuple[Edit, ...] = fix.edits
    return [{"range": _range(source, f.path, e.line, e.column, e.end_line, e.end_column),
             "text": e.content} for e in edits]


def diagnostic(f: Finding, source: Sources | None = None) -> dict[str, Any]:
    """One finding as a reviewdog ``Diagnostic``."""
    from reviewbot.github.markdown import message
    from reviewbot.github.review import DOCS_URL

    location: dict[str, Any] = {"path": f.path.replace(os.sep, "/")}
    folder = source.is_dir(f.path) if source is not None else os.path.isdir(f.path)
    if not folder:
        location["range"] = _range(source, f.path, f.line, f.column, f.end_line,
                                   f.end_column)
    data: dict[str, Any] = {
        "message": message(f.message),
        "location": location,
        "severity": _SEVERITY.get(f.severity, "WARNING"),
        "code": {"value": f.code, "url": f"{DOCS_URL}#{f.code.lower()}-{f.name}"},
    }
    suggestions = _suggestions(f, source)
    if suggestions:
        data["suggestions"] = suggestions
    return data


def build(findings: Sequence[Finding], source: Sources | None = None) -> dict[str, Any]:
    """The ``DiagnosticResult`` as a dict."""
    worst = "ERROR" if any(f.severity == "error" for f in findings) else "WARNING"
    return {"source": dict(SOURCE), "severity": worst,
            "diagnostics": [diagnostic(f, source) for f in findings]}


def write(findings: Sequence[Finding], out: TextIO, color: bool,
          source: Sources | None = None) -> None:
    """Write the findings as one rdjson object."""
    dump(build(findings, source), out, indent=2, ensure_ascii=False)
    out.write("\n")
