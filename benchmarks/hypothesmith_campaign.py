"""A long run of generated programs through `check` and `fix` (hypothesmith).

Each program, alone and after a class whose hot readback gets the event-sync fix, is
checked with every rule and fixed with the unsafe fixes too: nothing may raise or report a
rule crash (RB002), and every fixed program must compile and be a fixed point of a second
fix. Prints the counts; exit 1 on the first failure, with the program that caused it.

    python benchmarks/hypothesmith_campaign.py [--examples 2000] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import hypothesmith
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from reviewbot import registry
from reviewbot.config import Overrides, build_config
from reviewbot.engine import Checker, FileJob
from reviewbot.fixer import Fixer
from reviewbot.packs import load_packs

HOT_READBACK = '''
import torch


class Runner:
    def __init__(self):
        self.device = torch.device("cuda")

    def execute_model(self, x):
        ids = torch.zeros(4, device=self.device).argmax(dim=-1, keepdim=True)
        return ids.tolist()
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    opts = parser.parse_args()
    root = Path(tempfile.mkdtemp())
    config = build_config({"select": ["ALL"]}, None, "", root, Overrides())
    packs = load_packs(config.rule_packs, config.root, None)
    checker, fixer = Checker(config, packs), Fixer(config, packs, registry.RULES, unsafe=True)
    counts = {"programs": 0, "findings": 0, "fixed": 0, "fixes": 0}

    def one(source: str) -> None:
        counts["programs"] += 1
        findings = checker.check(FileJob("gen.py", "gen.py", source.encode("utf-8"))).findings
        counts["findings"] += len(findings)
        crashes = [f.message for f in findings if f.code == "RB002"]
        assert not crashes, crashes
        result = fixer.fix_text("gen.py", "gen.py", source)
        if result.error is None and result.changed:
            counts["fixed"] += 1
            counts["fixes"] += len(result.applied)
            compile(result.new, "gen.py", "exec")
            again = fixer.fix_text("gen.py", "gen.py", result.new)
            assert again.error is None and not again.changed, "not a fixed point"

    @seed(opts.seed)
    @settings(max_examples=opts.examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(hypothesmith.from_grammar(), hypothesmith.from_node()), st.booleans())
    def campaign(source: str, with_readback: bool) -> None:
        one(HOT_READBACK + "\n" + source if with_readback else source)

    start = time.perf_counter()
    try:
        campaign()
    except Exception as exc:  # hypothesis has shrunk it: print the smallest failing program
        print(f"FAILED after {counts['programs']} programs: {exc.__class__.__name__}: {exc}")
        return 1
    seconds = time.perf_counter() - start
    print(f"{counts['programs']} programs checked and fixed in {seconds:.0f} s: "
          f"{counts['findings']} findings, {counts['fixed']} programs fixed "
          f"({counts['fixes']} fixes), no crash, every fix compiles and is a fixed point")
    return 0


if __name__ == "__main__":
    sys.exit(main())
