"""``path:line:col: CODE message``, one line per finding, and the summary line."""

from __future__ import annotations

from typing import Sequence, TextIO

from reviewbot.finding import Finding
from reviewbot.reporters import text


def write(findings: Sequence[Finding], out: TextIO, color: bool, summary: bool = True) -> None:
    """The text report without the lines below RB301's (one line per finding)."""
    text.write(findings, out, color, summary=summary, details=False)
