"""``--statistics``: how many findings each rule has, most first (as ruff prints them).

A table for people (count, code, ``[*]`` when a safe fix resolves them all, name), or
with ``--output-format json`` / ``json-lines`` a JSON array / one object a line of
``{"code", "name", "count", "fixable"}``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence, TextIO

from reviewbot.finding import Finding
from reviewbot.reporters import text
from reviewbot.reporters.safe_json import dump
from reviewbot.textsafe import printable


def _safe_fix(f: Finding) -> bool:
    return f.fix is not None and bool(f.fix.edits) and f.fix.applicability == "safe"


def counts(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """One row per rule code: most findings first, then by code."""
    per_code: Counter[str] = Counter(f.code for f in findings)
    names: dict[str, str] = {}
    fixable: dict[str, int] = Counter()
    for f in findings:
        names.setdefault(f.code, f.name)
        fixable[f.code] += _safe_fix(f)
    order = sorted(per_code, key=lambda code: (-per_code[code], code))
    return [{"code": code, "name": names[code], "count": per_code[code],
             "fixable": fixable[code] == per_code[code]} for code in order]


def write(findings: Sequence[Finding], out: TextIO, color: bool, output_format: str = "text",
          summary: bool = True) -> None:
    """Write the counts as a table, or as JSON for the JSON formats."""
    rows = counts(findings)
    if output_format == "json":
        dump(rows, out, indent=2, ensure_ascii=False)
        out.write("\n")
        return
    if output_format == "json-lines":
        for row in rows:
            dump(row, out, ensure_ascii=False, separators=(",", ":"))
            out.write("\n")
        return
    count_width = max((len(str(r["count"])) for r in rows), default=1)
    code_width = max((len(printable(r["code"])) for r in rows), default=1)
    any_fixable = any(r["fixable"] for r in rows)
    for row in rows:
        mark = ("[*] " if row["fixable"] else "    ") if any_fixable else ""
        out.write(f"{row['count']:>{count_width}}  {printable(row['code']):<{code_width}}  "
                  f"{mark}{printable(row['name'])}\n")
    if summary:
        text.write_summary(findings, out, color)
