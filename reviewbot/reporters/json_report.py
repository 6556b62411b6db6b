"""One JSON array of findings, as DESIGN.md's contract spells it.

Each finding carries ``schema_version`` (the array itself stays an array, as consumers
read it); ``json-lines`` writes the same objects, one a line.
"""

from __future__ import annotations

from typing import Any, Sequence, TextIO

from reviewbot.finding import Finding
from reviewbot.reporters.safe_json import dump

# Raised when a key of a finding changes meaning or goes away; new keys do not raise it.
SCHEMA_VERSION = 1


def record(finding: Finding) -> dict[str, Any]:
    """A finding as the JSON formats write it."""
    return {**finding.to_json(), "schema_version": SCHEMA_VERSION}


def write(findings: Sequence[Finding], out: TextIO, color: bool, context: Any = None) -> None:
    """Write the findings as a JSON array."""
    dump([record(f) for f in findings], out, indent=2, ensure_ascii=False)
    out.write("\n")
