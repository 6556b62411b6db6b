"""One side of a scenario, in its own process: ``python -m reviewbot.verify.worker``.

Imports the scenario file and the module it names (``TARGET``, a path relative to the
code's folder) from one folder (the code before the fix, or after it), calls
``run(module, device)`` and writes what it returned, as plain data, to a JSON file. With
``--sync-debug``, the run happens under ``torch.cuda.set_sync_debug_mode("warn")`` and the
lines of the target file that synchronised are written too.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any


def plain(value: Any) -> Any:
    """Results as JSON data that keeps every type apart: tensors, tuples, objects."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return {"__float__": repr(value)}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, tuple):
        return {"__tuple__": [plain(v) for v in value]}
    if isinstance(value, dict):
        return {"__dict__": [[plain(k), plain(v)] for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        return {"__set__": sorted((plain(v) for v in value), key=repr)}
    if type(value).__name__ == "Tensor":
        return {"__tensor__": str(value.dtype), "shape": list(value.shape),
                "device": value.device.type, "values": plain(value.detach().cpu().tolist())}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__object__": type(value).__name__,
                "fields": {f.name: plain(getattr(value, f.name))
                           for f in dataclasses.fields(value)}}
    if hasattr(value, "__dict__"):
        return {"__object__": type(value).__name__,
                "fields": {k: plain(v) for k, v in vars(value).items()}}
    return {"__repr__": type(value).__name__, "text": repr(value)}


@dataclasses.dataclass
class TensorValue:
    """A tensor a scenario returned, as the parent process compares it."""

    dtype: str
    shape: list
    device: str
    values: Any


@dataclasses.dataclass
class ObjectValue:
    """An object a scenario returned: its class name and its fields."""

    type: str
    fields: dict


def unplain(data: Any) -> Any:
    """The values :func:`plain` wrote, back as Python values (tensors and objects as
    :class:`TensorValue` and :class:`ObjectValue`)."""
    if isinstance(data, list):
        return [unplain(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "__float__" in data:
        return float(data["__float__"])
    if "__tuple__" in data:
        return tuple(unplain(v) for v in data["__tuple__"])
    if "__dict__" in data:
        return {_hashable(unplain(k)): unplain(v) for k, v in data["__dict__"]}
    if "__set__" in data:
        return {_hashable(unplain(v)) for v in data["__set__"]}
    if "__tensor__" in data:
        return TensorValue(data["__tensor__"], data["shape"], data["device"],
                           unplain(data["values"]))
    if "__object__" in data:
        return ObjectValue(data["__object__"], {k: unplain(v) for k, v in data["fields"].items()})
    return ObjectValue(data.get("__repr__", "?"), {"repr": data.get("text")})


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    """Run the scenario on one side; exit 0 after writing the result (errors included)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("scenario")
    parser.add_argument("out")
    parser.add_argument("--device", default=None)
    parser.add_argument("--sync-debug", action="store_true")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    report: dict[str, Any] = {"ok": False}

    def write() -> int:
        Path(args.out).write_text(json.dumps(report), encoding="utf-8")
        return 0

    try:
        scenario = _load("reviewbot_scenario", Path(args.scenario))
        target_rel = getattr(scenario, "TARGET", None)
        run = getattr(scenario, "run", None)
        if not isinstance(target_rel, str) or not callable(run):
            report.update(stage="scenario", error=f"{args.scenario}: a scenario defines TARGET "
                          "(the module's path, relative to the code's folder) and run(module, "
                          "device)")
            return write()
    except Exception:
        report.update(stage="scenario", error=traceback.format_exc())
        return write()
    target = root / target_rel
    sys.path.insert(0, str(root))
    try:
        module = _load("reviewbot_target", target)
    except Exception:
        report.update(stage="import", error=f"cannot import {target}:\n"
                      + traceback.format_exc())
        return write()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    synced: list[dict[str, Any]] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if args.sync_debug and device == "cuda":
                torch.cuda.set_sync_debug_mode("warn")
            try:
                result = run(module, device)
            finally:
                if args.sync_debug and device == "cuda":
                    torch.cuda.set_sync_debug_mode(0)
                    torch.cuda.synchronize()
        for warning in caught:
            if "synchroniz" in str(warning.message) and Path(warning.filename) == target:
                synced.append({"line": warning.lineno,
                               "message": str(warning.message).splitlines()[0]})
    except Exception:
        report.update(stage="run", error=traceback.format_exc())
        return write()
    lines = {}
    for item in synced:
        lines.setdefault(item["line"], item)
    report.update(ok=True, device=device, result=plain(result),
                  sync_lines=sorted(lines.values(), key=lambda i: i["line"]))
    return write()


if __name__ == "__main__":
    sys.exit(main())
