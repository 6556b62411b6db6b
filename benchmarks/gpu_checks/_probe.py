"""Run each case under `torch.cuda.set_sync_debug_mode("error")`: sync, no sync, or the
error torch raised (the first line, cut to `width` characters)."""
from typing import Callable

import torch


def probe(cases: dict[str, Callable[[], object]], width: int = 140) -> dict[str, str]:
    out = {}
    for name, fn in cases.items():
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            fn()
            out[name] = "no sync"
        except RuntimeError as exc:
            first = str(exc).splitlines()[0][:width]
            out[name] = "sync" if "synchroniz" in str(exc) else f"error: {first}"
        except Exception as exc:
            out[name] = f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:width]}"
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return out
