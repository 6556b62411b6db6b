"""The one list of rules. A built-in rule is added here and nowhere else; a project's own
rules (``rule-modules``) join them when its configuration is read."""

from __future__ import annotations

import re
from typing import Sequence

from reviewbot.errors import ReviewbotError
from reviewbot.rule import Rule
from reviewbot.rules.rb001_syntax_error import SyntaxErrorRule
from reviewbot.rules.rb002_rule_crash import RuleCrash
from reviewbot.rules.rb003_unreadable_file import UnreadableFile
from reviewbot.rules.rb101_tolist_on_cuda_tensor import TolistOnCudaTensor
from reviewbot.rules.rb102_item_on_cuda_tensor import ItemOnCudaTensor
from reviewbot.rules.rb103_blocking_copy_to_host import BlockingCopyToHost
from reviewbot.rules.rb104_implicit_sync import ImplicitSync
from reviewbot.rules.rb105_explicit_sync import ExplicitSync
from reviewbot.rules.rb106_unsynchronised_async_copy import UnsynchronisedAsyncCopy
from reviewbot.rules.rb107_blocking_copy_to_device import BlockingCopyToDevice
from reviewbot.rules.rb108_runtime_sync import RuntimeSync
from reviewbot.rules.rb109_event_wait import EventWait
from reviewbot.rules.rb201_buffer_bound_mismatch import BufferBoundMismatch
from reviewbot.rules.rb202_pinned_alloc_in_hot_path import PinnedAllocInHotPath
from reviewbot.rules.rb203_unguarded_pin_memory import UnguardedPinMemory
from reviewbot.rules.rb301_docstring_coverage import DocstringCoverage
from reviewbot.rules.rb302_missing_docstring import MissingDocstring

BUILTIN: tuple[type[Rule], ...] = (
    SyntaxErrorRule,
    RuleCrash,
    UnreadableFile,
    TolistOnCudaTensor,
    ItemOnCudaTensor,
    BlockingCopyToHost,
    ImplicitSync,
    ExplicitSync,
    UnsynchronisedAsyncCopy,
    BlockingCopyToDevice,
    RuntimeSync,
    EventWait,
    BufferBoundMismatch,
    PinnedAllocInHotPath,
    UnguardedPinMemory,
    DocstringCoverage,
    MissingDocstring,
)

RULES: tuple[type[Rule], ...] = BUILTIN  # the built-in rules, then the project's
BY_CODE: dict[str, type[Rule]] = {rule.code: rule for rule in RULES}


_UNLOADED = [False]  # the project names rule modules that this run does not import


def set_project_rules(rules: Sequence[type[Rule]], unloaded: bool = False) -> None:
    """Make ``rules`` (a project's own, validated by reviewbot.project_rules) the rules
    that follow the built-in ones, replacing any set before. ``unloaded``: the project
    names rule modules that are not imported (project code is off)."""
    global RULES, BY_CODE
    RULES = (*BUILTIN, *rules)
    BY_CODE = {rule.code: rule for rule in RULES}
    _UNLOADED[0] = unloaded


def project_rules_unloaded() -> bool:
    """Whether the project's rule modules are named but not imported in this run."""
    return _UNLOADED[0]


def project_rules() -> tuple[type[Rule], ...]:
    """The project's own rules now registered."""
    return RULES[len(BUILTIN):]


def get_rule(code: str) -> type[Rule]:
    """The rule with this code (or kebab-case name)."""
    key = code.strip()
    rule = BY_CODE.get(key.upper())
    if rule is None:
        rule = next((r for r in RULES if r.name == key.lower()), None)
    if rule is None:
        raise ReviewbotError(f"unknown rule {code!r}; `reviewbot rules` lists them")
    return rule


def matching(selector: str) -> list[type[Rule]]:
    """Rules selected by a code, a code prefix (`RB3`), a name, or `ALL`."""
    sel = selector.strip().upper()
    if sel == "ALL":
        return list(RULES)
    exact = [r for r in RULES if r.code == sel or r.name.upper() == sel]
    if exact:
        return exact
    # A prefix is letters, then digits (RB1, ENG): the codes that start with it.
    if not re.fullmatch(r"[A-Z]+[0-9]*", sel):
        return []
    return [r for r in RULES if r.code.startswith(sel)]
