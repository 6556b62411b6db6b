"""Reporters turn findings into text for people (text) and for tools (json, sarif, github)."""

from __future__ import annotations

from typing import Callable, Sequence, TextIO

from reviewbot.finding import Finding
from reviewbot.reporters import github, json_report, sarif, text
from reviewbot.reporters.context import ReportContext

FORMATS: dict[str, Callable[[Sequence[Finding], TextIO, bool, ReportContext | None], None]] = {
    "text": text.write,
    "json": json_report.write,
    "sarif": sarif.write,
    "github": github.write,
}
