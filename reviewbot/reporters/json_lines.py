"""JSON Lines: one finding a line, each the object ``json`` puts in its array (with
``schema_version``), so a reader can stream them."""

from __future__ import annotations

from typing import Sequence, TextIO

from reviewbot.finding import Finding
from reviewbot.reporters.json_report import record
from reviewbot.reporters.safe_json import dump


def write(findings: Sequence[Finding], out: TextIO, color: bool) -> None:
    """One compact JSON object per line (no line breaks inside: JSON escapes them)."""
    for f in findings:
        dump(record(f), out, ensure_ascii=False, separators=(",", ":"))
        out.write("\n")
