"""Run a wild reproduction's step a fixed number of times, for ``reviewbot trace``.

``python benchmarks/wild/drive.py CASE SIDE [--steps N]``: loads ``CASE/scenario.py`` and
``CASE/SIDE/<TARGET>``, warms the step up three times, calls ``reviewbot.trace.start()``
(a no-op unless traced with ``--wait-for-start``), then runs N steps. Under
``reviewbot trace`` each synchronising line's count divided by N is how often it runs per
step (benchmarks/gpu_wild.sh does this for every case).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from measure import _load  # noqa: E402

import reviewbot.trace  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case")
    parser.add_argument("side", choices=("before", "after"))
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    import torch

    case = Path(args.case)
    scenario = _load(case / "scenario.py", "wild_scenario")
    module = _load(case / args.side / scenario.TARGET, f"wild_{args.side}")
    step = scenario.step(module, "cuda")
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    reviewbot.trace.start()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
