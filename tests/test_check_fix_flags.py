"""`reviewbot check`'s ruff-style flags: --fix, --unsafe-fixes, --diff, --fix-only,
--show-fixes, --add-noqa, --show-settings, --show-files, standard input, target-version."""

from __future__ import annotations

import io
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES
from reviewbot.config import TARGET_VERSIONS
from reviewbot.noqa import add_noqa
from reviewbot.suppression import Suppressions
from reviewbot.finding import Finding

BEFORE = FIXTURES / "fix" / "before"
AFTER = FIXTURES / "fix" / "after"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with one file of readbacks: two safe RB103 fixes, one safe RB102 fix and
    one RB102 without a fix."""
    (tmp_path / ".git").mkdir()
    shutil.copy(BEFORE / "readbacks.py", tmp_path / "readbacks.py")
    return tmp_path


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


# --diff ---------------------------------------------------------------------------------

def test_diff_shows_the_change_and_writes_nothing(project, run_cli):
    before = (project / "readbacks.py").read_bytes()
    result = run_cli(["check", "--no-cache", "--diff", "."], cwd=project)
    assert result.code == 1
    assert "--- a/readbacks.py" in result.out and "+++ b/readbacks.py" in result.out
    assert "-        as_list = scores.cpu().tolist()" in result.out
    assert "+        as_list = self._to_list(scores)" in result.out
    assert "readbacks.py:19" not in result.out  # a diff, not a report
    assert (project / "readbacks.py").read_bytes() == before
    assert sorted(p.name for p in project.iterdir()) == [".git", "readbacks.py"]


def test_diff_without_a_fix_exits_0(project, run_cli):
    shutil.copy(AFTER / "readbacks.py", project / "readbacks.py")
    result = run_cli(["check", "--no-cache", "--diff", "--select", "RB103", "."], cwd=project)
    assert (result.code, result.out) == (0, "")


# --fix, --fix-only, --unsafe-fixes, --show-fixes ----------------------------------------

def test_fix_applies_then_reports_what_remains(project, run_cli):
    result = run_cli(["check", "--no-cache", "--fix", "."], cwd=project)
    assert (project / "readbacks.py").read_bytes() == (AFTER / "readbacks.py").read_bytes()
    # The RB102 without a fix remains: reported, exit 1; the fixed ones are gone.
    assert result.code == 1
    assert "RB102" in result.out and "RB103" not in result.out
    assert "Applied 3 fixes in 1 file." in result.err


def test_fix_exits_0_when_nothing_remains_and_the_recheck_is_clean(project, run_cli):
    result = run_cli(["check", "--no-cache", "--fix", "--select", "RB103", "."], cwd=project)
    assert result.code == 0, result.out + result.err
    again = run_cli(["check", "--no-cache", "--select", "RB103", "."], cwd=project)
    assert again.code == 0 and "All checks passed!" in again.out


def test_fix_only_applies_and_reports_nothing(project, run_cli):
    result = run_cli(["check", "--no-cache", "--fix-only", "."], cwd=project)
    assert result.code == 0
    assert result.out == ""
    assert (project / "readbacks.py").read_bytes() == (AFTER / "readbacks.py").read_bytes()


def test_unsafe_fixes_only_on_request(tmp_path, run_cli):
    shutil.copy(BEFORE / "seed_buffer_bound.py", tmp_path / "seed_buffer_bound.py")
    safe = run_cli(["check", "--no-cache", "--diff", "--select", "RB201", "."], cwd=tmp_path)
    assert (safe.code, safe.out) == (0, "")
    assert "1 more with --unsafe-fixes" in safe.err
    unsafe = run_cli(["check", "--no-cache", "--diff", "--unsafe-fixes", "--select", "RB201",
                      "."], cwd=tmp_path)
    assert unsafe.code == 1 and "+++ b/seed_buffer_bound.py" in unsafe.out
    fixed = run_cli(["check", "--no-cache", "--fix", "--unsafe-fixes", "--select", "RB201",
                     "."], cwd=tmp_path)
    assert fixed.code == 0
    assert (tmp_path / "seed_buffer_bound.py").read_bytes() == \
        (AFTER / "seed_buffer_bound.py").read_bytes()


def test_show_fixes_lists_available_and_applied_fixes(project, run_cli):
    available = run_cli(["check", "--no-cache", "--show-fixes", "."], cwd=project)
    assert "3 findings fixable with --fix:" in available.out
    assert "- readbacks.py:\n    1 x RB102 (item-on-cuda-tensor)\n" \
           "    2 x RB103 (blocking-copy-to-host)\n" in available.out
    assert (project / "readbacks.py").read_bytes() == (BEFORE / "readbacks.py").read_bytes()
    applied = run_cli(["check", "--no-cache", "--fix", "--show-fixes", "."], cwd=project)
    assert "Fixed 3 findings:\n- readbacks.py:\n" in applied.out
    assert "2 x RB103" in applied.out


def test_fix_skips_a_read_only_file_and_a_link(project, run_cli):
    target = project / "readbacks.py"
    os.chmod(target, stat.S_IRUSR | stat.S_IRGRP)
    (project / "link.py").symlink_to("readbacks.py")
    try:
        result = run_cli(["check", "--no-cache", "--fix", "."], cwd=project)
        assert target.read_bytes() == (BEFORE / "readbacks.py").read_bytes()
        assert "readbacks.py: is read-only; not rewritten" in result.err
        assert "link.py: is a symbolic link; not rewritten" in result.err
        assert (project / "link.py").is_symlink()
        assert result.code == 1
    finally:
        os.chmod(target, stat.S_IRUSR | stat.S_IWUSR)


def test_fix_command_is_unchanged(project, run_cli):
    result = run_cli(["fix", "--no-cache", "."], cwd=project)
    assert result.code == 1 and "+++ b/readbacks.py" in result.out
    assert "Would apply 3 fixes in 1 file; run with --apply to write them." in result.err


@pytest.mark.parametrize("flags", [["--fix", "--diff"], ["--diff", "--add-noqa"],
                                   ["--fix", "--since", "HEAD"],
                                   ["--add-noqa", "--baseline", "b.json"],
                                   ["--show-settings", "--show-files"]])
def test_flags_that_do_not_go_together_exit_2(project, run_cli, flags):
    result = run_cli(["check", "--no-cache", *flags, "."], cwd=project)
    assert result.code == 2
    assert result.err.startswith("reviewbot: error: ") and result.err.count("\n") == 1
    assert (project / "readbacks.py").read_bytes() == (BEFORE / "readbacks.py").read_bytes()


# --add-noqa -----------------------------------------------------------------------------

def test_add_noqa_suppresses_every_finding(project, run_cli):
    result = run_cli(["check", "--no-cache", "--add-noqa", "."], cwd=project)
    assert result.code == 0, result.err
    text = (project / "readbacks.py").read_text(encoding="utf-8")
    assert "as_list = scores.cpu().tolist()  # noqa: RB103\n" in text
    assert "total = scores.sum().item()  # noqa: RB102\n" in text
    # An existing comment that is not a noqa keeps its words; the noqa follows it.
    assert "display-only suggestion  # noqa: RB102\n" in text
    again = run_cli(["check", "--no-cache", "."], cwd=project)
    assert again.code == 0 and "All checks passed!" in again.out
    # A second run adds nothing.
    twice = run_cli(["check", "--no-cache", "--add-noqa", "."], cwd=project)
    assert (project / "readbacks.py").read_text(encoding="utf-8") == text
    assert "Added 0 noqa codes in 0 files." in twice.err


def test_add_noqa_merges_with_an_existing_noqa(project, run_cli):
    path = project / "readbacks.py"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("as_list = scores.cpu().tolist()\n",
                                 "as_list = scores.cpu().tolist()  # noqa: E501\n"),
                    encoding="utf-8")
    run_cli(["check", "--no-cache", "--add-noqa", "."], cwd=project)
    fixed = path.read_text(encoding="utf-8")
    assert "as_list = scores.cpu().tolist()  # noqa: E501, RB103\n" in fixed
    assert fixed.count("noqa") == 4
    assert run_cli(["check", "--no-cache", "."], cwd=project).code == 0


def test_add_noqa_skips_a_read_only_file_and_says_so(project, run_cli):
    target = project / "readbacks.py"
    os.chmod(target, stat.S_IRUSR | stat.S_IRGRP)
    try:
        result = run_cli(["check", "--no-cache", "--add-noqa", "."], cwd=project)
        assert "readbacks.py: is read-only; not rewritten" in result.err
        assert target.read_bytes() == (BEFORE / "readbacks.py").read_bytes()
        assert result.code == 1
    finally:
        os.chmod(target, stat.S_IRUSR | stat.S_IWUSR)


def test_add_noqa_does_not_follow_a_link(tmp_path, run_cli):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(BEFORE / "readbacks.py", outside / "readbacks.py")
    project = tmp_path / "project"
    project.mkdir()
    (project / ".git").mkdir()
    (project / "link.py").symlink_to(project.parent / "outside" / "readbacks.py")
    shutil.copy(BEFORE / "readbacks.py", project / "real.py")
    (project / "inside.py").symlink_to("real.py")
    result = run_cli(["check", "--no-cache", "--add-noqa", "."], cwd=project)
    assert (outside / "readbacks.py").read_bytes() == (BEFORE / "readbacks.py").read_bytes()
    assert (project / "link.py").is_symlink() and (project / "inside.py").is_symlink()
    assert "inside.py: is a symbolic link; not rewritten" in result.err
    assert "# noqa: RB103" in (project / "real.py").read_text(encoding="utf-8")


def test_add_noqa_leaves_run_level_coverage_alone(tmp_path, run_cli):
    source = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    (tmp_path / "mod.py").write_text(source, encoding="utf-8")
    before = run_cli(["check", "--no-cache", "--select", "RB301", "."], cwd=tmp_path)
    assert before.code == 1 and "RB301" in before.out
    result = run_cli(["check", "--no-cache", "--select", "RB301", "--add-noqa", "."],
                     cwd=tmp_path)
    assert (tmp_path / "mod.py").read_text(encoding="utf-8") == source
    assert "Added 0 noqa codes in 0 files." in result.err


def _finding(line: int, code: str = "RB101") -> Finding:
    return Finding(code, "name", "message", "x.py", line, 1, line, 2)


def test_noqa_for_a_line_inside_a_multi_line_string_goes_where_it_ends():
    text = 'x = f("""one\ntwo\n""", a.tolist())\ny = 1\n'
    result = add_noqa(text, {1: {"RB101"}, 2: {"RB103"}})
    assert result.text == 'x = f("""one\ntwo\n""", a.tolist())  # noqa: RB101, RB103\ny = 1\n'
    assert result.skipped == []
    compile(result.text, "x.py", "exec")
    suppressions = Suppressions.parse(result.text)
    assert suppressions.suppresses(_finding(1)) and suppressions.suppresses(_finding(2, "RB103"))
    assert not suppressions.suppresses(_finding(4))
    # The lines inside the string are untouched.
    assert result.text.splitlines()[:2] == ["x = f(\"\"\"one", "two"]


def test_noqa_is_not_written_after_a_backslash():
    text = "x = a.tolist() + \\\n    b\n"
    result = add_noqa(text, {1: {"RB101"}})
    assert result.text == text
    assert result.skipped == [(1, "continued with a backslash")]


def test_noqa_on_a_continued_line_goes_to_the_statement_start():
    text = "x = (a +\n     b.tolist())\n"
    result = add_noqa(text, {2: {"RB101"}})
    assert result.text == "x = (a +\n     b.tolist())  # noqa: RB101\n"
    text = "if a and \\\n   b.item():\n    pass\n"
    result = add_noqa(text, {2: {"RB102"}})
    assert result.text.startswith("if a and \\\n   b.item():  # noqa: RB102\n")


def test_noqa_merge_never_duplicates_and_keeps_the_newline_style():
    text = "a = 1  # noqa: RB101 because\r\nb = 2\r\n"
    result = add_noqa(text, {1: {"RB101", "RB102"}, 2: {"RB103"}})
    assert result.text == "a = 1  # noqa: RB101, RB102 because\r\nb = 2  # noqa: RB103\r\n"
    assert add_noqa(result.text, {1: {"RB101"}}).text == result.text
    assert add_noqa("a = 1  # noqa\n", {1: {"RB101"}}).text == "a = 1  # noqa\n"


# --show-settings, --show-files ----------------------------------------------------------

def test_show_settings_prints_the_resolved_configuration(tmp_path, run_cli):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.reviewbot]\ntarget-version = "py310"\nextend-select = ["RB302"]\n'
        'extend-exclude = ["gen/"]\nper-file-ignores = { "scripts/*" = ["RB301"] }\n'
        '[tool.reviewbot.rules.RB301]\nthreshold = 90\n', encoding="utf-8")
    result = run_cli(["check", "--show-settings", "."], cwd=tmp_path)
    assert result.code == 0
    out = result.out
    assert f"config file: {tmp_path / 'pyproject.toml'}\n" in out
    assert "target-version: py310\n" in out
    assert "RB302" in out.split("enabled rules: ")[1].split("\n")[0]
    assert "gen/" in out.split("exclude: ")[1].split("\n")[0]
    assert "  scripts/*: RB301\n" in out
    assert "  RB301.threshold = 90.0\n" in out
    assert "packs in use: pytorch, inference-engines" in out


def test_show_files_lists_the_files_and_escapes_hostile_names(tmp_path, run_cli):
    (tmp_path / "ok.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "evil\n::error::pwned.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "::warning::x.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "skipped.py").write_text("x = 1\n", encoding="utf-8")
    result = run_cli(["check", "--show-files", "."], cwd=tmp_path)
    assert result.code == 0
    lines = result.out.splitlines()
    assert "ok.py" in lines and "evil\\n::error::pwned.py" in lines
    assert "./::warning::x.py" in lines
    assert not any(line.startswith("::") for line in lines)
    assert not any("skipped" in line for line in lines)
    assert len(lines) == 3


# standard input -------------------------------------------------------------------------

def test_stdin_is_checked_and_named(project, run_cli, monkeypatch):
    _stdin(monkeypatch, (BEFORE / "readbacks.py").read_bytes())
    result = run_cli(["check", "--no-cache", "-"], cwd=project)
    assert result.code == 1 and "-:19:19: RB103" in result.out
    _stdin(monkeypatch, (BEFORE / "readbacks.py").read_bytes())
    named = run_cli(["check", "--no-cache", "--stdin-filename", "src/x.py", "-"], cwd=project)
    assert "src/x.py:19:19: RB103" in named.out


def test_stdin_filename_honours_per_file_ignores(project, run_cli, monkeypatch):
    (project / "pyproject.toml").write_text(
        '[tool.reviewbot]\nper-file-ignores = { "gen/*" = ["RB103"] }\n', encoding="utf-8")
    _stdin(monkeypatch, (BEFORE / "readbacks.py").read_bytes())
    ignored = run_cli(["check", "--no-cache", "--stdin-filename", "gen/x.py", "-"],
                      cwd=project)
    assert "RB103" not in ignored.out and "gen/x.py:21:17: RB102" in ignored.out
    _stdin(monkeypatch, (BEFORE / "readbacks.py").read_bytes())
    kept = run_cli(["check", "--no-cache", "--stdin-filename", "src/x.py", "-"], cwd=project)
    assert "src/x.py:19:19: RB103" in kept.out


def test_stdin_fix_writes_the_fixed_source_to_stdout_and_nothing_to_disk(project, run_cli,
                                                                          monkeypatch):
    listing = sorted(p.name for p in project.iterdir())
    _stdin(monkeypatch, (BEFORE / "readbacks.py").read_bytes())
    result = run_cli(["check", "--no-cache", "--fix", "--stdin-filename", "readbacks.py",
                      "-"], cwd=project)
    assert result.out == (AFTER / "readbacks.py").read_text(encoding="utf-8")
    assert "readbacks.py:" in result.err and "RB102" in result.err  # what remains
    assert result.code == 1
    assert (project / "readbacks.py").read_bytes() == (BEFORE / "readbacks.py").read_bytes()
    assert sorted(p.name for p in project.iterdir()) == listing
    _stdin(monkeypatch, (BEFORE / "readbacks.py").read_bytes())
    diff = run_cli(["check", "--no-cache", "--diff", "-"], cwd=project)
    assert diff.code == 1 and "+++ b/-" in diff.out


@pytest.mark.parametrize("data", [b"x = '\xff'\n", b"x = 1\x00\n"])
def test_undecodable_stdin_is_rb003(project, run_cli, monkeypatch, data):
    _stdin(monkeypatch, data)
    result = run_cli(["check", "--no-cache", "-"], cwd=project)
    assert result.code == 1 and "RB003" in result.out and "Skipped" in result.out
    _stdin(monkeypatch, data)
    fixed = run_cli(["check", "--no-cache", "--fix", "-"], cwd=project)
    assert fixed.code == 1 and "RB003" in fixed.err
    assert "Traceback" not in fixed.err


def test_stdin_with_other_paths_or_add_noqa_exits_2(project, run_cli):
    for args in (["-", "readbacks.py"], ["--add-noqa", "-"],
                 ["--stdin-filename", "x.py", "readbacks.py"]):
        result = run_cli(["check", "--no-cache", *args], cwd=project)
        assert result.code == 2 and result.err.count("\n") == 1, args


# target-version -------------------------------------------------------------------------

@pytest.mark.parametrize("value", ['"py27"', '"3.10"', "310"])
def test_an_unknown_target_version_exits_2(tmp_path, run_cli, value):
    (tmp_path / "pyproject.toml").write_text(f"[tool.reviewbot]\ntarget-version = {value}\n",
                                             encoding="utf-8")
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    result = run_cli(["check", "--no-cache", "."], cwd=tmp_path)
    assert result.code == 2
    assert "tool.reviewbot.target-version: expected a Python version" in result.err
    assert result.err.count("\n") == 1


def test_a_target_version_newer_than_the_interpreter_warns_once(tmp_path, run_cli):
    running = f"py3{sys.version_info[1]}"
    newer = [v for v in TARGET_VERSIONS if int(v[3:]) > sys.version_info[1]]
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("x = 2\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(f'[tool.reviewbot]\ntarget-version = "{running}"\n',
                                             encoding="utf-8")
    quiet = run_cli(["check", "--no-cache", "."], cwd=tmp_path)
    assert quiet.code == 0 and "target-version" not in quiet.err
    if not newer:
        pytest.skip("no target-version newer than this interpreter")
    (tmp_path / "pyproject.toml").write_text(f'[tool.reviewbot]\ntarget-version = "{newer[0]}"\n',
                                             encoding="utf-8")
    result = run_cli(["check", "--no-cache", "."], cwd=tmp_path)
    assert result.code == 0
    assert result.err.count("warning: target-version is") == 1


def test_syntax_newer_than_the_interpreter_is_rb001_and_other_files_are_checked(
        tmp_path, run_cli):
    # `type X = int` is Python 3.12 syntax; a match statement needs 3.10.
    (tmp_path / "new.py").write_text("type Alias = int\n", encoding="utf-8")
    (tmp_path / "old.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    result = run_cli(["check", "--no-cache", "--select", "RB0,RB302", "."], cwd=tmp_path)
    if sys.version_info >= (3, 12):
        assert "new.py" not in result.out
    else:
        assert "new.py:1:" in result.out and "RB001" in result.out
    assert "old.py:1:" in result.out  # RB302 still checked the other file
