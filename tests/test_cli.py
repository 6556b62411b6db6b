"""The command line as a user starts it: exit codes, `rules`, and never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reviewbot import registry
from reviewbot.source import UnreadableSource, decode

from conftest import REPO


def reviewbot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reviewbot", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_rules_lists_every_rule(run_cli):
    result = run_cli(["rules"])
    assert result.code == 0
    lines = result.out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "RB001", "RB002", "RB003", "RB101", "RB102", "RB103", "RB104", "RB105", "RB106", "RB107",
        "RB108", "RB109",
        "RB201", "RB202", "RB203", "RB301", "RB302"]
    rb301 = next(line for line in lines if line.startswith("RB301"))
    assert "docstring-coverage" in rb301 and "fix: none" in rb301
    assert lines[-1].startswith("RB302") and "(off by default)" in lines[-1]
    # The summaries start in one column, "fix: sometimes" rows included, two spaces after
    # the widest fix safety.
    starts = {line.index(rule.summary) for line, rule in zip(lines, registry.RULES)}
    assert len(starts) == 1
    assert "fix: sometimes  `.item()`" in lines[4]
    # Which parser each rule reads: the engine's own, LibCST, the ast analysis's sites, ast.
    kinds = {line.split()[0]: line.split("kind: ")[1].split()[0] for line in lines}
    assert kinds["RB001"] == "internal" and kinds["RB108"] == "analysis"
    assert {kinds[f"RB10{n}"] for n in range(1, 8)} == {"cst"}
    assert {kinds[f"RB20{n}"] for n in range(1, 4)} == {"cst"}
    assert kinds["RB301"] == "ast"


def test_rules_code_prints_the_documentation(run_cli):
    result = run_cli(["rules", "RB301"])
    assert result.code == 0
    assert result.out.startswith("# docstring-coverage (RB301)")
    assert "## Why is this bad?" in result.out and "threshold" in result.out
    by_name = run_cli(["rules", "docstring-coverage"])
    assert by_name.out == result.out


def test_rules_json(run_cli):
    data = json.loads(run_cli(["rules", "--output-format", "json"]).out)
    rb301 = next(r for r in data if r["code"] == "RB301")
    assert rb301["kind"] == "ast"
    assert rb301["options"][0] == {"name": "threshold", "default": 80.0,
                                   "help": "The lowest acceptable coverage, in percent."}


def test_unknown_rule_exits_2(run_cli):
    result = run_cli(["rules", "RB999"])
    assert result.code == 2 and "unknown rule 'RB999'" in result.err


def test_no_command_prints_help_and_exits_2(run_cli):
    assert run_cli([]).code == 2


def test_exit_zero(tmp_path, run_cli):
    (tmp_path / "m.py").write_text("def f():\n    pass\n")
    assert run_cli(["check", ".", "--exit-zero"], cwd=tmp_path).code == 0


@pytest.mark.parametrize("args", [
    ["check", "missing-dir"],
    ["check", ".", "--select", "RB9"],
    ["check", ".", "--jobs", "many"],
    ["check", "--output-format", "yaml", "."],
    ["rules", "nope"],
    ["frobnicate"],
])
def test_bad_input_from_a_real_process_is_one_line_exit_2(tmp_path, args):
    (tmp_path / "m.py").write_text("x = 1\n")
    proc = reviewbot(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 or proc.stderr.startswith("usage:")


def test_main_command_on_the_fixtures(tmp_path):
    # README's first command, after installation: findings and exit status 1.
    proc = reviewbot("check", "fixtures/", "--no-cache", cwd=REPO)
    assert proc.returncode == 1
    assert "RB301 Docstring coverage is" in proc.stdout
    assert "fixtures/bad-input/missing_colon.py:4:31: RB001" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_progress_bar_only_on_a_terminal(tmp_path):
    for i in range(60):
        (tmp_path / f"m{i}.py").write_text('"""Doc."""\n')
    proc = reviewbot("check", ".", "--no-cache", cwd=tmp_path)
    assert proc.stderr == ""  # not a terminal: no bar
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: stderr is the terminal
        os.chdir(tmp_path)
        os.execv(sys.executable, [sys.executable, "-m", "reviewbot", "check", ".", "--no-cache",
                                  "-o", os.devnull])
    output = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.waitpid(pid, 0)
    assert b"60/60 files" in output


@pytest.mark.parametrize("data,expected", [
    (b"x = 1\n", "x = 1\n"),
    (b"\xef\xbb\xbfx = 1\n", "x = 1\n"),
    (b"# -*- coding: latin-1 -*-\ns = '\xe9'\n", "# -*- coding: latin-1 -*-\ns = '\u00e9'\n"),
    (b"#!/usr/bin/env python\n# vim: set fileencoding=cp1252 :\ns = '\x80'\n",
     "#!/usr/bin/env python\n# vim: set fileencoding=cp1252 :\ns = '\u20ac'\n"),
    (b"x = 1\r\ny = 2\r\n", "x = 1\r\ny = 2\r\n"),
])
def test_decode_honours_bom_and_coding_cookies(data, expected):
    assert decode(data).text == expected


@pytest.mark.parametrize("data,message", [
    (b"x = '\xe9'\n", "cannot decode as utf-8 (byte 0xe9 at offset 5)"),
    (b"\x00\x01\x02", "binary file (NUL byte at offset 0)"),
    (b"# coding: nope\n", "unknown encoding 'nope'"),
    (b"# coding: ascii\nx = '\xe9'\n", "cannot decode as ascii"),
])
def test_undecodable_files_get_one_line(data, message):
    with pytest.raises(UnreadableSource, match=message.replace("(", r"\(").replace(")", r"\)")):
        decode(data)


def test_special_files_are_skipped_without_hanging(tmp_path, run_cli):
    os.mkfifo(tmp_path / "pipe.py")  # opening it for reading would wait for a writer
    (tmp_path / "ok.py").write_text('"""Doc."""\n')
    result = run_cli(["check", ".", "pipe.py", "--no-cache", "--output-format", "json"],
                     cwd=tmp_path)
    assert [(f["path"], f["code"], f["message"]) for f in json.loads(result.out)] == [
        ("pipe.py", "RB003", "Skipped: not a regular file")]
    assert result.code == 1


def test_deeply_nested_expression_is_a_finding_not_a_crash(tmp_path, run_cli):
    (tmp_path / "deep.py").write_text("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    (tmp_path / "ok.py").write_text('"""Doc."""\n')
    result = run_cli(["check", ".", "--no-cache", "--output-format", "json"], cwd=tmp_path)
    findings = json.loads(result.out)
    assert [(f["path"], f["code"]) for f in findings] == [("deep.py", "RB001")]


def test_pre_commit_hook_definition_runs(tmp_path):
    import yaml

    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "reviewbot" and hook["language"] == "python"
    assert set(hook["types_or"]) == {"python", "pyi"}
    # pre-commit appends the staged file names to the entry.
    (tmp_path / "pyproject.toml").write_text("[tool.reviewbot]\nextend-exclude = ['gen/']\n")
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "g.py").write_text("def g():\n    pass\n")
    (tmp_path / "m.py").write_text('def f():\n    """Doc."""\n')
    entry = hook["entry"].split()
    assert entry[0] == "reviewbot"
    proc = reviewbot(*entry[1:], "m.py", "gen/g.py", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "All checks passed!\n")


def test_the_project_passes_its_own_check():
    proc = reviewbot("check", ".", "--no-cache", cwd=REPO)
    assert proc.returncode == 0, proc.stdout
