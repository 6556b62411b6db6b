"""File discovery: .gitignore, excludes, --force-exclude, links, missing paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewbot.config import Overrides, build_config
from reviewbot.discovery import discover
from reviewbot.errors import ReviewbotError


def touch(path: Path, text: str = "x = 1\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def found(root: Path, paths=(".",), table=None, force=False) -> list[str]:
    config = build_config(table or {}, None, "", root, Overrides())
    return [p.relative_to(root).as_posix()
            for p in discover(list(paths), config, force_exclude=force, cwd=root)]


def test_finds_python_files_only_and_sorted(tmp_path):
    for name in ["b.py", "a.py", "stub.pyi", "notes.txt", "pkg/c.py", "pkg/data.json"]:
        touch(tmp_path / name)
    assert found(tmp_path) == ["a.py", "b.py", "pkg/c.py", "stub.pyi"]


def test_default_excludes_skip_virtualenvs_and_caches(tmp_path):
    for name in ["src/m.py", ".venv/lib/x.py", "build/lib/y.py", "src/__pycache__/z.py",
                 "node_modules/pkg/w.py"]:
        touch(tmp_path / name)
    assert found(tmp_path) == ["src/m.py"]


def test_gitignore_is_honoured_at_every_level(tmp_path):
    (tmp_path / ".git").mkdir()
    touch(tmp_path / ".gitignore", "generated/\n*_pb2.py\n")
    touch(tmp_path / "pkg" / ".gitignore", "scratch.py\n!keep_pb2.py\n")
    for name in ["pkg/m.py", "pkg/scratch.py", "scratch.py", "generated/g.py", "api_pb2.py",
                 "pkg/keep_pb2.py"]:
        touch(tmp_path / name)
    assert found(tmp_path) == ["pkg/keep_pb2.py", "pkg/m.py", "scratch.py"]
    # Checking a subfolder still reads the ignore files above it.
    assert found(tmp_path, ["pkg"]) == ["pkg/keep_pb2.py", "pkg/m.py"]


def test_gitignore_can_be_turned_off(tmp_path):
    (tmp_path / ".git").mkdir()
    touch(tmp_path / ".gitignore", "*.py\n")
    touch(tmp_path / "m.py")
    assert found(tmp_path) == []
    assert found(tmp_path, table={"respect-gitignore": False}) == ["m.py"]


def test_configured_excludes(tmp_path):
    for name in ["src/m.py", "src/gen/g.py", "legacy.py", "docs/conf.py"]:
        touch(tmp_path / name)
    assert found(tmp_path, table={"extend-exclude": ["gen/", "/legacy.py", "docs/*.py"]}) == \
        ["src/m.py"]


def test_named_file_is_checked_even_if_excluded_unless_force_exclude(tmp_path):
    touch(tmp_path / "gen" / "g.py")
    table = {"extend-exclude": ["gen/"]}
    assert found(tmp_path, ["gen/g.py"], table) == ["gen/g.py"]
    assert found(tmp_path, ["gen/g.py"], table, force=True) == []
    assert found(tmp_path, ["gen"], table, force=True) == []


def test_named_excluded_folder_is_checked_but_other_patterns_apply(tmp_path):
    touch(tmp_path / "fixtures" / "a.py")
    touch(tmp_path / "fixtures" / "__pycache__" / "b.py")
    touch(tmp_path / "fixtures" / "skip_me.py")
    table = {"extend-exclude": ["fixtures/", "skip_me.py"]}
    assert found(tmp_path, table=table) == []
    assert found(tmp_path, ["fixtures"], table) == ["fixtures/a.py"]


def test_missing_path_is_an_error(tmp_path):
    with pytest.raises(ReviewbotError, match="nope.py: no such file"):
        found(tmp_path, ["nope.py"])


def test_missing_path_exits_2(tmp_path, run_cli):
    result = run_cli(["check", "nope/"], cwd=tmp_path)
    assert result.code == 2 and "nope/: no such file or directory" in result.err


def test_symlink_loop_does_not_hang(tmp_path):
    touch(tmp_path / "pkg" / "m.py")
    os.symlink(tmp_path / "pkg", tmp_path / "pkg" / "loop")
    os.symlink(tmp_path / "pkg" / "self", tmp_path / "pkg" / "self")  # a link to itself
    assert found(tmp_path) == ["pkg/m.py"]


def test_dangling_link_is_reported_not_fatal(tmp_path, run_cli):
    touch(tmp_path / "ok.py", '"""Doc."""\n')
    os.symlink(tmp_path / "gone.py", tmp_path / "dangling.py")
    result = run_cli(["check", ".", "--no-cache"], cwd=tmp_path)
    assert result.code == 1
    assert "dangling.py:1:1: RB003 Skipped: no such file" in result.out


def test_duplicates_are_checked_once(tmp_path):
    touch(tmp_path / "pkg" / "m.py")
    assert found(tmp_path, ["pkg", "pkg/m.py", "."]) == ["pkg/m.py"]


_PIECES = ("a", "b", "build", ".git", "x.py", "gen_1.py", "keep", "*", "**", "*.py", "c.pyc")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans(),
                          st.lists(st.sampled_from(_PIECES), min_size=1, max_size=3),
                          st.booleans()), min_size=1, max_size=6),
       st.lists(st.tuples(st.lists(st.sampled_from(_PIECES[:7]), min_size=1, max_size=4),
                          st.booleans()), min_size=1, max_size=20),
       st.frozensets(st.integers(0, 5)))
def test_the_joined_patterns_give_each_patterns_verdict(patterns, paths, skip):
    from reviewbot.discovery import PatternSet

    lines = [("!" if negate else "") + ("/" if anchored else "") + "/".join(parts)
             + ("/" if folder else "") for negate, anchored, parts, folder in patterns]
    spec = PatternSet(lines)
    for parts, folder in paths:
        rel = "/".join(parts) + ("/" if folder else "")
        slow = None
        for pattern in spec.patterns:
            if pattern.match_file(rel) is not None:
                slow = bool(pattern.include)
        assert spec.verdict(rel) == slow
        # Patterns that matched a folder named on the command line are left out.
        slow = None
        for i, pattern in enumerate(spec.patterns):
            if i not in skip and pattern.match_file(rel) is not None:
                slow = bool(pattern.include)
        assert spec.verdict(rel, skip) == slow
        assert spec.matching(rel) == frozenset(
            i for i, p in enumerate(spec.patterns) if p.match_file(rel) is not None)
