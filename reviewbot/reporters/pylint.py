"""``path:line: [CODE] message``, the line pylint's parseable output has (editors and CI
problem matchers read it)."""

from __future__ import annotations

from typing import Sequence, TextIO

from reviewbot.finding import Finding
from reviewbot.textsafe import line_start, printable


def write(findings: Sequence[Finding], out: TextIO, color: bool) -> None:
    """One line per finding."""
    for f in findings:
        out.write(f"{line_start(f.path)}:{f.line}: [{printable(f.code)}] "
                  f"{printable(f.message)}\n")
