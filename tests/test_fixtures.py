"""The bundled fixtures' reports match the expected reports next to them, exactly."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, REPO

CASES = sorted(p.parent.name for p in FIXTURES.glob("*/expected.txt"))


def test_there_are_fixture_cases():
    assert {"runner", "bad-input", "suppressions"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_text_report_matches_expected(run_cli, case, jobs):
    result = run_cli(["check", f"fixtures/{case}", "--no-cache", "--color", "never",
                      "--jobs", jobs], cwd=REPO)
    expected = (FIXTURES / case / "expected.txt").read_text(encoding="utf-8")
    assert result.out == expected
    assert result.code == (1 if "Found" in expected else 0)


def test_runner_coverage_matches_the_seed_review(run_cli):
    # The seed's pre-merge check: "Docstring coverage is 33.33%, threshold 80.00%".
    result = run_cli(["check", "fixtures/runner", "--no-cache", "--output-format", "json"],
                     cwd=REPO)
    (finding,) = [f for f in json.loads(result.out) if f["code"] == "RB301"]
    details = finding["details"]
    assert (details["documented"], details["total"], details["coverage"]) == (3, 9, 33.33)
    assert details["threshold"] == 80.0
    assert "fixtures/runner/model_runner.py:44 GPUModelRunner" in details["missing"]


def test_suppressions_leave_only_unsuppressed_findings(run_cli):
    result = run_cli(["check", "fixtures/suppressions", "--no-cache", "--output-format",
                      "json"], cwd=REPO)
    names = sorted(f["message"].split("`")[1] for f in json.loads(result.out))
    # greedy (noqa), top_k (ignore[...]), temperature (bare ignore on the first line of a
    # multi-line statement) are suppressed; a comment on a later line, an unrelated code
    # and a directive inside a string suppress nothing.
    assert names == ["describe", "min_p", "top_p"]
