"""One JSON array of findings, as DESIGN.md's contract spells it."""

from __future__ import annotations

import json
from typing import Sequence, TextIO

from reviewbot.finding import Finding


def write(findings: Sequence[Finding], out: TextIO, color: bool) -> None:
    """Write the findings as a JSON array."""
    json.dump([f.to_json() for f in findings], out, indent=2, ensure_ascii=False)
    out.write("\n")
