"""Suppression comments: which comments suppress which findings."""

from __future__ import annotations

import pytest

from reviewbot.finding import Finding
from reviewbot.suppression import Suppressions


def finding(line: int, code: str = "RB101") -> Finding:
    return Finding(code, "x", "m", "f.py", line, 1, line, 1)


@pytest.mark.parametrize("comment,suppressed", [
    ("# noqa: RB101", True),
    ("# noqa: E501, RB101", True),
    ("# NOQA:RB101", True),
    ("# noqa", True),  # a blanket noqa, as ruff reads it
    ("# noqa: E501", False),
    ("# noqa: RB102", False),
    ("# reviewbot: ignore", True),
    ("# reviewbot: ignore[RB102, RB101]", True),
    ("# reviewbot: ignore[RB102]", False),
    ("# why this is fine  # noqa: RB101", True),
])
def test_comment_forms(comment, suppressed):
    text = f"x = t.tolist()  {comment}\n"
    assert Suppressions.parse(text).suppresses(finding(1)) is suppressed


def test_first_line_of_a_multi_line_statement():
    text = "ids = f(  # reviewbot: ignore[RB101]\n    a,\n    b.tolist(),\n)\nz = 1\n"
    sup = Suppressions.parse(text)
    assert sup.suppresses(finding(3)) and not sup.suppresses(finding(5))


def test_directive_in_a_string_is_not_a_comment():
    text = 's = "# noqa: RB101"\nx = t.tolist()\n'
    assert not Suppressions.parse(text).suppresses(finding(1))


# The file-level directive ------------------------------------------------------------------
from reviewbot.suppression import file_ignore_line  # noqa: E402


@pytest.mark.parametrize("text,line", [
    ("# reviewbot: ignore-file\nx = 1\n", 1),
    ("#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n#  REVIEWBOT:ignore-file\n", 3),
    ('"""Generated."""\n# reviewbot: ignore-file  # made by protoc\n', 2),
    ("\n" * 9 + "# reviewbot: ignore-file\n", 10),
    ("\n" * 10 + "# reviewbot: ignore-file\n", None),  # too far down
    ("x = 1  # reviewbot: ignore-file\n", None),  # not on a line of its own
    ('"""\n# reviewbot: ignore-file\n"""\n', None),  # inside a string
    ("# reviewbot: ignore-file[RB101]\n", None),  # no per-rule form: nothing is ignored
    ("# reviewbot: ignore-files\n", None),
    ("# reviewbot: ignore\n", None),
    ("x = (\n# reviewbot: ignore-file\n", 2),  # an unclosed bracket later does not matter
])
def test_file_directive(text, line):
    assert file_ignore_line(text) == line


def test_the_file_directive_is_not_a_line_suppression():
    text = "# reviewbot: ignore-file\nx = t.tolist()\n"
    assert not Suppressions.parse(text).suppresses(finding(1))


def test_an_ignored_file_yields_no_findings(tmp_path, run_cli):
    import json

    body = ("import torch\n\n\ndef f(x):\n    return x\n\n\n"
            "class ModelRunner:\n    def execute_model(self, batch):\n"
            "        ids = torch.zeros(4, device='cuda')\n        return ids.tolist()\n")
    (tmp_path / "kept.py").write_text(body)
    (tmp_path / "skipped.py").write_text("# reviewbot: ignore-file\n" + body)
    (tmp_path / "broken.py").write_text("# reviewbot: ignore-file\ndef (:\n")
    result = run_cli(["check", ".", "--no-cache", "--output-format", "json"], cwd=tmp_path)
    findings = json.loads(result.out)
    assert result.code == 1
    assert {f["path"] for f in findings} == {".", "kept.py"}
    assert "RB101" in {f["code"] for f in findings}
    (coverage,) = [f for f in findings if f["code"] == "RB301"]
    assert coverage["details"]["total"] == 3  # skipped.py is not counted
    (tmp_path / "kept.py").write_text("# reviewbot: ignore-file\n" + body)
    result = run_cli(["check", ".", "--no-cache"], cwd=tmp_path)
    assert (result.code, result.out.strip()) == (0, "All checks passed!")
    assert run_cli(["fix", "."], cwd=tmp_path).code == 0  # nothing to fix there either


def test_the_review_counts_an_added_file_directive(tmp_path):
    from reviewbot.github.diff import ChangedLines, FileChange
    from reviewbot.github.review import added_suppressions

    (tmp_path / "a.py").write_text("# reviewbot: ignore-file\nx = t.tolist()  # noqa: RB101\n")
    (tmp_path / "b.py").write_text("# reviewbot: ignore-file\nx = 1\n")
    changed = ChangedLines({"a.py": FileChange("a.py", "added", {1, 2}, {1, 2}),
                            "b.py": FileChange("b.py", "modified", {2}, {1, 2})})
    assert added_suppressions([tmp_path / "a.py", tmp_path / "b.py"], changed, tmp_path) == \
        ["a.py:1 (whole file)", "a.py:2"]  # b.py's directive was there before
