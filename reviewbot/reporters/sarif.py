"""SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.

- Every result names a file and a region. A finding about the whole run (RB301's
  coverage) is shown where its ``details["location"]`` says: the configuration file at the
  line naming the rule, else the file with the most undocumented definitions, at line 1,
  its region the whole line.
- Paths are relative to the repository, whatever the working directory: each
  ``artifactLocation`` has ``uriBaseId: "%SRCROOT%"``, and ``originalUriBaseIds`` gives
  ``%SRCROOT%`` as the git root above the project (or the project root). A file outside it
  is an absolute ``file:`` URI with no base.
- Columns are 1-based characters (``columnKind: "unicodeCodePoints"``), as in every
  format.
- ``partialFingerprints["reviewbotLineHash/v1"]`` is a hash of the rule, the
  repository-relative path and the reported line's text with its white space collapsed,
  then ``:N`` for the N-th such line: line numbers are not in it, so an alert keeps its
  identity when lines are added above it. It has a name of its own: upload-sarif adds its
  ``primaryLocationLineHash`` beside it, and warns about every result whose
  ``primaryLocationLineHash`` differs from the one it computes.
- A finding that a trace confirmed (``check --trace``), and RB108's findings, carry what
  the run saw in ``properties.runtime`` (count, wait, kinds, stack).
- Messages are plain text with ``[``, ``]`` and ``\\`` escaped, so text from a checked file
  cannot become one of SARIF's embedded links.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Sequence, TextIO
from urllib.parse import quote

from reviewbot import __version__, registry
from reviewbot.finding import Finding
from reviewbot.links import HOMEPAGE, rule_url
from reviewbot.reporters.context import ReportContext
from reviewbot.reporters.safe_json import dump
from reviewbot.source import UnreadableSource, decode, read_bytes, split_lines

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
FINGERPRINT = "reviewbotLineHash/v1"


def _level(severity: str) -> str:
    return "error" if severity == "error" else "warning"


def plain_text(message: str) -> str:
    """A message as SARIF plain text (§3.11.6): a literal bracket or backslash escaped, so
    that ``[text](destination)`` from a checked file is shown, never followed."""
    return message.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _rule_descriptor(rule: Any) -> dict[str, Any]:
    docs = rule.docs()
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": docs.splitlines()[0] if docs else rule.summary},
        "helpUri": rule_url(rule),
        "help": {"text": docs, "markdown": docs},
        "defaultConfiguration": {"level": _level(rule.severity), "enabled": rule.default_enabled},
        "properties": {"fixSafety": rule.fix_safety},
    }


class _Artifacts:
    """Files as SARIF names them (relative to ``%SRCROOT%``), and their lines, read once."""

    def __init__(self, context: ReportContext) -> None:
        self.context = context
        self.root = context.source_root.resolve()
        self._lines: dict[str, list[str] | None] = {}

    def locate(self, path: str) -> tuple[dict[str, Any], str, Path]:
        """The artifactLocation of a reported path, its repository-relative name (absolute
        outside the repository) and where it is on disk."""
        absolute = Path(os.path.realpath(os.path.join(self.context.cwd, path)))
        try:
            relative = absolute.relative_to(self.root).as_posix()
        except ValueError:
            return {"uri": absolute.as_uri()}, absolute.as_posix(), absolute
        return {"uri": quote(relative, safe="/"), "uriBaseId": SRCROOT}, relative, absolute

    def line(self, path: Path, number: int) -> str:
        """The text of a 1-based line ("" where the file or the line cannot be read)."""
        key = str(path)
        if key not in self._lines:
            try:
                data = read_bytes(key, self.context.max_file_size)
                self._lines[key] = split_lines(decode(data).text)
            except UnreadableSource:
                self._lines[key] = None
        lines = self._lines[key]
        if lines is None or not 0 < number <= len(lines):
            return ""
        return lines[number - 1]


def line_hash(code: str, path: str, text: str) -> str:
    """The hash of a reported line: the rule, the repository-relative path and the line's
    text with runs of white space made one space (indentation does not count)."""
    normal = " ".join(text.split())
    data = "\0".join((code, path, normal)).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:32]


def _result(f: Finding, index: int, artifacts: _Artifacts) -> tuple[dict[str, Any], tuple]:
    """A result, and what its fingerprint is made of (its hash, then where it is)."""
    result: dict[str, Any] = {
        "ruleId": f.code,
        "ruleIndex": index,
        "level": _level(f.severity),
        "message": {"text": plain_text(f.message)},
    }
    runtime = dict(f.details).get("runtime")
    if runtime is not None:  # what a `reviewbot trace` run saw at this place
        result["properties"] = {"runtime": runtime}
    shown = f.location()
    if shown is not None:  # about the whole run: at its location, the whole line
        artifact, relative, absolute = artifacts.locate(shown[0])
        line = max(shown[1], 1)
        text = artifacts.line(absolute, line)
        region: dict[str, int] | None = {"startLine": line, "startColumn": 1,
                                          "endLine": line, "endColumn": len(text) + 1}
        position = (line, 1)
    else:
        artifact, relative, absolute = artifacts.locate(f.path)
        text = artifacts.line(absolute, f.line)
        region = None if absolute.is_dir() else {
            "startLine": f.line, "startColumn": f.column,
            "endLine": f.end_line, "endColumn": f.end_column}
        position = (f.line, f.column)
    location: dict[str, Any] = {"artifactLocation": artifact}
    if region is not None:
        location["region"] = region
    result["locations"] = [{"physicalLocation": location}]
    if f.fix is not None and f.fix.edits and shown is None:
        result["fixes"] = [{
            "description": {"text": plain_text(f.fix.message)},
            "artifactChanges": [{
                "artifactLocation": dict(artifact),
                "replacements": [{
                    "deletedRegion": {"startLine": e.line, "startColumn": e.column,
                                      "endLine": e.end_line, "endColumn": e.end_column},
                    "insertedContent": {"text": e.content},
                } for e in f.fix.edits],
            }],
        }]
    return result, (line_hash(f.code, relative, text), relative, *position)


def _fingerprint(results: list[dict[str, Any]], keys: list[tuple]) -> None:
    """``hash:N``: N counts the results with the same hash, in the order of their
    positions in the file (a second identical line is told from the first)."""
    seen: dict[str, int] = {}
    for number in sorted(range(len(keys)), key=lambda i: (keys[i][1:], i)):
        digest = keys[number][0]
        seen[digest] = seen.get(digest, 0) + 1
        results[number]["partialFingerprints"] = {FINGERPRINT: f"{digest}:{seen[digest]}"}


def _root_uri(root: Path) -> str:
    uri = root.as_uri()
    return uri if uri.endswith("/") else uri + "/"


def build(findings: Sequence[Finding], context: ReportContext | None = None) -> dict[str, Any]:
    """The SARIF log as a dict."""
    context = context or ReportContext.here()
    artifacts = _Artifacts(context)
    index = {rule.code: i for i, rule in enumerate(registry.RULES)}
    results, keys = [], []
    for finding in findings:
        result, key = _result(finding, index.get(finding.code, 0), artifacts)
        results.append(result)
        keys.append(key)
    _fingerprint(results, keys)
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "reviewbot",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": HOMEPAGE,
                "rules": [_rule_descriptor(rule) for rule in registry.RULES],
            }},
            "originalUriBaseIds": {SRCROOT: {
                "uri": _root_uri(artifacts.root),
                "description": {"text": "The root of the repository (or of the project)."}}},
            "results": results,
            "columnKind": "unicodeCodePoints",
        }],
    }


def write(findings: Sequence[Finding], out: TextIO, color: bool,
          context: ReportContext | None = None) -> None:
    """Write the findings as a SARIF 2.1.0 log."""
    dump(build(findings, context), out, indent=2, ensure_ascii=False)
    out.write("\n")
