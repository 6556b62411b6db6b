"""The arithmetic of the benchmark scripts (rb1xx_overhead.py, accuracy.py)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import rb1xx_overhead  # noqa: E402

# The summary cachegrind prints with --cache-sim=yes --branch-sim=yes (numbers made up).
SUMMARY = """\
==1== I   refs:      1,000,000
==1== I1  misses:        2,000
==1== LLi misses:          300
==1== I1  miss rate:      0.20%
==1== D   refs:        500,000  (400,000 rd   + 100,000 wr)
==1== D1  misses:        4,000  (  3,000 rd   +   1,000 wr)
==1== LLd misses:           50  (     20 rd   +      30 wr)
==1== LL refs:           6,000  (  5,000 rd   +   1,000 wr)
==1== LL misses:           350  (    320 rd   +      30 wr)
==1== Branches:         90,000  ( 80,000 cond +  10,000 ind)
==1== Mispredicts:       7,000  (  5,000 cond +   2,000 ind)
"""


def test_the_summary_gives_each_count_and_the_cycle_estimate():
    counts = rb1xx_overhead.parse_counts(SUMMARY)
    assert counts == {
        "instructions": 1_000_000, "I1 misses": 2_000, "D1 misses": 4_000,
        "LL misses": 350, "mispredicts": 7_000,
        # 1 per instruction, 10 per L1 miss, 200 per last-level miss, 20 per mispredict
        "estimated cycles": 1_000_000 + 10 * 6_000 + 200 * 350 + 20 * 7_000,
    }


def test_a_summary_without_the_branch_counts_is_refused():
    without = "\n".join(line for line in SUMMARY.splitlines() if "Mispredicts" not in line)
    assert rb1xx_overhead.parse_counts(without) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-0.5, max_value=2.0), min_size=1, max_size=15))
def test_the_bootstrap_interval_lies_within_the_rounds_and_repeats(ratios):
    low, high = rb1xx_overhead.bootstrap_interval(ratios, draws=400)
    assert min(ratios) <= low <= high <= max(ratios)
    assert (low, high) == rb1xx_overhead.bootstrap_interval(ratios, draws=400)
    if len(set(ratios)) == 1:
        assert low == high == ratios[0]
    # Rounds that all agree leave nothing to resample: the interval is their value.
    packed = [statistics.median(ratios)] * len(ratios)
    assert rb1xx_overhead.bootstrap_interval(packed, draws=400) == (packed[0], packed[0])


def test_a_samples_verdicts_are_counted_strict_and_with_conditional_ones(tmp_path):
    import accuracy

    sample = tmp_path / "s.yml"
    sample.write_text(
        "tree: t\nseed: 1\nfindings:\n"
        "- {path: a.py, line: 1, code: RB101, verdict: 'true'}\n"
        "- {path: a.py, line: 2, code: RB101, verdict: conditional}\n"
        "- {path: a.py, line: 3, code: RB102, verdict: 'false'}\n"
        "- {path: a.py, line: 4, code: RB102, verdict: ''}\n", encoding="utf-8")
    still = [{"path": "a.py", "line": 2, "code": "RB101"}, {"path": "a.py", "line": 3,
                                                              "code": "RB102"}]
    counts = accuracy.judged(sample, still)
    assert (counts["true"], counts["conditional"], counts["false"], counts["left"]) == \
        (1, 1, 1, 1)
    assert (counts["kept_true"], counts["kept_conditional"], counts["kept_false"]) == (0, 1, 1)
    assert accuracy.precision_words(1, 1, 2) == \
        "25% true of 4 judged (50% counting the 1 conditional)"
    assert accuracy.precision_words(3, 0, 1) == "75% true of 4 judged"
