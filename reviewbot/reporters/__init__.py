"""Reporters turn findings into text for people (text, concise, full, pylint) and for tools
(json, json-lines, sarif, github, rdjson, gitlab, junit)."""

from __future__ import annotations

from typing import Any, Callable, Sequence, TextIO

from reviewbot.finding import Finding
from reviewbot.reporters.context import ReportContext
from reviewbot.reporters import (concise, full, github, gitlab, json_lines, json_report,
                                 junit, pylint, rdjson, sarif, text)

FORMATS: dict[str, Callable[..., None]] = {
    "text": text.write,
    "concise": concise.write,
    "full": full.write,
    "json": json_report.write,
    "json-lines": json_lines.write,
    "sarif": sarif.write,
    "github": github.write,
    "rdjson": rdjson.write,
    "gitlab": gitlab.write,
    "junit": junit.write,
    "pylint": pylint.write,
}
# Formats that end with a summary line (-q leaves it out), and those that read the
# checked files' lines again (to show them, or to fingerprint them).
WITH_SUMMARY = frozenset({"text", "concise", "full"})
# Formats that take the report's context (the working folder and the repository root).
WITH_CONTEXT = frozenset({"text", "json", "sarif", "github"})
READS_SOURCES = frozenset({"full", "rdjson", "gitlab"})


def write_report(name: str, findings: Sequence[Finding], out: TextIO, color: bool,
                 summary: bool = True, source: Any = None,
                 context: ReportContext | None = None) -> None:
    """Write ``findings`` in format ``name``; ``source`` (a Sources) for those that read
    the files' lines, ``summary`` off for ``-q``."""
    options: dict[str, Any] = {}
    if name in WITH_SUMMARY:
        options["summary"] = summary
    if name in READS_SOURCES:
        options["source"] = source
    if name in WITH_CONTEXT:
        options["context"] = context
    FORMATS[name](findings, out, color, **options)
