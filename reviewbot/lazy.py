"""Modules imported when first used.

LibCST takes about a quarter of a second to import, and a run that finds every file in
its cache, or whose files hold nothing a LibCST rule matches, never parses with it.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """``name`` as a module object that runs the module's code on first attribute access
    (the module itself when it is already imported)."""
    known = sys.modules.get(name)
    if known is not None:
        return known
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}")
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


libcst = lazy_module("libcst")
