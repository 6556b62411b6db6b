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
