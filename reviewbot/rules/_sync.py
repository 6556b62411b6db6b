"""What the GPU->host sync rules (RB101-RB106) share: the analysis, hot-path gating, messages."""

from __future__ import annotations

import ast
import dataclasses
from typing import Any, ClassVar, Mapping

from reviewbot.analysis.gpu import CUDA, UNKNOWN, Site, trigger_words
from reviewbot.context import FileContext
from reviewbot.finding import Finding, Fix
from reviewbot.rule import AstRule, Option

INCLUDE_UNKNOWN = Option(
    "include-unknown", False,
    "Also report tensors whose device is unknown (as warnings).", (bool,))
HELPER_NAME = Option(
    "helper-name", "_to_list",
    "Name of the event-synced readback helper the fix calls (and adds when missing).",
    (str,), lambda v: None if v.isidentifier() else "expected a Python identifier")


_LAST_FILE: list[Any] = [None, None, (False, False)]  # text, packs, their answer
_LAST_WORD: list[str] = [""]  # the entry-point word that the last hot file spelled


def _file_words(text: str, packs: Any) -> tuple[bool, bool]:
    """Whether the text names torch or CUDA, and an entry point's word (or there are no
    words to look for). Every RB1xx rule asks this of the same text: answered once."""
    if _LAST_FILE[0] is text and _LAST_FILE[1] is packs:
        return _LAST_FILE[2]
    torch_text = "torch" in text or "cuda" in text
    hot_text = False
    if torch_text and packs is not None:
        words = trigger_words(packs)
        # The word found last is tried first: a project's files share their vocabulary.
        last = _LAST_WORD[0]
        if not words or (last in words and last in text):
            hot_text = True
        else:
            for word in words:
                if word in text:
                    _LAST_WORD[0] = word
                    hot_text = True
                    break
    _LAST_FILE[:] = [text, packs, (torch_text, hot_text)]
    return torch_text, hot_text


class SyncRule(AstRule):
    """A rule that reports the analysis's sites of its own code."""

    kind = "analysis"  # the ast device analysis finds the sites; the rule filters them

    severity = "error"
    # The harm a site does, said once per rule, after the site itself.
    consequence: ClassVar[str] = ""
    # Only in hot paths (all but RB106, a correctness bug wherever it is).
    hot_only: ClassVar[bool] = True
    # Words a file must hold for this rule's sites to exist in it.
    sync_words: ClassVar[tuple[str, ...]] = ()

    project_facts = True

    @classmethod
    def applies_to_linked(cls, text: str, settings: Mapping[str, Any], packs: Any = None) -> bool:
        """A file with linked hot functions needs only torch and the rule's sync word."""
        if "torch" not in text and "cuda" not in text:
            return False
        return not cls.sync_words or any(word in text for word in cls.sync_words)

    @classmethod
    def applies_to(cls, text: str, settings: Mapping[str, Any], packs: Any = None) -> bool:
        """A site needs its sync word, and (for hot-only rules) an entry point's name."""
        torch_text, hot_text = _file_words(text, packs)
        if not torch_text or not (hot_text or not cls.hot_only or packs is None):
            return False
        return not cls.sync_words or any(word in text for word in cls.sync_words)

    def check_file(self, ctx: FileContext) -> None:
        """Report this rule's sites in the file."""
        analysis = ctx.gpu
        include_unknown = bool(self.settings.get("include-unknown", False))
        for site in analysis.sites:
            if site.code != self.code:
                continue
            if site.label.kind == UNKNOWN and not include_unknown:
                continue
            if site.label.kind not in (CUDA, UNKNOWN) and \
                    self.code not in ("RB105", "RB106", "RB107"):
                continue
            chain = analysis.hot.get(site.function)
            if self.hot_only and chain is None:
                continue
            finding = self.finding(ctx.path, site, chain)
            if site.label.kind == CUDA:
                fix = self.fix_for(ctx, site, analysis)
                if fix is not None:
                    finding = dataclasses.replace(finding, fix=fix)
            ctx.findings.append(finding)

    def fix_for(self, ctx: FileContext, site: Site, analysis: Any) -> Fix | None:
        """The fix of a site (none by default)."""
        return None

    # Shared by the readback fixes -------------------------------------------------------
    @staticmethod
    def _function_index(ctx: FileContext, site: Site, analysis: Any) -> dict[str, Any]:
        """The calls and the parents of the nodes of the function holding a site."""
        key = f"index:{site.function}"
        index = ctx.memo.get(key)
        if index is None:
            func = analysis.functions.get(site.function)
            root = func.node if func is not None else ctx.ast_tree
            calls, parents = {}, {}
            for node in ast.walk(root):
                for child in ast.iter_child_nodes(node):
                    parents[child] = node
                if isinstance(node, ast.Call):  # by their spans, as sites record them
                    calls[ctx.span(node)] = node
            index = ctx.memo[key] = {"calls": calls, "parents": parents}
        return index

    def call_at(self, ctx: FileContext, site: Site, analysis: Any) -> ast.Call | None:
        """The call a site was recorded at."""
        calls = self._function_index(ctx, site, analysis)["calls"]
        return calls.get((site.line, site.column, site.end_line, site.end_column))

    def parent_of(self, ctx: FileContext, site: Site, analysis: Any,
                  node: ast.AST) -> ast.AST | None:
        """A node's parent within the function holding a site."""
        return self._function_index(ctx, site, analysis)["parents"].get(node)

    def event_sync_fix(self, ctx: FileContext, site: Site, analysis: Any, replaced: ast.Call,
                       tensor: ast.expr, what: str) -> Fix | None:
        """Replace ``replaced`` by a call of the event-sync helper on ``tensor``."""
        from reviewbot.fixes.event_sync import EventSyncFixer

        helper = str(self.settings.get("helper-name", HELPER_NAME.default))
        key = f"event-sync:{helper}"
        fixer = ctx.memo.get(key)
        if fixer is None:
            fixer = EventSyncFixer(ctx.ast_tree, ctx.text, ctx.packs, helper, ctx.columns)
            ctx.memo[key] = fixer
        func = analysis.functions.get(site.function)
        if func is None:
            return None
        return fixer.fix(replaced, tensor, func.node, func.cls.node if func.cls else None, what)

    def finding(self, path: str, site: Site, chain: list[str] | None) -> Finding:
        """The finding of one site."""
        where = f" in hot path {' -> '.join(chain)}" if chain else ""
        if site.label.kind == UNKNOWN:
            why = "device unknown: reported because include-unknown is on"
        else:
            why = site.label.why
        message = f"{site.what}{where}: {self.consequence}"
        if why:
            message += f" [{why}]"
        return Finding(self.code, self.name, message, path, site.line, site.column,
                       site.end_line, site.end_column,
                       "warning" if site.label.kind == UNKNOWN else self.severity)
