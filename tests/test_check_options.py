"""`check --statistics` (counts per rule, most first) and `-q/--quiet` (findings only)."""

from __future__ import annotations

import io
import json

import pytest

from reviewbot.finding import Edit, Finding, Fix
from reviewbot.reporters import statistics

SELECT = ["--select", "RB302,RB001", "--no-cache"]


@pytest.fixture
def tree(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.py").write_text("def f():\n    pass\n\n\ndef g():\n    pass\n")
    (tmp_path / "b.py").write_text("def h(:\n")
    (tmp_path / "c.py").write_text('"""Doc."""\n\n\ndef k():\n    pass\n')
    return tmp_path


def finding(code: str, name: str, fix: Fix | None = None) -> Finding:
    return Finding(code, name, "m", "a.py", 1, 1, 1, 2, "warning", fix)


def test_counts_are_sorted_by_count_then_code():
    safe = Fix("safe", "f", (Edit(1, 1, 1, 2, "x"),))
    rows = statistics.counts([finding("RB302", "missing-docstring"), finding("RB101", "a", safe),
                              finding("RB102", "b"), finding("RB101", "a", safe),
                              finding("RB302", "missing-docstring"),
                              finding("RB302", "missing-docstring")])
    assert [(r["code"], r["count"], r["fixable"]) for r in rows] == [
        ("RB302", 3, False), ("RB101", 2, True), ("RB102", 1, False)]
    out = io.StringIO()
    statistics.write([finding("RB101", "a", safe), finding("RB102", "b"),
                      finding("RB102", "b")], out, False)
    assert out.getvalue().splitlines() == [
        "2  RB102      b",
        "1  RB101  [*] a",
        "Found 3 findings. [*] 1 fixable with `reviewbot fix --apply`.",
    ]


def test_statistics_from_the_cli(tree, run_cli):
    result = run_cli(["check", ".", *SELECT, "--statistics"], cwd=tree)
    assert result.code == 1
    assert result.out.splitlines() == ["3  RB302  missing-docstring",
                                       "1  RB001  syntax-error",
                                       "Found 4 findings."]
    quiet = run_cli(["check", ".", *SELECT, "--statistics", "-q"], cwd=tree)
    assert quiet.out.splitlines() == result.out.splitlines()[:2]


@pytest.mark.parametrize("fmt", ["json", "json-lines"])
def test_statistics_as_json(tree, run_cli, fmt):
    result = run_cli(["check", ".", *SELECT, "--statistics", "--output-format", fmt],
                     cwd=tree)
    rows = json.loads(result.out) if fmt == "json" else \
        [json.loads(line) for line in result.out.splitlines()]
    assert rows == [{"code": "RB302", "name": "missing-docstring", "count": 3,
                     "fixable": False},
                    {"code": "RB001", "name": "syntax-error", "count": 1, "fixable": False}]


def test_statistics_of_a_clean_run(tmp_path, run_cli):
    (tmp_path / "m.py").write_text('"""Doc."""\n')
    result = run_cli(["check", ".", "--no-cache", "--statistics"], cwd=tmp_path)
    assert (result.code, result.out) == (0, "All checks passed!\n")
    result = run_cli(["check", ".", "--no-cache", "--statistics", "--output-format", "json"],
                     cwd=tmp_path)
    assert json.loads(result.out) == []


def test_statistics_keep_hostile_names_on_their_line():
    out = io.StringIO()
    statistics.write([Finding("RB9\n::error::x", "n\x1b[2J\u202e", "m", "a.py", 1, 1, 1, 1)],
                     out, False, summary=False)
    assert out.getvalue() == "1  RB9\\n::error::x  n\\x1b[2J\\u202e\n"


@pytest.mark.parametrize("fmt", ["text", "concise", "full"])
def test_quiet_prints_the_findings_without_the_summary(tree, run_cli, fmt):
    loud = run_cli(["check", ".", *SELECT, "--output-format", fmt], cwd=tree)
    quiet = run_cli(["check", ".", *SELECT, "--output-format", fmt, "--quiet"], cwd=tree)
    assert quiet.code == loud.code == 1
    assert loud.out.splitlines()[-1] == "Found 4 findings."
    assert "Found" not in quiet.out
    assert quiet.out.splitlines() == loud.out.splitlines()[:-1]
    assert quiet.out.count("RB302") == 3 * (2 if fmt == "full" else 1)


def test_quiet_clean_run_prints_nothing(tmp_path, run_cli):
    (tmp_path / "m.py").write_text('"""Doc."""\n')
    result = run_cli(["check", ".", "--no-cache", "-q"], cwd=tmp_path)
    assert (result.code, result.out, result.err) == (0, "", "")
