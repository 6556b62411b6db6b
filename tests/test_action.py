"""action.yml and the example workflows: actionlint, conventions, and the run step's plumbing."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess

import pytest
import yaml

from conftest import REPO

ACTIONLINT = shutil.which("actionlint")
needs_actionlint = pytest.mark.skipif(ACTIONLINT is None, reason="actionlint is not installed")


def action() -> dict:
    return yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))


def _lint_repo(tmp_path, workflows: dict[str, str]) -> subprocess.CompletedProcess:
    """actionlint on workflows in a scratch git repository holding this action.yml (a local
    action's inputs are only checked inside a repository)."""
    shutil.copy(REPO / "action.yml", tmp_path / "action.yml")
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    for name, text in workflows.items():
        (folder / name).write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return subprocess.run([ACTIONLINT, "-no-color", *sorted(workflows)], cwd=folder,
                          capture_output=True, text=True)


@needs_actionlint
def test_workflows_pass_actionlint(tmp_path):
    selftest = (REPO / ".github" / "workflows" / "selftest.yml").read_text(encoding="utf-8")
    example = (REPO / "examples" / "reviewbot.yml").read_text(encoding="utf-8")
    # The example's `uses:` pointed at this folder, so its inputs are checked against action.yml.
    local = example.replace("uses: reviewbot-dev/reviewbot@v1", "uses: ./")
    assert local != example
    scanning = (REPO / "examples" / "code-scanning.yml").read_text(encoding="utf-8")
    result = _lint_repo(tmp_path, {"selftest.yml": selftest, "example.yml": local,
                                   "code-scanning.yml": scanning})
    assert result.returncode == 0, result.stdout + result.stderr


@needs_actionlint
def test_actionlint_catches_a_broken_code_scanning_example(tmp_path):
    scanning = (REPO / "examples" / "code-scanning.yml").read_text(encoding="utf-8")
    bad = scanning.replace("security-events: write", "security-events: upload")
    assert bad != scanning
    result = _lint_repo(tmp_path, {"code-scanning.yml": bad})
    assert result.returncode == 1 and "security-events" in result.stdout, result.stdout


def test_the_code_scanning_example_uploads_the_sarif_report(tmp_path, run_cli):
    workflow = yaml.safe_load((REPO / "examples" / "code-scanning.yml").read_text(
        encoding="utf-8"))
    (job,) = workflow["jobs"].values()
    assert job["permissions"]["security-events"] == "write"
    assert workflow["permissions"] == {"contents": "read"}  # nothing more for other jobs
    steps = job["steps"]
    (check,) = [s for s in steps if "reviewbot check" in s.get("run", "")]
    (upload,) = [s for s in steps if s.get("uses", "").startswith(
        "github/codeql-action/upload-sarif@")]
    assert steps.index(check) < steps.index(upload)
    for step in steps:
        if "uses" in step:  # pinned by commit, the version noted
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
        assert "${{" not in step.get("run", "")
    # The check step as written: a SARIF file where the upload looks for it.
    args = check["run"].split()
    assert args[:2] == ["reviewbot", "check"]
    assert args[args.index("--output-format") + 1] == "sarif"
    assert args[args.index("--output-file") + 1] == upload["with"]["sarif_file"]
    (tmp_path / "m.py").write_text("def f():\n    pass\n", encoding="utf-8")
    result = run_cli(args[1:], cwd=tmp_path)
    assert result.code == 0, result.err  # --exit-zero: findings do not stop the upload
    log = json.loads((tmp_path / upload["with"]["sarif_file"]).read_text(encoding="utf-8"))
    assert log["runs"][0]["results"][0]["ruleId"] == "RB301"


@needs_actionlint
def test_actionlint_catches_a_misspelt_input(tmp_path):
    example = (REPO / "examples" / "reviewbot.yml").read_text(encoding="utf-8")
    bad = example.replace("uses: reviewbot-dev/reviewbot@v1", "uses: ./").replace(
        "fail_level:", "fail_levle:")
    result = _lint_repo(tmp_path, {"example.yml": bad})
    assert result.returncode == 1
    assert 'input "fail_levle" is not defined in action "reviewbot"' in result.stdout


def test_inputs_follow_reviewdogs_conventions():
    inputs = action()["inputs"]
    assert inputs["github_token"]["default"] == "${{ github.token }}"
    assert inputs["filter_mode"]["default"] == "added"
    assert inputs["fail_level"]["default"] == "error"
    assert inputs["reporter"]["default"] == "github-pr-review"
    for name, values in {"filter_mode": ("added", "diff_context", "file", "nofilter"),
                         "fail_level": ("none", "warning", "error"),
                         "reporter": ("github-pr-review", "github-check", "annotations")}.items():
        for value in values:  # each description lists its allowed values
            assert value in inputs[name]["description"]
    assert {"paths", "config", "docstring_threshold", "max_comments", "baseline"} <= set(inputs)
    assert inputs["baseline"]["default"] == ""
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", name) for name in inputs)


def test_the_action_is_thin_and_safe():
    runs = action()["runs"]
    assert runs["using"] == "composite"
    for step in runs["steps"]:
        if "uses" in step:  # third-party actions pinned by commit, with the version noted
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"])
        if "run" in step:  # inputs reach scripts through the environment, never spliced in
            assert "${{" not in step["run"]


def test_the_review_step_passes_every_input_to_the_cli(tmp_path):
    """Run the action's review script with a stand-in `reviewbot` that prints its arguments."""
    (step,) = [s for s in action()["runs"]["steps"] if s.get("name") == "Review"]
    fake = tmp_path / "reviewbot"
    fake.write_text("#!/usr/bin/env bash\nprintf '%s\\n' \"$@\"\n", encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
           "INPUT_FILTER_MODE": "diff_context", "INPUT_FAIL_LEVEL": "warning",
           "INPUT_REPORTER": "annotations", "INPUT_PATHS": "src lib/engine",
           "INPUT_CONFIG": "", "INPUT_DOCSTRING_THRESHOLD": "80", "INPUT_MAX_COMMENTS": "5",
           "INPUT_CONFIG_FROM": "base", "INPUT_BASELINE": "ci/reviewbot-baseline.json"}
    result = subprocess.run(["bash", "-c", step["run"]], env=env, capture_output=True,
                            text=True, check=True)
    assert result.stdout.splitlines() == [
        "review", "--filter-mode", "diff_context", "--fail-level", "warning", "--reporter",
        "annotations", "--max-comments", "5", "--config-from", "base",
        "--docstring-threshold", "80", "--baseline", "ci/reviewbot-baseline.json", "src",
        "lib/engine"]
    # Without a baseline, no --baseline.
    env["INPUT_BASELINE"] = ""
    result = subprocess.run(["bash", "-c", step["run"]], env=env, capture_output=True,
                            text=True, check=True)
    assert "--baseline" not in result.stdout.splitlines()


def test_the_cli_accepts_what_the_action_passes(run_cli):
    result = run_cli(["review", "--help"])
    assert result.code == 0
    for flag in ("--filter-mode", "--fail-level", "--reporter", "--max-comments",
                 "--docstring-threshold", "--config", "--config-from", "--baseline"):
        assert flag in result.out
