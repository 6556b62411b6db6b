"""`reviewbot check --since REF`: only findings on lines changed since REF."""

from __future__ import annotations

import json
import shutil
import subprocess

from conftest import FIXTURES

RUNNER = FIXTURES / "fix" / "before" / "seed_runner.py"


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c",
                    "user.name=t", *args], check=True, capture_output=True)


def _repo(tmp_path):
    shutil.copy(RUNNER, tmp_path / "runner.py")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "base")
    return tmp_path


def _codes(result):
    return [(f["path"], f["line"], f["code"]) for f in json.loads(result.out)]


def test_unchanged_findings_are_left_out(tmp_path, run_cli):
    repo = _repo(tmp_path)
    everything = run_cli(["check", ".", "--no-cache", "--output-format", "json"], cwd=repo)
    assert ("runner.py", 105, "RB101") in _codes(everything)
    since = run_cli(["check", ".", "--no-cache", "--output-format", "json", "--since", "HEAD"],
                    cwd=repo)
    assert (since.code, _codes(since)) == (0, [])


def test_changed_and_new_lines_are_reported(tmp_path, run_cli):
    repo = _repo(tmp_path)
    path = repo / "runner.py"
    text = path.read_text(encoding="utf-8").replace(
        "valid_sampled_token_ids = sampled_token_ids.tolist()",
        "valid_sampled_token_ids = list(sampled_token_ids.tolist())")
    path.write_text(text, encoding="utf-8")
    shutil.copy(RUNNER, repo / "new_runner.py")  # untracked: every line is new
    result = run_cli(["check", ".", "--no-cache", "--output-format", "json", "--since",
                      "HEAD"], cwd=repo)
    assert result.code == 1
    assert _codes(result) == [("new_runner.py", 105, "RB101"), ("runner.py", 105, "RB101")]


def test_a_bad_ref_is_exit_2(tmp_path, run_cli):
    repo = _repo(tmp_path)
    result = run_cli(["check", ".", "--no-cache", "--since", "no-such-ref"], cwd=repo)
    assert result.code == 2
    assert result.err.startswith("reviewbot: error: --since no-such-ref: fatal:")
