"""Measure each wild reproduction on a GPU: syncs per step, host wait, other threads' stall.

For every case folder under ``benchmarks/wild/`` (``scenario.py`` with ``TARGET`` and
``step(module, device)``, the code in ``before/`` and ``after/``):

- syncs per step: one call of the step under ``torch.cuda.set_sync_debug_mode("warn")``
  with the warning filter set to "always", so a line that syncs twice counts twice; the
  lines are given relative to the case folder;
- the host wait and the stall, as in the H200 readback measurements: the main thread
  queues ``PENDING_MS`` of matrix multiplications on the default stream and calls the
  step; a worker thread, 2 ms after the work is queued, enqueues a 64 MiB pinned
  host-to-device copy on its own stream. The host wait is how long the step call takes on
  the main thread; the stall is how long the worker's enqueue call takes. Median and p90
  over ``--iterations`` runs after one warm-up.

The equivalence of results is ``reviewbot verify --scenario`` (benchmarks/gpu_wild.sh
runs both). Usage: ``python benchmarks/wild/measure.py [--iterations N] [-o FILE.json]
[CASE ...]``; exit 2 without CUDA.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
PENDING_MS = (20.0, 3.0)


def _load(path: Path, name: str) -> Any:
    from reviewbot.verify.worker import _load as load

    return load(name, path)


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def _summary(values: list[float]) -> dict[str, float]:
    return {"median_us": round(statistics.median(values), 1), "p90_us": round(_p90(values), 1)}


def sync_lines(torch: Any, step: Callable[[], Any], root: Path) -> list[str]:
    """The lines that synchronise during one step, once per synchronisation."""
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    torch.cuda.synchronize()
    out = []
    for warning in caught:
        if "synchroniz" not in str(warning.message):
            continue
        try:
            where = Path(warning.filename).resolve().relative_to(root).as_posix()
        except ValueError:
            where = Path(warning.filename).name
        out.append(f"{where}:{warning.lineno}")
    return out


def stall(torch: Any, bench: Any, step: Callable[[], Any], pending_ms: float,
          iterations: int) -> dict[str, Any]:
    """Host wait of the step and the worker's enqueue latency, behind pending work (the
    verify harness's iteration, with the step in place of the readback)."""
    waits: list[float] = []
    enqueues: list[float] = []

    def timed(_queued: Any) -> None:
        start = time.perf_counter()
        step()
        waits.append((time.perf_counter() - start) * 1e6)

    for index in range(iterations + 1):
        latency, _ = bench.once(timed, pending_ms)
        if index:  # the first run is a warm-up
            enqueues.append(latency)
        else:
            waits.clear()
    return {"pending_ms": pending_ms, "iterations": iterations,
            "host_wait": _summary(waits), "worker_enqueue": _summary(enqueues)}


def measure_case(torch: Any, bench: Any, case: Path, iterations: int) -> dict[str, Any]:
    scenario = _load(case / "scenario.py", f"wild_{case.name.replace('-', '_')}_scenario")
    report: dict[str, Any] = {"case": case.name, "target": scenario.TARGET}
    for side in ("before", "after"):
        module = _load(case / side / scenario.TARGET,
                       f"wild_{case.name.replace('-', '_')}_{side}")
        step = scenario.step(module, "cuda")
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        lines = sync_lines(torch, step, case.resolve())
        report[side] = {
            "syncs_per_step": len(lines),
            "sync_lines": sorted(set(lines)),
            "stall": [stall(torch, bench, step, ms, iterations) for ms in PENDING_MS],
        }
    return report


def markdown(reports: list[dict[str, Any]], device: str) -> str:
    rows = [f"Measured on {device} by `python benchmarks/wild/measure.py`.", "",
            "| case | side | syncs per step | lines | pending | host wait median / p90 | "
            "other thread's enqueue median / p90 |",
            "| --- | --- | ---: | --- | ---: | --- | --- |"]
    for report in reports:
        for side in ("before", "after"):
            data = report[side]
            for run in data["stall"]:
                wait, enq = run["host_wait"], run["worker_enqueue"]
                rows.append(
                    f"| {report['case']} | {side} | {data['syncs_per_step']} | "
                    f"{', '.join(data['sync_lines']) or 'none'} | {run['pending_ms']:g} ms | "
                    f"{wait['median_us']:,.1f} / {wait['p90_us']:,.1f} us | "
                    f"{enq['median_us']:,.1f} / {enq['p90_us']:,.1f} us |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="case folders (default: every one here)")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("-o", "--output", help="write the JSON report here (and .md beside)")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("measure: needs torch with CUDA", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("measure: needs a CUDA device", file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE.parents[1]))
    from reviewbot.verify.stall import StallBench

    cases = [Path(c) for c in args.cases] or sorted(
        p for p in HERE.iterdir() if (p / "scenario.py").is_file())
    bench = StallBench(torch)
    reports = [measure_case(torch, bench, case, args.iterations) for case in cases]
    device = f"{torch.cuda.get_device_name()} (torch {torch.__version__})"
    document = {"device": device, "cases": reports}
    text = markdown(reports, device)
    if args.output:
        Path(args.output).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        Path(args.output).with_suffix(".md").write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
