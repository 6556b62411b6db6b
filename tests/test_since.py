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
    assert _codes(result) == [(".", 1, "RB301"), ("new_runner.py", 105, "RB101"),
                              ("runner.py", 105, "RB101")]
    # RB301 counts the new file's definitions and, of runner.py, only the function
    # holding the changed line.
    (docs,) = [f for f in json.loads(result.out) if f["code"] == "RB301"]
    old = [m for m in docs["details"]["missing"] if m.startswith("runner.py:")]
    assert len(old) <= 1 < len(docs["details"]["missing"])


def test_a_bad_ref_is_exit_2(tmp_path, run_cli):
    repo = _repo(tmp_path)
    result = run_cli(["check", ".", "--no-cache", "--since", "no-such-ref"], cwd=repo)
    assert result.code == 2
    assert result.err.startswith("reviewbot: error: --since no-such-ref: fatal:")


def _docs_repo(tmp_path):
    (tmp_path / "lib.py").write_text('def old():\n    pass\n\n\ndef kept():\n    """Doc."""\n',
                                     encoding="utf-8")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "base")
    return tmp_path


def test_an_added_undocumented_function_is_reported(tmp_path, run_cli):
    repo = _docs_repo(tmp_path)
    with (repo / "lib.py").open("a", encoding="utf-8") as handle:
        handle.write("\n\ndef added(x):\n    return x\n")
    _git(repo, "commit", "-qam", "add a function")
    result = run_cli(["check", ".", "--no-cache", "--output-format", "json", "--since",
                      "HEAD~1"], cwd=repo)
    assert result.code == 1, result.err
    (finding,) = json.loads(result.out)
    assert finding["code"] == "RB301"
    assert "changed definitions is 0.00% (0 of 1" in finding["message"]
    assert finding["details"]["missing"] == ["lib.py:9 added"]  # not `old`, not changed
    assert finding["details"]["location"] == {"path": "lib.py", "line": 9}
    text = run_cli(["check", ".", "--no-cache", "--since", "HEAD~1"], cwd=repo)
    assert text.code == 1 and "missing: lib.py:9 added" in text.out


def test_a_documented_change_passes_and_rb301_can_be_turned_off(tmp_path, run_cli):
    repo = _docs_repo(tmp_path)
    with (repo / "lib.py").open("a", encoding="utf-8") as handle:
        handle.write('\n\ndef added(x):\n    """Return x."""\n    return x\n')
    _git(repo, "commit", "-qam", "add a documented function")
    # The whole file is below the threshold, the change is not.
    assert run_cli(["check", ".", "--no-cache"], cwd=repo).code == 1
    result = run_cli(["check", ".", "--no-cache", "--since", "HEAD~1"], cwd=repo)
    assert result.code == 0, result.out
    (repo / "new.py").write_text("def f():\n    pass\n", encoding="utf-8")  # untracked
    assert run_cli(["check", ".", "--no-cache", "--since", "HEAD~1"], cwd=repo).code == 1
    assert run_cli(["check", ".", "--no-cache", "--since", "HEAD~1", "--ignore", "RB301"],
                   cwd=repo).code == 0
    assert run_cli(["check", ".", "--no-cache", "--since", "HEAD~1", "--option",
                    "RB301.threshold=0"], cwd=repo).code == 0
