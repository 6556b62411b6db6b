"""`reviewbot verify` on a real GPU: the helpers' copy path, the sync-debug check, the
scenario on CUDA. Skipped where there is no CUDA device (CI); run with `pytest -m gpu`."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from conftest import FIXTURES, REPO  # noqa: E402
from reviewbot.verify.helpers import find_helpers  # noqa: E402
from reviewbot.verify.run import Options, check_helper  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

AFTER = FIXTURES / "fix" / "after"


@pytest.mark.parametrize("name", ["seed_runner.py", "free_functions.py", "crlf_tabs.py"])
def test_inserted_helpers_match_tolist_on_cuda(name):
    (helper,) = find_helpers([AFTER / name], str)
    report = check_helper(helper, torch, "cuda", Options([str(AFTER)], iterations=3),
                          _Bench())
    assert report.differences == [] and report.busy_differences == []
    assert report.cases == 78 and report.busy_cases == 78
    assert report.helper_syncs is None  # silent under set_sync_debug_mode("error")
    assert report.original_syncs is not None  # .tolist() is not


class _Bench:
    """No stall timing here (benchmarks measure speed, tests measure behaviour)."""

    def measure(self, readback, pending_ms, iterations):
        from reviewbot.verify.stall import Latency

        ids = torch.arange(256, device="cuda").reshape(256, 1)
        return Latency(1.0, 1.0, 1), [readback(ids)]


def test_the_seed_scenario_gives_the_same_results_on_cuda(run_cli):
    result = run_cli(["verify", "fixtures/fix/after/seed_runner.py", "--before",
                      "fixtures/fix/before", "--scenario",
                      "fixtures/verify/seed_runner_scenario.py", "--iterations", "3",
                      "--output-format", "json"], cwd=REPO)
    report = json.loads(result.out)
    assert result.code == 0, result.out
    assert report["scenario"]["device"] == "cuda" and report["scenario"]["same"]
    # The fixed readback no longer synchronises: line 106 is not among the lines that do.
    assert 106 not in [s["line"] for s in report["scenario"]["sync_lines"]]
    # ... while the original `.tolist()` (line 105 before the fix) is caught by it.
    assert 105 in [s["line"] for s in report["scenario"]["sync_lines_before"]]
