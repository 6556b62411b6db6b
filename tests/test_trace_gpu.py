"""`reviewbot trace` on a real GPU: the private torch hooks it uses exist, and the bundled
seed-shaped runner's `.tolist()` is seen before `reviewbot fix --apply` and not after.
Skipped where there is no CUDA device (CI); run with `pytest -m gpu`
(`benchmarks/gpu_trace.sh` runs it and keeps the traces). With REVIEWBOT_TRACE_OUT set,
the traces and the reports of `check --trace` are copied into that folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import FIXTURES, REPO  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

SCENARIO = FIXTURES / "verify" / "seed_runner_scenario.py"
DRIVER = f"""
import importlib.util
import sys

sys.path.insert(0, ".")
import seed_runner

spec = importlib.util.spec_from_file_location("scenario", {str(SCENARIO)!r})
scenario = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scenario)
outputs = scenario.run(seed_runner, "cuda")
print(len(outputs), "steps")
"""


def _reviewbot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"]
                                     if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "reviewbot", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def _keep(path: Path, name: str) -> None:
    folder = os.environ.get("REVIEWBOT_TRACE_OUT")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, Path(folder) / name)


def test_the_private_hooks_exist():
    import importlib

    assert callable(torch.cuda._lazy_call)
    assert callable(torch._C._cuda_set_sync_debug_mode)
    assert callable(torch._C._activate_gpu_trace)
    trace = importlib.import_module("torch.cuda._gpu_trace")
    for what in ("stream", "device", "event"):
        assert callable(getattr(trace, f"register_callback_for_{what}_synchronization"))


def _traced(project: Path, name: str) -> dict:
    result = _reviewbot("trace", "-o", name, "--profile-steps", "64", "--", sys.executable,
                        "drive.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("steps")  # the program's own output
    _keep(project / name, name)
    return json.loads((project / name).read_text())


def test_the_runner_before_and_after_the_fix(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("scenario", SCENARIO)
    scenario = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scenario)
    project = tmp_path / "runner"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'runner'\n")
    shutil.copy(FIXTURES / "fix" / "before" / "seed_runner.py", project / "seed_runner.py")
    (project / "drive.py").write_text(DRIVER)
    lines = (project / "seed_runner.py").read_text().splitlines()
    tolist = next(i for i, line in enumerate(lines, 1)
                  if "sampled_token_ids.tolist()" in line)

    before = _traced(project, "trace-before.json")
    (process,) = [p for p in before["processes"] if p["torch"]]
    assert process["debug_mode"] == "on" and process["gpu_trace"] == "on"
    seen = [s for s in before["syncs"] if s["path"] == "seed_runner.py" and s["line"] == tolist]
    assert seen, before["syncs"]
    assert sum(s["count"] for s in seen) == scenario.STEPS
    assert {s["kind"] for s in seen} == {"copy-to-pageable"}
    assert all(s["stalls_other_threads"] for s in seen)
    assert sum(s["waited"]["samples"] for s in seen) >= 1  # inside the profiler window
    report = _reviewbot("check", "--no-cache", "--trace", "trace-before.json",
                        "seed_runner.py", cwd=project)
    (project / "check-before.txt").write_text(report.stdout + report.stderr)
    _keep(project / "check-before.txt", "check-before.txt")
    confirmed = [line for line in report.stdout.splitlines()
                 if f"seed_runner.py:{tolist}:" in line and " RB101 " in line]
    assert confirmed and f"seen {scenario.STEPS} times at run time" in confirmed[0]

    fixed = _reviewbot("fix", "--apply", "--no-cache", "seed_runner.py", cwd=project)
    assert fixed.returncode == 0, fixed.stderr
    assert "sampled_token_ids.tolist()" not in (project / "seed_runner.py").read_text()

    after = _traced(project, "trace-after.json")
    pageable = [s for s in after["syncs"] if s["kind"] == "copy-to-pageable"
                and s["function"] == "GPUModelRunner.execute_model"]
    assert pageable == []
    helper = [s for s in after["syncs"] if s["kind"] == "event-sync"]
    assert helper and sum(s["count"] for s in helper) == scenario.STEPS
    assert all(not s["stalls_other_threads"] for s in helper)
    report = _reviewbot("check", "--no-cache", "--trace", "trace-after.json",
                        "seed_runner.py", "--output-format", "json", cwd=project)
    (project / "check-after.json").write_text(report.stdout)
    _keep(project / "check-after.json", "check-after.json")
    findings = json.loads(report.stdout)
    assert not [f for f in findings if f["code"] == "RB101"]
    waits = [f for f in findings if f["code"] == "RB108"
             and "event synchronisation" in f["message"]]
    assert waits and all(f["severity"] == "warning" for f in waits)
