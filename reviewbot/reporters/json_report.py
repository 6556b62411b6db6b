"""One JSON array of findings, as DESIGN.md's contract spells it."""

from __future__ import annotations

from typing import Any, Sequence, TextIO

from reviewbot.finding import Finding
from reviewbot.reporters.safe_json import dump


def write(findings: Sequence[Finding], out: TextIO, color: bool, context: Any = None) -> None:
    """Write the findings as a JSON array."""
    dump([f.to_json() for f in findings], out, indent=2, ensure_ascii=False)
    out.write("\n")
