"""``reviewbot trace -o trace.json -- python prog.py ARGS``: run a program with the tracing
hooks in every Python process it starts, then merge what each process recorded.

The hooks reach every process through a generated ``sitecustomize.py`` in a temporary
folder put first on ``PYTHONPATH`` and switched on by the ``REVIEWBOT_TRACE`` environment
variable; it runs the ``sitecustomize`` it hides, if any. This process never imports
torch: whether the program's interpreter has torch and a CUDA device is asked of a
separate probe process before the program starts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence, TextIO

from reviewbot.errors import ReviewbotError
from reviewbot.textsafe import printable

ENV = "REVIEWBOT_TRACE"
HOOK_MODULE = "_reviewbot_trace_hook"
ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")
EXIT_ERROR = 2

# Run by the program's interpreter before the program: what torch it has, whether it sees
# a CUDA device, and which of the private hooks the tracer uses it lacks.
PROBE = r"""
import json
out = {"torch": None, "cuda": False, "missing": []}
try:
    import torch
except Exception as exc:
    out["error"] = exc.__class__.__name__
else:
    out["torch"] = str(torch.__version__)
    checks = [("torch.cuda._lazy_call", lambda: torch.cuda._lazy_call),
              ("torch._C._cuda_set_sync_debug_mode", lambda: torch._C._cuda_set_sync_debug_mode),
              ("torch._C._activate_gpu_trace", lambda: torch._C._activate_gpu_trace)]
    for what in ("stream", "device", "event"):
        name = "register_callback_for_%s_synchronization" % what
        checks.append(("torch.cuda._gpu_trace." + name,
                       lambda name=name: getattr(__import__("torch.cuda._gpu_trace",
                                                            fromlist=["x"]), name)))
    for name, get in checks:
        try:
            get()
        except Exception:
            out["missing"].append(name)
    try:
        out["cuda"] = bool(torch.cuda.is_available())
    except Exception:
        out["cuda"] = False
print("REVIEWBOT-PROBE " + json.dumps(out))
"""


def project_root(cwd: Path) -> Path:
    """The nearest folder at or above ``cwd`` holding pyproject.toml, setup.cfg, setup.py
    or .git (else ``cwd``): trace paths are relative to it."""
    start = cwd.resolve()
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in ROOT_MARKERS):
            return folder
    return start


def allow_names(config_file: str | None, cwd: Path) -> list[str]:
    """The allow regions' context managers (``sync-allowed-contexts``) of the packs the
    configuration names (the shipped ``inference-engines`` and ``pytorch`` ones by
    default), read as ``reviewbot check`` reads them."""
    from reviewbot.config import Overrides, load_config
    from reviewbot.packs import load_packs

    if config_file is not None and not Path(config_file).is_file():
        raise ReviewbotError(f"{printable(config_file)}: configuration file not found")
    config = load_config([cwd], Path(config_file) if config_file else None, Overrides(), cwd)
    packs = load_packs(tuple(config.rule_packs), config.root, config.source,
                       config.key_prefix + "rule-packs")
    names = list(packs.sync_allowed_contexts)
    for extra in ("inference-engines", "pytorch"):  # what the engine packs add
        try:
            names += load_packs((extra,), config.root, None).sync_allowed_contexts
        except ReviewbotError:
            continue
    return list(dict.fromkeys(names))


def probe_interpreter(command: Sequence[str]) -> str:
    """The Python that will run the program: the command itself when it is a Python, the
    interpreter of its ``#!`` line when it is a Python script, else this one."""
    first = command[0]
    found = shutil.which(first) or first
    if re.fullmatch(r"python[0-9.]*(\.exe)?", os.path.basename(first)):
        return found
    try:
        with open(found, "rb") as handle:
            head = handle.readline(512)
    except OSError:
        return sys.executable
    if head.startswith(b"#!") and b"python" in head:
        words = head[2:].decode("utf-8", "replace").split()
        if words and os.path.basename(words[0]) == "env" and len(words) > 1:
            return shutil.which(words[1]) or words[1]
        if words:
            return words[0]
    return sys.executable


def probe(python: str, env: dict[str, str]) -> dict[str, Any]:
    """Ask the program's interpreter about torch and CUDA (in a process of its own)."""
    try:
        done = subprocess.run([python, "-c", PROBE], env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReviewbotError(f"trace: could not run {printable(python)} to look for torch "
                             f"({exc.__class__.__name__})") from None
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("REVIEWBOT-PROBE "):
            try:
                return json.loads(line.split(" ", 1)[1])
            except ValueError:
                break
    raise ReviewbotError(f"trace: {printable(python)} did not answer the probe for torch "
                         f"(exit status {done.returncode})")


def prepare_folder(folder: Path) -> Path:
    """Write the hooks and the sitecustomize into ``folder``; return the events folder."""
    here = Path(__file__).resolve().parent
    shutil.copyfile(here / "_hook.py", folder / f"{HOOK_MODULE}.py")
    shutil.copyfile(here / "sitecustomize_template.py", folder / "sitecustomize.py")
    events = folder / "events"
    events.mkdir()
    return events


def child_env(folder: Path, settings: dict[str, Any],
              base: dict[str, str] | None = None) -> dict[str, str]:
    """The program's environment: ours, the hooks' folder first on PYTHONPATH, and the
    switch with the settings."""
    env = dict(os.environ if base is None else base)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(folder) + (os.pathsep + old if old else "")
    env[ENV] = json.dumps(settings)
    return env


def _exit_status(code: int) -> int:
    """A child's status as a shell reports it (a signal N is 128 + N)."""
    return 128 - code if code < 0 else code


def _write_atomic(path: str, document: dict[str, Any]) -> None:
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=folder,
                                             prefix=f".{target.name}.", suffix=".tmp",
                                             delete=False)
    except OSError as exc:
        raise ReviewbotError(f"{printable(path)}: cannot write the trace "
                             f"({exc.strerror})") from None
    with handle:
        json.dump(document, handle, indent=1, ensure_ascii=True)
        handle.write("\n")
    os.replace(handle.name, target)


def run_trace(args: Any, err: TextIO) -> int:
    """``reviewbot trace``: run the program, pass its output and exit status through, and
    write the merged trace to ``-o``."""
    command = list(args.program)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ReviewbotError("trace: give the program to run after `--`, e.g. "
                             "reviewbot trace -o trace.json -- python bench.py")
    for name in ("profile_steps", "profile_seconds", "skip_seconds", "skip_syncs"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise ReviewbotError(f"trace: --{name.replace('_', '-')} must not be negative")
    parent = Path(os.path.abspath(args.output)).parent
    if not parent.is_dir() or Path(args.output).is_dir():
        raise ReviewbotError(f"{printable(args.output)}: cannot write the trace there (no "
                             "such folder, or a folder)")
    cwd = Path.cwd()
    root = project_root(cwd)
    allow = allow_names(args.config, cwd)
    python = probe_interpreter(command)
    if not args.allow_no_cuda:
        found = probe(python, dict(os.environ))
        if found.get("torch") is None:
            raise ReviewbotError(f"trace: torch is not installed for {printable(python)}: "
                                 "there is nothing to trace without CUDA")
        if not found.get("cuda"):
            raise ReviewbotError(f"trace: torch {printable(str(found['torch']))} sees no CUDA "
                                 "device: there is nothing to trace without one")
        missing = [str(m) for m in found.get("missing") or []]
        if missing and not args.quiet:
            err.write(f"reviewbot: trace: warning: torch {printable(str(found['torch']))} "
                      f"lacks {printable(', '.join(missing))}: those detectors are off\n")
    profile_seconds = args.profile_seconds
    if args.profile_steps and profile_seconds is None:
        profile_seconds = 60.0  # the window is bounded in time too
    public = {"skip_seconds": args.skip_seconds or 0, "skip_syncs": args.skip_syncs or 0,
              "wait_for_start": bool(args.wait_for_start),
              "profile_syncs": args.profile_steps or 0,
              "profile_seconds": profile_seconds or 0,
              "debug_mode": not args.no_sync_debug_mode, "allow": allow}
    folder = Path(tempfile.mkdtemp(prefix="reviewbot-trace-"))
    try:
        events = prepare_folder(folder)
        if args.events_dir:  # kept: the per-process files as the hooks wrote them
            events = Path(args.events_dir).resolve()
            try:
                events.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ReviewbotError(f"{printable(args.events_dir)}: cannot make the events "
                                     f"folder ({exc.strerror})") from None
            if any(events.glob("proc-*.jsonl")):
                raise ReviewbotError(f"{printable(args.events_dir)}: already holds events "
                                     "of another run")
        settings = {**public, "dir": str(events), "root": str(root), "t0": time.time()}
        env = child_env(folder, settings)
        started = time.monotonic()
        try:
            child = subprocess.Popen(command, env=env)
        except OSError as exc:
            raise ReviewbotError(f"trace: cannot run {printable(command[0])}: "
                                 f"{printable(exc.strerror or str(exc))}") from None
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the program gets it
        forward = signal.signal(signal.SIGTERM,
                                lambda number, frame: child.send_signal(signal.SIGTERM))
        try:
            code = child.wait()
        finally:
            signal.signal(signal.SIGINT, previous)
            signal.signal(signal.SIGTERM, forward)
        status = _exit_status(code)
        from reviewbot.trace.merge import merge

        document = merge(events, public, status, time.monotonic() - started)
        _write_atomic(args.output, document)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not args.quiet:
        _summary(document, args.output, err)
    return status


def _summary(document: dict[str, Any], output: str, err: TextIO) -> None:
    for note in document["notes"]:
        err.write(f"reviewbot: trace: note: {printable(note['text'])} "
                  f"({note['processes']} process{'es' if note['processes'] != 1 else ''})\n")
    processes = document["processes"]
    armed = [p for p in processes if p.get("torch")]
    for what in ("debug_mode", "gpu_trace"):
        off = sorted({str(p[what]) for p in armed if p.get(what) and p[what] != "on"})
        for reason in off:
            label = "sync debug mode" if what == "debug_mode" else "gpu-trace callbacks"
            err.write(f"reviewbot: trace: warning: {label} {printable(reason)}\n")
    syncs = document["syncs"]
    total = sum(s["count"] for s in syncs)
    intended = sum(s["count"] for s in syncs if s["intended"])
    err.write(f"reviewbot: trace: {printable(output)}: {total:,} syncs at {len(syncs)} "
              f"site{'s' if len(syncs) != 1 else ''} in the project ({intended:,} intended), "
              f"{document['outside_project']['count']:,} outside it; "
              f"{len(processes)} process{'es' if len(processes) != 1 else ''}, "
              f"{len(armed)} with torch\n")
