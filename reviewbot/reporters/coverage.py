"""The ``--coverage-report`` table: per file, definitions, documented, missing, percent."""

from __future__ import annotations

from typing import Any, Mapping, TextIO

from reviewbot.rules.rb301_docstring_coverage import coverage_percent
from reviewbot.textsafe import line_start


def write(facts: Mapping[str, Any], threshold: float, out: TextIO) -> None:
    """Write one row per file and a total row (``facts`` as RB301 records them)."""
    rows = []
    total = documented = 0
    for path in sorted(facts):
        defs = facts[path]
        done = sum(1 for d in defs if d[3])
        total += len(defs)
        documented += done
        rows.append((line_start(path), len(defs), done, len(defs) - done,
                     f"{coverage_percent(done, len(defs)):.2f}%"))
    rows.append(("TOTAL", total, documented, total - documented,
                 f"{coverage_percent(documented, total):.2f}%"))
    header = ("file", "definitions", "documented", "missing", "percent")
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(5)]

    def line(row: tuple[Any, ...]) -> str:
        cells = [str(row[0]).ljust(widths[0])] + [str(v).rjust(w) for v, w in zip(row[1:], widths[1:])]
        return "  ".join(cells).rstrip()

    out.write(line(header) + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for row in rows[:-1]:
        out.write(line(row) + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    out.write(line(rows[-1]) + "\n")
    verdict = "PASSED" if round(coverage_percent(documented, total), 2) >= threshold else "FAILED"
    out.write(f"Docstring coverage {verdict}: {documented} of {total} definitions documented "
              f"({coverage_percent(documented, total):.2f}%), threshold {threshold:.2f}%\n")
