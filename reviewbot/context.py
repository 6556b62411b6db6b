"""What a rule sees: one file (parsed lazily, each parse at most once) or the whole run."""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from reviewbot.finding import Finding
from reviewbot.source import Columns

if TYPE_CHECKING:
    import libcst

    from reviewbot.analysis.definitions import Definition
    from reviewbot.rule import Rule


class FileContext:
    """One source file and everything computed from it, each thing computed once."""

    def __init__(self, path: str, text: str, rel_path: str | None = None,
                 packs: Any = None, linked_hot: dict[str, list[str]] | None = None,
                 linked_devices: dict[str, list[str]] | None = None,
                 record_labels: bool = False) -> None:
        self.path = path  # as shown to the user
        # POSIX path relative to the configuration's folder, for glob options.
        self.rel_path = rel_path if rel_path is not None else path
        self.text = text
        self.packs = packs
        # The file's functions that are hot through other modules (the project's link phase).
        self.linked_hot = linked_hot or {}
        self.linked_devices = linked_devices or {}
        # Keep the analysis's labels by span: a LibCST rule reads device facts (providers).
        self.record_labels = record_labels
        self.findings: list[Finding] = []
        self.facts: dict[str, Any] = {}
        self.memo: dict[str, Any] = {}  # what rules share within this file (not reported)
        self._ast: ast.Module | None = None
        self._definitions: list[Definition] | None = None
        self._cst: libcst.Module | None = None
        self._wrapper: Any = None
        self._gpu: Any = None
        self._columns: Columns | None = None

    # Parses -----------------------------------------------------------------
    @property
    def ast_tree(self) -> ast.Module:
        """CPython's tree of the file (raises SyntaxError)."""
        if self._ast is None:
            with warnings.catch_warnings():  # the file's own oddities are not ours to print
                warnings.simplefilter("ignore", SyntaxWarning)
                warnings.simplefilter("ignore", DeprecationWarning)
                self._ast = ast.parse(self.text, filename=self.path, type_comments=False)
        return self._ast

    @property
    def columns(self) -> Columns:
        """Turns ``ast`` offsets (UTF-8 bytes) into the character columns findings use."""
        if self._columns is None:
            self._columns = Columns(self.text)
        return self._columns

    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        """An ``ast`` node's 1-based (line, column, end_line, end_column) in characters."""
        return self.columns.span(node)

    @property
    def definitions(self) -> list["Definition"]:
        """The module, classes and functions of the file, with their docstring state."""
        if self._definitions is None:
            from reviewbot.analysis.definitions import collect_definitions

            self._definitions = collect_definitions(self.ast_tree, self.columns)
        return self._definitions

    @property
    def gpu(self) -> Any:
        """Hot paths, tensor devices and sync sites of the file (RB1xx), computed once."""
        if self._gpu is None:
            from reviewbot.analysis.gpu import analyze
            from reviewbot.packs import PackData

            try:
                self._gpu = analyze(self.ast_tree, self.packs or PackData(), self.text,
                                    self.linked_hot, self.linked_devices, self.record_labels)
            except Exception as exc:  # every rule that asks gets the same error, computed once
                self._gpu = exc
        if isinstance(self._gpu, Exception):
            raise self._gpu
        return self._gpu

    def release(self) -> None:
        """Drop what was computed from the file (the findings and facts stay)."""
        if self._gpu is not None and not isinstance(self._gpu, Exception):
            self._gpu.release()
        self.memo.clear()
        self._gpu = self._ast = self._definitions = self._cst = self._wrapper = None
        self._columns = None

    @property
    def cst_module(self) -> "libcst.Module":
        """LibCST's tree of the file (raises libcst.ParserSyntaxError)."""
        if self._cst is None:
            import libcst

            self._cst = libcst.parse_module(self.text)
        return self._cst

    def metadata_wrapper(self) -> Any:
        """One MetadataWrapper per file, so metadata is resolved once for all rules; it
        carries the file's facts for the analysis-backed providers (reviewbot.providers)."""
        if self._wrapper is None:
            from reviewbot.cst_parse import FactsWrapper

            self._wrapper = FactsWrapper(self.cst_module, self)
        return self._wrapper

    # Reporting --------------------------------------------------------------
    def report(
        self,
        rule: "Rule | type[Rule]",
        message: str,
        line: int,
        column: int,
        end_line: int | None = None,
        end_column: int | None = None,
        fix: Any = None,
        details: dict[str, Any] | None = None,
        severity: Any = None,
    ) -> None:
        """Record a finding of ``rule`` at 1-based positions (at the rule's severity unless
        ``severity`` says otherwise)."""
        self.findings.append(
            Finding(
                code=rule.code,
                name=rule.name,
                message=message,
                path=self.path,
                line=line,
                column=column,
                end_line=end_line if end_line is not None else line,
                end_column=end_column if end_column is not None else column,
                severity=severity or rule.severity,
                fix=fix,
                details=tuple(sorted((details or {}).items())),
            )
        )

    def report_node(self, rule: "Rule", node: Any, message: str, fix: Any = None,
                    severity: Any = None) -> None:
        """Record a finding at a LibCST node's position (computed for the function being
        walked only, not for the whole tree: see reviewbot.providers.FileFacts.position)."""
        pos = self.metadata_wrapper().facts.position(node)
        # LibCST columns are 0-based; reports are 1-based.
        self.report(rule, message, pos.start.line, pos.start.column + 1,
                    pos.end.line, pos.end.column + 1, fix, severity=severity)

    def add_fact(self, code: str, data: Any) -> None:
        """Keep data for a rule's run-level :meth:`Rule.finish` (must be picklable)."""
        self.facts[code] = data


@dataclass
class RunContext:
    """The whole run: what run-level rules need to place and phrase their findings."""

    root_display: str  # where a finding about the whole checked set is reported
    extra: dict[str, Any] = field(default_factory=dict)
    # The configuration file as reports name it, when it lies inside the source root (where
    # code scanning can show a finding about the whole run), and its text.
    config_file: str | None = None
    config_text: str = ""

    def config_line(self, code: str | None = None) -> int:
        """The line of the configuration file that names ``code`` (its table or key), else
        the line that opens reviewbot's table, else 1."""
        from reviewbot.source import split_lines

        lines = split_lines(self.config_text)
        for number, line in enumerate(lines, start=1):
            if code and code in line:
                return number
        for number, line in enumerate(lines, start=1):
            if line.lstrip().startswith("[tool.reviewbot"):
                return number
        return 1

    def location(self, paths: Sequence[str]) -> dict[str, Any] | None:
        """Where a file-based viewer shows a finding about the whole run that has no better
        place: the configuration file, else the first of ``paths`` (None: neither)."""
        if self.config_file is not None:
            return {"path": self.config_file, "line": self.config_line()}
        return {"path": min(paths), "line": 1} if paths else None
