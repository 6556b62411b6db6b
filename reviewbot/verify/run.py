"""``reviewbot verify``: prove the fixed readbacks return the same and stop the stall.

1. Helper level: each event-sync helper in the given files against ``.tolist()`` (and
   ``.item()`` for 0-d tensors) on the same tensors: every dtype, shape and edge case,
   seeded random values, exact comparison of values and types; on an idle GPU and with a
   second stream busy with compute and a device-to-host copy. Under
   ``torch.cuda.set_sync_debug_mode("error")`` the helper must not synchronise.
2. Program level (``--scenario``): the scenario runs on the code before the fix (a
   ``--before`` folder, or git ``HEAD``) and after it, each in its own process, and every
   returned value must be the same. Lines that still synchronise are listed.
3. The stall: a worker thread's 64 MiB copy enqueue while the main thread reads back
   after 20 ms and 3 ms of pending work, with ``.tolist()`` and with each helper.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reviewbot.verify.cases import cases, difference, same
from reviewbot.verify.helpers import Helper, VerifyError, build, find_helpers

PENDING_MS = (20.0, 3.0)
EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2


@dataclass
class Options:
    """What the command line asked for."""

    paths: list[str]
    scenario: str | None = None
    before: str | None = None
    require_gpu: bool = False
    min_stall_ratio: float | None = None
    seed: int = 0
    iterations: int = 30
    device: str | None = None  # force "cpu" (the tests) or "cuda"
    all_helpers: bool = False  # also the project's own helpers of the same shape


@dataclass
class HelperReport:
    """What was proved about one helper."""

    path: str
    helper: str
    line: int
    sites: list[dict[str, Any]]
    cases: int = 0
    differences: list[str] = field(default_factory=list)
    busy_cases: int = 0
    busy_differences: list[str] = field(default_factory=list)
    helper_syncs: str | None = None
    original_syncs: str | None = None
    stall: dict[str, Any] = field(default_factory=dict)
    verdict: str = ""


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise VerifyError("reviewbot verify needs PyTorch: pip install 'reviewbot[gpu]'") \
            from None
    return torch


def _python_files(paths: list[str]) -> tuple[list[Path], Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise VerifyError(f"{raw}: no such file or directory")
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.py") if p.is_file()))
        elif path.suffix == ".py":
            files.append(path)
    first = Path(paths[0])
    root = first if first.is_dir() else first.parent
    return files, root


def _environment(torch: Any, on_gpu: bool) -> dict[str, Any]:
    info = {"python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "gpu": None}
    if on_gpu:
        info["gpu"] = torch.cuda.get_device_name(0)
        info["compute_capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
    return info


# Helper level ---------------------------------------------------------------------------
def _compare(helper_fn: Any, torch: Any, device: str, seed: int) -> tuple[int, list[str]]:
    count, diffs = 0, []
    for case in cases(torch, device, seed):
        count += 1
        expected = case.tensor.tolist()
        try:
            got = helper_fn(case.tensor)
        except Exception as exc:
            diffs.append(f"{case.name}: raised {exc.__class__.__name__}: {exc}")
            continue
        found = difference(expected, got)
        if found:
            diffs.append(f"{case.name}: .tolist() vs helper: {found}")
        if case.tensor.dim() == 0:
            count += 1
            if not same(case.tensor.item(), got):
                diffs.append(f"{case.name}: .item() {case.tensor.item()!r} vs helper {got!r}")
    return count, diffs


def _busy_side_stream(torch: Any) -> Any:
    """Queue compute and a large device-to-host copy on a second stream."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        a = torch.randn(2048, 2048, device="cuda")
        for _ in range(20):
            a = a @ a
            a = a / a.norm()
        host = torch.empty(32 << 20, dtype=torch.uint8, pin_memory=True)
        host.copy_(torch.empty(32 << 20, dtype=torch.uint8, device="cuda"), non_blocking=True)
    return stream


def _sync_error(torch: Any, fn: Any, tensor: Any) -> str | None:
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn(tensor)
    except RuntimeError as exc:
        return str(exc).splitlines()[0]
    finally:
        torch.cuda.set_sync_debug_mode(0)
    return None


def check_helper(helper: Helper, torch: Any, device: str, options: Options,
                 bench: Any) -> HelperReport:
    """Equivalence, sync-debug mode and stall figures of one helper."""
    report = HelperReport(helper.path, helper.qualname, helper.line,
                          [{"line": s.line, "call": s.text} for s in helper.sites])
    try:
        fn = build(helper, torch)
    except VerifyError as exc:
        report.differences.append(str(exc))
        report.verdict = "SKIPPED" if device == "cpu" else "FAIL"
        return report
    report.cases, report.differences = _compare(fn, torch, device, options.seed)
    if device == "cuda":
        stream = _busy_side_stream(torch)
        report.busy_cases, report.busy_differences = _compare(fn, torch, device,
                                                              options.seed + 1)
        stream.synchronize()
        probe = torch.arange(256, device="cuda").reshape(256, 1)
        report.helper_syncs = _sync_error(torch, fn, probe)
        report.original_syncs = _sync_error(torch, lambda t: t.tolist(), probe)
        for pending in PENDING_MS:
            before, before_results = bench.measure(lambda t: t.tolist(), pending,
                                                   options.iterations)
            after, after_results = bench.measure(fn, pending, options.iterations)
            if not same(before_results, after_results):
                report.differences.append(f"stall run with {pending:g} ms pending: the "
                                          "helper's readbacks differ from .tolist()'s")
            ratio = before.median_us / after.median_us if after.median_us else float("inf")
            report.stall[f"{pending:g}"] = {"pending_ms": pending, "before": asdict(before),
                                            "after": asdict(after), "ratio": round(ratio, 1)}
    failed = report.differences or report.busy_differences or report.helper_syncs
    if failed:
        report.verdict = "FAIL"
    elif options.min_stall_ratio is not None and report.stall and any(
            s["ratio"] < options.min_stall_ratio for s in report.stall.values()
            if s["pending_ms"] == PENDING_MS[0]):
        report.verdict = "FAIL"
    else:
        report.verdict = "PASS"
    return report


# Program level --------------------------------------------------------------------------
def _before_from_git(root: Path, temp: Path) -> Path:
    """The code at git HEAD, unpacked into ``temp``; the folder matching ``root``."""
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
        archive = temp / "head.tar"
        subprocess.run(["git", "-C", top, "archive", "--format=tar", "-o", str(archive),
                        "HEAD"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        raise VerifyError(f"{root}: not in a git repository with a HEAD commit; give the code "
                          "before the fix with --before DIR") from None
    with tarfile.open(archive) as tar:
        try:
            tar.extractall(temp / "head", filter="data")
        except TypeError:  # Python without extraction filters; git's own archive
            tar.extractall(temp / "head")
    return temp / "head" / root.resolve().relative_to(Path(top).resolve())


def _run_side(root: Path, scenario: Path, device: str | None, sync_debug: bool) -> dict:
    with tempfile.TemporaryDirectory() as temp:
        out = Path(temp) / "result.json"
        command = [sys.executable, "-m", "reviewbot.verify.worker", str(root.resolve()),
                   str(scenario.resolve()),
                   str(out)] + (["--device", device] if device else []) + \
            (["--sync-debug"] if sync_debug else [])
        # Run from the empty temporary folder: modules in the caller's folder (a types.py)
        # must not shadow the standard library's.
        proc = subprocess.run(command, capture_output=True, text=True, cwd=temp,
                              env={**os.environ, "PYTHONHASHSEED": "0"})
        if not out.exists():
            return {"ok": False, "stage": "process",
                    "error": f"the scenario's process exited {proc.returncode}: "
                             f"{proc.stderr.strip()[-2000:]}"}
        return json.loads(out.read_text(encoding="utf-8"))


def check_scenario(options: Options, root: Path, device: str | None) -> dict[str, Any]:
    """Run the scenario on the code before and after; compare every returned value."""
    scenario = Path(options.scenario or "")
    if not scenario.is_file():
        raise VerifyError(f"{options.scenario}: scenario file not found")
    with tempfile.TemporaryDirectory() as temp:
        if options.before:
            before_root = Path(options.before)
            if not before_root.is_dir():
                raise VerifyError(f"{options.before}: --before must be a folder")
            origin = str(before_root)
        else:
            before_root = _before_from_git(root, Path(temp))
            origin = "git HEAD"
        before = _run_side(before_root, scenario.resolve(), device, True)
        after = _run_side(root, scenario.resolve(), device, True)
    report: dict[str, Any] = {"scenario": str(scenario), "before": origin, "after": str(root)}
    for side, data in (("before", before), ("after", after)):
        if not data.get("ok"):
            report["verdict"] = "FAIL"
            report["error"] = f"{side}: {data.get('stage')}: {data.get('error')}"
            return report
    from reviewbot.verify.worker import unplain

    before_values, after_values = unplain(before["result"]), unplain(after["result"])
    diff = difference(before_values, after_values)
    report.update(device=after["device"], values=_count(after["result"]),
                  same=diff is None, first_difference=diff,
                  sync_lines=after.get("sync_lines", []),
                  sync_lines_before=before.get("sync_lines", []),
                  verdict="PASS" if diff is None else "FAIL")
    return report


def _count(value: Any) -> int:
    if isinstance(value, list):
        return sum(_count(v) for v in value) or 1
    if isinstance(value, dict):
        return sum(_count(v) for v in value.values()) or 1
    return 1


# The command ----------------------------------------------------------------------------
def verify(options: Options) -> tuple[dict[str, Any], int]:
    """Run every check; the report and the exit status."""
    torch = _torch()
    files, root = _python_files(options.paths)
    on_gpu = torch.cuda.is_available() and options.device != "cpu"
    if options.require_gpu and not on_gpu:
        raise VerifyError("no CUDA device, and --require-gpu was given")
    device = "cuda" if on_gpu else "cpu"
    helpers = [h for h in find_helpers(files, lambda p: os.path.relpath(p))
               if h.inserted or options.all_helpers]
    if not helpers and not options.scenario:
        raise VerifyError(f"no event-sync helper in {', '.join(options.paths)}; run "
                          "`reviewbot fix --apply` first, or give --scenario")
    torch.manual_seed(options.seed)
    bench = None
    if on_gpu and helpers:
        from reviewbot.verify.stall import StallBench

        bench = StallBench(torch)
    reports = [check_helper(h, torch, device, options, bench) for h in helpers]
    scenario = check_scenario(options, root, None if on_gpu else "cpu") \
        if options.scenario else None
    report = {
        "environment": _environment(torch, on_gpu),
        "gpu_checks": "ran" if on_gpu else "GPU checks skipped: no CUDA device (equivalence "
                      "and the scenario ran on CPU tensors; the stall needs a GPU)",
        "seed": options.seed,
        "helpers": [asdict(r) for r in reports],
        "scenario": scenario,
    }
    failed = any(r.verdict == "FAIL" for r in reports) or (
        scenario is not None and scenario["verdict"] == "FAIL")
    report["verdict"] = "FAIL" if failed else "PASS"
    return report, EXIT_FAIL if failed else EXIT_PASS


def write_text(report: dict[str, Any], out: Any) -> None:
    """The report as a table for people."""
    env = report["environment"]
    out.write(f"reviewbot verify: {env['gpu'] or 'no GPU'}, torch {env['torch']}, "
              f"CUDA {env['cuda'] or '-'}, seed {report['seed']}\n")
    if report["gpu_checks"] != "ran":
        out.write(f"{report['gpu_checks']}\n")
    for h in report["helpers"]:
        out.write(f"\n{h['path']}:{h['line']} {h['helper']}: {h['verdict']}\n")
        out.write(f"  equivalence: {h['cases']} cases, {len(h['differences'])} differ")
        if h["busy_cases"]:
            out.write(f"; second stream busy: {h['busy_cases']} cases, "
                      f"{len(h['busy_differences'])} differ")
        out.write("\n")
        for diff in (h["differences"] + h["busy_differences"])[:10]:
            out.write(f"    {diff}\n")
        if h["original_syncs"] is not None or h["helper_syncs"] is not None:
            out.write(f"  sync debug mode 'error': .tolist() "
                      f"{'synchronises' if h['original_syncs'] else 'silent'}; helper "
                      f"{'SYNCHRONISES: ' + h['helper_syncs'] if h['helper_syncs'] else 'silent'}\n")
        if h["stall"]:
            out.write("  worker's 64 MiB copy enqueue, median / p90 (us):\n")
            for s in h["stall"].values():
                b, a = s["before"], s["after"]
                out.write(f"    {s['pending_ms']:>4g} ms pending: .tolist() {b['median_us']:>9,.1f}"
                          f" / {b['p90_us']:>9,.1f}   helper {a['median_us']:>7,.1f} / "
                          f"{a['p90_us']:>7,.1f}   {s['ratio']:g}x ({a['samples']} runs)\n")
        for site in h["sites"]:
            out.write(f"  site {h['path']}:{site['line']} {site['call']}: {h['verdict']}\n")
    scenario = report["scenario"]
    if scenario:
        out.write(f"\nscenario {scenario['scenario']} ({scenario['before']} vs "
                  f"{scenario['after']}): {scenario['verdict']}\n")
        if "error" in scenario:
            out.write(f"  {scenario['error'].rstrip()}\n")
        else:
            out.write(f"  {scenario['values']} returned values on {scenario['device']}: "
                      f"{'all the same' if scenario['same'] else scenario['first_difference']}\n")
            if scenario["device"] == "cuda":
                for side, key in (("before the fix", "sync_lines_before"),
                                  ("after the fix", "sync_lines")):
                    lines = ", ".join(str(s["line"]) for s in scenario.get(key, [])) or "none"
                    out.write(f"  lines of the target that synchronise {side} "
                              f"(sync debug mode): {lines}\n")
    out.write(f"\nverdict: {report['verdict']}\n")
