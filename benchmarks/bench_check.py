#!/usr/bin/env python3
"""Benchmark ``reviewbot check`` on a real tree (vLLM 0.11.0) against comparable tools.

Run from anywhere with the interpreter that has reviewbot installed::

    python benchmarks/bench_check.py [--repeat N] [--skip-slow]

It downloads the tree once (into the git-ignored ``benchmarks/data/``), makes a separate
virtual environment for the comparison tools (interrogate, fixit), then times each tool
as a subprocess: wall seconds, files per second and the peak resident memory of the
whole process tree (the tool and every worker it starts, sampled every ~20 ms). The
table is printed and written to ``benchmarks/results/check-vllm-0.11.0.{json,md}``.
See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trees import BenchError, tree_for  # noqa: E402

VLLM_VERSION = "0.11.0"
BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
DATA_DIR = BENCH_DIR / "data"
TREE_DIR = DATA_DIR / f"vllm-{VLLM_VERSION}"
TOOLS_VENV = DATA_DIR / "tools-venv"
RESULTS_DIR = BENCH_DIR / "results"
RESULTS_STEM = f"check-vllm-{VLLM_VERSION}"
SINGLE_FILE = Path("vllm/v1/worker/gpu_model_runner.py")
TOOLS = ("fixit==2.2.1", "interrogate")
# An empty configuration: reviewbot's defaults. Without it reviewbot would pick up this
# repository's own pyproject.toml (which excludes benchmarks/ and raises RB301's bar).
DEFAULTS_CONFIG = DATA_DIR / "reviewbot-defaults.yml"
SAMPLE_INTERVAL_S = 0.02
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

# A bare parse loop over a list of files, one core; {module} and {call} fill it in.
PARSE_LOOP = """\
import json, sys, {module}
paths = open(sys.argv[1], encoding="utf-8").read().splitlines()
errors = 0
for path in paths:
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        {call}
    except Exception:
        errors += 1
print(json.dumps({{"files": len(paths), "errors": errors}}))
"""
LIBCST_LOOP = PARSE_LOOP.format(module="libcst", call="libcst.parse_module(data)")
AST_LOOP = PARSE_LOOP.format(module="ast", call="ast.parse(data, filename=path)")


class SetupError(Exception):
    """A preparation step failed; the message is printed as one line, without a traceback."""


# Preparation -------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeStats:
    """The benchmark tree: its ``.py`` files and their total line count."""

    files: tuple[Path, ...]
    lines: int


def tree_stats(tree: Path) -> TreeStats:
    """Every ``.py`` file under ``tree`` (sorted) and how many lines they hold."""
    files = tuple(sorted(tree.rglob("*.py")))
    lines = 0
    for path in files:
        with open(path, "rb") as handle:
            lines += sum(1 for _ in handle)
    return TreeStats(files, lines)


def ensure_tree() -> TreeStats:
    """Download and unpack the vLLM sources if missing; print and return their size."""
    try:
        tree_for(VLLM_VERSION)
    except BenchError as exc:
        raise SetupError(str(exc)) from None
    ensure_root_marker()
    stats = tree_stats(TREE_DIR)
    if not stats.files:
        raise SetupError(f"{TREE_DIR} holds no .py files; delete it and run again")
    if not (TREE_DIR / SINGLE_FILE).is_file():
        raise SetupError(f"{TREE_DIR / SINGLE_FILE} is missing; delete {TREE_DIR} and run again")
    print(f"tree: {rel(TREE_DIR)}: {len(stats.files)} files, {stats.lines} lines", flush=True)
    return stats


def ensure_root_marker() -> None:
    """Mark the tree as a project root, so that fixit does not skip it as git-ignored.

    fixit walks paths with trailrunner, which applies the ``.gitignore`` of the nearest
    folder holding ``pyproject.toml``, ``.git`` or ``.hg``, even to paths named on its
    command line; without a marker that is this repository, whose ``.gitignore`` ignores
    ``benchmarks/data/``, and fixit reports "0 files clean". The marker also makes fixit
    use its default rules rather than look further up for a configuration.
    """
    marker = TREE_DIR / "pyproject.toml"
    if not marker.exists():
        marker.write_text("# Written by benchmarks/bench_check.py: the project root for "
                          "fixit (trailrunner).\n[tool.fixit]\nroot = true\n")


def tool_path(name: str) -> Path:
    """A console script of the comparison tools' virtual environment."""
    return TOOLS_VENV / "bin" / name


def ensure_tools_venv() -> None:
    """Create the comparison tools' virtual environment (interrogate, fixit) if missing."""
    if all(tool_path(name).exists() for name in ("fixit", "interrogate")):
        return
    print(f"creating {rel(TOOLS_VENV)} with {', '.join(TOOLS)} ...", flush=True)
    steps = [[sys.executable, "-m", "venv", "--clear", str(TOOLS_VENV)],
             [str(tool_path("python")), "-m", "pip", "install", "--quiet", *TOOLS]]
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SetupError(f"could not create {rel(TOOLS_VENV)} "
                             f"({Path(cmd[0]).name} exited {proc.returncode}: "
                             f"{last_line(proc.stderr)})")


def ensure_defaults_config() -> Path:
    """An empty reviewbot configuration (all defaults) beside the data."""
    if not DEFAULTS_CONFIG.exists():
        DEFAULTS_CONFIG.write_text("# reviewbot's defaults, for the benchmark; see bench_check.py\n")
    return DEFAULTS_CONFIG


def reviewbot_command() -> list[str]:
    """How to start reviewbot from the current interpreter's environment."""
    script = Path(sys.executable).with_name("reviewbot")
    return [str(script)] if script.exists() else [sys.executable, "-m", "reviewbot"]


# Measuring a process tree --------------------------------------------------------------


class TreeSampler:
    """Samples the summed RSS of a process and all its descendants, keeping the maximum.

    ``/proc/PID/task/*/children`` is not available on every kernel, so the parent of each
    process is read once from ``/proc/PID/stat`` and remembered; a sample lists ``/proc``,
    looks up only processes it has not seen, and reads ``statm`` of the tree's members.
    """

    def __init__(self, root_pid: int, interval: float = SAMPLE_INTERVAL_S) -> None:
        """Prepare to sample ``root_pid``'s tree every ``interval`` seconds."""
        self.root_pid = root_pid
        self.interval = interval
        self.peak_bytes = 0
        self.samples = 0
        self._parents: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        """Start sampling in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        """Sample until stopped."""
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def _parent_of(self, pid: int) -> int | None:
        """The parent pid of ``pid`` (cached), or None if it is gone."""
        if pid not in self._parents:
            try:
                with open(f"/proc/{pid}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                return None
            self._parents[pid] = int(stat.rsplit(b")", 1)[1].split()[1])
        return self._parents[pid]

    def tree_pids(self) -> list[int]:
        """The root process and its living descendants."""
        children: dict[int, list[int]] = {}
        alive = [int(name) for name in os.listdir("/proc") if name.isdigit()]
        self._parents = {pid: self._parents[pid] for pid in alive if pid in self._parents}
        for pid in alive:
            parent = self._parent_of(pid)
            if parent is not None:
                children.setdefault(parent, []).append(pid)
        tree, stack = [], [self.root_pid]
        while stack:
            pid = stack.pop()
            tree.append(pid)
            stack.extend(children.get(pid, ()))
        return tree

    def sample(self) -> None:
        """Add up the RSS of the tree once and keep the maximum."""
        total = 0
        for pid in self.tree_pids():
            try:
                with open(f"/proc/{pid}/statm", "rb") as handle:
                    total += int(handle.read().split()[1]) * PAGE_SIZE
            except (OSError, IndexError, ValueError):
                continue  # it exited between the listing and the read
        self.samples += 1
        self.peak_bytes = max(self.peak_bytes, total)


@dataclass
class RunOutcome:
    """One subprocess run: wall time, peak tree memory, exit status and output."""

    wall_s: float
    peak_bytes: int
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False


def measure(cmd: Sequence[str], timeout: float, cwd: Path = REPO_ROOT) -> RunOutcome:
    """Run ``cmd`` with its output on pipes; time it and sample its tree's memory."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(cmd), cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", start_new_session=True)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc)
        out, err = proc.communicate()
    wall = time.perf_counter() - start
    sampler.stop()
    return RunOutcome(wall, sampler.peak_bytes, proc.returncode, out, err, timed_out)


def kill_group(proc: subprocess.Popen) -> None:
    """End a timed-out run and the workers it started (its own process group only)."""
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass


# Cases ---------------------------------------------------------------------------------


@dataclass
class Case:
    """One row of the table: a command, how many files it checks, how to read its output."""

    name: str
    cmd: list[str]
    files: int
    summarize: Callable[[RunOutcome], tuple[int | None, str]]
    timeout: float
    prepare: Callable[[], list[str]] | None = None  # extra args for each run, e.g. a cache dir
    warm_up: bool = False  # run once untimed first (the cached case)


@dataclass
class CaseResult:
    """The median of a case's runs, with every run's numbers kept for the JSON."""

    name: str
    files: int
    wall_s: float | None
    peak_mib: float | None
    findings: int | None
    notes: str
    walls: list[float] = field(default_factory=list)
    peaks_mib: list[float] = field(default_factory=list)
    exit_codes: list[int | None] = field(default_factory=list)

    @property
    def files_per_s(self) -> float | None:
        """Throughput of the median run."""
        return self.files / self.wall_s if self.wall_s else None


def last_line(text: str) -> str:
    """The last non-empty line of ``text`` (for one-line error messages)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def summarize_reviewbot(run: RunOutcome) -> tuple[int | None, str]:
    """Findings in reviewbot's JSON report, and the most frequent codes."""
    try:
        findings = json.loads(run.stdout)
    except json.JSONDecodeError:
        return None, f"no JSON report: {last_line(run.stderr)}"
    codes = Counter(f.get("code", "?") for f in findings)
    return len(findings), ", ".join(f"{code} {n}" for code, n in sorted(codes.items()))


def summarize_interrogate(run: RunOutcome) -> tuple[int | None, str]:
    """interrogate's coverage figures: missing docstrings as findings, coverage as a note."""
    totals = re.search(r"\|\s*TOTAL\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*([\d.]+)%",
                       run.stdout)
    result = re.search(r"actual:\s*([\d.]+)%", run.stdout)
    if totals:
        total, miss, covered, cover = totals.groups()
        return int(miss), f"missing docstrings; {covered}/{total} covered ({cover}%)"
    if result:
        return None, f"coverage {result.group(1)}%"
    return None, f"unrecognised output: {last_line(run.stdout + run.stderr)}"


FIXIT_FINDING = re.compile(r"^\S+@\d+:\d+ \S+: ", re.MULTILINE)


def summarize_fixit(run: RunOutcome) -> tuple[int | None, str]:
    """Violations that ``fixit lint`` printed (one ``path@line:col Rule: message`` each)."""
    lines = FIXIT_FINDING.findall(run.stdout)
    rules = Counter(line.split()[1].rstrip(":") for line in lines)
    top = ", ".join(f"{name} {n}" for name, n in rules.most_common(3))
    errors = len(re.findall(r"^Error: ", run.stdout + run.stderr, re.MULTILINE))
    notes = f"top: {top}" if top else "no violations printed"
    if errors:
        notes += f"; {errors} files failed"
    return len(lines), notes


def summarize_loop(run: RunOutcome) -> tuple[int | None, str]:
    """The parse loop's own count of files it could not parse."""
    try:
        report = json.loads(last_line(run.stdout))
    except json.JSONDecodeError:
        return None, f"no report: {last_line(run.stderr)}"
    return None, f"parse errors: {report['errors']}"


def fresh_cache_dir(scratch: Path) -> Callable[[], list[str]]:
    """A ``prepare`` hook giving each run an empty cache folder (a cold run)."""
    counter = iter(range(1_000_000))

    def prepare() -> list[str]:
        """Arguments naming a new, empty cache folder."""
        return ["--cache-dir", str(scratch / f"cold-{next(counter)}")]
    return prepare


def build_cases(args: argparse.Namespace, stats: TreeStats, scratch: Path) -> list[Case]:
    """Every measurement of the run, in table order."""
    tree, single = rel(TREE_DIR), rel(TREE_DIR / SINGLE_FILE)
    config = ["--config", rel(ensure_defaults_config())]
    check = [*reviewbot_command(), "check", "--output-format", "json", "--exit-zero", *config]
    n, t = len(stats.files), args.timeout
    cold = fresh_cache_dir(scratch)
    file_list = scratch / "files.txt"
    file_list.write_text("\n".join(str(p) for p in stats.files) + "\n", encoding="utf-8")
    cases = [
        Case("reviewbot cold, --jobs 1", [*check, "--jobs", "1", tree], n,
             summarize_reviewbot, t, cold),
        Case("reviewbot cold, --jobs 2", [*check, "--jobs", "2", tree], n,
             summarize_reviewbot, t, cold),
        Case("reviewbot cached, --jobs 2",
             [*check, "--jobs", "2", "--cache-dir", str(scratch / "warm"), tree], n,
             summarize_reviewbot, t, warm_up=True),
        Case(f"reviewbot cold, 1 file ({SINGLE_FILE.name})", [*check, single], 1,
             summarize_reviewbot, t, cold),
        Case("interrogate", [str(tool_path("interrogate")), "--fail-under", "0", "-v", tree],
             n, summarize_interrogate, t),
    ]
    fixit = [str(tool_path("fixit")), "lint"]
    if not args.skip_slow:
        # fixit starts one worker process per core (os.cpu_count(): 2 on the reference
        # machine); it has no flag for that.
        cases.append(Case(f"fixit lint, {os.cpu_count()} processes", [*fixit, tree], n,
                          summarize_fixit, args.fixit_timeout))
    cases += [
        Case(f"fixit lint, 1 file ({SINGLE_FILE.name})", [*fixit, single], 1,
             summarize_fixit, t),
        Case("bare libcst.parse_module loop (1 core)",
             [sys.executable, "-c", LIBCST_LOOP, str(file_list)], n, summarize_loop, t),
        Case("bare ast.parse loop (1 core)",
             [sys.executable, "-c", AST_LOOP, str(file_list)], n, summarize_loop, t),
    ]
    return cases


def run_case(case: Case, repeat: int) -> CaseResult:
    """Run a case ``repeat`` times (after an untimed warm-up if it asks) and take medians."""
    if case.warm_up:
        measure(case.cmd, case.timeout)
    runs: list[RunOutcome] = []
    for _ in range(repeat):
        extra = case.prepare() if case.prepare else []
        runs.append(measure([*case.cmd[:-1], *extra, case.cmd[-1]] if extra else case.cmd,
                            case.timeout))
    findings, notes = case.summarize(runs[-1])
    done = [r for r in runs if not r.timed_out]
    if len(done) < len(runs):
        timeout_note = (f"{len(runs) - len(done)} of {len(runs)} runs timed out "
                        f"after {case.timeout:.0f} s")
        if done and runs[-1].timed_out:  # report the output of a run that finished
            findings, notes = case.summarize(done[-1])
        notes = f"{notes}; {timeout_note}" if done else timeout_note
        findings = findings if done else None
    failed = [r for r in done if r.returncode not in (0, 1)]
    if failed and case.summarize is not summarize_fixit:
        notes += f"; exit {failed[-1].returncode}: {last_line(failed[-1].stderr)}"
    walls = [r.wall_s for r in done]
    peaks = [r.peak_bytes / 2**20 for r in runs]
    return CaseResult(case.name, case.files,
                      statistics.median(walls) if walls else None,
                      statistics.median(peaks) if peaks else None,
                      findings, notes, walls, peaks, [r.returncode for r in runs])


# Reporting -----------------------------------------------------------------------------


def rel(path: Path) -> str:
    """``path`` relative to the repository root, as commands are run from there."""
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def version_of(package: str, python: str | None = None) -> str:
    """An installed package's version, here or in another interpreter's environment."""
    if python is None:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "not installed"
    proc = subprocess.run([python, "-c", "import sys, importlib.metadata as m; "
                                         "print(m.version(sys.argv[1]))", package],
                          capture_output=True, text=True)
    return proc.stdout.strip() or "not installed"


def git_revision() -> str:
    """The checkout's commit, with ``-dirty`` when the code under test has uncommitted changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                "reviewbot", "rules", "pyproject.toml"],
                               cwd=REPO_ROOT, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def cpu_model() -> str:
    """The processor's model name from /proc/cpuinfo."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info(stats: TreeStats) -> dict[str, object]:
    """What the numbers depend on: machine, versions, tree size and load."""
    tools_python = str(tool_path("python"))
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "memory_gib": round(os.sysconf("SC_PHYS_PAGES") * PAGE_SIZE / 2**30, 1),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "libcst": version_of("libcst"),
        "reviewbot": version_of("reviewbot"),
        "reviewbot_revision": git_revision(),
        "interrogate": version_of("interrogate", tools_python),
        "fixit": version_of("fixit", tools_python),
        "tree": f"vllm {VLLM_VERSION} wheel, *.py only",
        "tree_files": len(stats.files),
        "tree_lines": stats.lines,
    }


def fmt(value: float | None, digits: int) -> str:
    """A number for the table, or a dash when there is none."""
    return "–" if value is None else f"{value:,.{digits}f}"


def markdown_table(results: Sequence[CaseResult]) -> str:
    """The results as a Markdown table."""
    rows = ["| tool / config | wall s | files/s | peak MiB | findings / notes |",
            "| --- | ---: | ---: | ---: | --- |"]
    for r in results:
        found = "" if r.findings is None else f"{r.findings:,}"
        notes = "; ".join(x for x in (found, r.notes) if x).replace("|", "\\|")
        rows.append(f"| {r.name} | {fmt(r.wall_s, 2)} | {fmt(r.files_per_s, 1)} | "
                    f"{fmt(r.peak_mib, 0)} | {notes} |")
    return "\n".join(rows) + "\n"


def write_results(results: Sequence[CaseResult], info: dict[str, object],
                  command: str, repeat: int) -> tuple[Path, Path]:
    """Write the JSON and Markdown result files; return their paths."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    json_path = RESULTS_DIR / f"{RESULTS_STEM}.json"
    md_path = RESULTS_DIR / f"{RESULTS_STEM}.md"
    rows = [{"name": r.name, "files": r.files, "wall_s": r.wall_s,
             "files_per_s": r.files_per_s, "peak_mib": r.peak_mib, "findings": r.findings,
             "notes": r.notes, "wall_s_runs": r.walls, "peak_mib_runs": r.peaks_mib,
             "exit_codes": r.exit_codes} for r in results]
    payload = {"machine": info, "command": command, "repeat": repeat, "results": rows}
    json_path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    lines = [f"# reviewbot check on vLLM {VLLM_VERSION}", "",
             f"`{command}` (median of {repeat} run{'s' if repeat > 1 else ''}; peak MiB is "
             "the summed RSS of the whole process tree, sampled every 20 ms)", ""]
    lines += [f"- {key}: {value}" for key, value in info.items()]
    md_path.write_text("\n".join(lines) + "\n\n" + markdown_table(results), encoding="utf-8")
    return json_path, md_path


# Command line --------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="runs per measurement; the median is reported (default: 1)")
    parser.add_argument("--skip-slow", action="store_true",
                        help="leave out fixit on the whole tree (about 8 minutes on 2 cores)")
    parser.add_argument("--timeout", type=float, default=600, metavar="S",
                        help="limit for each run (default: 600)")
    parser.add_argument("--fixit-timeout", type=float, default=900, metavar="S",
                        help="limit for fixit on the whole tree (default: 900; it took "
                             "460-490 s on 2 cores)")
    parser.add_argument("--only", metavar="TEXT",
                        help="run only the cases whose name contains TEXT")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Prepare, measure every case, print the table and write the result files."""
    args = parse_args(argv)
    command = " ".join(["python", rel(Path(__file__).resolve()), *(argv or sys.argv[1:])])
    try:
        stats = ensure_tree()
        ensure_tools_venv()
    except SetupError as exc:
        print(f"bench_check: error: {exc}", file=sys.stderr)
        return 2
    info = machine_info(stats)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-check-") as scratch:
        cases = build_cases(args, stats, Path(scratch))
        if args.only:
            cases = [c for c in cases if args.only.lower() in c.name.lower()]
        for case in cases:
            print(f"running: {case.name} ...", flush=True)
            results.append(run_case(case, args.repeat))
            print(f"  {fmt(results[-1].wall_s, 2)} s, {fmt(results[-1].peak_mib, 0)} MiB, "
                  f"{results[-1].findings}; {results[-1].notes}", flush=True)
    print()
    print(markdown_table(results))
    json_path, md_path = write_results(results, info, command, args.repeat)
    print(f"written: {rel(json_path)}, {rel(md_path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
