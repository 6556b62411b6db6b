"""Speed and memory of `reviewbot check` on a real tree, beside the tools it is compared with.

    python benchmarks/speed.py                 # vLLM 0.11.0's Python files, everything
    python benchmarks/speed.py --skip-slow     # without fixit (about three minutes)
    python benchmarks/speed.py --repeat 3      # medians of three runs

Downloads the vLLM wheel from PyPI once (`pip download --no-deps --only-binary :all:`),
unpacks its `*.py` files under benchmarks/data/, installs interrogate and fixit into a
venv of their own there, then times each command as a subprocess and samples the
resident memory of its whole process tree (reviewbot's workers included). Writes the
table to benchmarks/results/check-vllm-<version>.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import venv
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
RESULTS = HERE / "results"
SINGLE_FILE = "vllm/v1/worker/gpu_model_runner.py"
PARSE_LOOP = """
import sys, pathlib
{import_line}
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.py")):
    {parse_call}(path.read_text(encoding="utf-8", errors="replace"))
"""


class BenchError(Exception):
    """A step of the benchmark failed; the message says which and why."""


@dataclass
class Measurement:
    """One row of the table."""

    name: str
    wall_s: float
    files_per_s: float
    peak_mib: float
    note: str = ""


def tree_for(version: str) -> Path:
    """Download the wheel (once) and unpack its Python files; return the tree's folder."""
    tree = DATA / f"vllm-{version}"
    if tree.is_dir() and any(tree.rglob("*.py")):
        return tree
    wheels = DATA / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = list(wheels.glob(f"vllm-{version}-*.whl"))
    if not found:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                               "--only-binary", ":all:", f"vllm=={version}", "-d", str(wheels)],
                              capture_output=True, text=True)
        found = list(wheels.glob(f"vllm-{version}-*.whl"))
        if proc.returncode != 0 or not found:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise BenchError(f"could not download vllm=={version}: {last}")
    with zipfile.ZipFile(found[0]) as archive:
        for member in archive.namelist():
            if member.endswith(".py"):
                archive.extract(member, tree)
    return tree


def tools_python() -> Path:
    """A venv with interrogate and fixit, kept apart from reviewbot's environment."""
    env = DATA / "tools-venv"
    python = env / "bin" / "python"
    if not python.exists():
        venv.create(env, with_pip=True)
        proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "interrogate==1.7.0",
                               "fixit==2.2.1"], capture_output=True, text=True)
        if proc.returncode != 0:
            raise BenchError("could not install interrogate and fixit: "
                             + (proc.stderr.strip().splitlines() or ["?"])[-1])
    return python


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            with open(f"/proc/{current}/statm") as handle:
                total += int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    return total


def measure(command: list[str], cwd: Path, timeout: float) -> tuple[float, float, str]:
    """Run a command; return wall seconds, peak MiB of its process tree, and its stdout."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.DEVNULL)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, tree_rss(proc.pid))
            if time.perf_counter() - start > timeout:
                proc.kill()
                proc.wait()
                raise BenchError(f"{command[0]} ran past {timeout:.0f} s")
            time.sleep(0.02)
        wall = time.perf_counter() - start
        out.seek(0)
        return wall, peak / 2**20, out.read().decode("utf-8", errors="replace")


def run_case(name: str, command: list[str], cwd: Path, files: int, repeat: int,
             timeout: float, prepare=None, note_of=None) -> Measurement:
    """Median of ``repeat`` runs of one command."""
    walls, peaks, note = [], [], ""
    for _ in range(repeat):
        if prepare:
            prepare()
        wall, peak, stdout = measure(command, cwd, timeout)
        walls.append(wall)
        peaks.append(peak)
        note = note_of(stdout) if note_of else ""
    wall = statistics.median(walls)
    return Measurement(name, round(wall, 2), round(files / wall, 1), round(max(peaks), 1), note)


def findings_note(stdout: str) -> str:
    """How many findings, by code, a JSON report holds."""
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError:
        return "no JSON"
    counts: dict[str, int] = {}
    for finding in data:
        counts[finding["code"]] = counts.get(finding["code"], 0) + 1
    return ", ".join(f"{code} {count}" for code, count in sorted(counts.items()))


def main() -> int:
    """Run every case and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.11.0", help="vLLM version (default 0.11.0)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case; the median counts")
    parser.add_argument("--skip-slow", action="store_true", help="leave out fixit")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    args = parser.parse_args()
    try:
        tree = tree_for(args.version)
        tools = tools_python()
        rows = run_all(tree, tools, args)
    except BenchError as exc:
        print(f"speed.py: error: {exc}", file=sys.stderr)
        return 2
    write_results(rows, tree, args.version)
    return 0


def run_all(tree: Path, tools: Path, args: argparse.Namespace) -> list[Measurement]:
    """Every case of the table, in order."""
    py_files = sorted(tree.rglob("*.py"))
    files = len(py_files)
    lines = sum(p.read_bytes().count(b"\n") for p in py_files)
    print(f"{files} files, {lines} lines under {tree}", flush=True)
    reviewbot = [sys.executable, "-m", "reviewbot", "check"]
    common = ["--output-format", "json", "--exit-zero"]
    cache = Path(tempfile.mkdtemp(prefix="reviewbot-bench-"))
    rows: list[Measurement] = []

    def case(name, command, count=files, **kw):
        row = run_case(name, command, tree, count, args.repeat, args.timeout, **kw)
        print(f"{row.name}: {row.wall_s} s, {row.peak_mib} MiB {row.note}", flush=True)
        rows.append(row)

    for jobs in ("1", "2"):
        case(f"reviewbot, all default rules, cold, --jobs {jobs}",
             [*reviewbot, "vllm", "--no-cache", "--jobs", jobs, *common], note_of=findings_note)
    case("reviewbot, RB3xx only, cold, --jobs 2",
         [*reviewbot, "vllm", "--no-cache", "--jobs", "2", "--select", "RB3", *common],
         note_of=findings_note)
    warm = [*reviewbot, "vllm", "--cache-dir", str(cache), "--jobs", "2", *common]
    subprocess.run(warm, cwd=tree, capture_output=True)  # fill the cache
    case("reviewbot, all default rules, cached, --jobs 2", warm, note_of=findings_note)
    case("reviewbot, single file, cold",
         [*reviewbot, SINGLE_FILE, "--no-cache", "--jobs", "1", *common], count=1,
         note_of=findings_note)
    case("interrogate", [str(tools.parent / "interrogate"), "-q", "--fail-under", "0", "vllm"])
    case("bare ast.parse loop, 1 core", [sys.executable, "-c", PARSE_LOOP.format(
        import_line="import ast", parse_call="ast.parse"), "vllm"])
    case("bare libcst.parse_module loop, 1 core", [sys.executable, "-c", PARSE_LOOP.format(
        import_line="import libcst", parse_call="libcst.parse_module"), "vllm"])
    if not args.skip_slow:
        fixit = str(tools.parent / "fixit")
        case("fixit lint (2 processes)", [fixit, "lint", "vllm"])
        case("fixit lint, single file", [fixit, "lint", SINGLE_FILE], count=1)
    return rows


def write_results(rows: list[Measurement], tree: Path, version: str) -> None:
    """The Markdown table and the JSON, with the machine they were measured on."""
    import libcst

    from reviewbot import __version__

    RESULTS.mkdir(parents=True, exist_ok=True)
    machine = {
        "date": time.strftime("%Y-%m-%d"),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "libcst": getattr(libcst, "__version__", "?"),
        "reviewbot": __version__,
        "tree": f"vllm {version} wheel, {len(list(tree.rglob('*.py')))} .py files",
    }
    stem = RESULTS / f"check-vllm-{version}"
    stem.with_suffix(".json").write_text(json.dumps(
        {"machine": machine, "rows": [asdict(r) for r in rows]}, indent=2) + "\n")
    table = ["| run | wall s | files/s | peak MiB | findings / note |",
             "| --- | ---: | ---: | ---: | --- |"]
    table += [f"| {r.name} | {r.wall_s} | {r.files_per_s} | {r.peak_mib} | {r.note} |"
              for r in rows]
    header = ", ".join(f"{k}: {v}" for k, v in machine.items())
    stem.with_suffix(".md").write_text(f"{header}\n\n" + "\n".join(table) + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    sys.exit(main())
