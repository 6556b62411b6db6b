"""The data a rule reports: findings, their fixes and the edits of a fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning"]
Applicability = Literal["safe", "unsafe", "display"]


@dataclass(frozen=True)
class Edit:
    """Replace the text between two 1-based (line, column) positions, end exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str

    def to_json(self) -> dict[str, Any]:
        """The edit as the JSON contract spells it."""
        return {
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "content": self.content,
        }


@dataclass(frozen=True)
class Fix:
    """A change that resolves a finding, with how safe it is to apply unasked."""

    applicability: Applicability
    message: str
    edits: tuple[Edit, ...] = ()
    # Modules the edited code needs imported (added with LibCST's import helpers).
    imports: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The fix as the JSON contract spells it."""
        data: dict[str, Any] = {
            "applicability": self.applicability,
            "message": self.message,
            "edits": [edit.to_json() for edit in self.edits],
        }
        if self.imports:
            data["imports"] = list(self.imports)
        return data


@dataclass(frozen=True)
class Finding:
    """One reported problem at a place in a file (1-based lines and columns)."""

    code: str
    name: str
    message: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    severity: Severity = "warning"
    fix: Fix | None = None
    # Extra machine-readable detail (for example the undocumented definitions of RB301).
    details: tuple[tuple[str, Any], ...] = field(default=(), compare=False)

    @property
    def run_level(self) -> bool:
        """Whether the finding is about the whole run (RB301's coverage): its ``path`` names
        what was checked, and ``details["location"]`` the file and line that viewers which
        need one (SARIF, code scanning) show it at."""
        return any(key == "location" for key, _ in self.details)

    def location(self) -> tuple[str, int] | None:
        """The file and line a run-level finding is shown at (None: not run-level)."""
        for key, value in self.details:
            if key == "location" and isinstance(value, dict):
                return str(value["path"]), int(value["line"])
        return None

    def sort_key(self) -> tuple[str, int, int, str]:
        """Order findings by file, position, then code."""
        return (self.path, self.line, self.column, self.code)

    def to_json(self) -> dict[str, Any]:
        """The finding as DESIGN.md's JSON contract spells it."""
        data: dict[str, Any] = {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "severity": self.severity,
            "fix": self.fix.to_json() if self.fix else None,
        }
        if self.details:
            data["details"] = dict(self.details)
        return data
