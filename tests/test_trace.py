"""`reviewbot trace` and `reviewbot check --trace` on a CPU: merging the per-process files,
reporting against recorded traces, hostile trace files, the hooks in processes the
program starts, output and exit status passed through, and the exit without CUDA."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import FIXTURES, REPO
from reviewbot.trace import _hook
from reviewbot.trace.attach import line_hash, load, parse
from reviewbot.trace.merge import merge, read_process

DATA = REPO / "tests" / "data" / "trace"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _trace(*args: str, cwd: Path, env: dict[str, str] | None = None,
           timeout: int = 120) -> subprocess.CompletedProcess:
    """``python -m reviewbot trace ARGS`` in ``cwd`` (bytes out, bytes err)."""
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = str(REPO) + (os.pathsep + base["PYTHONPATH"]
                                      if base.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "reviewbot", "trace", *args], cwd=cwd,
                          env=base, capture_output=True, timeout=timeout)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    return root


# Merging --------------------------------------------------------------------------------
def test_merge_sums_the_processes_and_leaves_out_a_cut_short_line(tmp_path):
    document = merge(DATA / "events", {"skip_syncs": 0}, 0, 1.5)
    assert document["tool"] == "reviewbot trace" and document["schema_version"] == 1
    assert len(document["processes"]) == 3
    parent = next(p for p in document["processes"] if p["recorded"] == 7)
    children = [p for p in document["processes"] if p is not parent]
    assert all(c["ppid"] == parent["pid"] for c in children)
    # The forked child inherits the armed detectors; the worker killed with os._exit has
    # no exit record and its last line was cut short.
    assert all(p["torch"] == "2.13.0+cpu" for p in document["processes"])
    killed = next(p for p in children if p["truncated_lines"])
    assert killed["truncated_lines"] == 1 and not killed["ended"]
    step = [s for s in document["syncs"] if s["line"] == 18]
    # prog.py: 5 steps in the parent, 3 in the forked child, 2 in the worker (one stack
    # per call site of `runner.step()`).
    assert sum(s["count"] for s in step) == 10
    assert sorted(s["count"] for s in step) == [1, 1, 3, 5]
    assert {s["stack"][1]["line"] for s in step} == {30, 31, 34, 40}
    by_kind = {s["kind"]: s for s in document["syncs"] if s["line"] != 18}
    assert by_kind["event-sync"]["stalls_other_threads"] is False
    assert by_kind["device-sync"]["intended"] is True
    source = (DATA / "prog.py").read_text().splitlines()
    assert step[0]["line_hash"] == line_hash(source[17]) == _hook.line_hash(source[17])


def test_lines_that_are_not_events_are_counted_not_read(tmp_path):
    source = next(p for p in sorted((DATA / "events").iterdir()) if b'"exit"' in p.read_bytes())
    lines = source.read_bytes().splitlines(keepends=True)
    broken = tmp_path / "proc-1-000000.jsonl"
    broken.write_bytes(b"".join(lines[:3]) + b"not json\n[1, 2]\n" + b"".join(lines[3:]))
    process = read_process(broken)
    assert process.unreadable == 2 and process.truncated == 0
    assert sum(process.hits.values()) == sum(read_process(source).hits.values())


def test_merge_takes_the_kind_and_the_wait_from_the_profiler(tmp_path):
    events = [
        {"t": "process", "pid": 5, "ppid": 1, "recording": True},
        {"t": "site", "s": 1, "kind": "copy-to-pinned", "kind_from": "default", "op": None,
         "intended": False, "stack": [], "path": "a.py", "line": 3, "hash": "0" * 16},
        {"t": "hit", "s": 1}, {"t": "hit", "s": 1},
        {"t": "wait", "s": 1, "us": 1500.0, "kind": "copy-to-pageable"},
        {"t": "wait", "s": 1, "us": 500.0, "kind": "copy-to-pageable"},
        {"t": "site", "s": 2, "kind": "stream-sync", "op": "synchronize", "intended": False,
         "stack": []},
        {"t": "hit", "s": 2},
    ]
    (tmp_path / "proc-5-000000.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    document = merge(tmp_path)
    (entry,) = document["syncs"]
    assert entry["kind"] == "copy-to-pageable" and entry["kind_from"] == "profiler"
    assert entry["stalls_other_threads"] is True and entry["count"] == 2
    assert entry["waited"] == {"samples": 2, "total_ms": 2.0, "max_ms": 1.5}
    assert document["outside_project"] == {"count": 1, "by_kind": {"stream-sync": 1}}


def _event(name, start, end, thread=1):
    return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end),
                           thread=thread)


def test_profiler_markers_are_matched_with_their_sync_and_copy():
    events = [
        _event("reviewbot_sync_0", 10, 10),
        _event("cudaMemcpyAsync", 11, 12),
        _event("Memcpy DtoH (Device -> Pageable)", 12, 30),
        _event("cudaStreamSynchronize", 12, 31),
        _event("reviewbot_sync_1", 40, 40),
        _event("Memcpy DtoH (Device -> Pinned)", 41, 44),
        _event("cudaStreamSynchronize", 41, 45),
        _event("cudaEventSynchronize", 60, 70),  # after a marker made after the sync
        _event("reviewbot_sync_2", 71, 71),
    ]
    markers = [("reviewbot_sync_0", 1, True), ("reviewbot_sync_1", 2, True),
               ("reviewbot_sync_2", 3, False)]
    assert _hook.match_waits(events, markers) == [
        (1, 19.0, "copy-to-pageable"), (2, 4.0, "copy-to-pinned"), (3, 10.0, None)]
    # A marker with no sync call after it gets no wait.
    assert _hook.match_waits([_event("reviewbot_sync_0", 1, 1)],
                             [("reviewbot_sync_0", 4, True)]) == [(4, None, None)]


@pytest.mark.parametrize("text,expected", [
    ("ids.tolist()", ("copy-to-pageable", "call")),
    ("t.to('cpu')", ("copy-to-pageable", "call")),
    ("t.to(self.device)", ("copy-to-device", "call")),
    ("torch.tensor(ids, device='cuda')", ("copy-to-device", "call")),
    ("logits.argmax().item()", ("copy-to-pinned", "call")),
    ("x[mask]", ("copy-to-pinned", "call")),
    ("torch.cuda.current_stream().synchronize()", ("stream-sync", "call")),
    ("lambda: 0", ("copy-to-pinned", "default")),
])
def test_the_kind_is_deduced_from_the_call(text, expected):
    op, detail = _hook._operation_of(text)
    assert _hook._kind("stream", op, detail) == expected
    assert _hook._kind("event", op, detail) == ("event-sync", "hook")
    assert _hook._kind("device", op, detail) == ("device-sync", "hook")


# check --trace ----------------------------------------------------------------------------
@pytest.fixture
def runner(project: Path) -> Path:
    shutil.copy(FIXTURES / "fix" / "before" / "seed_runner.py", project / "seed_runner.py")
    shutil.copy(DATA / "seed_runner.json", project / "trace.json")
    return project


def _lines(text: str, code: str) -> list[str]:
    return [line for line in text.splitlines() if f" {code} " in line]


def test_check_trace_confirms_a_finding_and_reports_what_no_rule_did(run_cli, runner):
    result = run_cli(["check", "--no-cache", "--trace", "trace.json", "seed_runner.py"],
                     cwd=runner)
    assert result.code == 1
    (tolist,) = _lines(result.out, "RB101")
    assert tolist.startswith("seed_runner.py:105:")
    assert "(seen 24 times at run time, 19.3 ms waited in 8 profiled; a copy to pageable " \
           "memory: other threads stall)" in tolist
    new = _lines(result.out, "RB108")
    assert [line.split(":")[1] for line in new] == ["102", "110"]
    assert "in hot path execute_model" in new[0] and "seen 24 times" in new[0]
    assert "drive.py:21" in new[0] and "3 frames outside the project" in new[0]
    assert "event synchronisation" in new[1] and "other threads are not stalled" in new[1]
    # Stale (line 103), intended (99), a warm-up function below min-count (117) and a file
    # that is not checked make no finding; the stale one is named.
    assert "1 stale trace entry" in result.err and "seed_runner.py:103" in result.err
    assert "1 finding confirmed at run time, 2 new RB108, 1 intended (allow regions), " \
           "1 below RB108's thresholds, 1 in files not checked" in result.err
    lowered = run_cli(["check", "--no-cache", "--trace", "trace.json", "seed_runner.py",
                       "--option", "RB108.min-count=5"], cwd=runner)
    assert [line.split(":")[1] for line in _lines(lowered.out, "RB108")] == \
        ["102", "110", "117"]
    assert "not in a hot path; at least min-count=5 times" in lowered.out


def test_without_a_trace_rb108_reports_nothing(run_cli, runner):
    result = run_cli(["check", "--no-cache", "--select", "RB1", "seed_runner.py"], cwd=runner)
    assert "RB108" not in result.out and "seen" not in result.out


def test_check_trace_in_json_sarif_and_github(run_cli, runner):
    base = ["check", "--no-cache", "--trace", "trace.json", "seed_runner.py", "-q"]
    findings = json.loads(run_cli([*base, "--output-format", "json"], cwd=runner).out)
    rb101 = next(f for f in findings if f["code"] == "RB101")
    runtime = rb101["details"]["runtime"]
    assert runtime["count"] == 24 and runtime["waited_ms"] == 19.3
    assert runtime["kinds"] == ["copy-to-pageable"] and runtime["stalls_other_threads"]
    event = next(f for f in findings if f["code"] == "RB108" and f["line"] == 110)
    assert event["severity"] == "warning"
    assert event["details"]["runtime"]["stalls_other_threads"] is False
    assert event["details"]["runtime"]["stack"][0] == {
        "path": "seed_runner.py", "line": 110, "function": "GPUModelRunner.execute_model"}
    sarif = json.loads(run_cli([*base, "--output-format", "sarif"], cwd=runner).out)
    results = sarif["runs"][0]["results"]
    confirmed = next(r for r in results if r["ruleId"] == "RB101")
    assert confirmed["properties"]["runtime"]["count"] == 24
    assert "seen 24 times at run time" in confirmed["message"]["text"]
    assert "RB108" in [rule["id"] for rule in sarif["runs"][0]["tool"]["driver"]["rules"]]
    github = run_cli([*base, "--output-format", "github"], cwd=runner).out
    assert any(line.startswith("::error file=seed_runner.py,line=105") and "seen 24 times"
               in line for line in github.splitlines())
    assert any("title=RB108" in line and "line=110" in line and line.startswith("::warning")
               for line in github.splitlines())


def test_a_noqa_comment_suppresses_rb108(run_cli, runner):
    path = runner / "seed_runner.py"
    lines = path.read_text().splitlines()
    lines[101] += "  # noqa: RB108"
    path.write_text("\n".join(lines) + "\n")
    trace = json.loads((runner / "trace.json").read_text())
    for entry in trace["syncs"]:
        if entry["line"] == 102:
            entry["line_hash"] = line_hash(lines[101])
    (runner / "trace.json").write_text(json.dumps(trace))
    result = run_cli(["check", "--no-cache", "--trace", "trace.json", "seed_runner.py"],
                     cwd=runner)
    assert [line.split(":")[1] for line in _lines(result.out, "RB108")] == ["110"]


def test_trace_cannot_be_combined_with_fixing(run_cli, runner):
    result = run_cli(["check", "--trace", "trace.json", "--fix", "seed_runner.py"], cwd=runner)
    assert result.code == 2 and result.err.count("\n") == 1
    assert "--trace cannot be combined with --fix" in result.err


# Hostile trace files ---------------------------------------------------------------------
def _document(**entry):
    base = {"path": "seed_runner.py", "line": 105, "line_hash": "0" * 16,
            "kind": "copy-to-pageable", "op": "tolist", "function": "f", "intended": False,
            "count": 1, "waited": {"samples": 0, "total_ms": 0, "max_ms": 0}, "stack": []}
    base.update(entry)
    return {"tool": "reviewbot trace", "schema_version": 1, "syncs": [base]}


@pytest.mark.parametrize("content,message", [
    (b"\xff\xfe not json", "not a trace (not JSON)"),
    (b"[1, 2]", "tool: not a trace written by `reviewbot trace`"),
    (json.dumps({"tool": "reviewbot trace", "schema_version": 99, "syncs": []}).encode(),
     "schema_version: expected 1"),
    (json.dumps({"tool": "reviewbot trace", "schema_version": True, "syncs": []}).encode(),
     "schema_version: expected 1"),
    (json.dumps({"tool": "reviewbot trace", "schema_version": 1, "syncs": {}}).encode(),
     "syncs: expected a list"),
    (json.dumps(_document(line="105")).encode(), "syncs[0].line: expected int"),
    (json.dumps(_document(count=True)).encode(), "syncs[0].count: expected int"),
    (json.dumps(_document(kind="<b>x</b>")).encode(), "syncs[0].kind: expected one of"),
    (json.dumps(_document(count=-1)).encode(), "a negative count"),
    (json.dumps(_document(stack=["x"])).encode(), "syncs[0].stack[0]: expected an object"),
    (json.dumps(_document(waited={"samples": 1, "total_ms": "9"})).encode(),
     "syncs[0].waited.total_ms: expected int or float"),
    (b"[" * 100000 + b"]" * 100000, "not a trace (not JSON)"),
])
def test_a_malformed_trace_is_one_line_and_exit_2(run_cli, runner, content, message):
    (runner / "bad.json").write_bytes(content)
    result = run_cli(["check", "--no-cache", "--trace", "bad.json", "seed_runner.py"],
                     cwd=runner)
    assert result.code == 2, result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert message in result.err and result.out == ""
    assert "<b>" not in result.err


def test_an_oversized_trace_is_refused(run_cli, runner, monkeypatch):
    from reviewbot.trace import attach

    monkeypatch.setattr(attach, "MAX_BYTES", 1000)
    (runner / "big.json").write_text(json.dumps(_document()) + " " * 1000)
    result = run_cli(["check", "--trace", "big.json", "seed_runner.py"], cwd=runner)
    assert result.code == 2 and "larger than" in result.err and result.err.count("\n") == 1


def test_a_missing_trace_is_one_line(run_cli, runner):
    result = run_cli(["check", "--trace", "nope.json", "seed_runner.py"], cwd=runner)
    assert result.code == 2 and "nope.json: cannot read the trace" in result.err


HOSTILE = [
    {"path": "/etc/passwd.py"},
    {"path": "../outside.py"},
    {"path": "a/../seed_runner.py"},
    {"path": "seed_runner.py\n::error::injected.py"},
    {"path": "[x](https://evil.example)/seed_runner.py"},
    {"path": "<img src=x onerror=alert(1)>.py"},
    {"path": "C:\\\\seed_runner.py"},
    {"function": "f\u202egnp.exe"},
    {"function": "::add-mask::secret"},
    {"function": "<script>alert(1)</script>"},
    {"function": "[link](https://evil.example)"},
    {"op": "tolist`) [x](https://evil.example) (`"},
    {"line_hash": "<b>not a hash</b>"},
    {"stack": [{"path": "../../etc/x.py", "line": 1, "function": "f"}]},
    {"stack": [{"path": "seed_runner.py", "line": 1, "function": "@everyone **bold**"}]},
]


@pytest.mark.parametrize("entry", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_entry_is_dropped_and_never_echoed(run_cli, runner, entry):
    lines = (runner / "seed_runner.py").read_text().splitlines()
    document = _document(**{"line_hash": line_hash(lines[104]), "count": 7, **entry})
    (runner / "hostile.json").write_text(json.dumps(document))
    result = run_cli(["check", "--no-cache", "--trace", "hostile.json", "seed_runner.py"],
                     cwd=runner)
    assert result.code == 1  # the static findings are still reported
    assert "1 trace entry dropped" in result.err
    assert "seen 7 times" not in result.out
    value = next(iter(entry.values()))
    hostile = value if isinstance(value, str) else \
        value[0]["path"] if value[0]["path"] != "seed_runner.py" else value[0]["function"]
    assert hostile not in result.out and hostile not in result.err
    for piece in ("evil.example", "<script", "<img", "::add-mask", "::error", "@everyone",
                  "\u202e", "/etc/", "**bold**"):
        assert piece not in result.out and piece not in result.err


def test_the_parser_keeps_a_sound_entry(runner):
    lines = (runner / "seed_runner.py").read_text().splitlines()
    trace = parse(_document(line_hash=line_hash(lines[104]),
                            stack=[{"path": "pkg/mod.py", "line": 3,
                                    "function": "Runner.step.<locals>.inner"},
                                   {"outside": 2}]))
    assert trace.dropped == 0 and trace.entries[0].stack[1] == {"outside": 2}
    assert load(str(runner / "trace.json")).entries[0].count == 24


# Running a program under the hooks --------------------------------------------------------
def test_no_torch_is_exit_2_with_one_line(project, tmp_path):
    hidden = tmp_path / "hide"
    hidden.mkdir()
    (hidden / "torch.py").write_text("raise ImportError('hidden for the test')\n")
    env = dict(os.environ, PYTHONPATH=str(hidden))
    result = _trace("-o", "t.json", "--", sys.executable, "-c", "print('ran')",
                    cwd=project, env=env)
    assert result.returncode == 2
    assert result.stdout == b""  # the program did not run
    err = result.stderr.decode()
    assert err.count("\n") == 1 and "torch is not installed" in err
    assert "nothing to trace without CUDA" in err and not (project / "t.json").exists()


@pytest.mark.skipif(not HAS_TORCH, reason="could not import 'torch'")
def test_no_cuda_device_is_exit_2_with_one_line(project):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    result = _trace("-o", "t.json", "--", sys.executable, "-c", "print('ran')", cwd=project,
                    timeout=300)
    assert result.returncode == 2 and result.stdout == b""
    err = result.stderr.decode()
    assert err.count("\n") == 1 and "sees no CUDA device" in err


PASSTHROUGH = """
import sys
sys.stdout.buffer.write(b"out \\xff\\x00 line\\n")
sys.stderr.write("err line\\n")
sys.stdout.flush()
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.parametrize("status", [0, 3, 77])
def test_output_and_exit_status_pass_through(project, status):
    (project / "prog.py").write_text(PASSTHROUGH)
    result = _trace("-q", "--allow-no-cuda", "-o", "t.json", "--", sys.executable, "prog.py",
                    str(status), cwd=project)
    assert result.returncode == status
    assert result.stdout == b"out \xff\x00 line\n" and result.stderr == b"err line\n"
    document = json.loads((project / "t.json").read_text())
    assert document["exit_status"] == status and len(document["processes"]) == 1


def test_a_program_killed_by_a_signal_exits_as_a_shell_says(project):
    result = _trace("-q", "--allow-no-cuda", "-o", "t.json", "--", sys.executable, "-c",
                    "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", cwd=project)
    assert result.returncode == 128 + 9
    assert json.loads((project / "t.json").read_text())["exit_status"] == 137


def test_a_program_that_cannot_start_is_one_line(project):
    result = _trace("--allow-no-cuda", "--", "./no-such-program", cwd=project)
    assert result.returncode == 2 and b"cannot run ./no-such-program" in result.stderr
    assert _trace("--allow-no-cuda", cwd=project).returncode == 2
    missing = _trace("--allow-no-cuda", "-o", "no/such/dir/t.json", "--", sys.executable,
                     "-c", "print('ran')", cwd=project)
    assert missing.returncode == 2 and missing.stdout == b""  # refused before it ran
    assert b"cannot write the trace there" in missing.stderr


def test_the_existing_sitecustomize_still_runs(project, tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text(
        "import builtins\nbuiltins.THEIR_SITECUSTOMIZE = 'ran'\n")
    (project / "prog.py").write_text(
        "import builtins, sys\nprint(getattr(builtins, 'THEIR_SITECUSTOMIZE', 'missing'))\n"
        "print('_reviewbot_trace_hook' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=str(theirs))
    result = _trace("-q", "--allow-no-cuda", "-o", "t.json", "--", sys.executable, "prog.py",
                    cwd=project, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().split() == ["ran", "True"]
    # Without the tracer it runs as well (the program's own check of the setting).
    plain = subprocess.run([sys.executable, "prog.py"], cwd=project, env=env,
                           capture_output=True, text=True)
    assert plain.stdout.split() == ["ran", "False"]


CHILDREN = """
import multiprocessing, os, subprocess, sys
subprocess.run([sys.executable, "-c", "print('child')"], check=True)
if os.fork() == 0:
    os._exit(0)
os.wait()
ctx = multiprocessing.get_context("spawn")
p = ctx.Process(target=print, args=("spawned",))
p.start(); p.join()
"""


def test_processes_the_program_starts_load_the_hooks(project):
    (project / "prog.py").write_text(CHILDREN)
    result = _trace("--allow-no-cuda", "-o", "t.json", "--", sys.executable, "prog.py",
                    cwd=project)
    assert result.returncode == 0, result.stderr
    document = json.loads((project / "t.json").read_text())
    processes = document["processes"]
    main = next(p for p in processes if not any(p["ppid"] == q["pid"] for q in processes))
    children = [p for p in processes if p["ppid"] == main["pid"]]
    # The subprocess, the forked child and the spawned one (the spawn start method may run a
    # resource tracker too, itself a child of the main process).
    assert len(children) >= 3
    assert f"{len(processes)} processes".encode() in result.stderr


RECORDS = """
import sys, warnings
import torch
from torch.cuda import _gpu_trace as gpu_trace
import reviewbot.trace


def gpu_sync_allowed():
    import contextlib
    return contextlib.nullcontext()


def step(ids):
    return gpu_trace.StreamSynchronizationCallbacks.fire_callbacks(0)


for i in range(4):
    step(None)
with gpu_sync_allowed():
    gpu_trace.DeviceSynchronizationCallbacks.fire_callbacks()
reviewbot.trace.start()
for i in range(3):
    step(None)
gpu_trace.EventSynchronizationCallbacks.fire_callbacks(1)
print(torch.cuda.is_initialized())
"""


@pytest.mark.skipif(not HAS_TORCH, reason="could not import 'torch'")
@pytest.mark.parametrize("flags,steps,skipped", [
    ((), 7, 0), (("--skip-syncs", "2"), 5, 2), (("--wait-for-start",), 3, 5)])
def test_the_hooks_record_syncs_without_initialising_cuda(project, flags, steps, skipped):
    (project / "prog.py").write_text(RECORDS)
    result = _trace("-q", "--allow-no-cuda", *flags, "-o", "t.json", "--", sys.executable,
                    "prog.py", cwd=project, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"False\n"  # torch.cuda.is_initialized()
    document = json.loads((project / "t.json").read_text())
    (process,) = document["processes"]
    assert process["gpu_trace"] == "on" and process["torch"]
    assert process["warm_up_skipped"] == skipped
    syncs = document["syncs"]
    assert sum(s["count"] for s in syncs if s["line"] == 14) == steps
    step = next(s for s in syncs if s["line"] == 14)
    assert step["path"] == "prog.py" and step["function"] == "step"
    assert step["stack"][0] == {"path": "prog.py", "line": 14, "function": "step"}
    # torch's callback registry and the hooks are not shown; nothing outside the project
    # is named.
    assert all(set(frame) in ({"path", "line", "function"}, {"outside"})
               for s in syncs for frame in s["stack"])
    event = next(s for s in syncs if s["kind"] == "event-sync")
    assert event["stalls_other_threads"] is False and event["line"] == 24
    if not flags:
        allowed = next(s for s in syncs if s["kind"] == "device-sync")
        assert allowed["intended"] is True and allowed["line"] == 20


def test_start_is_a_no_op_outside_a_trace():
    import reviewbot.trace

    assert reviewbot.trace.start() is None
    code = "import sys, reviewbot.trace; reviewbot.trace.start(); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO)
    assert done.stdout == "False\n"


FAKE_TORCH = {
    "torch/__init__.py": """
__version__ = "0.0-fake"
from . import cuda, _C
""",
    "torch/_C.py": """
MODES = []
def _cuda_set_sync_debug_mode(mode):
    MODES.append(mode)
""",
    "torch/cuda/__init__.py": """
QUEUED = []
def _lazy_call(fn):
    QUEUED.append(fn)
def init():
    for fn in QUEUED:
        fn()
""",
}


def test_the_sync_debug_mode_path_with_a_torch_that_has_no_gpu_trace(project, tmp_path):
    fake = tmp_path / "fake"
    for name, text in FAKE_TORCH.items():
        (fake / name).parent.mkdir(parents=True, exist_ok=True)
        (fake / name).write_text(textwrap.dedent(text))
    (project / "prog.py").write_text(textwrap.dedent("""
        import warnings
        import torch
        assert torch._C.MODES == []  # nothing set before the program's first CUDA call
        torch.cuda.init()
        print(torch._C.MODES)
        def readback():
            warnings.warn("called a synchronizing CUDA operation")
        for _ in range(3):
            readback()
        warnings.warn("another warning")
    """))
    env = dict(os.environ, PYTHONPATH=str(fake))
    result = _trace("--allow-no-cuda", "-o", "t.json", "--", sys.executable, "prog.py",
                    cwd=project, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"[1]\n"
    err = result.stderr.decode()
    # The sync warnings are recorded, not printed; the program's other warnings are.
    assert "another warning" in err and "synchronizing" not in err
    assert "gpu-trace callbacks unavailable" in err
    document = json.loads((project / "t.json").read_text())
    (sync,) = document["syncs"]
    assert sync["count"] == 3 and sync["line"] == 8 and sync["detected_by"] == ["debug-mode"]
    assert sync["function"] == "readback"


def test_check_with_a_trace_never_imports_torch(runner):
    code = ("import sys; from reviewbot import cli; code = cli.main(['check', '--no-cache', "
            "'--trace', 'trace.json', 'seed_runner.py', '-q']); "
            "sys.stderr.write(repr(('torch' in sys.modules, code)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=runner, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.stderr.endswith("(False, 1)"), done.stderr
    assert "seen 24 times at run time" in done.stdout


@pytest.mark.skipif(not HAS_TORCH, reason="could not import 'torch'")
def test_this_torch_has_the_private_hooks_a_cpu_build_can_have():
    # A CPU build has no sync debug mode (torch._C._cuda_set_sync_debug_mode is CUDA's);
    # tests/test_trace_gpu.py checks it on a CUDA build.
    import importlib

    import torch

    assert callable(torch.cuda._lazy_call) and callable(torch._C._activate_gpu_trace)
    trace = importlib.import_module("torch.cuda._gpu_trace")
    for what in ("stream", "device", "event"):
        assert callable(getattr(trace, f"register_callback_for_{what}_synchronization"))
