"""`reviewbot fix`: fixture before/after pairs, safety of writes, passes, the helper."""

from __future__ import annotations

import codecs
import os
import shutil
import stat
from pathlib import Path

import pytest

from conftest import FIXTURES
from reviewbot import registry
from reviewbot.config import Overrides, build_config
from reviewbot.finding import Edit, Finding, Fix
from reviewbot.fixer import Fixer, FixError, apply_edits, choose, write_atomic
from reviewbot.packs import load_packs
from reviewbot.rule import Rule

BEFORE = FIXTURES / "fix" / "before"
AFTER = FIXTURES / "fix" / "after"
PAIRS = sorted(p.name for p in BEFORE.glob("*.py"))


def test_every_before_has_an_after():
    assert PAIRS and PAIRS == sorted(p.name for p in AFTER.glob("*.py"))


@pytest.mark.parametrize("name", PAIRS)
def test_fix_turns_before_into_after_exactly(tmp_path, run_cli, name):
    shutil.copy(BEFORE / name, tmp_path / name)
    result = run_cli(["fix", "--apply", "--unsafe-fixes", "--no-cache", name], cwd=tmp_path)
    assert result.code == 0, result.err
    assert (tmp_path / name).read_bytes() == (AFTER / name).read_bytes()
    # A second run has nothing left to do.
    again = run_cli(["fix", "--unsafe-fixes", "--no-cache", name], cwd=tmp_path)
    assert (again.code, again.out) == (0, "")
    assert "Would apply 0 fixes in 0 files." in again.err


def test_the_fixed_seed_runner_has_the_seed_structure_with_the_right_bound():
    text = (AFTER / "seed_runner.py").read_text(encoding="utf-8")
    assert "valid_sampled_token_ids = self._to_list(sampled_token_ids)" in text
    # The state is the class's, made on first use; the first buffer holds the bound.
    assert "    _to_list_local = threading.local()\n" in text
    assert "size = max(count, self.max_num_reqs * 1, " in text
    assert 'device="cpu", pin_memory=True' in text
    assert "self.transfer_event" not in text.split("def _to_list")[0].split("class ")[-1]
    assert "max_model_len, 1" not in text
    assert "non_blocking=True" in text and ".synchronize()" in text


def test_fixed_files_are_clean_of_what_was_fixed(run_cli, tmp_path):
    for name in PAIRS:
        shutil.copy(AFTER / name, tmp_path / name)
    result = run_cli(["check", ".", "--no-cache", "--select", "RB1,RB2", "--output-format",
                      "json"], cwd=tmp_path)
    import json

    left = [(f["path"], f["code"]) for f in json.loads(result.out)]
    # Only the display-only `.item()` on a tensor that may not be 0-d remains.
    assert left == [("readbacks.py", "RB102")]


def test_crlf_and_tabs_are_kept():
    data = (AFTER / "crlf_tabs.py").read_bytes()
    assert b"\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert b"\n\t_to_list_local = threading.local()\n" in data.replace(b"\r\n", b"\n")
    assert b"\n\t\t\tevent.record(stream)\n" in data.replace(b"\r\n", b"\n")
    assert b"\n\tdef _to_list(self, tensor: torch.Tensor):" in data.replace(b"\r\n", b"\n")


def test_preview_prints_a_diff_and_changes_nothing(tmp_path, run_cli):
    target = tmp_path / "runner.py"
    shutil.copy(BEFORE / "seed_runner.py", target)
    before = target.read_bytes()
    result = run_cli(["fix", "--no-cache", "."], cwd=tmp_path)
    assert result.code == 1
    assert result.out.startswith("--- a/runner.py\n+++ b/runner.py\n")
    assert "-        valid_sampled_token_ids = sampled_token_ids.tolist()" in result.out
    assert "+        valid_sampled_token_ids = self._to_list(sampled_token_ids)" in result.out
    assert "Would apply 1 fix in 1 file; run with --apply to write them." in result.err
    assert target.read_bytes() == before


def test_unsafe_fixes_need_the_flag(tmp_path, run_cli):
    shutil.copy(BEFORE / "seed_buffer_bound.py", tmp_path / "a.py")
    result = run_cli(["fix", "--no-cache", "."], cwd=tmp_path)
    assert (result.code, result.out) == (0, "")
    assert "1 more with --unsafe-fixes." in result.err
    result = run_cli(["fix", "--no-cache", "--unsafe-fixes", "."], cwd=tmp_path)
    assert result.code == 1 and "+            (self.max_num_reqs, 1)," in result.out


def test_select_and_ignore_choose_the_fixes(tmp_path, run_cli):
    shutil.copy(BEFORE / "readbacks.py", tmp_path / "a.py")
    only_item = run_cli(["fix", "--no-cache", "--select", "RB102", "."], cwd=tmp_path)
    assert "self._to_list(scores.sum())" in only_item.out
    assert "+        as_list = self._to_list(scores)" not in only_item.out
    ignored = run_cli(["fix", "--no-cache", "--ignore", "RB102,RB103", "."], cwd=tmp_path)
    assert (ignored.code, ignored.out) == (0, "")


def test_only_the_given_paths_are_touched(tmp_path, run_cli):
    (tmp_path / "inside").mkdir()
    shutil.copy(BEFORE / "seed_runner.py", tmp_path / "inside" / "a.py")
    shutil.copy(BEFORE / "seed_runner.py", tmp_path / "outside.py")
    outside = (tmp_path / "outside.py").read_bytes()
    assert run_cli(["fix", "--apply", "--no-cache", "inside"], cwd=tmp_path).code == 0
    assert (tmp_path / "outside.py").read_bytes() == outside
    assert b"self._to_list(" in (tmp_path / "inside" / "a.py").read_bytes()


def test_mode_bom_and_encoding_are_kept(tmp_path, run_cli):
    source = (BEFORE / "seed_runner.py").read_text(encoding="utf-8")
    bom = tmp_path / "bom.py"
    bom.write_bytes(codecs.BOM_UTF8 + source.replace("One call", "Ünë call").encode())
    latin = tmp_path / "latin.py"
    latin.write_bytes(("# -*- coding: latin-1 -*-\n" + source.replace("One call", "Öne call"))
                      .encode("latin-1"))
    os.chmod(latin, 0o754)
    assert run_cli(["fix", "--apply", "--no-cache", "."], cwd=tmp_path).code == 0
    assert bom.read_bytes().startswith(codecs.BOM_UTF8)
    assert "Ünë call" in bom.read_bytes()[3:].decode("utf-8")
    assert "Öne call" in latin.read_bytes().decode("latin-1")
    assert b"self._to_list(" in latin.read_bytes()
    assert stat.S_IMODE(latin.stat().st_mode) == 0o754
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".reviewbot-tmp")]


def test_a_symlink_is_not_rewritten(tmp_path, run_cli):
    real = tmp_path / "real.py"
    shutil.copy(BEFORE / "seed_runner.py", real)
    (tmp_path / ".git").mkdir()  # the project: a link inside it is checked, not rewritten
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "link.py").symlink_to(real)
    result = run_cli(["fix", "--apply", "--no-cache", "sub/link.py"], cwd=tmp_path)
    assert result.code == 1
    assert "is a symbolic link; not rewritten" in result.err
    assert (tmp_path / "sub" / "link.py").is_symlink()
    assert real.read_bytes() == (BEFORE / "seed_runner.py").read_bytes()


def _fixer(tmp_path: Path, rule: type[Rule]) -> Fixer:
    config = build_config({"select": ["RB0"]}, None, "", tmp_path, Overrides())
    import dataclasses

    config = dataclasses.replace(config, enabled=config.enabled | {rule.code})
    return Fixer(config, load_packs(config.rule_packs, config.root, None),
                 (*registry.RULES, rule))


class _AppendRule(Rule):
    """Test rule: asks to append a line to every file, forever."""

    code = "RB901"
    name = "test-append"
    summary = "test"

    def check_file(self, ctx):
        """Report line 1 with a fix that appends a line."""
        end = len(ctx.text.splitlines()) + 1
        ctx.findings.append(Finding(self.code, self.name, "m", ctx.path, 1, 1, 1, 1,
                                    fix=Fix("safe", "append", (Edit(end, 1, end, 1, "x = 1\n"),))))


class _BreakRule(Rule):
    """Test rule: a fix that would not compile."""

    code = "RB902"
    name = "test-break"
    summary = "test"

    def check_file(self, ctx):
        """Report line 1 with a fix that deletes a colon."""
        if "def" in ctx.text:
            ctx.findings.append(Finding(self.code, self.name, "m", ctx.path, 1, 1, 1, 1,
                                        fix=Fix("safe", "break", (Edit(1, 8, 1, 9, ""),))))


def test_a_fix_that_never_converges_leaves_the_file_alone(tmp_path):
    result = _fixer(tmp_path, _AppendRule).fix_text("a.py", "a.py", "y = 2\n")
    assert result.error == "fixes did not converge after 8 passes; the file is left as it was"
    assert not result.changed


def test_a_fix_that_breaks_the_code_leaves_the_file_alone(tmp_path):
    result = _fixer(tmp_path, _BreakRule).fix_text("a.py", "a.py", "def f():\n    pass\n")
    assert "RB902 would give code that does not compile" in result.error
    assert not result.changed


def test_overlapping_fixes_are_applied_one_per_pass():
    text = "a = 1\nb = 2\n"
    first = Fix("safe", "1", (Edit(1, 1, 1, 2, "A"),))
    second = Fix("safe", "2", (Edit(1, 1, 1, 6, "A = 10"),))
    third = Fix("safe", "3", (Edit(2, 1, 2, 2, "B"),))
    assert choose([first, second, third], text) == [first, third]
    # Two insertions at the same point overlap too.
    insert = Fix("safe", "4", (Edit(2, 1, 2, 1, "# x\n"),))
    assert choose([insert, Fix("safe", "5", (Edit(2, 1, 2, 1, "# y\n"),))], text) == [insert]
    assert apply_edits(text, [*first.edits, *third.edits]) == "A = 1\nB = 2\n"


def test_inserted_text_takes_the_files_newline_style():
    assert apply_edits("a = 1\r\nb = 2\r\n", [Edit(2, 1, 2, 1, "c = 3\nd = 4\n")]) == \
        "a = 1\r\nc = 3\r\nd = 4\r\nb = 2\r\n"


def test_a_file_changed_on_disk_is_not_overwritten(tmp_path):
    from reviewbot.fixer import FileFix

    target = tmp_path / "a.py"
    target.write_bytes(b"x = 1\n")
    fixed = FileFix("a.py", old="x = 1\n", new="x = 2\n", data=b"x = 0\n")
    with pytest.raises(FixError, match="changed on disk while it was being fixed"):
        write_atomic(target, fixed)
    assert target.read_bytes() == b"x = 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


def test_a_latin1_file_is_fixed_where_non_ascii_text_precedes_the_call(tmp_path, run_cli):
    # The fixer once re-encoded such a file as UTF-8 under its latin-1 cookie: the
    # positions it found were off and the call was left as it was.
    source = (BEFORE / "seed_runner.py").read_text(encoding="utf-8").replace(
        "        valid_sampled_token_ids = sampled_token_ids.tolist()\n",
        "        é = 1; valid_sampled_token_ids = sampled_token_ids.tolist()  # ÄÖ\n")
    target = tmp_path / "l.py"
    target.write_bytes(("# -*- coding: latin-1 -*-\n" + source).encode("latin-1"))
    result = run_cli(["fix", "--apply", "--no-cache", "."], cwd=tmp_path)
    assert result.code == 0, result.err
    fixed = target.read_bytes().decode("latin-1")
    assert "é = 1; valid_sampled_token_ids = self._to_list(sampled_token_ids)  # ÄÖ" in fixed
    compile(target.read_bytes(), "l.py", "exec")
