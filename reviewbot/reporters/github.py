"""GitHub Actions workflow commands (``::error file=...::message``), one per finding."""

from __future__ import annotations

import os
from typing import Any, Sequence, TextIO

from reviewbot.finding import Finding


# Other characters some readers end a line at; workflow commands have no escape for them,
# so they are shown as Python escapes (a file name holding one cannot be annotated anyway).
_OTHER_BREAKS = {ord(c): f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
                 for c in "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A") \
        .translate(_OTHER_BREAKS)


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def write(findings: Sequence[Finding], out: TextIO, color: bool, context: Any = None) -> None:
    """Write one workflow command per finding."""
    for f in findings:
        level = "error" if f.severity == "error" else "warning"
        props = []
        # A finding about the whole checked set (RB301) names a folder: no file to annotate.
        if not os.path.isdir(f.path):
            props += [f"file={_escape_property(f.path)}", f"line={f.line}", f"col={f.column}",
                      f"endLine={f.end_line}", f"endColumn={f.end_column}"]
        props.append(f"title={_escape_property(f.code)}")
        out.write(f"::{level} {','.join(props)}::{_escape_data(f'{f.message} ({f.name})')}\n")
