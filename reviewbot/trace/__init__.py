"""``reviewbot.trace.start()``: where a traced program's warm-up ends.

Call it once the program reaches its steady state (after model loading, CUDA-graph
capture and the first few steps); ``reviewbot trace --wait-for-start`` then records the
syncs from that point on, in this process and, from their next sync, in the program's
other processes. Outside ``reviewbot trace`` it does nothing, costs nothing and imports
nothing (torch included).
"""

from __future__ import annotations

import sys

__all__ = ["start"]

# The module ``reviewbot trace`` loads into each traced process (see reviewbot/trace/_hook.py).
HOOK_MODULE = "_reviewbot_trace_hook"


def start() -> None:
    """Start recording synchronisations (a no-op when the program is not being traced)."""
    hook = sys.modules.get(HOOK_MODULE)
    if hook is not None:
        hook.start()
