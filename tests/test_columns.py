"""One column convention: 1-based characters (code points) for findings, fix edits,
suggestions and SARIF, whatever the bytes of the text before a finding on its line."""

from __future__ import annotations

import ast
import json
import re

import pytest

from conftest import REPO, check_source
from reviewbot.github.review import build_comment
from reviewbot.reporters import sarif
from reviewbot.rules.rb101_tolist_on_cuda_tensor import TolistOnCudaTensor
from reviewbot.rules.rb202_pinned_alloc_in_hot_path import PinnedAllocInHotPath
from reviewbot.rules.rb203_unguarded_pin_memory import UnguardedPinMemory
from reviewbot.source import Columns

# Two, three and four bytes in UTF-8, one character each: nine bytes, three columns.
WIDE = "é中😀"


def test_columns_count_characters_not_bytes():
    text = f'x = 1\ny = "{WIDE}"; z = f(a)\n'
    tree = ast.parse(text)
    call = tree.body[2].value  # f(a), after the three wide characters
    assert call.col_offset == text.splitlines()[1].encode().index(b"f(a)")  # bytes
    columns = Columns(text)
    start = text.splitlines()[1].index("f(a)") + 1
    assert columns.span(call) == (2, start, 2, start + len("f(a)"))
    assert columns.column(1, 4) == 5  # an ASCII line
    assert columns.column(9, 3) == 4  # a line the text does not have: as given


def test_columns_follow_pythons_line_ends_and_an_end_on_another_line():
    # CR and CRLF end lines, a form feed does not; the end of a call is on its last line.
    text = f"a = 1\r\nb = 2\rc = ('\x0c{WIDE}', g(\n    '{WIDE}', 1))\n"
    tree = ast.parse(text)
    call = tree.body[2].value.elts[1]
    lines = ["a = 1", "b = 2", f"c = ('\x0c{WIDE}', g(", f"    '{WIDE}', 1))"]
    assert Columns(text).span(call) == (3, lines[2].index("g(") + 1, 4, len(lines[3]))


RUNNER = f'''\
import torch


class Worker:
    """Hands results back as lists."""

    def __init__(self, max_num_reqs: int) -> None:
        """The readback state."""
        self.ids = torch.zeros((max_num_reqs, 1), dtype=torch.int64, device="cuda")
        self.done = torch.cuda.Event()
        self.host_ids = torch.empty((max_num_reqs, 1), dtype=torch.int64, pin_memory=True)

    def execute_model(self) -> dict:
        """One step."""
        return {{"{WIDE}": self.ids.tolist()}}

    def read_ids(self, sampled: torch.Tensor) -> list:
        """Copy into pinned memory and wait on an event only."""
        pinned = self.host_ids[:sampled.shape[0]]
        pinned.copy_(sampled, non_blocking=True)
        self.done.record()
        self.done.synchronize()
        return pinned.tolist()
'''
LINE = 15
CALL = "self.ids.tolist()"


def test_rb101_finding_fix_suggestion_and_sarif_agree_after_wide_characters(tmp_path,
                                                                            run_cli):
    line_text = RUNNER.splitlines()[LINE - 1]
    start = line_text.index(CALL) + 1  # in characters
    assert len(line_text[:start - 1].encode()) == start - 1 + 6  # six bytes more

    (finding,) = check_source(tmp_path, RUNNER, TolistOnCudaTensor, path="worker.py")
    assert (finding.line, finding.column, finding.end_line, finding.end_column) == \
        (LINE, start, LINE, start + len(CALL))
    (edit,) = finding.fix.edits  # the class has a helper: one edit, on the call
    assert (edit.line, edit.column, edit.end_line, edit.end_column) == \
        (LINE, start, LINE, start + len(CALL))
    assert edit.content == "self.read_ids(self.ids)"

    fixed_line = f'        return {{"{WIDE}": self.read_ids(self.ids)}}'
    comment = build_comment(finding, tmp_path)
    assert comment.line == LINE and comment.start_line is None
    assert f"```suggestion\n{fixed_line}\n```" in comment.body

    log = sarif.build([finding])
    run = log["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    region = run["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert (region["startColumn"], region["endColumn"]) == (start, start + len(CALL))
    deleted = run["results"][0]["fixes"][0]["artifactChanges"][0]["replacements"][0][
        "deletedRegion"]
    assert (deleted["startColumn"], deleted["endColumn"]) == (start, start + len(CALL))

    # The fix written to disk: the same text as the suggestion, nothing else changed.
    result = run_cli(["fix", "--apply", "--no-cache", "--select", "RB101", "worker.py"],
                     cwd=tmp_path)
    assert result.code == 0, result.err
    after = (tmp_path / "worker.py").read_text(encoding="utf-8")
    assert after == RUNNER.replace(line_text, fixed_line)

    shown = run_cli(["check", "--no-cache", "--select", "RB101", "worker.py"],
                    cwd=tmp_path)
    assert shown.code == 0  # fixed


def test_rb101_fix_with_a_new_helper_edits_the_right_characters(tmp_path, run_cli):
    source = RUNNER.split("    def read_ids")[0].rstrip() + "\n"
    (tmp_path / "worker.py").write_text(source, encoding="utf-8")
    result = run_cli(["fix", "--apply", "--no-cache", "--select", "RB101", "worker.py"],
                     cwd=tmp_path)
    assert result.code == 0, result.err
    after = (tmp_path / "worker.py").read_text(encoding="utf-8")
    assert f'        return {{"{WIDE}": self._to_list(self.ids)}}\n' in after
    compile(after, "worker.py", "exec")


HOT = f"""\
import torch
class Runner:
    def execute_model(self, x):
        h = ("{WIDE}", torch.empty(x.shape, pin_memory=True))
        return h
"""


@pytest.mark.parametrize("rule, source, call", [
    (PinnedAllocInHotPath, HOT, "torch.empty(x.shape, pin_memory=True)"),
    (UnguardedPinMemory, f'import torch\nB = ("{WIDE}", torch.empty(2, pin_memory=True))\n',
     "torch.empty(2, pin_memory=True)"),
])
def test_buffer_rules_report_character_columns(tmp_path, rule, source, call):
    (finding,) = check_source(tmp_path, source, rule)
    line_text = source.splitlines()[finding.line - 1]
    start = line_text.index(call) + 1
    assert (finding.column, finding.end_column) == (start, start + len(call))


def test_syntax_errors_and_future_imports_report_character_columns(tmp_path, run_cli):
    (tmp_path / "a.py").write_text(f'x = "{WIDE}" $ 1\n', encoding="utf-8")
    (tmp_path / "b.py").write_text(f'"{WIDE}"; from __future__ import nope\n',
                                   encoding="utf-8")
    result = run_cli(["check", "--no-cache", "--output-format", "json", "a.py", "b.py"],
                     cwd=tmp_path)
    found = {f["path"]: f for f in json.loads(result.out) if f["code"] == "RB001"}
    assert found["a.py"]["column"] == f'x = "{WIDE}" $ 1'.index("$") + 1
    assert found["b.py"]["column"] == f'"{WIDE}"; from'.index("from") + 1


def test_text_report_shows_the_character_column(tmp_path, run_cli):
    (tmp_path / "worker.py").write_text(RUNNER, encoding="utf-8")
    result = run_cli(["check", "--no-cache", "--select", "RB101", "worker.py"], cwd=tmp_path)
    start = RUNNER.splitlines()[LINE - 1].index(CALL) + 1
    assert result.out.startswith(f"worker.py:{LINE}:{start}: RB101")


def test_no_ast_offset_becomes_a_column_outside_columns():
    """Every conversion of ``col_offset`` goes through source.Columns (byte offsets are
    still read elsewhere, to slice a line's bytes, but never reported as they are)."""
    offenders = []
    for path in sorted((REPO / "reviewbot").rglob("*.py")):
        if path.name == "source.py":
            continue
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"col_offset\)?\s*\+\s*1|char_column", text):
            offenders.append(f"{path.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1}")
    assert offenders == []
