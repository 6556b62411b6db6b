"""What the GPU->host sync rules (RB101-RB106) share: the analysis, hot-path gating, messages."""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

from reviewbot.analysis.gpu import CUDA, UNKNOWN, Site, trigger_words
from reviewbot.context import FileContext
from reviewbot.finding import Finding
from reviewbot.rule import Option, Rule

INCLUDE_UNKNOWN = Option(
    "include-unknown", False,
    "Also report tensors whose device is unknown (as warnings).", (bool,))


class SyncRule(Rule):
    """A rule that reports the analysis's sites of its own code."""

    severity = "error"
    # The harm a site does, said once per rule, after the site itself.
    consequence: ClassVar[str] = ""
    # Only in hot paths (all but RB106, a correctness bug wherever it is).
    hot_only: ClassVar[bool] = True
    # Words a file must hold for this rule's sites to exist in it.
    sync_words: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def applies_to(cls, text: str, settings: Mapping[str, Any], packs: Any = None) -> bool:
        """A site needs its sync word, and (for hot-only rules) an entry point's name."""
        if "torch" not in text and "cuda" not in text:
            return False
        if cls.sync_words and not any(word in text for word in cls.sync_words):
            return False
        if not cls.hot_only or packs is None:
            return True
        words = trigger_words(packs)
        return not words or any(word in text for word in words)

    def check_file(self, ctx: FileContext) -> None:
        """Report this rule's sites in the file."""
        analysis = ctx.gpu
        include_unknown = bool(self.settings.get("include-unknown", False))
        for site in analysis.sites:
            if site.code != self.code:
                continue
            if site.label.kind == UNKNOWN and not include_unknown:
                continue
            if site.label.kind not in (CUDA, UNKNOWN) and self.code not in ("RB105", "RB106"):
                continue
            chain = analysis.hot.get(site.function)
            if self.hot_only and chain is None:
                continue
            ctx.findings.append(self.finding(ctx.path, site, chain))

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
