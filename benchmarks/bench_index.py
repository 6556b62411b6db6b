"""Speed and memory of the project-wide analysis, against a baseline reviewbot.

Runs, on the same machine in one invocation, each case with this checkout's reviewbot and
with a baseline installed in another environment (``--baseline-python``; for instance a
worktree of the commit before the project index, with ``pip install -e .``):

- cold: a whole-tree check of vLLM 0.33.0 with an empty cache folder;
- nothing changed: the same again with the cache the cold run filled;
- one changed file, warm: a comment appended to a leaf module and to a hub module (one
  that many modules import), then the check again; and the same with a new function
  appended instead (`leaf_def`, `hub_def`: the file's summary changes, so the project is
  linked again);
- peak memory of the largest process (and of all together) with ``--jobs 2`` on vLLM
  0.33.0 and SGLang 0.5.23 checked together (copies of both trees under one root).

Medians over ``--repeat`` runs. Wall time includes interpreter start-up; bytecode is written
and reused, as for an installed package, whatever PYTHONDONTWRITEBYTECODE says.

    python benchmarks/bench_index.py --baseline-python ../base/.venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trees import DATA, BenchError, tree_for  # noqa: E402

LEAF = "vllm/v1/sample/ops/penalties.py"
# The edits: a comment (what the link reads of the file stays the same, so the linked facts
# recorded by the last run are reused), and a new function that calls another (the file's
# summary changes, so the project is linked again).
COMMENT = b"\n# edited by a benchmark\n"
FUNCTION = b"\n\ndef _added_by_a_benchmark(x):\n    return len(list(x))\n"
HUB = "vllm/logger.py"


def reviewbot_of(python: str) -> str:
    script = Path(python).with_name("reviewbot")
    if not script.exists():
        raise BenchError(f"no reviewbot next to {python}")
    return str(script)


def config() -> Path:
    target = DATA / "bench-index-config.yml"
    target.write_text("respect-gitignore: false\n", encoding="utf-8")
    return target


def mark(tree: Path) -> None:
    marker = tree / "pyproject.toml"
    if not marker.exists():
        marker.write_text("# the root of this project (written by a benchmark)\n")


def sample_memory(pid: int, stop: threading.Event, out: dict) -> None:
    """Largest RSS of one process and of the whole tree, sampled every 20 ms."""
    page = os.sysconf("SC_PAGE_SIZE")
    while not stop.is_set():
        total = largest = 0
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                parent = _parent(proc / "stat")
                rss = int((proc / "statm").read_text().split()[1]) * page
            except (OSError, IndexError, ValueError):
                continue
            if int(proc.name) == pid or _descends(parent, pid):
                total += rss
                largest = max(largest, rss)
        out["total"] = max(out.get("total", 0), total)
        out["largest"] = max(out.get("largest", 0), largest)
        stop.wait(0.02)


def _parent(stat: Path) -> int:
    """The parent pid in a /proc stat file (read after the command name, which may hold
    spaces and parentheses)."""
    return int(stat.read_text().rpartition(")")[2].split()[1])


def _descends(ppid: int, root: int) -> bool:
    seen = 0
    while ppid > 1 and seen < 8:
        if ppid == root:
            return True
        try:
            ppid = _parent(Path(f"/proc/{ppid}/stat"))
        except (OSError, IndexError, ValueError):
            return False
        seen += 1
    return False


# As installed by pip, with its modules compiled: an environment that forbids writing
# bytecode would have each run compile reviewbot's sources again.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(cmd: list[str], cwd: Path, memory: bool = False) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=ENV)
    peak: dict = {}
    stop = threading.Event()
    sampler = None
    if memory:
        sampler = threading.Thread(target=sample_memory, args=(proc.pid, stop, peak))
        sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    stop.set()
    if sampler:
        sampler.join()
    if proc.returncode not in (0, 1):
        raise BenchError(f"{' '.join(cmd[:3])} exited {proc.returncode}: "
                         f"{err.decode(errors='replace').strip().splitlines()[-1:]}")
    peak["findings"] = len(json.loads(out or b"[]"))
    return wall, peak


def check_cmd(tool: str, cache: Path, jobs: int | None, *paths: str) -> list[str]:
    cmd = [tool, "check", *paths, "--output-format", "json", "--exit-zero",
           "--config", str(config()), "--cache-dir", str(cache)]
    return cmd + (["--jobs", str(jobs)] if jobs else [])


def bench(label: str, tool: str, tree: Path, repeat: int) -> dict:
    results: dict = {"cold": [], "unchanged": [], "leaf": [], "hub": [],
                     "leaf_def": [], "hub_def": []}
    findings = None
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as folder:
            cache = Path(folder) / "cache"
            wall, info = run(check_cmd(tool, cache, None, "."), tree)
            results["cold"].append(wall)
            findings = info["findings"]
            results["unchanged"].append(run(check_cmd(tool, cache, None, "."), tree)[0])
            for case, rel, edit in (("leaf", LEAF, COMMENT), ("hub", HUB, COMMENT),
                                    ("leaf_def", LEAF, FUNCTION), ("hub_def", HUB, FUNCTION)):
                path = tree / rel
                original = path.read_bytes()
                try:
                    path.write_bytes(original + edit)
                    results[case].append(run(check_cmd(tool, cache, None, "."), tree)[0])
                finally:
                    path.write_bytes(original)
                run(check_cmd(tool, cache, None, "."), tree)  # back to the cached state
    summary = {case: statistics.median(times) for case, times in results.items()}
    summary["findings"] = findings
    print(f"{label}: " + ", ".join(f"{k} {v:.2f} s" if isinstance(v, float) else f"{k} {v}"
                                   for k, v in summary.items()), flush=True)
    return summary


def pair_tree() -> Path:
    pair = DATA / "pair-vllm-0.33.0-sglang-0.5.23"
    if not pair.is_dir():
        staging = pair.with_name(pair.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        for version, package in (("0.33.0", "vllm"), ("0.5.23", "sglang")):
            source = tree_for(version, package)
            shutil.copytree(source / package, staging / package)
        staging.rename(pair)
    mark(pair)
    return pair


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-python", required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    try:
        tree = tree_for("0.33.0")
        mark(tree)
        tools = {"this checkout": reviewbot_of(sys.executable),
                 # absolute (not resolved: a venv's python is a link out of the venv), as
                 # the checks run in the trees' folders
                 "baseline": reviewbot_of(os.path.abspath(args.baseline_python))}
        report: dict = {"tree": tree.name, "cpus": os.cpu_count(), "cases": {}}
        for label, tool in tools.items():
            report["cases"][label] = bench(label, tool, tree, args.repeat)
        pair = pair_tree()
        for label, tool in tools.items():
            with tempfile.TemporaryDirectory() as folder:
                wall, peak = run(check_cmd(tool, Path(folder) / "c", 2, "."), pair, memory=True)
            report["cases"][label]["pair"] = {"wall": wall, "largest_mib": peak["largest"] / 2**20,
                                             "total_mib": peak["total"] / 2**20,
                                             "findings": peak["findings"]}
            print(f"{label}: vLLM + SGLang, --jobs 2: {wall:.1f} s, largest process "
                  f"{peak['largest'] / 2**20:.0f} MiB, all {peak['total'] / 2**20:.0f} MiB",
                  flush=True)
        mine, base = report["cases"]["this checkout"], report["cases"]["baseline"]
        print(f"cold: {mine['cold'] / base['cold']:.2f}x the baseline")
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(report, indent=2) + "\n")
    except BenchError as exc:
        print(f"bench_index: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
