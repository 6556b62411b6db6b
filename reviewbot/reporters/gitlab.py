"""GitLab's code quality report (``artifacts: reports: codequality``): a JSON array of
issues, the subset of the Code Climate spec GitLab reads.

The fingerprint is what GitLab tells findings apart by, between the base and the head of a
merge request: it is made of the rule, the path relative to the repository root and the
reported line's text (whitespace normalised), not its number, so a finding keeps its
fingerprint when lines are added above it. The same finding on identical lines of one file
gets a running number, so no two share one. Descriptions are one line, control
characters escaped.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Sequence, TextIO

from reviewbot.finding import Finding
from reviewbot.reporters.safe_json import dump
from reviewbot.reporters.sources import Sources, digest, normalised
from reviewbot.textsafe import printable

_SEVERITY = {"error": "major", "warning": "minor"}


def build(findings: Sequence[Finding], source: Sources | None = None) -> list[dict[str, Any]]:
    """The report as a list of issues."""
    source = source or Sources(Path.cwd(), (Path.cwd().resolve(),))
    seen: Counter[tuple[str, str, str]] = Counter()
    issues = []
    for f in findings:
        path = source.relative(f.path) or f.path.replace("\\", "/")
        text = normalised(source.line(f.path, f.line) or "")
        key = (f.code, path, text)
        occurrence = seen[key]
        seen[key] += 1
        lines: dict[str, int] = {"begin": max(f.line, 1)}
        if f.end_line > f.line:
            lines["end"] = f.end_line
        issues.append({
            "description": printable(f"{f.code}: {f.message}"),
            "check_name": f.code,
            "fingerprint": digest(f.code, path, text, str(occurrence), size=32),
            "severity": _SEVERITY.get(f.severity, "minor"),
            "location": {"path": path, "lines": lines},
        })
    return issues


def write(findings: Sequence[Finding], out: TextIO, color: bool,
          source: Sources | None = None) -> None:
    """Write the findings as a code quality report."""
    dump(build(findings, source), out, indent=2, ensure_ascii=False)
    out.write("\n")
