"""action.yml and the example workflows: actionlint, conventions, and the run step's plumbing."""

from __future__ import annotations

import io
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
    assert inputs["fail_on_error"]["default"] == "false"
    assert inputs["workdir"]["default"] == "."
    assert inputs["tool_name"]["default"] == "reviewbot"
    for name, values in {"filter_mode": ("added", "diff_context", "file", "nofilter"),
                         "fail_level": ("none", "any", "warning", "error"),
                         "level": ("info", "warning", "error"),
                         "reporter": ("github-pr-review", "github-pr-check", "github-check",
                                      "annotations")}.items():
        for value in values:  # each description lists its allowed values
            assert value in inputs[name]["description"]
    assert {"paths", "config", "docstring_threshold", "max_comments", "baseline", "level",
            "workdir", "tool_name", "fail_on_error", "reviewbot_flags"} <= set(inputs)
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


def _step_env(tmp_path, **inputs) -> dict:
    """The Review step's environment as the runner builds it (every input set, defaults
    for those not given), with a stand-in `python` that prints its arguments."""
    step_env = {}
    defaults = {name: str(spec.get("default", "")) for name, spec in action()["inputs"].items()}
    (step,) = [s for s in action()["runs"]["steps"] if s.get("name") == "Review"]
    for key, value in step["env"].items():
        name = re.fullmatch(r"\$\{\{ inputs\.(\w+) \}\}", value).group(1)
        step_env[key] = inputs.get(name, defaults[name])
    return step_env


def _argv(tmp_path, **inputs) -> list[str]:
    from reviewbot.github.action import main

    out = io.StringIO()
    assert main(["--dry-run"], _step_env(tmp_path, **inputs), out) == 0
    return out.getvalue().splitlines()


def test_the_review_step_runs_the_python_entry_point_only(tmp_path):
    (step,) = [s for s in action()["runs"]["steps"] if s.get("name") == "Review"]
    assert step["run"].strip() == "python -I -m reviewbot.github.action"
    # Every input reaches it through the environment.
    names = {re.fullmatch(r"\$\{\{ inputs\.(\w+) \}\}", v).group(1)
             for v in step["env"].values()}
    assert names == set(action()["inputs"]) - {"python_version"}
    fake = tmp_path / "python"
    fake.write_text("#!/usr/bin/env bash\nprintf '%s\\n' \"$@\"\n", encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, **_step_env(tmp_path, paths="$(touch pwned) `touch pwned`"),
           "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", "-c", step["run"]], env=env, capture_output=True,
                            text=True, check=True, cwd=tmp_path)
    assert result.stdout.splitlines() == ["-I", "-m", "reviewbot.github.action"]
    assert not (tmp_path / "pwned").exists()


def test_the_checkout_cannot_stand_in_for_reviewbot(tmp_path):
    # The step runs in the pull request's checkout: a `reviewbot` package committed there
    # would be imported instead of the installed one if the working directory were on
    # sys.path (as `python -m` puts it).
    import sys

    (step,) = [s for s in action()["runs"]["steps"] if s.get("name") == "Review"]
    package = tmp_path / "reviewbot" / "github"
    package.mkdir(parents=True)
    for rel in ("reviewbot/__init__.py", "reviewbot/github/__init__.py"):
        (tmp_path / rel).write_text("")
    (package / "action.py").write_text("open('pwned', 'w').close()\n")
    env = {**os.environ, **_step_env(tmp_path)}
    command = step["run"].strip().replace("python", sys.executable, 1) + " --dry-run"
    subprocess.run(["bash", "-c", command], env=env, capture_output=True, cwd=tmp_path)
    assert not (tmp_path / "pwned").exists()
    subprocess.run([sys.executable, "-m", "reviewbot.github.action", "--dry-run"], env=env,
                   capture_output=True, cwd=tmp_path)
    assert (tmp_path / "pwned").exists()  # what -I prevents


def test_the_inputs_become_review_arguments(tmp_path):
    assert _argv(tmp_path) == [
        "review", "--filter-mode", "added", "--fail-level", "error", "--reporter",
        "github-pr-review", "--max-comments", "25", "--config-from", "head", "--tool-name",
        "reviewbot", "--", "."]
    argv = _argv(tmp_path, filter_mode="diff_context", fail_level="warning",
                 reporter="annotations", paths="src lib/engine", docstring_threshold="80",
                 max_comments="5", config_from="base", baseline="ci/reviewbot-baseline.json",
                 level="info", tool_name="engine review", workdir="python",
                 config="pyproject.toml",
                 reviewbot_flags="--select RB1,RB3 --option=RB301.threshold=70 "
                                 "--extend-exclude 'gen dir/'")
    assert argv == [
        "review", "--filter-mode", "diff_context", "--fail-level", "warning", "--reporter",
        "annotations", "--max-comments", "5", "--config-from", "base", "--level", "info",
        "--tool-name", "engine review", "--config", "python/pyproject.toml",
        "--docstring-threshold", "80", "--baseline", "python/ci/reviewbot-baseline.json",
        "--select", "RB1,RB3", "--option", "RB301.threshold=70", "--extend-exclude",
        "gen dir/", "--", "python/src", "python/lib/engine"]
    from reviewbot.cli import build_parser

    args = build_parser().parse_args(argv)  # the CLI takes all of it
    assert (args.level, args.tool_name, args.paths) == ("info", "engine review",
                                                        ["python/src", "python/lib/engine"])
    assert args.select == [["RB1", "RB3"]] and args.option == [("RB301", "threshold", 70)]
    assert not args.base_rule_modules


def test_base_rule_modules_are_an_opt_in_of_the_base_configuration(tmp_path):
    assert action()["inputs"]["base_rule_modules"]["default"] == "false"
    argv = _argv(tmp_path, config_from="base", base_rule_modules="true")
    assert argv[argv.index("--config-from"):argv.index("--config-from") + 3] == \
        ["--config-from", "base", "--base-rule-modules"]
    assert "--base-rule-modules" not in _argv(tmp_path, config_from="base")
    assert "--base-rule-modules" not in _argv(tmp_path, config_from="base",
                                              base_rule_modules="false")
    from reviewbot.cli import build_parser

    assert build_parser().parse_args(argv).base_rule_modules


def test_reviewdog_names_and_the_old_ones_both_work(tmp_path):
    def value(flag, **inputs):
        argv = _argv(tmp_path, **inputs)
        return argv[argv.index(flag) + 1]

    assert value("--reporter", reporter="github-pr-check") == "github-check"
    assert value("--reporter", reporter="github-check") == "github-check"
    assert value("--fail-level", fail_level="any") == "any"
    assert value("--fail-level", fail_level="none") == "none"
    assert value("--fail-level", fail_on_error="true") == "any"
    assert value("--fail-level", fail_on_error="false", fail_level="warning") == "warning"


@pytest.mark.parametrize("inputs,message", [
    ({"fail_level": "info"}, "input fail_level: info is not a level"),
    ({"fail_level": "fatal"}, "input fail_level: expected one of none, any, warning, error"),
    ({"reporter": "local"}, "input reporter: expected one of"),
    ({"level": "debug"}, "input level: expected one of info, warning, error"),
    ({"fail_on_error": "maybe"}, "input fail_on_error: expected true or false"),
    ({"base_rule_modules": "maybe", "config_from": "base"},
     "input base_rule_modules: expected true or false"),
    ({"base_rule_modules": "true"}, "input base_rule_modules: needs config_from base"),
    ({"workdir": "../other"}, "input workdir: expected a path inside the repository"),
    ({"workdir": "/etc"}, "input workdir: expected a path inside the repository"),
    ({"paths": "src ../../etc"}, "input paths: expected a path inside the repository"),
    ({"tool_name": "[x](https://evil) @admin"}, "input tool_name: expected letters"),
    ({"max_comments": "5; rm -rf /"}, "input max_comments: expected a whole number"),
    ({"docstring_threshold": "1e9"}, "input docstring_threshold: expected a percentage"),
    ({"reviewbot_flags": "--select RB1; rm -rf /"}, "'rm' is not one of the flags"),
    ({"reviewbot_flags": "--config evil.toml"}, "'--config' is not one of the flags"),
    ({"reviewbot_flags": "--output-file /etc/passwd"}, "is not one of the flags"),
    ({"reviewbot_flags": "$(touch pwned)"}, "'$(touch' is not one of the flags"),
    ({"reviewbot_flags": "--select"}, "--select needs a value"),
    ({"reviewbot_flags": "--select 'RB1"}, "input reviewbot_flags: cannot be split"),
    ({"reviewbot_flags": "--select=RB1\u001b[2J"}, "control characters are not allowed"),
])
def test_bad_inputs_are_one_line_and_exit_2(tmp_path, capsys, inputs, message):
    from reviewbot.github.action import main

    inputs = {k: v.encode().decode("unicode_escape") for k, v in inputs.items()}
    assert main(["--dry-run"], _step_env(tmp_path, **inputs), io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.startswith("reviewbot: error: ") and message in err, err
    assert len(err.splitlines()) == 1 and "\x1b" not in err
    assert not (tmp_path / "pwned").exists()


def test_the_cli_accepts_what_the_action_passes(run_cli):
    result = run_cli(["review", "--help"])
    assert result.code == 0
    for flag in ("--filter-mode", "--fail-level", "--reporter", "--max-comments",
                 "--docstring-threshold", "--config", "--config-from", "--baseline",
                 "--level", "--tool-name", "--base-rule-modules"):
        assert flag in result.out


def test_level_and_fail_level_decide_the_exit_status():
    from reviewbot.finding import Finding
    from reviewbot.github.review import Outcome, Settings, exit_status

    warning = Finding("RB301", "docstring-coverage", "m", "a.py", 1, 1, 1, 1, "warning")
    error = Finding("RB101", "tolist-on-cuda-tensor", "m", "a.py", 1, 1, 1, 1, "error")

    def status(findings, fail_level, level=None, coverage_passed=True):
        outcome = Outcome(findings=list(findings),
                          coverage={"passed": coverage_passed})
        return exit_status(outcome, Settings(fail_level=fail_level, level=level))

    assert [status([warning], lv) for lv in ("none", "any", "warning", "error")] == [0, 1, 1, 0]
    assert [status([error], lv) for lv in ("none", "any", "warning", "error")] == [0, 1, 1, 1]
    assert status([], "any", coverage_passed=False) == 1
    assert status([], "error", coverage_passed=False) == 0
    # `level` sets every finding's level: an error shown as info fails only fail_level any.
    assert [status([error], lv, "info") for lv in ("any", "warning", "error")] == [1, 0, 0]
    assert status([warning], "error", "error") == 1


def test_level_and_tool_name_reach_annotations_and_the_check_run():
    from reviewbot.finding import Finding
    from reviewbot.github.review import Outcome, Settings, _annotations, _post_check

    finding = Finding("RB101", "tolist-on-cuda-tensor", "m", "a.py", 3, 1, 3, 2, "error")
    out = io.StringIO()
    _annotations(Outcome(findings=[finding]), Settings(level="info"), out)
    assert out.getvalue().startswith("::notice file=a.py,line=3")

    class Repo:
        def create_check_run(self, **kwargs):
            self.kwargs = kwargs

    class Event:
        head_sha = "a" * 40

    repo = Repo()
    _post_check(repo, Event(), Outcome(findings=[finding]),
                Settings(level="warning", tool_name="engine review", fail_level="error"))
    assert repo.kwargs["name"] == "engine review"
    assert repo.kwargs["conclusion"] == "success"  # shown as a warning, below fail_level
    assert repo.kwargs["output"]["annotations"][0]["annotation_level"] == "warning"


def test_a_hostile_tool_name_is_refused_by_the_review(run_cli):
    result = run_cli(["review", "--tool-name", "x](https://e) <b>"])
    assert result.code == 2 and result.err.startswith("reviewbot: error: --tool-name")
