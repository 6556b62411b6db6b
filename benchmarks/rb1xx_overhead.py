#!/usr/bin/env python3
"""What the RB1xx rules add to a run of the RB3xx (docstring) rules, on vLLM 0.10.1.

    python benchmarks/rb1xx_overhead.py               # 7 rounds, the default --jobs
    python benchmarks/rb1xx_overhead.py --rounds 11 --jobs 1

Each round runs `reviewbot check vllm --no-cache --select RB3` and `--select RB1,RB3`
(in alternating order, so that a slow spell of the machine hits both) in the vLLM
0.10.1 wheel's tree (downloaded once, see trees.py), with reviewbot's default
configuration. Reported per selection: the median wall time and the median CPU time of
the process tree (user + system, the children included), and the overhead of RB1xx as
the ratio of the medians minus one, for wall and CPU time; then the median of each round's
own wall-time ratio and the ratio of the fastest runs. The target is at most 30%.
The table is printed and written to benchmarks/results/rb1xx-overhead-<jobs>.{json,md}.

    python benchmarks/rb1xx_overhead.py --instructions

counts instead the instructions each selection executes (one run each, `--jobs 1`, under
valgrind's cachegrind with a fixed hash seed): the same on every run and every machine
load, though blind to cache misses. Written to results/rb1xx-overhead-instructions.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trees import BenchError, tree_for  # noqa: E402

VERSION = "0.10.1"
RESULTS = Path(__file__).resolve().parent / "results"
SELECTIONS = ("RB3", "RB1,RB3")
TARGET = 0.30


def timed_run(tree: Path, config: Path, select: str, jobs: int | None) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the run and its workers) of one check."""
    command = [sys.executable, "-P", "-m", "reviewbot", "check", "vllm", "--no-cache",
               "--config", str(config), "--select", select, "--exit-zero", "-o", os.devnull]
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    before = os.times()
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=tree, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = os.times()
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"reviewbot check --select {select} exited {proc.returncode}: {last}")
    cpu = (after.children_user - before.children_user) + \
        (after.children_system - before.children_system)
    return wall, cpu


def instructions(tree: Path, config: Path, select: str) -> int:
    """Instructions one `--jobs 1` check executes, counted by valgrind's cachegrind."""
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no",
               "--cachegrind-out-file=/dev/null", sys.executable, "-P", "-m", "reviewbot",
               "check", "vllm", "--no-cache", "--config", str(config), "--select", select,
               "--exit-zero", "-o", os.devnull, "--jobs", "1"]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(command, cwd=tree, capture_output=True, text=True, env=env)
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode != 0 or not found:
        raise BenchError(f"valgrind on --select {select} exited {proc.returncode}")
    return int(found.group(1).replace(",", ""))


def count_instructions(tree: Path, config: Path) -> int:
    """Write the instruction counts of both selections and their ratio."""
    counts = {select: instructions(tree, config, select) for select in SELECTIONS}
    overhead = counts[SELECTIONS[1]] / counts[SELECTIONS[0]] - 1
    table = "\n".join([
        f"vLLM {VERSION}, --jobs 1, valgrind cachegrind, Python {platform.python_version()}",
        "",
        "| run | instructions |",
        "| --- | ---: |",
        *(f"| `--select {s}` | {counts[s]:,} |" for s in SELECTIONS),
        "",
        f"RB1xx overhead: {100 * overhead:+.1f}% instructions "
        f"(target at most +{100 * TARGET:.0f}% of time)",
    ])
    print(table)
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / "rb1xx-overhead-instructions"
    stem.with_suffix(".md").write_text(table + "\n", encoding="utf-8")
    stem.with_suffix(".json").write_text(json.dumps({
        "version": VERSION, "jobs": 1,
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "instructions": counts, "overhead": overhead}, indent=2) + "\n", encoding="utf-8")
    return 0


def main() -> int:
    """Run the rounds, print and save the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="pairs of runs (default 7)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="worker processes (default: reviewbot's own, one per core)")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions under valgrind instead of timing")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind on the PATH")
    try:
        tree = tree_for(VERSION)
    except BenchError as exc:
        print(f"rb1xx_overhead.py: error: {exc}", file=sys.stderr)
        return 2
    config = tree.parent / "reviewbot-defaults.yml"
    config.write_text("# reviewbot's defaults\n")
    if args.instructions:
        try:
            return count_instructions(tree, config)
        except BenchError as exc:
            print(f"rb1xx_overhead.py: error: {exc}", file=sys.stderr)
            return 2
    samples: dict[str, list[tuple[float, float]]] = {s: [] for s in SELECTIONS}
    try:
        timed_run(tree, config, SELECTIONS[0], args.jobs)  # warm the file cache
        for round_ in range(args.rounds):
            order = SELECTIONS if round_ % 2 == 0 else SELECTIONS[::-1]
            for select in order:
                samples[select].append(timed_run(tree, config, select, args.jobs))
    except BenchError as exc:
        print(f"rb1xx_overhead.py: error: {exc}", file=sys.stderr)
        return 2
    medians = {s: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
               for s, v in samples.items()}
    base, full = medians[SELECTIONS[0]], medians[SELECTIONS[1]]
    wall_overhead = full[0] / base[0] - 1
    cpu_overhead = full[1] / base[1] - 1
    # Two more estimates, less moved by a slow spell of a shared machine: the median of
    # each round's own ratio (its two runs ran back to back), and the ratio of the fastest
    # runs (a busy machine only ever slows a run down).
    paired = statistics.median(f[0] / b[0] - 1 for b, f in zip(samples[SELECTIONS[0]],
                                                                 samples[SELECTIONS[1]]))
    fastest = min(w for w, _ in samples[SELECTIONS[1]]) / \
        min(w for w, _ in samples[SELECTIONS[0]]) - 1
    jobs = "default" if args.jobs is None else str(args.jobs)
    rows = [f"| `--select {s}` | {medians[s][0]:.2f} | {medians[s][1]:.2f} | "
            f"{min(w for w, _ in samples[s]):.2f} - {max(w for w, _ in samples[s]):.2f} |"
            for s in SELECTIONS]
    table = "\n".join([
        f"vLLM {VERSION}, {args.rounds} rounds, --jobs {jobs}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "",
        "| run | median wall s | median CPU s | wall range s |",
        "| --- | ---: | ---: | --- |",
        *rows,
        "",
        f"RB1xx overhead: {100 * wall_overhead:+.1f}% wall, {100 * cpu_overhead:+.1f}% CPU "
        f"(target at most +{100 * TARGET:.0f}%); median of the rounds' own ratios "
        f"{100 * paired:+.1f}% wall, fastest runs {100 * fastest:+.1f}% wall",
    ])
    print(table)
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / f"rb1xx-overhead-jobs-{jobs}"
    stem.with_suffix(".md").write_text(table + "\n", encoding="utf-8")
    stem.with_suffix(".json").write_text(json.dumps({
        "version": VERSION, "rounds": args.rounds, "jobs": jobs, "cores": os.cpu_count(),
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "samples": {s: [{"wall": w, "cpu": c} for w, c in v] for s, v in samples.items()},
        "median_wall": {s: m[0] for s, m in medians.items()},
        "median_cpu": {s: m[1] for s, m in medians.items()},
        "overhead_wall": wall_overhead, "overhead_cpu": cpu_overhead,
        "overhead_wall_paired_median": paired, "overhead_wall_fastest": fastest,
    }, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
