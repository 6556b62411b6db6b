"""Shared helpers: run the CLI in-process, and check source text with chosen rules."""

from __future__ import annotations

import dataclasses
import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pytest

from reviewbot import cli, registry
from reviewbot.config import Overrides, build_config
from reviewbot.context import RunContext
from reviewbot.engine import Engine
from reviewbot.finding import Finding
from reviewbot.packs import load_packs
from reviewbot.rule import Rule

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


@dataclass
class CliResult:
    """What one CLI call printed and returned."""

    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch):
    """Run ``reviewbot ARGS`` in-process in a folder; return exit code and output."""

    # Output is the same in and out of a GitHub Actions job (where `fix` fences its diff).
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)

    def run(args: Sequence[str], cwd: Path | None = None) -> CliResult:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)
        try:
            code = cli.main(list(args))
        except SystemExit as exc:  # argparse's own exits
            code = int(exc.code or 0)
        return CliResult(code, out.getvalue(), err.getvalue())

    return run


def check_source(tmp_path: Path, source: str, rule: type[Rule],
                 options: Mapping[str, Any] = {}, path: str = "example.py",
                 jobs: int = 1, trace: Sequence[Mapping[str, Any]] | None = None
                 ) -> list[Finding]:
    """Check one file of ``source`` with only ``rule`` (and its options) enabled.

    ``rule`` may be a test's own rule outside the registry. With ``trace`` (entries of a
    ``reviewbot trace`` document), the findings are checked against it as ``check
    --trace`` does.
    """
    file = tmp_path / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(source, encoding="utf-8")
    registered = rule.code in registry.BY_CODE
    table: dict[str, Any] = {"select": [rule.code] if registered else ["RB0"]}
    if registered and options:
        table["rules"] = {rule.code: dict(options)}
    config = build_config(table, None, "", tmp_path, Overrides())
    config = dataclasses.replace(config, enabled=config.enabled | {rule.code})
    rules = registry.RULES if registered else (*registry.RULES, rule)
    packs = load_packs(config.rule_packs, config.root, None)
    engine = Engine(config, packs, jobs=jobs, rules=rules)
    findings = engine.run([file], RunContext(str(tmp_path)), tmp_path).findings
    if trace is None:
        return findings
    from reviewbot.trace.attach import Project, attach, parse

    (tmp_path / "pyproject.toml").touch()  # the project root the trace's paths start from
    document = {"tool": "reviewbot trace", "schema_version": 1, "syncs": list(trace)}
    return attach(findings, parse(document), [file], tmp_path, config, Project(packs))


def fix_source(tmp_path: Path, source: str, rule: type[Rule],
               options: Mapping[str, Any] = {}, path: str = "example.py") -> Any:
    """Fix one file of ``source`` as ``reviewbot fix`` does, with only ``rule`` enabled;
    the ``FileFix`` (``new`` is the fixed text, ``error`` why there is none)."""
    from reviewbot.fixer import Fixer

    table: dict[str, Any] = {"select": [rule.code]}
    if options:
        table["rules"] = {rule.code: dict(options)}
    config = build_config(table, None, "", tmp_path, Overrides())
    config = dataclasses.replace(config, enabled=config.enabled | {rule.code})
    packs = load_packs(config.rule_packs, config.root, None)
    return Fixer(config, packs, registry.RULES, unsafe=rule.fix_safety == "unsafe").fix_text(
        path, path, source)
