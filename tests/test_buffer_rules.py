"""RB201-RB203: buffer bounds, per-step pinned allocations, unguarded pinning."""

from __future__ import annotations

import json
import textwrap

import pytest

from conftest import FIXTURES, REPO, check_source
from reviewbot.finding import Finding
from reviewbot.rules.rb201_buffer_bound_mismatch import BufferBoundMismatch
from reviewbot.rules.rb202_pinned_alloc_in_hot_path import PinnedAllocInHotPath
from reviewbot.rules.rb203_unguarded_pin_memory import UnguardedPinMemory


def apply_edits(source: str, finding: Finding) -> str:
    """The source with the finding's fix applied (edits on single lines only)."""
    lines = source.splitlines(keepends=True)
    assert finding.fix is not None
    for edit in sorted(finding.fix.edits, key=lambda e: (e.line, e.column), reverse=True):
        assert edit.line == edit.end_line
        text = lines[edit.line - 1]
        lines[edit.line - 1] = text[:edit.column - 1] + edit.content + text[edit.end_column - 1:]
    return "".join(lines)


RUNNER = """\
import torch
class Runner:
    def __init__(self, max_num_reqs, max_model_len):
        self.max_num_reqs = max_num_reqs
        self.max_model_len = max_model_len
        self.pinned = torch.empty((self.max_model_len, 1), dtype=torch.int64,
                                  pin_memory=True)
{uses}
"""

TO_LIST = """\
    def _to_list(self, sampled_token_ids):
        pinned = self.pinned[:sampled_token_ids.shape[0]]
        pinned.copy_(sampled_token_ids, non_blocking=True)
        return pinned.tolist()
"""


def rb201(tmp_path, source):
    return check_source(tmp_path, textwrap.dedent(source), BufferBoundMismatch)


def test_seed_buffer_is_reported_with_sites_cost_overflow_and_fix(tmp_path):
    source = RUNNER.format(uses=TO_LIST)
    (finding,) = rb201(tmp_path, source)
    assert (finding.code, finding.line, finding.severity) == ("RB201", 6, "error")
    assert "sized by max_model_len" in finding.message
    assert "bounded by max_num_reqs" in finding.message
    assert "line 9 `self.pinned[:sampled_token_ids.shape[0]]`" in finding.message
    # 131,072 rows of 8 bytes against 256 rows.
    assert "holds 1 MiB where 2 KiB is used (1,046,528 bytes wasted)" in finding.message
    assert "where max_num_reqs > max_model_len" in finding.message
    assert finding.fix.applicability == "unsafe"
    fixed = apply_edits(source, finding)
    assert "torch.empty((self.max_num_reqs, 1), dtype=torch.int64," in fixed
    assert rb201(tmp_path, fixed) == []


def test_the_fix_uses_the_spelling_the_class_has(tmp_path):
    source = RUNNER.format(uses=TO_LIST).replace("self.max_num_reqs = max_num_reqs",
                                                 "self.max_num_seqs = max_num_reqs")
    (finding,) = rb201(tmp_path, source)
    assert "self.max_num_seqs" in apply_edits(source, finding)


def test_no_fix_when_the_class_lacks_the_right_bound(tmp_path):
    source = RUNNER.format(uses=TO_LIST).replace("        self.max_num_reqs = max_num_reqs\n",
                                                 "")
    (finding,) = rb201(tmp_path, source)
    assert finding.fix is None


def test_a_bare_name_bound_is_fixed_from_the_parameters(tmp_path):
    source = RUNNER.format(uses=TO_LIST).replace("(self.max_model_len, 1)",
                                                 "(max_model_len, 1)")
    (finding,) = rb201(tmp_path, source)
    assert "torch.empty((max_num_reqs, 1)" in apply_edits(source, finding)


@pytest.mark.parametrize("uses", [
    # a count followed through a local assignment, and len()
    "    def a(self, req_ids):\n        n = req_ids.shape[0]\n        return self.pinned[:n]\n"
    "    def b(self, req_ids):\n        return self.pinned[:len(req_ids)]\n",
    # x.size(0) and a copy source whose name is per-request
    "    def a(self, x, sampled_token_ids):\n"
    "        self.pinned[:x.size(0)].copy_(sampled_token_ids)\n",
    # num_reqs + 1 is still bounded by requests (cumulative offsets)
    "    def a(self, num_reqs):\n        return self.pinned[:num_reqs + 1]\n",
])
def test_use_bounds_are_read_through_counts(tmp_path, uses):
    assert [f.code for f in rb201(tmp_path, RUNNER.format(uses=uses))] == ["RB201"]


@pytest.mark.parametrize("uses", [
    # no use at all: no evidence
    "",
    # one use bounded by positions: the table may be per-position after all
    TO_LIST + "    def b(self, positions):\n        return self.pinned[positions]\n",
    # a use whose bound is unknown
    TO_LIST + "    def b(self, k):\n        return self.pinned[:k]\n",
    # the whole buffer escapes
    TO_LIST + "    def b(self):\n        return self.pinned\n",
    # a whole-buffer slice
    TO_LIST + "    def b(self):\n        return self.pinned[:]\n",
    # reassigned elsewhere
    TO_LIST + "    def b(self, x):\n        self.pinned = x\n",
    # the same bound as the allocation
    "    def a(self, positions):\n        return self.pinned[positions]\n",
])
def test_unclear_or_matching_evidence_is_not_reported(tmp_path, uses):
    assert rb201(tmp_path, RUNNER.format(uses=uses)) == []


def test_numpy_buffers_are_checked_too(tmp_path):
    source = """\
        import numpy as np
        class Batch:
            def __init__(self, max_model_len):
                self.seq_start = np.zeros(max_model_len, dtype=np.int32)
            def fill(self, num_reqs):
                return self.seq_start[:num_reqs]
        """
    (finding,) = rb201(tmp_path, source)
    assert "holds 512 KiB where 1 KiB is used" in finding.message


def test_users_add_their_own_bounds_in_a_pack(tmp_path, run_cli):
    (tmp_path / "packs").mkdir()
    (tmp_path / "packs" / "mine.yml").write_text(
        "name: mine\nsize-bounds:\n  max_beams:\n    holds: beams of one request\n"
        "    names: [num_beams]\n  max_vocab:\n    holds: token ids\n    names: [vocab]\n",
        encoding="utf-8")
    (tmp_path / ".reviewbot.yml").write_text("rule-packs: [pytorch, packs/mine.yml]\n",
                                             encoding="utf-8")
    (tmp_path / "beam.py").write_text(textwrap.dedent("""\
        import torch
        class Beams:
            def __init__(self, max_vocab):
                self.scores = torch.zeros(max_vocab)
            def top(self, num_beams):
                return self.scores[:num_beams]
        """), encoding="utf-8")
    result = run_cli(["check", ".", "--no-cache", "--select", "RB201", "--output-format",
                      "json"], cwd=tmp_path)
    (finding,) = json.loads(result.out)
    assert "sized by max_vocab" in finding["message"]
    assert "bounded by max_beams (beams of one request)" in finding["message"]
    assert "wasted" not in finding["message"]  # no typical values in that pack


def test_bad_typical_value_is_a_config_error(tmp_path, run_cli):
    (tmp_path / "mine.yml").write_text(
        "name: mine\nsize-bounds:\n  max_x:\n    holds: x\n    names: [n]\n"
        "    typical: -3\n", encoding="utf-8")
    (tmp_path / ".reviewbot.yml").write_text("rule-packs: [mine.yml]\n", encoding="utf-8")
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    result = run_cli(["check", "a.py", "--no-cache"], cwd=tmp_path)
    assert result.code == 2
    assert "size-bounds.max_x.typical: expected a positive integer" in result.err


# RB202 ---------------------------------------------------------------------------------

HOT = """\
import torch
class Runner:
    def __init__(self):
        self.buf = torch.empty(8, pin_memory=True)
    def execute_model(self, x):
{body}
"""


@pytest.mark.parametrize("body, reported", [
    ("        h = torch.empty(x.shape, pin_memory=True)", True),
    ("        h = torch.tensor([1, 2], pin_memory=self.pin_memory)", True),
    ("        h = x.cpu().pin_memory()", True),
    ("        s = torch.cuda.Stream()", True),
    ("        h = torch.empty(x.shape, pin_memory=False)", False),
    ("        if self.buf is None:\n            self.buf = torch.empty(8, pin_memory=True)", False),
    ("        if len(x) > self.buf.numel():\n"
     "            self.buf = torch.empty(len(x), pin_memory=True)", False),
    ("        def later():\n            return torch.empty(8, pin_memory=True)\n"
     "        return later", False),
])
def test_rb202_reports_allocations_made_every_step(tmp_path, body, reported):
    findings = check_source(tmp_path, HOT.format(body=body), PinnedAllocInHotPath)
    assert bool(findings) is reported
    if reported:
        assert "hot path execute_model" in findings[0].message


def test_rb202_matches_events_and_streams_through_the_imports(tmp_path):
    source = HOT.format(body="        a = Event(enable_timing=False)\n"
                             "        b = cuda.Stream()\n        c = Event()\n") \
        .replace("import torch\n", "import torch\nfrom torch.cuda import Event\n"
                                   "from torch import cuda\n")
    findings = check_source(tmp_path, source, PinnedAllocInHotPath)
    assert [(f.line, f.message.split("`")[1]) for f in findings] == [
        (8, "torch.cuda.Event()"), (9, "torch.cuda.Stream()"), (10, "torch.cuda.Event()")]
    # A project class of the same name is no CUDA event.
    mine = source.replace("from torch.cuda import Event\n", "from mylib import Event\n")
    assert [f.line for f in check_source(tmp_path, mine, PinnedAllocInHotPath)] == [9]


def test_rb202_follows_hot_calls_and_ignores_cold_code(tmp_path):
    source = HOT.format(body="        return self._read(x)") + (
        "    def _read(self, x):\n        return torch.empty(3, pin_memory=True)\n"
        "    def load_model(self):\n        return torch.empty(3, pin_memory=True)\n")
    (finding,) = check_source(tmp_path, source, PinnedAllocInHotPath)
    assert finding.line == 8
    assert "execute_model -> _read" in finding.message


def test_rb202_on_the_fixture_reports_only_the_per_step_allocations(run_cli):
    result = run_cli(["check", "fixtures/buffers/step_allocations.py", "--no-cache",
                      "--select", "RB202", "--output-format", "json"], cwd=REPO)
    assert [(f["line"], f["message"].split("`")[1]) for f in json.loads(result.out)] == [
        (19, "pin_memory=True"), (20, "torch.cuda.Event()")]


# RB203 ---------------------------------------------------------------------------------

def test_rb203_is_off_by_default(run_cli, tmp_path):
    (tmp_path / "a.py").write_text("import torch\nb = torch.empty(2, pin_memory=True)\n",
                                   encoding="utf-8")
    assert run_cli(["check", "a.py", "--no-cache", "--select", "RB2"], cwd=tmp_path).code == 0
    result = run_cli(["check", "a.py", "--no-cache", "--select", "RB203"], cwd=tmp_path)
    assert result.code == 1 and "RB203" in result.out


@pytest.mark.parametrize("source, count", [
    ("import torch\ndef f(n):\n    return torch.empty(n, pin_memory=True)\n", 1),
    ("import torch\ndef f(n):\n    return torch.empty(n, pin_memory=True if "
     "torch.cuda.is_available() else False)\n", 0),
    ("import torch\ndef f(n):\n    x = torch.empty(n, pin_memory=torch.cuda.is_available() "
     "and True)\n    return x\n", 0),
    ("import torch\nif torch.cuda.is_available():\n    B = torch.empty(4, pin_memory=True)\n"
     "else:\n    B = torch.empty(4)\n", 0),
    ("import torch\ndef f(n):\n    a = torch.empty(n, pin_memory=True)\n"
     "    assert torch.cuda.is_available()\n    return a\n", 1),
    # A check in the scope's own body covers what follows it, not what comes before it.
    ("import torch\ndef f(n):\n    assert torch.cuda.is_available()\n"
     "    return torch.empty(n, pin_memory=True)\n", 0),
    ("import torch\ndef f(n):\n    if not torch.cuda.is_available():\n"
     "        raise RuntimeError('CUDA only')\n    return torch.empty(n, pin_memory=True)\n", 0),
    # ... but not a nested function's, which runs at another time.
    ("import torch\ndef f(n):\n    assert torch.cuda.is_available()\n"
     "    def g():\n        return torch.empty(n, pin_memory=True)\n    return g\n", 1),
    ("import torch\nclass Pool:\n    if torch.cuda.is_available():\n"
     "        SHARED = torch.zeros(8, pin_memory=True)\n", 0),
])
def test_rb203_respects_guards(tmp_path, source, count):
    assert len(check_source(tmp_path, source, UnguardedPinMemory)) == count


def test_buffers_fixture_covers_every_case():
    expected = (FIXTURES / "buffers" / "expected.txt").read_text(encoding="utf-8")
    assert "seed_helper.py:15:45: RB201" in expected
    assert "token_buffers.py:18:31: RB201" in expected
    for clean in ("sized_by_reqs.py", "position_tables.py", "token_buffers.py:15"):
        assert clean not in expected


def test_a_length_and_a_value_of_the_same_name_have_different_bounds(tmp_path):
    # seq_lens holds positions (values up to max_model_len) but has one entry per request.
    source = """\
        import torch
        class Builder:
            def __init__(self, max_num_reqs, max_model_len, max_num_batched_tokens):
                self.lens = torch.zeros(max_num_reqs, dtype=torch.int32)
                self.pos = torch.zeros(max_model_len, dtype=torch.int64)
            def build(self, seq_lens, positions):
                num_reqs = seq_lens.size(0)
                self.lens[:num_reqs].copy_(seq_lens)
                self.pos[:positions.shape[0]].copy_(positions)
        """
    (finding,) = rb201(tmp_path, source)
    assert "`self.pos` is sized by max_model_len" in finding.message
    assert "bounded by max_num_batched_tokens" in finding.message
    assert "torch.zeros(max_num_batched_tokens," in apply_edits(textwrap.dedent(source), finding)
