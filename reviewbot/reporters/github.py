"""GitHub Actions workflow commands (``::error file=...::message``), one per finding."""

from __future__ import annotations

import os
from typing import Any, Sequence, TextIO

from reviewbot.finding import Finding
from reviewbot.textsafe import printable


def _escape_data(value: str) -> str:
    # Workflow commands have no escape for the other characters some readers end a line
    # at, nor for terminal escapes and bidirectional controls: they are shown as Python
    # escapes (a file name holding one cannot be annotated anyway).
    return printable(value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


_COMMANDS = {"info": "notice", "warning": "warning", "error": "error"}


def write(findings: Sequence[Finding], out: TextIO, color: bool, context: Any = None,
          level_of_all: str | None = None) -> None:
    """Write one workflow command per finding (``level_of_all``: info, warning or error
    for every finding, instead of each one's severity)."""
    for f in findings:
        level = _COMMANDS.get(level_of_all or "", "error" if f.severity == "error"
                              else "warning")
        props = []
        # A finding about the whole checked set (RB301) names a folder: no file to annotate.
        if not os.path.isdir(f.path):
            props += [f"file={_escape_property(f.path)}", f"line={f.line}", f"col={f.column}",
                      f"endLine={f.end_line}", f"endColumn={f.end_column}"]
        props.append(f"title={_escape_property(f.code)}")
        out.write(f"::{level} {','.join(props)}::{_escape_data(f'{f.message} ({f.name})')}\n")
