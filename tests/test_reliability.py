"""No input crashes reviewbot, and no fix loses code.

Generated programs (hypothesmith), a corpus of broken and odd files, files that vanish or
loop, and `fix --apply` killed at random moments. The long runs are scripts under
`benchmarks/` (reliability_trees.py, hypothesmith_campaign.py, scale.py).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from reviewbot import registry
from reviewbot.config import Overrides, build_config
from reviewbot.context import RunContext
from reviewbot.engine import Checker, Engine, FileJob
from reviewbot.fixer import Fixer
from reviewbot.packs import load_packs

hypothesmith = pytest.importorskip("hypothesmith")
# Generated programs make the compiler warn (`1()`); those warnings are the programs'.
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")

RUNNER = (FIXTURES / "fix" / "before" / "seed_runner.py").read_text(encoding="utf-8")
HOT_READBACK = '''
import torch


class Runner:
    def __init__(self):
        self.device = torch.device("cuda")

    def execute_model(self, x):
        ids = torch.zeros(4, device=self.device).argmax(dim=-1, keepdim=True)
        return ids.tolist()
'''


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    root = tmp_path_factory.mktemp("cfg")
    config = build_config({"select": ["ALL"]}, None, "", root, Overrides())
    packs = load_packs(config.rule_packs, config.root, None)
    return Checker(config, packs), Fixer(config, packs, registry.RULES, unsafe=True)


def _no_crash(findings) -> None:
    crashes = [f.message for f in findings if f.code == "RB002"]
    assert not crashes, crashes


def _check_and_fix(tools, source: str) -> None:
    checker, fixer = tools
    findings = checker.check(FileJob("gen.py", "gen.py", source.encode("utf-8"))).findings
    _no_crash(findings)
    result = fixer.fix_text("gen.py", "gen.py", source)
    if result.error is None and result.changed:
        compile(result.new, "gen.py", "exec")  # the fixed program compiles
        again = fixer.fix_text("gen.py", "gen.py", result.new)
        assert again.error is None and not again.changed  # and is a fixed point


SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@SETTINGS
@given(st.one_of(hypothesmith.from_grammar(), hypothesmith.from_node()))
def test_generated_programs_never_crash_check_or_fix(tools, source):
    _check_and_fix(tools, source)


@SETTINGS
@given(hypothesmith.from_node())
def test_generated_programs_around_a_hot_readback(tools, source):
    # The generated code after a class whose readback gets the event-sync fix.
    _check_and_fix(tools, HOT_READBACK + "\n" + source)


# Broken and odd input -------------------------------------------------------------------
def _corpus(folder: Path) -> list[str]:
    """Write the nasty files; return their names."""
    files = {
        "nul.py": b"x = 1\x00\n",
        "latin1_cookie.py": "# -*- coding: latin-1 -*-\ns = 'caf\xe9'\n".encode("latin-1"),
        "latin1_bare.py": "s = 'caf\xe9'\n".encode("latin-1"),
        "bom_crlf.py": b"\xef\xbb\xbfimport torch\r\nx = 1\r\n",
        "bom_twice.py": b"\xef\xbb\xbf\xef\xbb\xbfx = 1\n",
        "lone_cr.py": b"import torch\rclass R:\r    def execute_model(self):\r"
                      b"        x = torch.zeros(2, device='cuda')\r        return x.tolist()\r",
        "tabs_spaces.py": b"def f():\n\tif True:\n        return 1\n\treturn 2\n",
        "empty.py": b"",
        "blank.py": b"   \n\t\n \r\n",
        "deep_parens.py": b"x = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n",
        "deep_unary.py": b"x = " + b"-" * 100000 + b"1\n",
        "deep_lists.py": b"x = " + b"[" * 300 + b"]" * 300 + b"\n",
        "long_line.py": b"x = [" + b"1, " * 3_000_000 + b"]\n",
        "unknown_cookie.py": b"# coding: klingon\nx = 1\n",
        "cookie_mismatch.py": "# coding: ascii\ns = 'é'\n".encode("utf-8"),
        "formfeed.py": b"x = 1\n\x0c\ndef f():\n    return x\n",
        "surrogate.py": b"s = '\\ud800'\nt = '\xed\xa0\x80'\n",
        "ctrl.py": b"x = 1\x1b[31m\n",
    }
    lines = RUNNER.splitlines(keepends=True)
    step = max(1, len(lines) // 40)
    for index in range(1, len(lines), step):  # truncated at line ends and mid-line
        files[f"trunc_{index:03d}.py"] = "".join(lines[:index]).encode()
        files[f"cut_{index:03d}.py"] = ("".join(lines[:index]) + lines[index][:7]).encode()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return sorted(files)


def test_broken_input_gets_findings_and_the_run_goes_on(tmp_path, run_cli):
    names = _corpus(tmp_path)
    result = run_cli(["check", ".", "--no-cache", "--select", "ALL", "--output-format",
                      "json"], cwd=tmp_path)
    assert result.code == 1, result.err
    import json

    findings = json.loads(result.out)
    _no_crash_json(findings)
    by_file = {f["path"] for f in findings}
    for name in ("nul.py", "unknown_cookie.py", "cookie_mismatch.py", "latin1_bare.py",
                 "bom_twice.py"):
        assert name in by_file, name  # each says why it was skipped or does not parse
    assert any(f["path"] == "deep_parens.py" and f["code"] == "RB001" for f in findings)
    assert any(f["path"] == "tabs_spaces.py" and f["code"] == "RB001" for f in findings)
    # Lone CRs end lines, as Python counts them.
    assert any(f["path"] == "lone_cr.py" and f["code"] == "RB101" and f["line"] == 5
               for f in findings)
    # Every truncated copy of the runner either parses or says where it stops.
    for name in names:
        if name.startswith(("trunc_", "cut_")):
            source = (tmp_path / name).read_text(encoding="utf-8")
            try:
                compile(source, name, "exec")
            except SyntaxError:
                assert any(f["path"] == name and f["code"] == "RB001" for f in findings), name


def _no_crash_json(findings) -> None:
    crashes = [f["message"] for f in findings if f["code"] == "RB002"]
    assert not crashes, crashes


def test_fix_on_broken_input_changes_nothing_it_cannot_parse(tmp_path, run_cli):
    names = _corpus(tmp_path)
    before = {n: (tmp_path / n).read_bytes() for n in names}
    result = run_cli(["fix", "--apply", "--unsafe-fixes", "--no-cache", "."], cwd=tmp_path)
    assert result.code in (0, 1) and "Traceback" not in result.err
    for name in names:
        data = (tmp_path / name).read_bytes()
        if data != before[name]:
            compile(data, name, "exec")  # only files that parse were changed


def test_links_that_loop_or_dangle(tmp_path, run_cli):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "pkg" / "loop").symlink_to(tmp_path / "pkg")  # a directory loop
    (tmp_path / "pkg" / "one.py").symlink_to(tmp_path / "pkg" / "two.py")
    (tmp_path / "pkg" / "two.py").symlink_to(tmp_path / "pkg" / "one.py")  # a file loop
    result = run_cli(["check", ".", "--no-cache", "--output-format", "json"], cwd=tmp_path)
    assert result.code in (0, 1) and "Traceback" not in result.err


def test_a_file_deleted_mid_run_is_reported(tmp_path):
    config = build_config({}, None, "", tmp_path, Overrides())
    gone = tmp_path / "gone.py"
    gone.write_text("x = 1\n", encoding="utf-8")
    kept = tmp_path / "kept.py"
    kept.write_text("x = 1\n", encoding="utf-8")
    files = [gone, kept]
    gone.unlink()  # discovered, then deleted before it is read
    result = Engine(config, load_packs(config.rule_packs, config.root, None)).run(
        files, RunContext("."), tmp_path)
    (finding,) = [f for f in result.findings if f.path == "gone.py"]
    assert finding.code == "RB003" and "no such file (deleted" in finding.message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_is_reported(tmp_path, run_cli):
    secret = tmp_path / "secret.py"
    secret.write_text("x = 1\n", encoding="utf-8")
    secret.chmod(0)
    result = run_cli(["check", ".", "--no-cache"], cwd=tmp_path)
    assert "RB003" in result.out and "Permission denied" in result.out


# Interrupted writes ---------------------------------------------------------------------
def test_fix_killed_at_random_moments_leaves_old_or_new_files(tmp_path):
    reference = tmp_path / "reference"
    reference.mkdir()
    (reference / "r.py").write_text(RUNNER, encoding="utf-8")
    subprocess.run([sys.executable, "-m", "reviewbot", "fix", "--apply", "--no-cache", "."],
                   cwd=reference, check=True, capture_output=True)
    old, new = RUNNER.encode(), (reference / "r.py").read_bytes()
    assert old != new
    rng = random.Random(20261130)
    for attempt in range(6):
        work = tmp_path / f"run{attempt}"
        work.mkdir()
        for index in range(40):
            (work / f"r{index:02d}.py").write_bytes(old)
        proc = subprocess.Popen([sys.executable, "-m", "reviewbot", "fix", "--apply",
                                 "--no-cache", "--jobs", "1", "."], cwd=work,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 2.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for path in work.glob("r*.py"):
            assert path.read_bytes() in (old, new), path
        leftovers = [p.name for p in work.iterdir() if not p.name.startswith("r")]
        assert all(name.endswith(".reviewbot-tmp") for name in leftovers), leftovers


def test_bad_arguments_never_print_a_traceback(run_cli, tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    for args in (["check", "--jobs", "0"], ["check", "--option", "RB301.threshold=lots"],
                 ["check", "--option", "nonsense"], ["check", "--select", "RB9"],
                 ["fix", "--select", "XX1"], ["check", "--output-format", "xml"],
                 ["verify"], ["review", "--max-comments", "-1"], ["check", "--since"],
                 ["check", "--config", "missing.toml"], ["fix", "--config", "a.py"]):
        result = run_cli(args, cwd=tmp_path)
        assert result.code == 2, (args, result.out, result.err)
        assert "Traceback" not in result.err and result.err.strip(), args
        shutil.rmtree(tmp_path / ".reviewbot_cache", ignore_errors=True)


def test_warnings_of_the_checked_code_are_not_printed(tmp_path):
    # A fixable file whose code makes the compiler warn (`1()`, an invalid escape).
    (tmp_path / "w.py").write_text(RUNNER + '\nimport re\nx = re.compile("\\d")\ny = 1()\n',
                                   encoding="utf-8")
    for command in (["check", "w.py"], ["fix", "w.py"], ["fix", "--apply", "w.py"]):
        proc = subprocess.run([sys.executable, "-m", "reviewbot", *command, "--no-cache"],
                              cwd=tmp_path, capture_output=True, text=True)
        assert "Warning" not in proc.stderr, proc.stderr


def test_an_unknown_future_feature_is_a_syntax_error(tmp_path, run_cli):
    # ast.parse accepts it; only the compiler refuses it (found by broken_corpus.py).
    (tmp_path / "f.py").write_text('"""Doc."""\nfrom __future__ import annotatio\n',
                                   encoding="utf-8")
    result = run_cli(["check", "f.py", "--no-cache"], cwd=tmp_path)
    assert result.code == 1
    assert "f.py:2:1: RB001 Syntax error: future feature annotatio is not defined" in result.out
