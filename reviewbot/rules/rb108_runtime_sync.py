"""RB108 runtime-sync."""

from __future__ import annotations

from typing import Any

from reviewbot.finding import Finding
from reviewbot.rule import AstRule, Invalid, Option, Valid

MIN_COUNT = Option(
    "min-count", 100,
    "A sync the run saw this many times is reported even outside a hot function.", (int,),
    lambda v: None if v >= 1 else "expected at least 1")

_RUNNER = ("import torch\n"
           "class ModelRunner:\n"
           "    def execute_model(self, batch):\n"
           "        ids = self.ids(batch)\n"
           "        return ids\n")


def _entry(line: int, text: str, kind: str, count: int = 3, **extra: Any) -> dict[str, Any]:
    """A trace entry for the examples (the hash is of the line's text, as the tracer's)."""
    import hashlib

    digest = hashlib.sha256(text.strip().encode()).hexdigest()[:16]
    return {"path": "example.py", "line": line, "line_hash": digest, "kind": kind,
            "op": extra.get("op"), "function": "ModelRunner.execute_model",
            "intended": extra.get("intended", False), "count": count, "processes": 1,
            "waited": {"samples": 1, "total_ms": 0.5, "max_ms": 0.5},
            "stack": [{"path": "example.py", "line": line,
                       "function": "ModelRunner.execute_model"}]}


class RuntimeSync(AstRule):
    """A synchronisation the traced run saw that no rule reported (needs `--trace`).

    ## What it does
    Reads a trace written by `reviewbot trace` (`reviewbot check --trace trace.json`) and
    reports each place where the run synchronised the host with the GPU that no static
    rule (RB101-RB107, RB109) reported: when the place, or a frame above it on the recorded
    stack, lies in a function the analysis finds hot, or when the run saw it at least
    `min-count` times. The message gives the kind of sync, how often it ran, how long it
    waited in the profiled window, and the stack. Without `--trace` it reports nothing.
    Syncs inside an allow region (`with gpu_sync_allowed():`) are intended and never
    reported; an entry whose line changed since the run is stale and is not reported.

    ## Why is this bad?
    The static rules see a sync only where they can tell that a tensor is on the GPU; the
    run sees them all (a tensor passed through `*args`, a library helper, a `bool()` of a
    tensor in a condition). A sync that runs every step holds the host while the GPU
    drains; a copy to pageable memory also stalls every other thread's CUDA calls.
    An event sync (what `reviewbot fix`'s helper does) is reported as a warning only: it
    waits for one event, and other threads are not stalled.

    ## Example
    ```python
    def execute_model(self, batch):
        ids = self.ids(batch)  # the run saw a copy to pageable memory here, 1,024 times
        return ids
    ```

    ## Use instead
    ```python
    def execute_model(self, batch):
        ids = self.ids(batch)  # the helper copies through a pinned buffer and an event
        return ids
    ```
    (the fix is that of the static rule for the operation the message names: RB101 for
    `.tolist()`, RB102 for `.item()`, RB105 for a stream or device sync).

    ## Options
    - `min-count` (default 100): a place seen this many times is reported even outside a
      hot function.

    ## Fix safety
    No automatic fix: the trace names the place, not the code to change.
    """

    code = "RB108"
    kind = "analysis"
    name = "runtime-sync"
    summary = "A sync the traced run saw that no rule reported (with --trace)"
    severity = "error"
    options = (MIN_COUNT,)
    triggers = ()  # findings come from the trace, after the files are checked
    VALID = [
        Valid(_RUNNER),  # no trace: nothing
        Valid(_RUNNER, trace=(_entry(4, "        ids = self.ids(batch)",
                                     "copy-to-pageable", intended=True),)),
        Valid(_RUNNER, trace=(_entry(4, "        ids = self.ids(batch)  # changed",
                                     "copy-to-pageable"),)),  # stale
        Valid("def helper(x):\n    return x\n",
              trace=(_entry(2, "    return x", "copy-to-pinned", count=5),)),  # cold, rare
    ]
    INVALID = [
        Invalid(_RUNNER, line=4, message_contains="pageable",
                trace=(_entry(4, "        ids = self.ids(batch)", "copy-to-pageable",
                              op="tolist"),)),
        Invalid(_RUNNER, line=4, message_contains="other threads are not stalled",
                trace=(_entry(4, "        ids = self.ids(batch)", "event-sync"),)),
        Invalid("def helper(x):\n    return x\n", line=2, message_contains="min-count",
                trace=(_entry(2, "    return x", "copy-to-pinned", count=500),)),
    ]

    @classmethod
    def applies_to(cls, text: str, settings: Any, packs: Any = None) -> bool:
        """Never per file: the findings are made from the trace (see ``finding``)."""
        return False

    @classmethod
    def finding(cls, path: str, line: int, text: str, place: Any, chain: list[str] | None,
                min_count: int) -> Finding:
        """The finding of one place of the trace that no rule reported."""
        from reviewbot.trace.attach import KIND_TEXT, seen_text, stack_text

        main = place.main
        op = main.op
        what = {"[]": "indexing", "bool": "a truth test", None: "a call"}.get(
            op, f"`{op}()`")
        kind = place.kinds[0]
        where = f" in hot path {' -> '.join(chain)}" if chain else \
            f" (not in a hot path; at least min-count={min_count:,} times)"
        message = (f"{what} synchronised at run time and no rule reported it{where}: "
                   f"{seen_text(place)}; {KIND_TEXT[kind]} [stack: {stack_text(main.stack)}]")
        indent = len(text) - len(text.lstrip())
        severity = "warning" if all(k == "event-sync" for k in place.kinds) else cls.severity
        return Finding(cls.code, cls.name, message, path, line, indent + 1, line,
                       max(len(text.rstrip()), indent) + 1, severity,
                       details=(("runtime", place.runtime()),))
