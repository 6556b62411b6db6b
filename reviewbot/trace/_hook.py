"""The hooks ``reviewbot trace`` puts into every Python process of a traced program.

This file is copied next to a generated ``sitecustomize.py`` and imported from there as
``_reviewbot_trace_hook``, in interpreters that may not have reviewbot installed: it uses
the standard library only, and torch only once the program imports it.

What it does in a process:

- writes its own append-only JSON-lines file (one ``os.write`` per event, so a killed
  worker loses at most the line being written);
- arms when torch is imported (a meta-path finder wraps torch's loader), never before,
  and never initialises CUDA: ``torch.cuda._lazy_call`` queues the sync debug mode
  ("warn", through ``torch._C._cuda_set_sync_debug_mode(1)``, which does not initialise
  CUDA where the public setter does) until the program's own first CUDA call, and
  ``torch.cuda._gpu_trace`` callbacks (stream, device and event synchronisation) run in
  the calling thread before each sync;
- for each sync, walks the Python stack: the innermost frame inside the project gives the
  site (a project-relative path, the line and a hash of the line's text), the call being
  executed there gives the operation (``.tolist()``, ``.item()``, ...), from which the
  kind is deduced; frames outside the project are counted, never named;
- within an optional profiler window, asks torch.profiler how long each sync waited.
"""

from __future__ import annotations

import ast
import atexit
import hashlib
import json
import linecache
import os
import sys
import threading
import time

ENV = "REVIEWBOT_TRACE"
SCHEMA = 1
SYNC_WARNING = "called a synchronizing CUDA operation"
MAX_FRAMES = 24  # project frames kept per stack (innermost first)
START_FILE = "start"  # created in the events folder by reviewbot.trace.start()

# The kinds of synchronisation, and whether each stalls other threads' CUDA calls
# (measured on an H200: a copy into pageable memory and a blocking copy from pageable
# memory hold every other thread's CUDA calls; the others make only this host thread wait).
STALLS = {
    "copy-to-pageable": True,
    "copy-to-device": True,
    "copy-to-pinned": False,
    "stream-sync": False,
    "device-sync": False,
    "event-sync": False,
}
PAGEABLE_OPS = frozenset({"tolist", "cpu", "numpy"})
DEVICE_OPS = frozenset({"cuda", "tensor", "as_tensor"})
# Profiler names of the runtime calls that block the host, and of the copies.
WAIT_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
              "cudaMemcpy")


def line_hash(text: str) -> str:
    """The hash of a line's text (surrounding white space left out); ``reviewbot check
    --trace`` computes the same to tell a stale entry."""
    return hashlib.sha256(text.strip().encode("utf-8", "surrogatepass")).hexdigest()[:16]


class _State:
    """Everything the hooks of one process share."""

    def __init__(self, settings: dict) -> None:
        self.settings = settings
        self.folder = str(settings["dir"])
        self.root = os.path.realpath(str(settings.get("root") or os.getcwd()))
        self.here = os.path.dirname(os.path.realpath(__file__))
        self.allow = tuple(str(n) for n in settings.get("allow") or ())
        self.lock = threading.RLock()
        self.fd = -1
        self.sites: dict = {}
        self.ops: dict = {}
        self.allowed: dict = {}
        self.inside: dict = {}
        self.plumbing: dict = {}
        self.local = threading.local()
        self.skip_seconds = float(settings.get("skip_seconds") or 0)
        self.skip_syncs = int(settings.get("skip_syncs") or 0)
        self.wait_for_start = bool(settings.get("wait_for_start"))
        self.t0 = float(settings.get("t0") or time.time())
        self.recording = not (self.skip_seconds > 0 or self.skip_syncs > 0
                              or self.wait_for_start)
        self.seen = 0  # syncs seen, recorded or not
        self.skipped = 0
        self.recorded = 0
        self.next_start_check = 0.0
        self.profile_syncs = int(settings.get("profile_syncs") or 0)
        self.profile_seconds = float(settings.get("profile_seconds") or 0)
        self.profiler = None
        self.profile_done = False
        self.profile_started = 0.0
        self.profiled = 0
        self.markers: list = []
        self.torch = None
        self.armed: dict | None = None
        self.open_file()

    # The events file ---------------------------------------------------------------
    def open_file(self) -> None:
        """Open this process's own file (again after a fork)."""
        name = f"proc-{os.getpid()}-{time.monotonic_ns() & 0xffffff:06x}.jsonl"
        os.makedirs(self.folder, exist_ok=True)
        self.fd = os.open(os.path.join(self.folder, name),
                          os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.emit({"t": "process", "schema": SCHEMA, "pid": os.getpid(),
                   "ppid": os.getppid(), "time": time.time(),
                   "python": "%d.%d.%d" % sys.version_info[:3],
                   "recording": self.recording})

    def emit(self, event: dict) -> None:
        """Append one event as one line."""
        data = (json.dumps(event, separators=(",", ":")) + "\n").encode("utf-8")
        with self.lock:
            try:
                os.write(self.fd, data)
            except OSError:
                pass

    def note(self, text: str) -> None:
        """A line for the user, printed once by ``reviewbot trace`` after the run."""
        self.emit({"t": "note", "text": text})

    def after_fork(self) -> None:
        """A forked child writes its own file and starts with nothing of its parent's."""
        self.lock = threading.RLock()
        self.local = threading.local()
        self.sites = {}
        self.profiler = None
        self.markers = []
        try:
            os.close(self.fd)
        except OSError:
            pass
        self.open_file()
        if self.armed is not None:  # the detectors armed in the parent are on here too
            self.emit(self.armed)

    # Recording start -------------------------------------------------------------
    def start(self, how: str) -> None:
        """Begin recording (warm-up over)."""
        with self.lock:
            if self.recording:
                return
            self.recording = True
            self.emit({"t": "recording", "how": how, "skipped": self.skipped,
                       "time": time.time()})

    def should_record(self) -> bool:
        """Whether this sync is recorded (counts the warm-up ones that are not)."""
        self.seen += 1
        if not self.recording:
            if self.skip_syncs and self.seen > self.skip_syncs:
                self.start("skip-syncs")
            elif self.skip_seconds and time.time() - self.t0 >= self.skip_seconds:
                self.start("skip-seconds")
            else:
                now = time.monotonic()
                if now >= self.next_start_check:
                    self.next_start_check = now + 0.05
                    if os.path.exists(os.path.join(self.folder, START_FILE)):
                        self.start("start() in another process")
        if not self.recording:
            self.skipped += 1
            return False
        return True

    # Frames ---------------------------------------------------------------------------
    def project_path(self, filename: str) -> str | None:
        """The project-relative path of a code file, or None outside the project."""
        known = self.inside.get(filename, False)
        if known is not False:
            return known
        rel = None
        if filename and not filename.startswith("<"):
            real = os.path.realpath(filename)
            prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix,
                                                      sys.exec_prefix)}
            under_prefix = any(real.startswith(p + os.sep) for p in prefixes
                               if p != self.root and not self.root.startswith(p + os.sep))
            if real.startswith(self.root + os.sep) and not under_prefix \
                    and not real.startswith(self.here + os.sep) and os.path.isfile(real):
                candidate = os.path.relpath(real, self.root).replace(os.sep, "/")
                parts = candidate.split("/")
                if not any(p in ("site-packages", "dist-packages", "__pypackages__")
                           for p in parts):
                    rel = candidate
        self.inside[filename] = rel
        return rel

    def stack(self, frame) -> tuple[list, object, str | None]:
        """The stack from ``frame`` outwards: project frames by path, line and function,
        runs of other frames as a count; the innermost project frame and its path."""
        out: list = []
        outside = 0
        innermost = None
        innermost_path = None
        kept = 0
        while frame is not None:
            code = frame.f_code
            rel = self.project_path(code.co_filename)
            if rel is None:
                outside += 1
            else:
                if outside:
                    out.append({"outside": outside})
                    outside = 0
                if kept < MAX_FRAMES:
                    out.append({"path": rel, "line": frame.f_lineno or 0,
                                "function": getattr(code, "co_qualname", code.co_name)})
                    kept += 1
                else:
                    outside += 1
                if innermost is None:
                    innermost, innermost_path = frame, rel
            frame = frame.f_back
        if outside:
            out.append({"outside": outside})
        return out, innermost, innermost_path

    def intended(self, stack: list, frames) -> bool:
        """Whether a project frame on the stack is inside an allow region (a ``with``
        block of a context manager the packs name, e.g. ``gpu_sync_allowed()``)."""
        if not self.allow:
            return False
        frame = frames
        while frame is not None:
            filename = frame.f_code.co_filename
            if self.project_path(filename) is not None:
                for start, end in self.allowed_spans(filename):
                    if start <= (frame.f_lineno or 0) <= end:
                        return True
            frame = frame.f_back
        return False

    def allowed_spans(self, filename: str) -> list:
        """The line spans of the allow regions' ``with`` blocks in a file (parsed once)."""
        spans = self.allowed.get(filename)
        if spans is None:
            spans = []
            try:
                tree = ast.parse("".join(linecache.getlines(filename)))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, (ast.With, ast.AsyncWith)) and any(
                        self._names_allow(item.context_expr) for item in node.items):
                    spans.append((node.lineno, node.end_lineno or node.lineno))
            self.allowed[filename] = spans
        return spans

    def _names_allow(self, expr) -> bool:
        if isinstance(expr, ast.Call):
            expr = expr.func
        name = expr.attr if isinstance(expr, ast.Attribute) else \
            expr.id if isinstance(expr, ast.Name) else None
        return name in self.allow

    # What was called -------------------------------------------------------------------
    def operation(self, frame) -> tuple[str | None, str]:
        """The operation the frame is executing (``tolist``, ``item``, ``[]``, ``bool``)
        and what its text says about the copy's direction ("cpu" for ``.to("cpu")``)."""
        if frame is None:
            return None, ""
        key = (frame.f_code, frame.f_lasti)
        known = self.ops.get(key)
        if known is not None:
            return known
        found: tuple[str | None, str] = (None, "")
        try:
            text = self._instruction_text(frame)
            if text:
                found = _operation_of(text)
        except Exception:  # what the op was is a refinement; never fail a sync for it
            found = (None, "")
        self.ops[key] = found
        return found

    @staticmethod
    def _instruction_text(frame) -> str:
        code = frame.f_code
        lines = linecache.getlines(code.co_filename)
        positions = getattr(code, "co_positions", None)
        if positions is None or frame.f_lasti < 0:  # Python 3.10: the whole line
            number = frame.f_lineno or 0
            return lines[number - 1].strip() if 0 < number <= len(lines) else ""
        for index, position in enumerate(positions()):
            if index == frame.f_lasti // 2:
                start, end, col, end_col = position
                break
        else:
            return ""
        if start is None or end is None or col is None or end_col is None:
            return ""
        chosen = [lines[n - 1].encode("utf-8") for n in range(start, end + 1)
                  if 0 < n <= len(lines)]
        if not chosen:
            return ""
        if len(chosen) == 1:
            data = chosen[0][col:end_col]
        else:
            data = chosen[0][col:] + b"".join(chosen[1:-1]) + chosen[-1][:end_col]
        return data.decode("utf-8", "replace")

    # A sync ---------------------------------------------------------------------------
    def caller(self, frame):
        """The frame that called into torch: the hook's own frames, torch's callback
        registry and the warnings module's frames left out, so that the gpu-trace callback
        and the warning of one sync name the same frame."""
        while frame is not None and self.machinery(frame.f_code.co_filename):
            frame = frame.f_back
        return frame

    def machinery(self, filename: str) -> bool:
        """Whether frames of this file are the tracer's or the hooks' plumbing."""
        known = self.plumbing.get(filename)
        if known is None:
            real = os.path.realpath(filename) if not filename.startswith("<") else filename
            known = os.path.dirname(real) == self.here or (
                os.path.basename(real) in ("warnings.py", "_py_warnings.py")
                and os.path.dirname(real) == os.path.dirname(os.__file__)) or (
                os.path.basename(real) == "_utils.py"
                and os.path.basename(os.path.dirname(real)) == "torch")
            self.plumbing[filename] = known
        return known

    def sync(self, hook: str, frame) -> None:
        """Record one synchronisation seen by ``hook`` (stream, device, event or warning)."""
        local = self.local
        if getattr(local, "busy", False):
            return
        local.busy = True
        try:
            self._sync(hook, self.caller(frame))
        except Exception as exc:  # the program must never see the tracer fail
            if not getattr(local, "failed", False):
                local.failed = True
                self.note(f"an internal error while recording a sync: "
                          f"{exc.__class__.__name__}")
        finally:
            local.busy = False

    def _sync(self, hook: str, frame) -> None:
        if hook == "warning":
            # The gpu-trace callback ran before the sync and the warning comes after the
            # operation: the same sync, once, when the frame and instruction agree.
            pending = getattr(self.local, "pending", None)
            if pending is not None and pending[0] is frame and \
                    pending[1] == frame.f_lasti and pending[2] > 0:
                pending[2] -= 1
                return
        stack, innermost, path = self.stack(frame)
        caller = innermost
        if caller is None:  # no project frame: the operation of the outermost user frame
            caller = frame
        if hook != "warning" and frame is not None:
            pending = getattr(self.local, "pending", None)
            if pending is not None and pending[0] is frame and pending[1] == frame.f_lasti:
                pending[2] += 1
            else:
                self.local.pending = [frame, frame.f_lasti, 1]
        if not self.should_record():
            return
        op, detail = self.operation(caller)
        kind, kind_from = _kind(hook, op, detail)
        intended = self.intended(stack, innermost) if innermost is not None else False
        key = (kind, intended, tuple((f.get("path"), f.get("line"), f.get("outside"))
                                     for f in stack))
        with self.lock:
            site = self.sites.get(key)
            if site is None:
                site = len(self.sites) + 1
                self.sites[key] = site
                record = {"t": "site", "s": site, "kind": kind, "kind_from": kind_from,
                          "op": op, "by": "debug-mode" if hook == "warning" else "gpu-trace",
                          "intended": intended, "stack": stack}
                if path is not None:
                    number = innermost.f_lineno or 0
                    text = linecache.getline(innermost.f_code.co_filename, number)
                    record.update({"path": path, "line": number, "hash": line_hash(text),
                                   "function": getattr(innermost.f_code, "co_qualname",
                                                       innermost.f_code.co_name)})
                self.emit(record)
            self.recorded += 1
            self.emit({"t": "hit", "s": site})
        self.profile(site, before=hook != "warning")

    # The profiler window ----------------------------------------------------------------
    def profile(self, site: int, before: bool) -> None:
        """Inside the window: a marker in the profiler's timeline next to this sync."""
        if self.profile_done or not (self.profile_syncs or self.profile_seconds):
            return
        torch = self.torch
        if torch is None:
            return
        if self.profiler is None:
            try:
                import importlib

                importlib.import_module("torch.profiler")
                activities = [torch.profiler.ProfilerActivity.CPU,
                              torch.profiler.ProfilerActivity.CUDA]
                self.profiler = torch.profiler.profile(activities=activities)
                self.profiler.start()
            except Exception as exc:
                self.profile_done = True
                self.profiler = None
                self.note(f"the profiler could not start ({exc.__class__.__name__}): "
                          "no wait times")
                return
            self.profile_started = time.monotonic()
            self.emit({"t": "window", "state": "started", "time": time.time()})
        elapsed = time.monotonic() - self.profile_started
        if (self.profile_syncs and self.profiled >= self.profile_syncs) or \
                (self.profile_seconds and elapsed >= self.profile_seconds):
            self.finish_profile()
            return
        self.profiled += 1
        name = f"reviewbot_sync_{len(self.markers)}"
        try:
            with torch.profiler.record_function(name):
                pass
        except Exception:
            return
        self.markers.append((name, site, before))

    def finish_profile(self) -> None:
        """Close the window: each marker's sync call and copy, from the profiler's events."""
        if self.profile_done or self.profiler is None:
            return
        self.profile_done = True
        profiler, self.profiler = self.profiler, None
        try:
            profiler.stop()
            events = list(profiler.events())
        except Exception as exc:
            self.note(f"the profiler's events could not be read ({exc.__class__.__name__}): "
                      "no wait times")
            return
        waits = match_waits(events, self.markers)
        for site, wait_us, kind in waits:
            self.emit({"t": "wait", "s": site, "us": wait_us, "kind": kind})
        self.emit({"t": "window", "state": "closed", "syncs": len(self.markers),
                   "matched": sum(1 for w in waits if w[1] is not None),
                   "seconds": round(time.monotonic() - self.profile_started, 3)})

    def at_exit(self) -> None:
        """Close the window if it is still open; say how the process ended."""
        try:
            self.finish_profile()
        finally:
            self.emit({"t": "exit", "seen": self.seen, "skipped": self.skipped,
                       "recorded": self.recorded})


def _operation_of(text: str) -> tuple[str | None, str]:
    """The operation an instruction's source text performs."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, ""
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else None
        detail = ""
        if name == "to":
            words = " ".join(ast.dump(a) for a in (*node.args, *node.keywords))
            detail = "cpu" if "'cpu'" in words or "cpu" in text.split("(", 1)[-1] else ""
        return name, detail
    if isinstance(node, ast.Subscript):
        return "[]", ""
    if isinstance(node, (ast.Name, ast.Attribute, ast.Compare, ast.BoolOp, ast.UnaryOp)):
        return "bool", ""
    return None, ""


def _kind(hook: str, op: str | None, detail: str) -> tuple[str, str]:
    """The kind of a sync, and what it was deduced from (the hook, the call, a default)."""
    if hook == "device":
        return "device-sync", "hook"
    if hook == "event":
        return "event-sync", "hook"
    if op in PAGEABLE_OPS or (op == "to" and detail == "cpu"):
        return "copy-to-pageable", "call"
    if op in DEVICE_OPS or op == "to":
        return "copy-to-device", "call"
    if op in ("synchronize", "copy_"):
        return "stream-sync", "call"
    if op is not None:
        return "copy-to-pinned", "call"
    return "copy-to-pinned", "default"


def _interval(event) -> tuple[float, float]:
    span = event.time_range
    return float(span.start), float(span.end)


def match_waits(events: list, markers: list) -> list:
    """For each marker (name, site, before), the wait of its sync and the copy's kind.

    A marker made before a sync (the gpu-trace callback) is matched with the first
    host-blocking runtime call that starts after it and before the next marker; one made
    after (the sync debug mode's warning) with the last one that ended before it. The
    kind comes from the copy in between: a device-to-host copy into pageable or pinned
    memory, or a host-to-device copy."""
    names = {name: (site, before) for name, site, before in markers}
    placed = []
    calls = []
    copies = []
    for event in events:
        name = getattr(event, "name", "")
        if name in names:
            placed.append((_interval(event)[0], name, getattr(event, "thread", None)))
        elif name in WAIT_CALLS:
            calls.append((*_interval(event), getattr(event, "thread", None)))
        elif name.startswith("Memcpy "):
            copies.append((*_interval(event), name))
    placed.sort()
    calls.sort()
    copies.sort()
    used: set = set()
    results = []
    for index, (at, name, thread) in enumerate(placed):
        site, before = names[name]
        following = placed[index + 1][0] if index + 1 < len(placed) else float("inf")
        previous = placed[index - 1][0] if index > 0 else float("-inf")
        if before:
            candidates = [i for i, c in enumerate(calls) if at <= c[0] < following]
        else:
            candidates = [i for i, c in enumerate(calls) if previous <= c[0] and c[1] <= at]
            candidates.reverse()
        same = [i for i in candidates if calls[i][2] == thread]
        chosen = next((i for i in (same or candidates) if i not in used), None)
        if chosen is None:
            results.append((site, None, None))
            continue
        used.add(chosen)
        start, end, _ = calls[chosen]
        kind = None
        # The copy belongs to this sync: after the marker (or, for a marker made after the
        # sync, after the wait call before it) and before the sync call ended.
        low = at if before else max([previous] + [c[1] for c in calls if c[1] <= start])
        for copy_start, _, copy_name in copies:
            if low <= copy_start <= end:
                kind = ("copy-to-pageable" if "Pageable" in copy_name else "copy-to-pinned") \
                    if "DtoH" in copy_name else \
                    "copy-to-device" if "HtoD" in copy_name and "Pageable" in copy_name \
                    else None
                break
        results.append((site, round(end - start, 3), kind))
    return results


# Arming when torch is imported ---------------------------------------------------------
class _TorchFinder:
    """Finds nothing itself: wraps torch's loader so that the hooks arm once torch is in."""

    def __init__(self, state: _State) -> None:
        self.state = state
        self.done = False

    def find_spec(self, name, path=None, target=None):
        """torch's own spec, with a loader that arms the hooks after torch's code ran."""
        if name != "torch" or self.done:
            return None
        self.done = True
        import importlib.util

        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _ArmingLoader(spec.loader, self.state)
        return spec


class _ArmingLoader:
    """torch's loader, and the hooks armed once torch's ``__init__`` has run."""

    def __init__(self, loader, state: _State) -> None:
        self.loader = loader
        self.state = state

    def create_module(self, spec):
        """As torch's loader does."""
        return self.loader.create_module(spec)

    def exec_module(self, module):
        """Run torch's ``__init__``, then arm."""
        self.loader.exec_module(module)
        arm(self.state, module)

    def __getattr__(self, attr):
        return getattr(self.loader, attr)


def arm(state: _State, torch) -> None:
    """Turn the detectors on (without initialising CUDA); note what is missing."""
    state.torch = torch
    status: dict = {"t": "armed", "torch": str(getattr(torch, "__version__", "?"))}
    cuda = getattr(torch, "cuda", None)
    lazy = getattr(cuda, "_lazy_call", None)
    setter = getattr(getattr(torch, "_C", None), "_cuda_set_sync_debug_mode", None)
    if not state.settings.get("debug_mode", True):
        status["debug_mode"] = "off (--no-sync-debug-mode)"
    elif lazy is None or setter is None:
        missing = "torch.cuda._lazy_call" if lazy is None else \
            "torch._C._cuda_set_sync_debug_mode"
        status["debug_mode"] = f"unavailable: this torch has no {missing}"
    else:
        _hook_warnings(state)

        def switch_on() -> None:
            try:
                setter(1)
            except Exception as exc:
                state.note(f"sync debug mode could not be set ({exc.__class__.__name__})")

        try:
            lazy(switch_on)
            status["debug_mode"] = "on"
        except Exception as exc:
            status["debug_mode"] = f"unavailable: {exc.__class__.__name__}"
    status["gpu_trace"] = _hook_gpu_trace(state, torch)
    state.armed = status
    state.emit(status)


def _hook_warnings(state: _State) -> None:
    import warnings

    warnings.filterwarnings("always", message=SYNC_WARNING, category=UserWarning)
    name = "_showwarnmsg" if hasattr(warnings, "_showwarnmsg") else "showwarning"
    original = getattr(warnings, name)

    def show(*args, **kwargs):
        message = args[0] if args else kwargs.get("message")
        text = str(getattr(message, "message", message))
        if SYNC_WARNING in text:
            state.sync("warning", sys._getframe(1))
            return None
        return original(*args, **kwargs)

    setattr(warnings, name, show)


def _hook_gpu_trace(state: _State, torch) -> str:
    try:
        import importlib

        trace = importlib.import_module("torch.cuda._gpu_trace")
        activate = getattr(torch._C, "_activate_gpu_trace")
        registrations = [getattr(trace, f"register_callback_for_{what}_synchronization")
                         for what in ("stream", "device", "event")]
    except (ImportError, AttributeError) as exc:
        return f"unavailable: {exc.__class__.__name__}: {exc}"

    def on_stream(stream: int) -> None:
        state.sync("stream", sys._getframe(1))

    def on_device() -> None:
        state.sync("device", sys._getframe(1))

    def on_event(event: int) -> None:
        state.sync("event", sys._getframe(1))

    try:
        for register, callback in zip(registrations, (on_stream, on_device, on_event)):
            register(callback)
        activate()
    except Exception as exc:
        return f"unavailable: {exc.__class__.__name__}"
    return "on"


_STATE: _State | None = None


def install() -> None:
    """Set the hooks up in this process (from sitecustomize), once."""
    global _STATE
    if _STATE is not None:
        return
    raw = os.environ.get(ENV)
    if not raw:
        return
    settings = json.loads(raw)
    state = _State(settings)
    _STATE = state
    if "torch" in sys.modules:
        arm(state, sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchFinder(state))
    atexit.register(state.at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=state.after_fork)


def start() -> None:
    """``reviewbot.trace.start()``: recording begins here, and in the program's other
    processes at their next sync."""
    state = _STATE
    if state is None:
        return
    try:
        with open(os.path.join(state.folder, START_FILE), "a", encoding="utf-8"):
            pass
    except OSError:
        pass
    state.start("start()")
