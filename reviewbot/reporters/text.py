"""``path:line:col: CODE message`` lines and a summary line; colour only on a terminal.

Findings about the whole run (RB301's coverage of everything checked) come last, after
every finding in a file, as ``path: CODE message``: their path names what was checked (a
folder), which has no line or column."""

from __future__ import annotations

from typing import Any, Sequence, TextIO

from reviewbot.finding import Finding
from reviewbot.textsafe import line_start, printable

_BOLD, _RED, _YELLOW, _CYAN, _DIM, _RESET = "\033[1m", "\033[31m", "\033[33m", "\033[36m", \
    "\033[2m", "\033[0m"
# RB301 lists what is missing below its line; past this many, the list is cut.
MISSING_SHOWN = 20


def _fix_mark(finding: Finding) -> str:
    if finding.fix is None:
        return ""
    return {"safe": " [*]", "unsafe": " [~]"}.get(finding.fix.applicability, "")


def write(findings: Sequence[Finding], out: TextIO, color: bool, summary: bool = True,
          details: bool = True, context: Any = None) -> None:
    """Write one line per finding (RB301's missing definitions below its line unless
    ``details`` is off) and a summary (unless ``summary`` is off)."""

    def paint(code: str, value: str) -> str:
        return f"{code}{value}{_RESET}" if color else value

    ordered = [f for f in findings if not f.run_level] + [f for f in findings if f.run_level]
    for f in ordered:
        where = paint(_BOLD, f"{line_start(f.path)}:" if f.run_level
                      else f"{line_start(f.path)}:{f.line}:{f.column}:")
        code = paint(_RED if f.severity == "error" else _YELLOW, f.code)
        out.write(f"{where} {code}{_fix_mark(f)} {printable(f.message)}\n")
        missing = dict(f.details).get("missing")
        if missing and details:
            for item in missing[:MISSING_SHOWN]:
                out.write(paint(_DIM, f"    missing: {printable(str(item))}") + "\n")
            if len(missing) > MISSING_SHOWN:
                out.write(paint(_DIM, f"    ... and {len(missing) - MISSING_SHOWN} more "
                                      "(--coverage-report lists every file)") + "\n")
    if summary:
        write_summary(findings, out, color)


def write_summary(findings: Sequence[Finding], out: TextIO, color: bool) -> None:
    """The closing line: how many findings, how many a fix resolves."""

    def paint(code: str, value: str) -> str:
        return f"{code}{value}{_RESET}" if color else value

    if not findings:
        out.write(paint(_BOLD, "All checks passed!") + "\n")
        return
    safe = sum(1 for f in findings if f.fix and f.fix.edits and f.fix.applicability == "safe")
    unsafe = sum(1 for f in findings if f.fix and f.fix.edits
                 and f.fix.applicability == "unsafe")
    noun = "finding" if len(findings) == 1 else "findings"
    summary = f"Found {len(findings)} {noun}."
    if safe:
        summary += f" [*] {safe} fixable with `reviewbot fix --apply`."
    if unsafe and safe:
        summary += f" [~] {unsafe} more with `--unsafe-fixes`."
    elif unsafe:
        summary += f" [~] {unsafe} fixable with `reviewbot fix --apply --unsafe-fixes`."
    out.write(paint(_BOLD, summary) + "\n")
