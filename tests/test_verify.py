"""`reviewbot verify`: the parts that run without a GPU (CI), on CPU tensors."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from conftest import FIXTURES, REPO  # noqa: E402
from reviewbot.verify.cases import difference, same  # noqa: E402

AFTER = FIXTURES / "fix" / "after"
BEFORE = FIXTURES / "fix" / "before"
SCENARIO = FIXTURES / "verify" / "seed_runner_scenario.py"


def test_the_bundled_runner_verifies_on_cpu(run_cli):
    result = run_cli(["verify", str(AFTER / "seed_runner.py"), "--before", str(BEFORE),
                      "--scenario", str(SCENARIO), "--device", "cpu", "--output-format",
                      "json"], cwd=REPO)
    assert result.code == 0, result.out + result.err
    report = json.loads(result.out)
    assert report["verdict"] == "PASS"
    assert report["gpu_checks"].startswith("GPU checks skipped: no CUDA device")
    assert set(report["environment"]) >= {"torch", "cuda", "gpu", "python"}
    (helper,) = report["helpers"]
    assert helper["helper"] == "GPUModelRunner._to_list"
    assert helper["sites"] == [{"line": 106, "call": "self._to_list(sampled_token_ids)"}]
    # every dtype x every shape, the views, the oversized tensor, and .item() of 0-d ones
    assert helper["cases"] == 78 and helper["differences"] == []
    scenario = report["scenario"]
    assert scenario["same"] and scenario["values"] > 100 and scenario["before"] == str(BEFORE)


def test_text_report_names_every_part(run_cli):
    result = run_cli(["verify", "fixtures/fix/after/seed_runner.py", "--before",
                      "fixtures/fix/before", "--scenario", "fixtures/verify/"
                      "seed_runner_scenario.py", "--device", "cpu"], cwd=REPO)
    assert result.code == 0
    assert "GPU checks skipped: no CUDA device" in result.out
    assert "fixtures/fix/after/seed_runner.py:123 GPUModelRunner._to_list: PASS" in result.out
    assert "site fixtures/fix/after/seed_runner.py:106 self._to_list(sampled_token_ids): PASS" \
        in result.out
    assert result.out.rstrip().endswith("verdict: PASS")


def _project(tmp_path: Path, after_body: str, before_body: str = "return [1, 2.0, True]"):
    before, after = tmp_path / "before", tmp_path / "after"
    for folder, body in ((before, before_body), (after, after_body)):
        folder.mkdir()
        (folder / "mod.py").write_text(f"def compute():\n    {body}\n", encoding="utf-8")
    scenario = tmp_path / "scenario.py"
    scenario.write_text('TARGET = "mod.py"\n\ndef run(module, device):\n'
                        '    return module.compute()\n', encoding="utf-8")
    return before, after, scenario


def _verify(run_cli, tmp_path, before, after, scenario, *extra):
    return run_cli(["verify", str(after), "--before", str(before), "--scenario", str(scenario),
                    "--device", "cpu", "--output-format", "json", *extra], cwd=tmp_path)


def test_a_different_result_fails_and_says_where(tmp_path, run_cli):
    before, after, scenario = _project(tmp_path, "return [1, 2, True]")
    result = _verify(run_cli, tmp_path, before, after, scenario)
    assert result.code == 1
    report = json.loads(result.out)
    assert report["scenario"]["first_difference"] == "result[1]: float 2.0 vs int 2"


def test_a_scenario_that_raises_fails_with_its_traceback(tmp_path, run_cli):
    before, after, scenario = _project(tmp_path, "raise ValueError('broken step')")
    result = _verify(run_cli, tmp_path, before, after, scenario)
    assert result.code == 1
    error = json.loads(result.out)["scenario"]["error"]
    assert error.startswith("after: run: Traceback")
    assert "ValueError: broken step" in error


def test_code_that_fails_to_import_is_named(tmp_path, run_cli):
    before, after, scenario = _project(tmp_path, "return 1")
    (after / "mod.py").write_text("import no_such_module_here\n", encoding="utf-8")
    result = _verify(run_cli, tmp_path, before, after, scenario)
    assert result.code == 1
    error = json.loads(result.out)["scenario"]["error"]
    assert error.startswith(f"after: import: cannot import {after.resolve() / 'mod.py'}")
    assert "No module named 'no_such_module_here'" in error


def test_the_before_code_comes_from_git_head(tmp_path, run_cli):
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(BEFORE / "seed_runner.py", repo / "seed_runner.py")
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "before"], check=True)
    assert run_cli(["fix", "--apply", "--no-cache", "."], cwd=repo).code == 0
    result = run_cli(["verify", ".", "--scenario", str(SCENARIO), "--device", "cpu",
                      "--output-format", "json"], cwd=repo)
    assert result.code == 0, result.out + result.err
    report = json.loads(result.out)
    assert report["scenario"]["before"] == "git HEAD" and report["scenario"]["same"]


@pytest.mark.parametrize("args, message", [
    (["verify", "nowhere"], "nowhere: no such file or directory"),
    (["verify", "fixtures/fix/before/seed_runner.py"], "no event-sync helper in"),
    (["verify", "fixtures/fix/after/seed_runner.py", "--scenario", "missing.py"],
     "missing.py: scenario file not found"),
    (["verify", "fixtures/fix/after/seed_runner.py", "--require-gpu", "--device", "cpu"],
     "no CUDA device, and --require-gpu was given"),
])
def test_bad_input_is_one_line_and_exit_2(run_cli, args, message):
    result = run_cli(args, cwd=REPO)
    assert result.code == 2
    assert result.err.startswith("reviewbot: error: ") and message in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_outside_git_without_before_is_a_clear_error(tmp_path, run_cli):
    shutil.copy(AFTER / "seed_runner.py", tmp_path / "seed_runner.py")
    result = run_cli(["verify", ".", "--scenario", str(SCENARIO), "--device", "cpu"],
                     cwd=tmp_path)
    assert result.code == 2
    assert "not in a git repository with a HEAD commit; give the code before the fix with " \
        "--before DIR" in result.err


def test_a_helper_whose_state_needs_cuda_is_skipped_on_cpu(run_cli):
    result = run_cli(["verify", "fixtures/fix/after/existing_helper.py", "--all-helpers",
                      "--device", "cpu", "--output-format", "json"], cwd=REPO)
    (helper,) = json.loads(result.out)["helpers"]
    assert helper["verdict"] == "SKIPPED" and "cannot set up the state" in \
        helper["differences"][0]


def test_exact_comparison_keeps_types_apart():
    import torch

    assert same([1, [2.0, True]], [1, [2.0, True]])
    assert not same(1, 1.0) and not same(True, 1) and not same(1.0, True)
    assert same(float("nan"), float("nan"))
    assert not same(torch.tensor([1], dtype=torch.int32), torch.tensor([1], dtype=torch.int64))
    assert same(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")]))
    assert difference([[1, 2], [3, 4]], [[1, 2], [3, 4.0]]) == "result[1][1]: int 4 vs float 4.0"
    assert difference((1,), [1]) == "result: tuple (1,) vs list [1]"


def test_worker_plain_data_keeps_every_type_apart():
    from reviewbot.verify.worker import plain

    assert plain((1, 2.0)) == {"__tuple__": [1, {"__float__": "2.0"}]}
    assert plain([True, None]) == [True, None]
    text = textwrap.dedent("""\
        from dataclasses import dataclass
        @dataclass
        class Out:
            ids: list
        """)
    namespace: dict = {"__name__": "plain_test"}
    import sys
    import types

    module = types.ModuleType("plain_test")
    sys.modules["plain_test"] = module
    try:
        exec(text, module.__dict__)
        assert plain(module.Out([1])) == {"__object__": "Out", "fields": {"ids": [1]}}
    finally:
        del sys.modules["plain_test"]
    del namespace


def test_a_types_module_in_the_working_folder_does_not_shadow_the_stdlib(tmp_path, run_cli):
    # Found running the tools inside torch's own tree, which has a types.py.
    (tmp_path / "types.py").write_text("raise ImportError('shadowed')\n", encoding="utf-8")
    before, after, scenario = _project(tmp_path, "return [1, 2.0, True]")
    result = _verify(run_cli, tmp_path, before, after, scenario)
    assert result.code == 0, result.out
