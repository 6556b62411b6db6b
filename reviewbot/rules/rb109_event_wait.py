"""RB109 event-wait."""

from __future__ import annotations

import re

from reviewbot.fixes.event_sync import helper_text
from reviewbot.lazy import libcst as cst

from reviewbot.rule import Invalid, Valid
from reviewbot.rules._sync import EVENT, HELPER_NAME, UNKNOWN, SyncRule

# What an event is called when its type is not known: `copy_done`, `d2h_event`,
# `self._copy_events[i]`.
_EVENT_NAME = re.compile(r"(?:^|_)(?:events?|done)$")


class EventWait(SyncRule):
    """The host waits on a CUDA event in a hot path.

    ## What it does
    Finds `event.synchronize()` on a `torch.cuda.Event` (or on an object named as one:
    `copy_done`, `d2h_event`, `self._copy_events[i]`) inside a function that runs every
    step. The event-synced helper that `reviewbot fix` inserts (`helper-name`, default
    `_to_list`), or one of its shape that the fix reuses, is not reported.

    ## Why is this bad?
    An event wait is the cheap kind of host wait: it waits for the work recorded before
    the event only, and other host threads' CUDA calls do not stall with it (an event sync
    on the needed copy returned in under 0.4 ms on an H200 where `torch.cuda.synchronize()`
    took 22.4 ms). It still holds the host until that work is done, so the host cannot
    queue the next step meanwhile. Engines that overlap scheduling with the GPU wait as
    late as they can, often one step later. It is a warning, not an error like the other
    sync rules: this wait is what they recommend, and a wait placed where the value is
    first needed is often right. Say so with `# noqa: RB109`, or turn the rule off with
    `ignore = ["RB109"]`.

    ## Example
    ```python
    def execute_model(self, batch):
        out = self.model(batch)
        self.host_ids.copy_(out.ids, non_blocking=True)
        self.copy_done.record()
        self.copy_done.synchronize()
        return self.host_ids.tolist()
    ```

    ## Use instead
    ```python
    def execute_model(self, batch):
        out = self.model(batch)
        self.host_ids.copy_(out.ids, non_blocking=True)
        self.copy_done.record()
        return self.pending  # read the host copy in the next step, after it is done
    ```

    ## Options
    - `helper-name` (string, default `_to_list`): the event-synced readback helper that
      `reviewbot fix` inserts; its wait is not reported.

    ## Fix safety
    No automatic fix: when to wait depends on when the value is needed.
    """

    code = "RB109"
    name = "event-wait"
    summary = "The host waits on a CUDA event in a hot path"
    severity = "warning"
    options = (HELPER_NAME,)
    consequence = ("the host waits until the recorded work is done; wait as late as the "
                   "value allows (in the next step when scheduling overlaps)")
    CANDIDATES = ("synchronize",)
    QUIET_IN_ALLOWED_BLOCKS = False
    VALID = [
        Valid("import torch\nclass R:\n    def __init__(self):\n"
              "        self.s = torch.cuda.Stream()\n    def execute_model(self):\n"
              "        self.s.synchronize()\n"),  # RB105's
        Valid("import torch\nclass R:\n    def load_model(self):\n"
              "        done = torch.cuda.Event()\n        done.synchronize()\n"),
        Valid("import torch\nclass R:\n    def execute_model(self, t):\n"
              "        return self._to_list(t)\n"
              "    def _to_list(self, t):\n        self.ev.synchronize()\n"
              "        return t.tolist()\n"),
    ]
    INVALID = [
        Invalid("import torch\nclass R:\n    def __init__(self):\n"
                "        self.ev = torch.cuda.Event()\n    def execute_model(self):\n"
                "        self.ev.record()\n        self.ev.synchronize()\n", line=7,
                message_contains="torch.cuda.Event"),
        Invalid("class R:\n    def execute_model(self, result):\n"
                "        result.copy_done.synchronize()\n", line=3,
                message_contains="named as a CUDA event"),
    ]

    def _readback_helper(self, func: cst.FunctionDef) -> bool:
        """The fix's helper (``helper-name``), or a function of its shape: one tensor
        parameter (after ``self``), a non-blocking copy, the wait, a ``.tolist()``
        returned. ``reviewbot fix`` reuses such a helper; its wait is the one the fix makes."""
        if func.name.value == str(self.settings.get("helper-name", HELPER_NAME.default)):
            return True
        params = func.params
        if params.kwonly_params or not isinstance(params.star_arg, cst.MaybeSentinel) or \
                params.star_kwarg is not None or \
                len(params.posonly_params) + len(params.params) not in (1, 2):
            return False
        return helper_text(self.ctx.metadata_wrapper().module.code_for_node(func))

    def visit_Call(self, node: cst.Call) -> None:
        if self.callee_name(node) != "synchronize" or not isinstance(node.func, cst.Attribute):
            return
        chain = self.reporting_here()
        if chain is False or self.allowed(node) or self.torch_function(node) is not None:
            return
        if self._functions and self._readback_helper(self._functions[-1]):
            return  # the fix's own wait, or a helper of its shape that it would reuse
        receiver = self.receiver_of_method(node)
        if receiver is None:
            return
        holder = self.short(node.func.value)
        if receiver.kind == EVENT:
            why = receiver.evidence
        else:
            name = holder.rsplit(".", 1)[-1].split("[", 1)[0].lower()
            if receiver.kind != UNKNOWN or not _EVENT_NAME.search(name):
                return
            why = f"`{name}` is named as a CUDA event"
        self.report_sync(node, f"`{holder}.synchronize()` waits for the event", EVENT, why,
                         chain)
