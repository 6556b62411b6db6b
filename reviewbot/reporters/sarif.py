"""SARIF 2.1.0, for GitHub code scanning and other SARIF viewers."""

from __future__ import annotations

import os
from typing import Any, Sequence, TextIO

from reviewbot import __version__, registry
from reviewbot.finding import Finding
from reviewbot.reporters.safe_json import dump

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def _level(severity: str) -> str:
    return "error" if severity == "error" else "warning"


def _rule_descriptor(rule: Any) -> dict[str, Any]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.docs().splitlines()[0] if rule.docs() else rule.summary},
        "help": {"text": rule.docs(), "markdown": rule.docs()},
        "defaultConfiguration": {"level": _level(rule.severity), "enabled": rule.default_enabled},
        "properties": {"fixSafety": rule.fix_safety},
    }


def _result(f: Finding, index: int) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": f.code,
        "ruleIndex": index,
        "level": _level(f.severity),
        "message": {"text": f.message},
    }
    uri = f.path.replace(os.sep, "/")
    location: dict[str, Any] = {"artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"}}
    if not os.path.isdir(f.path):
        location["region"] = {"startLine": f.line, "startColumn": f.column,
                              "endLine": f.end_line, "endColumn": f.end_column}
    result["locations"] = [{"physicalLocation": location}]
    if f.fix is not None and f.fix.edits:
        result["fixes"] = [{
            "description": {"text": f.fix.message},
            "artifactChanges": [{
                "artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"},
                "replacements": [{
                    "deletedRegion": {"startLine": e.line, "startColumn": e.column,
                                      "endLine": e.end_line, "endColumn": e.end_column},
                    "insertedContent": {"text": e.content},
                } for e in f.fix.edits],
            }],
        }]
    return result


def build(findings: Sequence[Finding]) -> dict[str, Any]:
    """The SARIF log as a dict."""
    index = {rule.code: i for i, rule in enumerate(registry.RULES)}
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "reviewbot",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_rule_descriptor(rule) for rule in registry.RULES],
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": _cwd_uri()}},
            "results": [_result(f, index.get(f.code, 0)) for f in findings],
            "columnKind": "unicodeCodePoints",
        }],
    }


def _cwd_uri() -> str:
    from pathlib import Path

    return Path.cwd().as_uri() + "/"


def write(findings: Sequence[Finding], out: TextIO, color: bool) -> None:
    """Write the findings as a SARIF 2.1.0 log."""
    dump(build(findings), out, indent=2, ensure_ascii=False)
    out.write("\n")
