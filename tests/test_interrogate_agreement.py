"""RB301's percentages agree with interrogate's on the same files and equivalent settings."""

from __future__ import annotations

import json

import pytest
from interrogate.config import InterrogateConfig
from interrogate.coverage import InterrogateCoverage

from conftest import FIXTURES, REPO

# Files both tools can read (interrogate stops at a syntax error).
TREES = ["fixtures/runner", "fixtures/coverage", "fixtures/suppressions", "reviewbot"]

EVERYTHING = {"ignore-module": False, "ignore-private": False, "ignore-magic": False,
              "ignore-init": False, "ignore-nested": False, "ignore-overload": False,
              "ignore-setters": False}

# (our RB301 options, the equivalent interrogate settings)
SETTINGS = [
    pytest.param(EVERYTHING, {}, id="count-everything"),
    pytest.param({**EVERYTHING, "ignore-module": True, "ignore-magic": True,
                  "ignore-init": True, "ignore-overload": True, "ignore-setters": True},
                 {"ignore_module": True, "ignore_magic": True, "ignore_init_method": True,
                  "ignore_overloaded_functions": True, "ignore_property_setters": True},
                 id="our-defaults-but-nested"),
    pytest.param({**EVERYTHING, "ignore-module": True, "ignore-nested": True},
                 {"ignore_module": True, "ignore_nested_functions": True}, id="no-nested"),
]


def interrogate_percent(tree: str, settings: dict) -> float:
    conf = InterrogateConfig(**settings)
    cov = InterrogateCoverage(paths=[str(REPO / tree)], conf=conf)
    return cov.get_coverage().perc_covered


def reviewbot_percent(run_cli, tree: str, options: dict) -> float:
    args = ["check", tree, "--no-cache", "--output-format", "json", "--exit-zero",
            "--option", "RB301.threshold=100", "--option", "RB301.exclude=[]"]
    for key, value in options.items():
        args += ["--option", f"RB301.{key}={str(value).lower()}"]
    result = run_cli(args, cwd=REPO)
    findings = [f for f in json.loads(result.out) if f["code"] == "RB301"]
    if not findings:
        return 100.0
    details = findings[0]["details"]
    return 100.0 * details["documented"] / details["total"]


@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize("ours,theirs", SETTINGS)
def test_percentages_agree_to_a_tenth_of_a_point(run_cli, tree, ours, theirs):
    expected = interrogate_percent(tree, theirs)
    actual = reviewbot_percent(run_cli, tree, ours)
    assert abs(actual - expected) <= 0.1, (tree, actual, expected)


def test_the_settings_make_a_difference():
    # The comparison above is only worth something if the settings change the figure.
    figures = {interrogate_percent("fixtures/coverage", s.values[1]) for s in SETTINGS}
    assert len(figures) == len(SETTINGS)
    assert (FIXTURES / "coverage" / "scheduler.py").exists()
