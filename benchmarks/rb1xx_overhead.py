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
own wall-time ratio (with a 90% bootstrap interval) and the ratio of the fastest runs.
The target is at most 30%. The table is printed and written to
benchmarks/results/rb1xx-overhead-<jobs>.{json,md}.

    python benchmarks/rb1xx_overhead.py --instructions

counts instead what each selection executes (one run each, `--jobs 1`, under valgrind's
cachegrind with a fixed hash seed, its cache and branch-predictor simulation on): the
instructions, the cache misses and mispredicted branches, and cycles estimated from them
(see COUNTS). The same on every run and every machine load. Written to
results/rb1xx-overhead-instructions.{json,md}.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import random
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


def bootstrap_interval(ratios: list[float], draws: int = 5000,
                       seed: int = 0) -> tuple[float, float]:
    """A 90% interval of the median of the rounds' own ratios: the 5th and 95th percentile
    of that median over ``draws`` resamplings of the rounds (with replacement)."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios)))
                     for _ in range(draws))
    return medians[int(0.05 * (draws - 1))], medians[int(0.95 * (draws - 1))]


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


# What cachegrind counts, as its summary names each count, and the cycles one event costs
# in the rough model its manual gives (an L1 miss about 10 cycles, a last-level miss up to
# 200, a mispredicted branch 10 to 30): an estimate that, unlike the instruction count,
# sees the cache misses and mispredictions that the extra work brings.
COUNTS = {"instructions": ("I refs", 1), "I1 misses": ("I1 misses", 10),
          "D1 misses": ("D1 misses", 10), "LL misses": ("LL misses", 200),
          "mispredicts": ("Mispredicts", 20)}


def instructions(tree: Path, config: Path, select: str) -> dict[str, int]:
    """What one `--jobs 1` check executes, counted by valgrind's cachegrind with its cache
    and branch-predictor simulation on."""
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes",
               "--cachegrind-out-file=/dev/null", sys.executable, "-P", "-m", "reviewbot",
               "check", "vllm", "--no-cache", "--config", str(config), "--select", select,
               "--exit-zero", "-o", os.devnull, "--jobs", "1"]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(command, cwd=tree, capture_output=True, text=True, env=env)
    counts = parse_counts(proc.stderr) if proc.returncode == 0 else None
    if counts is None:
        raise BenchError(f"valgrind on --select {select} exited {proc.returncode} "
                         "without a full summary")
    return counts


def parse_counts(summary: str) -> dict[str, int] | None:
    """The COUNTS in cachegrind's summary, and the estimated cycles (None if one is missing)."""
    counts = {}
    for name, (label, _) in COUNTS.items():
        pattern = r"\s+".join(map(re.escape, label.split())) + r":\s+([\d,]+)"
        found = re.search(pattern, summary)
        if found is None:
            return None
        counts[name] = int(found.group(1).replace(",", ""))
    counts["estimated cycles"] = sum(counts[name] * weight
                                     for name, (_, weight) in COUNTS.items())
    return counts


def count_instructions(tree: Path, config: Path) -> int:
    """Write the counts of both selections and the overhead of each."""
    counts = {select: instructions(tree, config, select) for select in SELECTIONS}
    base, full = counts[SELECTIONS[0]], counts[SELECTIONS[1]]
    overhead = {name: full[name] / base[name] - 1 for name in base}
    weights = ", ".join(f"{name} x{weight}" for name, (_, weight) in COUNTS.items()
                        if weight != 1)
    table = "\n".join([
        f"vLLM {VERSION}, --jobs 1, valgrind cachegrind (cache and branch simulation), "
        f"Python {platform.python_version()}",
        "",
        f"| count | `--select {SELECTIONS[0]}` | `--select {SELECTIONS[1]}` | RB1xx overhead |",
        "| --- | ---: | ---: | ---: |",
        *(f"| {name} | {base[name]:,} | {full[name]:,} | {100 * overhead[name]:+.1f}% |"
          for name in base),
        "",
        f"RB1xx overhead: {100 * overhead['instructions']:+.1f}% instructions, "
        f"{100 * overhead['estimated cycles']:+.1f}% estimated cycles (instructions + "
        f"{weights}; target at most +{100 * TARGET:.0f}% of time)",
    ])
    print(table)
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / "rb1xx-overhead-instructions"
    stem.with_suffix(".md").write_text(table + "\n", encoding="utf-8")
    stem.with_suffix(".json").write_text(json.dumps({
        "version": VERSION, "jobs": 1,
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "weights": {name: weight for name, (_, weight) in COUNTS.items()},
        "counts": counts, "overhead": overhead,
        "instructions": {s: c["instructions"] for s, c in counts.items()}},
        indent=2) + "\n", encoding="utf-8")
    return 0


def compile_reviewbot() -> None:
    """Write reviewbot's bytecode, as installing it does: else a run with
    PYTHONDONTWRITEBYTECODE set compiles every module it imports, every time."""
    command = [sys.executable, "-P", "-c", "import pathlib, reviewbot; "
               "print(pathlib.Path(reviewbot.__file__).parent)"]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0 or not compileall.compile_dir(proc.stdout.strip(), quiet=1):
        raise BenchError(f"cannot import and compile reviewbot with {sys.executable}")


def main() -> int:
    """Run the rounds, print and save the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="pairs of runs (default 7)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="worker processes (default: reviewbot's own, one per core)")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions, cache misses and mispredicted branches "
                        "under valgrind instead of timing")
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
    try:
        compile_reviewbot()
    except BenchError as exc:
        print(f"rb1xx_overhead.py: error: {exc}", file=sys.stderr)
        return 2
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
    ratios = [f[0] / b[0] - 1 for b, f in zip(samples[SELECTIONS[0]], samples[SELECTIONS[1]])]
    paired = statistics.median(ratios)
    low, high = bootstrap_interval(ratios)
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
        f"{100 * paired:+.1f}% wall (90% bootstrap interval {100 * low:+.1f}% to "
        f"{100 * high:+.1f}%), fastest runs {100 * fastest:+.1f}% wall",
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
        "overhead_wall_paired_median": paired,
        "overhead_wall_paired_interval_90": [low, high], "overhead_wall_fastest": fastest,
    }, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
