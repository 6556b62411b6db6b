"""What a report needs besides the findings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ReportContext:
    """Where the findings' paths are relative to (the working directory), and where the
    repository starts (SARIF's ``%SRCROOT%``)."""

    cwd: Path
    source_root: Path
    max_file_size: int | None = None  # files larger than this are not read for fingerprints

    @classmethod
    def here(cls) -> "ReportContext":
        """The working directory, and the repository (or the folder itself) it lies in."""
        from reviewbot.discovery import source_root

        cwd = Path.cwd()
        return cls(cwd, source_root(cwd))
