"""Each checked file's own configuration (the nearest one above it, as ruff finds it) for
rule selection, per-file-ignores and options; rule packs from the project root's."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

# A hot readback once the root's pack names MyEngine.decode_step an entry point, and two
# undocumented definitions for RB302.
ENGINE = '''import torch


class MyEngine:
    def decode_step(self, x):
        y = torch.ones(4, device="cuda")
        return y.tolist()
'''


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A project with its own pack and two sub-packages with configurations of their own."""
    write(tmp_path / "pyproject.toml",
          '[tool.reviewbot]\nrule-packs = ["pytorch", "./pack.yml"]\n')
    write(tmp_path / "pack.yml",
          'name: mine\nhot-paths:\n  entry-points: ["*MyEngine.decode_step"]\n')
    # a's configuration names other packs: they are not used, the root's are.
    write(tmp_path / "a" / "pyproject.toml",
          '[tool.reviewbot]\nrule-packs = ["pytorch"]\nextend-select = ["RB302"]\n')
    write(tmp_path / "b" / ".reviewbot.yml", "ignore: [RB1]\n")
    write(tmp_path / "a" / "eng.py", ENGINE)
    write(tmp_path / "b" / "eng.py", ENGINE)
    write(tmp_path / "c" / "eng.py", ENGINE)  # no configuration of its own: the root's
    return tmp_path


def codes(result, path: str) -> list[str]:
    return sorted(f["code"] for f in json.loads(result.out) if f["path"] == path)


@pytest.mark.parametrize("order", [["a", "b", "c"], ["c", "b", "a"]])
def test_each_sub_package_gets_its_own_selection_in_one_run(tree, run_cli, order):
    result = run_cli(["check", "--no-cache", "--output-format", "json", *order], cwd=tree)
    assert result.code == 1, result.err
    assert codes(result, "a/eng.py") == ["RB101", "RB302", "RB302"]
    assert codes(result, "b/eng.py") == []
    assert codes(result, "c/eng.py") == ["RB101"]


def test_an_explicit_config_wins_over_every_nearer_one(tree, run_cli):
    write(tree / "ci.toml", 'select = ["RB302"]\n')
    result = run_cli(["check", "--no-cache", "--output-format", "json", "--config", "ci.toml",
                      "a", "b", "c"], cwd=tree)
    for path in ("a/eng.py", "b/eng.py", "c/eng.py"):
        assert codes(result, path) == ["RB302", "RB302"], path


def test_the_command_line_applies_to_every_configuration(tree, run_cli):
    result = run_cli(["check", "--no-cache", "--output-format", "json", "--ignore", "RB302",
                      "--extend-select", "RB1", "a", "b"], cwd=tree)
    assert codes(result, "a/eng.py") == ["RB101"]
    assert codes(result, "b/eng.py") == []  # b ignores RB1: the flag adds, b's ignore stays


def test_per_file_ignores_are_relative_to_their_own_configuration(tree, run_cli):
    write(tree / "a" / "pyproject.toml",
          '[tool.reviewbot]\nextend-select = ["RB302"]\n'
          'per-file-ignores = { "eng.py" = ["RB302"] }\n')
    result = run_cli(["check", "--no-cache", "--output-format", "json", "a", "c"], cwd=tree)
    assert codes(result, "a/eng.py") == ["RB101"]


def test_an_extended_root_configuration_is_layered_under_a_sub_package(tree, run_cli):
    write(tree / "pyproject.toml", '[tool.reviewbot]\nrule-packs = ["pytorch", "./pack.yml"]\n'
          'extend-select = ["RB302"]\n')
    write(tree / "b" / ".reviewbot.yml", "extend: ../pyproject.toml\nignore: [RB1]\n")
    result = run_cli(["check", "--no-cache", "--output-format", "json", "b", "c"], cwd=tree)
    assert codes(result, "b/eng.py") == ["RB302", "RB302"]
    assert codes(result, "c/eng.py") == ["RB101", "RB302", "RB302"]


def test_fix_uses_each_files_own_selection(tree, run_cli):
    result = run_cli(["check", "--no-cache", "--diff", "a", "b"], cwd=tree)
    assert "a/eng.py" in result.out and "b/eng.py" not in result.out


def test_show_settings_of_a_file_is_its_own_configuration(tree, run_cli):
    result = run_cli(["check", "--show-settings", "a/eng.py", "c"], cwd=tree)
    assert result.code == 0
    assert f"config file: {tree / 'a' / 'pyproject.toml'}\n" in result.out
    assert f"root config file: {tree / 'pyproject.toml'}\n" in result.out
    assert "RB302" in result.out.split("enabled rules: ")[1].split("\n")[0]
    assert "packs in use: pytorch, mine\n" in result.out
    other = run_cli(["check", "--show-settings", "c/eng.py", "a"], cwd=tree)
    assert f"config file: {tree / 'pyproject.toml'}\n" in other.out
    assert "RB302" not in other.out.split("enabled rules: ")[1].split("\n")[0]


def test_a_mistake_in_a_sub_package_configuration_is_exit_2(tree, run_cli):
    write(tree / "b" / ".reviewbot.yml", "ignor: [RB1]\n")
    result = run_cli(["check", "--no-cache", "a", "b"], cwd=tree)
    assert result.code == 2
    assert "b/.reviewbot.yml: ignor: unknown key (did you mean 'ignore'?)" in result.err
    assert "Traceback" not in result.err and result.err.count("\n") == 1


def test_stdin_is_checked_with_its_names_configuration(tree, run_cli, monkeypatch):
    import io
    import sys

    class Stdin(io.TextIOWrapper):
        pass

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(ENGINE.encode())))
    result = run_cli(["check", "--no-cache", "--output-format", "json",
                      "--stdin-filename", "a/new.py"], cwd=tree)
    assert codes(result, "a/new.py") == ["RB302", "RB302"]


def _age(root: Path) -> None:
    """Make every file older than the run memo's two seconds of doubt."""
    old = time.time() - 60
    for folder, _, names in os.walk(root):
        for name in names:
            os.utime(Path(folder) / name, (old, old))


def test_editing_a_sub_package_configuration_invalidates_its_cached_results(tree, run_cli):
    cache = ["--cache-dir", str(tree / "cache"), "--output-format", "json"]
    _age(tree)
    first = run_cli(["check", *cache, "a", "b"], cwd=tree)
    assert codes(first, "b/eng.py") == []
    again = run_cli(["check", *cache, "a", "b"], cwd=tree)  # the memo and cache answer
    assert again.out == first.out
    # The checked files keep their times (the memo would answer for them), and the
    # configuration is not among the files the memo looks at.
    write(tree / "b" / ".reviewbot.yml", "extend-select: [RB302]\n")
    changed = run_cli(["check", *cache, "a", "b"], cwd=tree)
    assert codes(changed, "b/eng.py") == ["RB101", "RB302", "RB302"]
    assert codes(changed, "a/eng.py") == ["RB101", "RB302", "RB302"]
    # The root's configuration did not change, so a's results came from the cache; and
    # going back to b's first configuration finds b's first results again.
    write(tree / "b" / ".reviewbot.yml", "ignore: [RB1]\n")
    back = run_cli(["check", *cache, "a", "b"], cwd=tree)
    assert back.out == first.out
