"""The engine: read each file, parse it once, run the enabled rules, collect findings.

Files are checked in worker processes (``--jobs``). A rule that raises becomes an
RB002 finding for that file; a file that kills its worker becomes one too, and every
other file is still checked.
"""

from __future__ import annotations

import ast
import dataclasses
import gc
import hashlib
import os
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from reviewbot import registry
from reviewbot.cache import ResultCache, content_key
from reviewbot.config import Config
from reviewbot.context import FileContext, RunContext
from reviewbot.finding import Finding
from reviewbot.packs import PackData
from reviewbot.rule import CstRule, Rule
from reviewbot.rules.rb001_syntax_error import SyntaxErrorRule
from reviewbot.rules.rb002_rule_crash import RuleCrash
from reviewbot.rules.rb003_unreadable_file import UnreadableFile
from reviewbot.source import Columns, UnreadableSource, _too_large, decode, read_bytes
from reviewbot.suppression import Suppressions, file_ignore_line


@dataclass
class FileResult:
    """What checking one file produced."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    # The file's project-index summary (plain data), when the job asked for one; the
    # engine moves it into the index cache, so cached results never hold one.
    summary: Any = None
    # Of a file-rules result: whether the project rules can report in the file at all, on
    # their own words and once the link finds hot functions in it (None: not known, so
    # yes). The engine asks for the second phase only where they can.
    gate: tuple[bool, bool] | None = None


@dataclass
class RunResult:
    """What a whole run produced."""

    findings: list[Finding]
    facts: dict[str, dict[str, Any]]  # rule code -> display path -> the file's facts
    files: int
    cached: int


# What a job runs: every rule (a run without a project index), the rules that need only
# the file (and its index summary), the rules that read linked project facts, or only the
# summary of a project file that is not checked.
ALL_RULES, FILE_RULES, PROJECT_RULES, SUMMARY_ONLY = 0, 1, 2, 3
_NOT_HOT = "-"  # in the links record: a file the project rules need only when hot, and not
# What a phase's cache key adds to the file's content key.
FILE_RULES_KEY, PROJECT_RULES_KEY = "|file-rules", "|project-rules|"


@dataclass(frozen=True)
class FileJob:
    """One file to check, with the names it is reported and matched by."""

    display: str
    rel: str
    data: bytes
    phase: int = ALL_RULES
    module: str | None = None  # summarise the file as this module (None: no summary)
    is_package: bool = False
    linked_hot: Any = None  # its functions hot through other modules, with their chains
    linked_devices: Any = None  # device facts of the project it reads (tensor fields, returns)
    config: int = 0  # which of the checker's configurations is the file's (0: the run's)


def _reads_labels(providers: Any) -> bool:
    """Whether a rule's providers need the analysis to keep its labels (the providers'
    module, and LibCST with it, is imported only when a CstRule runs)."""
    return any(getattr(p, "needs_labels", False) for p in providers)


class Checker:
    """Checks single files; lives in each worker process. A file is checked with the
    configuration its job names among ``configs`` (the first is ``config``, the run's)."""

    # Off only to measure that the LibCST gate is exact (benchmarks/cst_equivalence.py):
    # every LibCST rule then runs on every file that parses, and walks every function.
    cst_gate = True

    def __init__(self, config: Config, packs: PackData,
                 rules: Sequence[type[Rule]] | None = None, use_triggers: bool = True,
                 configs: Sequence[Config] = ()) -> None:
        self.use_triggers = use_triggers  # False only to test that the shortcut is exact
        self.config = config
        self.packs = packs
        # A list that grows (reviewbot.config.Configs.all) is read as it grows.
        self.configs: Sequence[Config] = configs or [config]
        # Default: the registry as it is now (with the project's own rules once loaded).
        self._all_rules = tuple(registry.RULES if rules is None else rules)
        self._by_config: dict[int, tuple[list[type[Rule]], Any]] = {}
        self.rules, self.ignore_specs = self._of(0)

    def _of(self, index: int) -> tuple[list[type[Rule]], Any]:
        """The enabled rules and compiled per-file-ignores of one configuration."""
        known = self._by_config.get(index)
        if known is None:
            config = self.configs[index]
            known = ([r for r in self._all_rules if r.code in config.enabled and not r.internal],
                     config.per_file_ignore_specs())
            self._by_config[index] = known
        return known

    def ignored_codes(self, rel: str, config: int = 0) -> set[str]:
        """Codes that per-file-ignores turns off for this file."""
        codes: set[str] = set()
        for spec, spec_codes in self._of(config)[1]:
            if spec.match_file(rel):
                codes |= spec_codes
        return codes

    def check(self, job: FileJob) -> FileResult:
        """Check one file; never raises for anything the file contains.

        The cyclic garbage collector waits while one file is checked: syntax trees hold
        no cycles, and its passes over a large tree cost a fifth of the parse. It runs
        again between files, so memory stays bounded by the largest file.
        """
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._check_one(job)
        finally:
            if was_enabled:
                gc.enable()

    def _rules_for(self, job: FileJob, text: str, ignored: set[str]) -> list[type[Rule]]:
        if job.phase == SUMMARY_ONLY:
            return []
        settings = self.configs[job.config].settings
        rules = [r for r in self._of(job.config)[0] if r.code not in ignored and (
            job.phase == ALL_RULES or (job.phase == PROJECT_RULES) == r.project_facts)]
        if not self.use_triggers:
            return rules
        return [r for r in rules if (not self.cst_gate and _ungated(r, text)) or _admits(
            r, text, settings.get(r.code, {}), self.packs, bool(job.linked_hot))]

    def _gate(self, text: str, ignored: set[str], config: int = 0,
              roots: Callable[[], bool] | None = None) -> tuple[bool, bool]:
        """Whether the project rules can apply to this text (see ``FileResult.gate``).

        ``roots``: whether the module may start a hot path of its own (None: not known, so
        it may). A rule that reports only in hot functions can report in a module that
        starts none only where the link finds functions hot through other modules: the
        second phase then skips the module unless the link does."""
        if not self.use_triggers:
            return True, True
        settings = self.configs[config].settings
        rules = [r for r in self._of(config)[0] if r.project_facts and r.code not in ignored]
        if not self.cst_gate and any(_ungated(r, text) for r in rules):
            return True, True
        starts: list[bool] = []

        def may_start() -> bool:
            if roots is None:
                return True
            if not starts:
                starts.append(roots())
            return starts[0]

        own = any(_admits(r, text, settings.get(r.code, {}), self.packs, False) and (
            not getattr(r, "HOT_ONLY", False) or may_start()) for r in rules)
        linked = own or any(_admits(r, text, settings.get(r.code, {}), self.packs, True)
                            for r in rules)
        return own, linked

    def _check_one(self, job: FileJob) -> FileResult:
        ignored = self.ignored_codes(job.rel, job.config)
        settings = self.configs[job.config].settings
        result = FileResult(job.display)
        try:
            source = decode(job.data)
        except UnreadableSource as exc:
            if UnreadableFile.code not in ignored and job.phase in (ALL_RULES, FILE_RULES):
                result.findings.append(_file_finding(UnreadableFile, job.display, f"Skipped: {exc}"))
            return result
        if file_ignore_line(source.text) is not None:
            # `# reviewbot: ignore-file`: no rule runs and nothing is reported (RB001 and
            # RB301's count included), as ruff's `# ruff: noqa`; the project index still
            # summarises the file, so the hot paths through it stay what they are.
            if job.phase == FILE_RULES:
                result.gate = (False, False)
            if job.module is not None:
                ctx = FileContext(job.display, source.text, job.rel, self.packs)
                try:
                    result.summary = _summary(ctx, job)
                finally:
                    ctx.release()
            return result
        ctx = FileContext(job.display, source.text, job.rel, self.packs, job.linked_hot,
                          job.linked_devices)
        if job.phase == FILE_RULES:
            # The summary parses the file anyway: only then are its functions looked at.
            result.gate = self._gate(source.text, ignored, job.config,
                                     (lambda: _may_start_a_hot_path(ctx))
                                     if job.module is not None else None)
        rules = self._rules_for(job, source.text, ignored)
        if job.phase == PROJECT_RULES and not rules:
            return result
        if any(issubclass(r, CstRule) and _reads_labels(r.METADATA_DEPENDENCIES) for r in rules):
            ctx.record_labels = True  # before any rule asks for the analysis
        try:
            if job.module is not None:
                result.summary = _summary(ctx, job)
            if job.phase == SUMMARY_ONLY:
                return result
            if self._parses(ctx, report=job.phase != PROJECT_RULES):
                plain = [r for r in rules if not issubclass(r, CstRule)]
                cst = [r for r in rules if issubclass(r, CstRule)]
                for rule_cls in plain:
                    rule = rule_cls(settings.get(rule_cls.code, {}), ctx)
                    try:
                        rule.check_file(ctx)
                    except Exception as exc:  # a rule's bug must not stop the run
                        _crash(ctx, rule_cls, exc)
                if cst:
                    self._run_cst_rules(ctx, cst, settings)
        finally:
            ctx.release()
        findings = [f for f in ctx.findings if f.code not in ignored]
        result.findings = Suppressions.parse(source.text).filter(findings) \
            if findings else []
        result.facts = ctx.facts
        return result

    def _parses(self, ctx: FileContext, report: bool = True) -> bool:
        if not report:  # the other phase reports why the file does not parse
            try:
                ctx.ast_tree
            except (SyntaxError, RecursionError, MemoryError, ValueError):
                return False
            return _unknown_future(ctx.ast_tree, ctx.columns) is None
        try:
            ctx.ast_tree
        except SyntaxError as exc:
            line = exc.lineno or 1
            column = exc.offset or 1
            end_line = getattr(exc, "end_lineno", None) or line
            end_column = getattr(exc, "end_offset", None) or column
            if (end_line, end_column) < (line, column):
                end_line, end_column = line, column
            ctx.report(SyntaxErrorRule, f"Syntax error: {exc.msg}", line, max(column, 1),
                       end_line, max(end_column, 1))
            return False
        except (RecursionError, MemoryError, ValueError) as exc:
            reason = "too deeply nested to parse" if isinstance(exc, RecursionError) \
                else f"cannot be parsed ({exc.__class__.__name__}: {exc})"
            ctx.report(SyntaxErrorRule, f"Syntax error: {reason}", 1, 1)
            return False
        unknown = _unknown_future(ctx.ast_tree, ctx.columns)
        if unknown is not None:  # the parser accepts it; the compiler refuses the file
            ctx.report(SyntaxErrorRule, f"Syntax error: future feature {unknown.name} is not "
                       "defined", unknown.line, unknown.column)
            return False
        return True

    def _run_cst_rules(self, ctx: FileContext, rules: list[type[CstRule]],
                       settings: Any = None) -> None:
        gated = self.use_triggers and self.cst_gate
        wrapper = None
        narrowed: dict[str, tuple[Any, list[type[CstRule]] | None]] | None = None
        if gated:
            rules = _with_a_hot_candidate(ctx, rules)
            if not rules:
                return  # no LibCST parse at all
            narrowed = _function_rules(ctx, rules, settings if settings is not None
                                       else self.config.settings)
            if narrowed is not None:
                local = [info for info, _ in narrowed.values()]
                if not local:
                    return  # no function where a rule can report
                from reviewbot.cst_parse import parse_functions

                wrapper = parse_functions(ctx, local)
                if wrapper is not None:
                    ctx._wrapper = wrapper
        import libcst  # only where a rule may report: most files never load it

        try:
            if wrapper is None:
                wrapper = ctx.metadata_wrapper()
        except libcst.ParserSyntaxError as exc:
            ctx.report(SyntaxErrorRule, f"Syntax error (LibCST): {exc.message}",
                       exc.raw_line, exc.raw_column + 1)
            return
        except RecursionError:
            ctx.report(SyntaxErrorRule, "Syntax error: too deeply nested to parse", 1, 1)
            return
        # Positions are not among them: a finding's span is computed for its function
        # alone when it is reported (reviewbot.providers.FileFacts.position).
        providers: set[Any] = set()
        for rule_cls in rules:
            providers.update(rule_cls.METADATA_DEPENDENCIES)
        try:
            metadata = _resolve(wrapper, providers)
        except Exception as exc:
            for rule_cls in rules:
                _crash(ctx, rule_cls, exc, "while computing metadata")
            return
        instances = []
        settings = self.config.settings if settings is None else settings
        for rule_cls in rules:
            try:
                rule = rule_cls(settings.get(rule_cls.code, {}), ctx)
            except Exception as exc:  # a project's rule may fail to start
                _crash(ctx, rule_cls, exc, "while starting")
                continue
            rule.metadata = metadata
            instances.append(rule)
        from reviewbot.cst_dispatch import BatchedVisitor

        facts = wrapper.facts

        def active(func: Any) -> list[CstRule]:
            """The rules that can report in a module-level function or method."""
            info = facts.function_info(func)
            chosen = _active_in(instances, facts.hot_chain(func) is not None,
                                info.summary.text if info is not None else None)
            only = narrowed.get(info.qualname) if narrowed is not None and info is not None \
                else None
            if only is not None and only[1] is not None:
                chosen = [rule for rule in chosen if type(rule) in only[1]]
            return chosen

        visitor = BatchedVisitor(instances, lambda rule, exc: _crash(ctx, type(rule), exc),
                                 facts.walking, active if gated else None)
        try:
            for root in wrapper.roots:
                visitor.walk(root)
        except RecursionError as exc:
            for rule in instances:
                _crash(ctx, type(rule), exc, "while walking the tree")


def _ungated(rule: type[Rule], text: str) -> bool:
    """With the LibCST gate off: a LibCST rule runs on every file that holds its trigger
    words (a precondition of its findings, as for every rule, not a part of the gate)."""
    return issubclass(rule, CstRule) and (
        rule.triggers is None or any(word in text for word in rule.triggers))


def _active_in(rules: Sequence[Any], hot: bool, text: str | None) -> list[Any]:
    """The rules (or rule classes) that can report in a function: a hot one for
    ``HOT_ONLY`` rules; one whose text holds a candidate for rules whose candidates are
    ``LOCAL_CANDIDATES`` (``text`` None: not known, so it may)."""
    chosen = []
    for rule in rules:
        kind = rule if isinstance(rule, type) else type(rule)
        if kind.HOT_ONLY and not hot:
            continue
        if kind.LOCAL_CANDIDATES and kind.CANDIDATES is not None and text is not None and \
                not any(word in text for word in kind.CANDIDATES):
            continue
        chosen.append(rule)
    return chosen


def _function_local(ctx: FileContext, rules: list[type[CstRule]],
                    settings: Any = None) -> list[Any] | None:
    """When every rule reads and reports only inside the functions it is active in
    (``FUNCTION_LOCAL``) and reads only reviewbot's providers: the analysis's functions
    where one of them is (None: the whole module must be parsed). A rule that reports only
    on a CUDA tensor (``NEEDS_CUDA``, and include-unknown off) is active only where the
    analysis labelled one (inside one of its ``cuda_sites``)."""
    narrowed = _function_rules(ctx, rules, settings)
    return None if narrowed is None else [info for info, _ in narrowed.values()]


def _function_rules(ctx: FileContext, rules: list[type[CstRule]], settings: Any = None
                    ) -> dict[str, tuple[Any, list[type[CstRule]] | None]] | None:
    """As :func:`_function_local`, by qualified name: each chosen function's
    ``FunctionInfo`` and, where only rules that need a CUDA tensor are active in it, those
    of them that can report there (None: every active rule)."""
    from reviewbot.providers import AnalysisProvider

    if not all(r.FUNCTION_LOCAL and all(isinstance(p, type) and issubclass(p, AnalysisProvider)
                                         for p in r.METADATA_DEPENDENCIES) for r in rules):
        return None
    try:
        analysis = ctx.gpu
    except Exception:  # the rules report the analysis's failure as they read it
        return None
    settings = settings or {}
    needing = [r for r in rules if getattr(r, "NEEDS_CUDA", False) and not
               settings.get(r.code, {}).get("include-unknown", False)]
    others = [r for r in rules if r not in needing]
    chosen: dict[str, tuple[Any, list[type[CstRule]] | None]] = {}
    # Functions that hold others the analysis knows apart (the methods of a class a factory
    # makes): their rules are not narrowed by their own labels alone.
    holders: set[str] = set()
    for name in analysis.functions:
        while "." in name:
            name = name.rpartition(".")[0]
            holders.add(name)
    for qualname, info in analysis.functions.items():
        active = _active_in(rules, qualname in analysis.hot, info.summary.text)
        if not active:
            continue
        if any(r in others for r in active):
            chosen[qualname] = (info, None)
            continue
        able = _cuda_rules(analysis, info, active, sites=qualname not in holders)
        if able is None:
            chosen[qualname] = (info, None)
        elif able:
            chosen[qualname] = (info, able)
    return chosen


def _cuda_rules(analysis: Any, info: Any, rules: list[type[CstRule]], sites: bool = True
                ) -> list[type[CstRule]] | None:
    """The rules (each needing a CUDA tensor) that can report in a function: where the
    analysis labels an expression a CUDA tensor, one of the rule's ``cuda_sites`` when it
    has them (None: the function is not labelled here, so every rule may)."""
    from reviewbot.analysis.gpu import CUDA
    from reviewbot.analysis.walk import walk

    labels = analysis.labels_of(info.qualname)
    if labels is None:
        return None  # not labelled here: the rules decide
    spans = {span for span, (label, _) in labels.items() if label.kind == CUDA}
    if not spans:
        return []
    able = [r for r in rules if r.cuda_sites is None or not sites]
    sited = [r for r in rules if r not in able]
    if not sited:
        return able

    def span_of(site: ast.AST) -> tuple[int, int, int, int]:
        """A node's span, by which the providers find its label."""
        line, col = site.lineno, site.col_offset  # type: ignore[attr-defined]
        end_col = site.end_col_offset  # type: ignore[attr-defined]
        return (line, col, site.end_lineno or line,  # type: ignore[attr-defined]
                col if end_col is None else end_col)

    def holds(site: ast.AST) -> bool:
        """Whether the analysis labels ``site`` a CUDA tensor."""
        return span_of(site) in spans

    def kind_of(site: ast.AST) -> str | None:
        """The kind of the analysis's label of ``site`` (None: not labelled)."""
        found = labels.get(span_of(site))  # type: ignore[union-attr]
        return None if found is None else found[0].kind

    def reportable(rule: type[CstRule], node: ast.AST) -> bool:
        """Whether ``rule`` can report at ``node``, as far as the labels tell."""
        return any(holds(site) for site in rule.cuda_sites(node)) and (  # type: ignore[misc]
            rule.host_sites is None or rule.host_sites(node, kind_of))

    for node in walk(info.node):
        found = [rule for rule in sited if reportable(rule, node)]
        if found:
            able.extend(found)
            sited = [r for r in sited if r not in found]
            if not sited:
                break
    return [r for r in rules if r in able]


def _resolve(wrapper: Any, providers: set[Any]) -> dict[Any, Any]:
    """The metadata of every provider: reviewbot's own (each value computed when a rule
    first reads it) without a walk of the tree, LibCST's through the wrapper."""
    from reviewbot.providers import AnalysisProvider

    ours = {p for p in providers if isinstance(p, type) and issubclass(p, AnalysisProvider)}
    metadata: dict[Any, Any] = {p: p()._gen(wrapper) for p in ours}
    others = providers - ours
    if others:  # LibCST walks the whole tree for them, even for none
        metadata.update(wrapper.resolve_many(others))
    return metadata


def _admits(rule: type[Rule], text: str, settings: Any, packs: Any, linked: bool) -> bool:
    """Whether a rule's gate admits the file (a gate that raises admits it: the rule then
    reports its own failure as RB002)."""
    try:
        return rule.applies_to(text, settings, packs) or (
            linked and rule.project_facts and rule.applies_to_linked(text, settings, packs))
    except Exception:
        return True


def _with_a_hot_candidate(ctx: FileContext, rules: list[type[CstRule]]) -> list[type[CstRule]]:
    """The rules that can report in this file: a ``HOT_ONLY`` rule with candidate names
    needs a hot function whose text holds one (the ast analysis knows the hot functions,
    far cheaper than a LibCST parse); the others always can."""
    if not any(r.HOT_ONLY and r.CANDIDATES is not None for r in rules):
        return rules
    try:
        analysis = ctx.gpu
    except Exception:  # the rules run, and report the analysis's failure as they read it
        return rules
    texts = [analysis.functions[q].summary.text for q in analysis.hot
             if q in analysis.functions]
    return [r for r in rules if not (r.HOT_ONLY and r.CANDIDATES is not None) or any(
        word in text for text in texts for word in r.CANDIDATES)]


def _may_start_a_hot_path(ctx: FileContext) -> bool:
    """Whether a function of the file may start a hot path of its own (True when the file
    does not parse: the rules then report why, or not, as before)."""
    from reviewbot.analysis.gpu import may_start_a_hot_path
    from reviewbot.packs import PackData

    try:
        return may_start_a_hot_path(ctx.ast_tree, ctx.packs or PackData(), ctx.text)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return True


def _summary(ctx: FileContext, job: FileJob) -> Any:
    """The file's project-index summary from its tree (None when it does not parse)."""
    from reviewbot.analysis.project import _Summariser

    try:
        tree = ctx.ast_tree
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return None
    try:
        return _Summariser(tree, job.module or "", job.is_package, ctx.text).summary()
    except RecursionError:
        return None


def _file_finding(rule: type[Rule], path: str, message: str) -> Finding:
    return Finding(rule.code, rule.name, message, path, 1, 1, 1, 1, rule.severity)


def _crash(ctx: FileContext, rule: type[Rule], exc: BaseException, when: str = "") -> None:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    ctx.report(RuleCrash, f"Rule {rule.code} ({rule.name}) crashed on {ctx.path}"
               f"{' ' + when if when else ''}: {exc.__class__.__name__}: {exc}{where}", 1, 1)


@dataclass
class _Future:
    name: str
    line: int
    column: int


def _unknown_future(tree: ast.Module, columns: Columns) -> _Future | None:
    """A ``from __future__ import`` of a feature this Python does not know."""
    import __future__

    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                if alias.name not in __future__.all_feature_names:
                    return _Future(alias.name, node.lineno,
                                   columns.column(node.lineno, node.col_offset))
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            break  # future imports come first (after the docstring)
    return None


_MISSING: Any = object()  # a summary not in the index cache (None: a file that does not parse)
_LAZY: Any = object()  # in the index cache, read only when the project is linked


# Worker processes ---------------------------------------------------------------
_worker: Checker | None = None


def _init_worker(config: Config, packs: PackData, rules: Sequence[type[Rule]],
                 use_triggers: bool, configs: Sequence[Config] = ()) -> None:
    global _worker
    _worker = Checker(config, packs, rules, use_triggers, configs)


def _check_batch(jobs: list[FileJob]) -> list[FileResult]:
    assert _worker is not None
    return [_worker.check(job) for job in jobs]


def _batches(items: list[FileJob], size: int) -> Iterable[list[FileJob]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def worker_count(requested: int | None, files: int) -> int:
    """Worker processes for ``files`` files: what was asked (default, every core), but never
    more than the files or the cores."""
    cores = os.cpu_count() or 1
    return max(1, min(requested or cores, cores, files))


class Engine:
    """Checks a list of files with one configuration, in parallel, using the cache.

    With a project (its root and every ``.py`` file in it), a run has two phases: the
    file rules run on each checked file while its index summary is taken from the same
    parse; the summaries of the whole project are linked (hot paths across modules);
    then the rules that read project facts run on the checked files the link or their
    own words admit. Each phase's result is cached by the file's content, the second
    also by the digest of the linked facts it read.
    """

    def __init__(self, config: Config, packs: PackData, *, jobs: int | None = None,
                 cache: ResultCache | None = None,
                 rules: Sequence[type[Rule]] | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 use_triggers: bool = True, roots: Sequence[Path] = (),
                 project_root: Path | None = None,
                 project_files: Sequence[Path] | None = None,
                 index_cache: Any = None, configs: Any = None) -> None:
        self.use_triggers = use_triggers
        # Files whose links resolve outside these folders are not read (none: no limit).
        self.roots = tuple(roots)
        self.config = config
        self.packs = packs
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.cache = cache
        self.rules = tuple(registry.RULES if rules is None else rules)
        self.progress = progress
        self.project_root = project_root
        self.project_files = project_files
        self.index_cache = index_cache
        self.linked: Any = None  # the HotFacts of the last run (for explanations)
        self._last_index: Any = None  # the project index of the last run, and its entries
        self._last_entries: dict[str, Any] = {}
        self._last_cache: Any = None
        self._pool: ProcessPoolExecutor | None = None
        # Each file's configuration (reviewbot.config.Configs; None: ``config`` for all).
        self.configs = configs
        self._configs: list[Config] = [config]
        self._tags: list[str] = [""]
        self._config_of: dict[str, int] = {}
        self._contents: Mapping[Path, bytes] = {}

    def _read(self, path: Path) -> bytes:
        """A file's bytes: the text given for it (an editor's unsaved buffer), else the
        file's (raises UnreadableSource)."""
        given = self._contents.get(path)
        if given is not None:
            if len(given) > self.config.max_file_size:
                raise UnreadableSource(_too_large(len(given), self.config.max_file_size))
            return given
        return read_bytes(str(path), self.config.max_file_size)

    def _resolve_configs(self, files: Sequence[Path], cwd: Path) -> list[int]:
        """Each file's configuration (its index in ``_configs``), and the cache-key tag
        of each configuration: empty for the run's, whose fingerprint names the cache."""
        indices = [self.configs.index(path) if self.configs is not None else 0
                   for path in files]
        self._configs = list(self.configs.all) if self.configs is not None else [self.config]
        self._tags = [""] + ["|config:" + hashlib.blake2b(
            f"{c.source}\0{c.root}\0{c.fingerprint()}".encode(), digest_size=12).hexdigest()
            for c in self._configs[1:]]
        return indices

    def run(self, files: Sequence[Path], run: RunContext, cwd: Path | None = None,
            contents: Mapping[Path, bytes] | None = None) -> RunResult:
        """Check ``files`` and finish the run-level rules. ``contents``: the text to check
        instead of what some files (absolute paths) hold on disk, checked files and the
        project's other files alike; the run memo is not used then."""
        from reviewbot.discovery import display_path, inside, relative_to_root

        cwd = cwd or Path.cwd()
        self._contents = dict(contents or {})
        indices = self._resolve_configs(files, cwd)
        signature = self._signature(files, cwd, indices) if self.cache and not contents \
            else None
        if signature is not None:
            remembered = self.cache.memo(signature)
            if remembered is not None:
                return self._finish(remembered, run, len(remembered))
        results: dict[str, FileResult] = {}
        read: list[tuple[Path, str, str, bytes]] = []
        self._config_of = {}
        for path, index in zip(files, indices):
            shown = display_path(path, cwd)
            if self.roots and not inside(path, self.roots):
                results[shown] = FileResult(shown, [_file_finding(
                    UnreadableFile, shown, "Skipped: a symbolic link to a file outside the "
                    "project")])
                continue
            try:
                data = self._read(path)
            except UnreadableSource as exc:
                results[shown] = FileResult(shown, [_file_finding(UnreadableFile, shown,
                                                                  f"Skipped: {exc}")])
                continue
            self._config_of[shown] = index
            read.append((path, shown, relative_to_root(path, self._configs[index].root), data))
        total = len(files)
        self._cached = 0
        try:
            if self.project_root is None:
                self._single_phase(read, results, total)
            else:
                self._two_phases(read, results, total)
        finally:
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None
        if self.cache:
            self.cache.save()
            if signature is not None:
                self.cache.set_memo(signature, results)
        return self._finish(results, run, self._cached)

    def _signature(self, files: Sequence[Path], cwd: Path,
                   indices: Sequence[int] = ()) -> str | None:
        """What the run memo is keyed by: the working folder, the project, and every checked
        and indexed file's path, size, times and inode. None (no memo) when a file cannot be
        stat'ed, or one was modified within the last two seconds: an edit in the same tick
        of the file system's clock would not change its times ("racy" as git calls it)."""
        digest = hashlib.blake2b(digest_size=16)
        digest.update(f"{cwd}\0{self.project_root}\0{self.roots}\0{self.use_triggers}".encode())
        # Each file's own configuration: an edit of a folder's configuration is a new run.
        digest.update("\0".join(self._tags[i] for i in indices).encode())
        recent = time.time_ns() - 2_000_000_000
        groups = [files, self.project_files or ()]
        if list(groups[1]) == list(files):
            groups[1] = ()  # the project itself was checked: its files are stat'ed once
            digest.update(b"\2")
        for group in groups:
            digest.update(b"\1")
            for path in group:
                try:
                    link, info = os.lstat(path), os.stat(path)
                except OSError:
                    return None
                if info.st_mtime_ns >= recent:
                    return None
                digest.update(f"{path}\0{link.st_ino}\0{link.st_ctime_ns}\0{info.st_dev}\0"
                              f"{info.st_ino}\0{info.st_size}\0{info.st_mtime_ns}\0"
                              f"{info.st_ctime_ns}\0".encode())
        return digest.hexdigest()

    def _single_phase(self, read: list[tuple[Path, str, str, bytes]],
                      results: dict[str, FileResult], total: int) -> None:
        todo: list[tuple[str, FileJob]] = []
        for _, shown, rel, data in read:
            index = self._config_of.get(shown, 0)
            key = content_key(shown, data) + self._tags[index]
            cached = self.cache.get(key) if self.cache else None
            if cached is not None:
                results[shown] = cached
                self._cached += 1
            else:
                todo.append((key, FileJob(shown, rel, data, config=index)))
        done = len(results)
        self._report_progress(done, total)
        for key, result in self._check(todo, done, total):
            results[result.path] = result
            if self.cache:
                self.cache.put(key, result)

    def _two_phases(self, read: list[tuple[Path, str, str, bytes]],
                    results: dict[str, FileResult], total: int) -> None:
        from reviewbot.analysis.project import (IndexCache, ModuleEntry, ProjectIndex,
                                                digest_of, module_name, project_key)
        from reviewbot.analysis.project import facts_digest as _facts_digest

        root = self.project_root
        assert root is not None
        index_cache = self.index_cache if self.index_cache is not None else IndexCache(None)
        index = ProjectIndex(root)
        tops: dict[Path, Path] = {}
        project_rules = any(r.project_facts for r in self.rules
                            if any(r.code in c.enabled for c in self._configs))
        # Phase 1: the file rules and the summaries of the checked files.
        first: dict[str, FileResult] = {}
        cached_first: set[str] = set()
        todo: list[tuple[str, FileJob]] = []
        entries: dict[str, ModuleEntry] = {}
        checked: set[Path] = set()
        summary_jobs: list[tuple[str, FileJob]] = []
        only: dict[str, ModuleEntry] = {}  # by path from the root: files needing a summary
        hashes: dict[str, str] = {}  # shown -> its content key (the bytes hashed once)
        for path, shown, rel, data in read:
            checked.add(path)
            digest = digest_of(data)
            # The file's configuration, when it is not the run's, is part of every key.
            hashes[shown] = shown + "\0" + digest + self._tags[self._config_of.get(shown, 0)]
            entry = self._entry(path, root, digest, tops, index_cache, module_name,
                                ModuleEntry)
            key = hashes[shown] + FILE_RULES_KEY
            cached = self.cache.get(key) if self.cache else None
            needs_summary = entry is not None and entry.summary is _MISSING
            if cached is not None:
                first[shown] = cached
                cached_first.add(shown)
                self._cached += 1
                if needs_summary:  # the results are cached, the index summary is not
                    summary_jobs.append(("", FileJob(entry.rel, entry.rel, data, SUMMARY_ONLY,
                                                     entry.name, path.name == "__init__.py")))
                    only[entry.rel] = entry
            else:
                todo.append((key, FileJob(shown, rel, data, FILE_RULES,
                                          entry.name if needs_summary else None,
                                          path.name == "__init__.py",
                                          config=self._config_of.get(shown, 0))))
            if entry is not None:
                entries[shown] = entry
        # The rest of the project: summaries only.
        for path in self.project_files or ():
            if path in checked:
                continue
            try:
                data = self._read(path)
            except UnreadableSource:
                continue
            entry = self._entry(path, root, digest_of(data), tops, index_cache, module_name,
                                ModuleEntry)
            if entry is None:
                continue
            if entry.summary is _MISSING:
                summary_jobs.append(("", FileJob(entry.rel, entry.rel, data, SUMMARY_ONLY,
                                                 entry.name, path.name == "__init__.py")))
            only[entry.rel] = entry
        done = len(first)
        self._report_progress(done, total)
        for key, result in self._check(todo + summary_jobs, done, total,
                                       count=lambda job: job.phase != SUMMARY_ONLY):
            entry = entries.get(result.path) if key else only.get(result.path)
            if entry is not None and entry.summary is _MISSING:
                entry.summary = result.summary
                entry.link_key = index_cache.put(entry.digest + ":" + entry.name,
                                                 result.summary)
            result.summary = None
            if key:
                first[result.path] = result
                if self.cache:
                    self.cache.put(key, result)
        for entry in (*entries.values(), *only.values()):
            if entry.summary is _MISSING:
                entry.summary = None
            index.add(entry)
        self._last_index, self._last_entries, self.linked = index, entries, None
        self._last_cache = index_cache
        second: dict[str, FileResult] = {}
        todo = []
        # Which checked files the project rules can report in: on their own words
        # ("own"), or only where the link finds hot functions ("linked"); the rest are
        # done after phase 1.
        gates: list[tuple[Path, str, str, bytes, Any, bool]] = []
        for path, shown, rel, data in read:
            gate = first[shown].gate if shown in first else None
            own, linked = gate if gate is not None else (True, True)
            if own or linked:
                gates.append((path, shown, rel, data, entries.get(shown), own))
        key_of_project = project_key(index, self.packs)
        recorded = index_cache.links(key_of_project) if project_rules and self.cache else None
        if recorded is not None and not index_cache.inert_changes_unseen(
                key_of_project, self._free_entry_point):
            recorded = None  # a function the key leaves out has a name the last link saw
        if recorded is not None:  # nothing the link reads changed: its results may be reused
            again: list[tuple[str, FileJob]] = []  # edited files, checked with stored facts
            stored: Any = None
            for path, shown, rel, data, entry, own in gates:
                digest = recorded.get(entry.rel) if entry is not None else ""
                if digest == _NOT_HOT and not own:
                    continue
                key = hashes[shown] + PROJECT_RULES_KEY + (digest or "")
                cached = None if digest is None or digest == _NOT_HOT else self.cache.get(key)
                if cached is not None:
                    second[shown] = cached
                    continue
                if stored is None and entry is not None and digest:
                    stored = index_cache.link_facts(key_of_project) or {}
                known = stored.get(entry.rel) if stored and entry is not None else None
                if not (isinstance(known, list) and len(known) == 2
                        and isinstance(known[0], dict) and isinstance(known[1], dict)
                        and _facts_digest(known[0], known[1]) == digest):
                    second.clear()
                    again.clear()
                    break
                again.append((key, FileJob(shown, rel, data, PROJECT_RULES,
                                           linked_hot=known[0] or None,
                                           linked_devices=known[1],
                                           config=self._config_of.get(shown, 0))))
            else:
                project_rules = False  # every checked file's result is known: no link
                for key, result in self._check(again, 0, 0, count=lambda job: False):
                    second[result.path] = result
                    self.cache.put(key, result)
                    if result.path in cached_first:
                        cached_first.discard(result.path)
                        self._cached -= 1
        facts = None
        if project_rules:
            facts = self._link(index, index_cache)
            self.linked = facts
            second.clear()
        if project_rules and facts is not None:
            digests, known_facts = {}, {}
            for path, shown, rel, data, entry, own in gates:
                hot = facts.for_file(entry.rel) if entry is not None else {}
                if not own and not hot:
                    if entry is not None:
                        digests[entry.rel] = _NOT_HOT
                    continue
                devices = facts.devices_for(entry.rel) if entry is not None else None
                digest = facts.digest(entry.rel, devices) if entry is not None else ""
                if entry is not None:
                    digests[entry.rel] = digest
                    known_facts[entry.rel] = [hot, devices]
                key = hashes[shown] + PROJECT_RULES_KEY + digest
                cached = self.cache.get(key) if self.cache else None
                if cached is not None:
                    second[shown] = cached
                else:
                    if shown in cached_first:
                        cached_first.discard(shown)
                        self._cached -= 1  # the file is checked again after all
                    todo.append((key, FileJob(shown, rel, data, PROJECT_RULES,
                                              linked_hot=hot or None, linked_devices=devices,
                                              config=self._config_of.get(shown, 0))))
            for key, result in self._check(todo, 0, 0, count=lambda job: False):
                second[result.path] = result
                if self.cache:
                    self.cache.put(key, result)
            index_cache.set_links(key_of_project, digests, facts.referenced, facts.inert)
            index_cache.set_link_facts(key_of_project, known_facts)
        index_cache.save()
        for shown, result in first.items():
            extra = second.get(shown)
            merged = FileResult(shown, list(result.findings), dict(result.facts))
            if extra is not None:
                merged.findings.extend(extra.findings)
                merged.facts.update(extra.facts)
            results[shown] = merged

    def _free_entry_point(self, qual: str) -> bool:
        """Whether the packs make a module-level function (``pkg.mod.name``) an entry point,
        as the link would (``Linker.is_entry``: by its name in the module)."""
        from reviewbot.analysis.gpu import _matches

        patterns = self.packs.hot_path_entry_points if self.packs is not None else ()
        return not patterns or _matches(qual.rpartition(".")[2], patterns)

    def file_facts(self, shown: str) -> tuple[Any, Any]:
        """What the last run's link knows of a checked file: its functions hot through other
        modules and the project's device facts it reads (linked now when the run answered
        every file from the cache). (None, None) when the file is not in the index."""
        entry = self._last_entries.get(shown)
        if entry is None or self._last_index is None:
            return None, None
        if self.linked is None:
            self.linked = self._link(self._last_index, self._last_cache)
        return self.linked.for_file(entry.rel) or None, self.linked.devices_for(entry.rel)

    @staticmethod
    def _entry(path: Path, root: Path, digest: str, tops: dict[Path, Path], index_cache: Any,
               module_name: Any, entry_type: Any) -> Any:
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            return None  # outside the project: not indexed
        name = module_name(path, tops, root)
        key = digest + ":" + name
        summary = _LAZY if index_cache.known(key) else _MISSING
        return entry_type(name, rel, digest, summary, index_cache.link_key(key))

    def _link(self, index: Any, index_cache: Any) -> Any:
        """The link phase's facts, once the summaries it reads are read from the index
        cache (a run that needs no link never reads them); one the cache lost is made
        again here."""
        from reviewbot.analysis.project import Linker

        lost: list[tuple[str, FileJob]] = []
        entries = {id(e): e for e in (*index.modules.values(), *index.by_rel.values())}
        for entry in entries.values():
            if entry.summary is not _LAZY:
                continue
            key = entry.digest + ":" + entry.name
            entry.summary = index_cache.get(key)
            if entry.summary is None and key not in index_cache.used:
                path = index.root / entry.rel
                try:
                    data = self._read(path)
                except UnreadableSource:
                    continue
                lost.append((key, FileJob(entry.rel, entry.rel, data, SUMMARY_ONLY,
                                          entry.name, path.name == "__init__.py")))
        by_rel = {entry.rel: entry for entry in entries.values()}
        for key, result in self._check(lost, 0, 0, count=lambda job: False):
            entry = by_rel[result.path]
            entry.summary = result.summary
            entry.link_key = index_cache.put(key, result.summary)
        return Linker(index, self.packs).link()

    def _report_progress(self, done: int, total: int) -> None:
        if self.progress and total:
            self.progress(done, total)

    def _pool_for(self, workers: int) -> ProcessPoolExecutor:
        """The run's pool of workers, made on first use and shared by its phases."""
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                workers, initializer=_init_worker,
                initargs=(self.config, self.packs, self.rules, self.use_triggers,
                          tuple(self._configs)))
        return self._pool

    def _check(self, todo: list[tuple[str, FileJob]], done: int, total: int,
               count: Callable[[FileJob], bool] = lambda job: True,
               ) -> Iterable[tuple[str, FileResult]]:
        keys = {(job.display, job.phase): key for key, job in todo}
        jobs = [job for _, job in todo]
        workers = worker_count(self.jobs, len(jobs))
        if workers == 1 or len(jobs) < 4:
            checker = Checker(self.config, self.packs, self.rules, self.use_triggers,
                              self._configs)
            for job in jobs:
                yield keys[(job.display, job.phase)], checker.check(job)
                if count(job):
                    done += 1
                    self._report_progress(done, total)
            return
        # Largest files first, in small batches: the workers finish together.
        jobs = sorted(jobs, key=lambda job: len(job.data), reverse=True)
        size = max(1, min(16, len(jobs) // (workers * 8) or 1))
        pending = {(job.display, job.phase): job for job in jobs}
        try:
            pool = self._pool_for(workers)
            futures = {pool.submit(_check_batch, batch): batch for batch in _batches(jobs, size)}
            for future in as_completed(futures):
                batch = futures[future]
                for job, result in zip(batch, future.result()):
                    pending.pop((job.display, job.phase), None)
                    yield keys[(job.display, job.phase)], result
                    if count(job):
                        done += 1
                self._report_progress(done, total)
        except BrokenProcessPool:
            # A file killed its worker (say, the parser overflowed the C stack): check the
            # rest one file per process so that only the guilty file is lost.
            self._pool = None
            for job in list(pending.values()):
                yield keys[(job.display, job.phase)], self._check_isolated(job)
                if count(job):
                    done += 1
                    self._report_progress(done, total)

    def _check_isolated(self, job: FileJob) -> FileResult:
        try:
            with ProcessPoolExecutor(1, initializer=_init_worker,
                                     initargs=(self.config, self.packs, self.rules,
                                               self.use_triggers,
                                               tuple(self._configs))) as pool:
                return pool.submit(_check_batch, [job]).result()[0]
        except BrokenProcessPool:
            return FileResult(job.display, [_file_finding(
                RuleCrash, job.display,
                f"Checking {job.display} killed the worker process; no rule ran on it")])

    def _finish(self, results: dict[str, FileResult], run: RunContext,
                cached: int) -> RunResult:
        findings: list[Finding] = []
        facts: dict[str, dict[str, Any]] = {}
        for path in sorted(results):
            result = results[path]
            findings.extend(result.findings)
            for code, data in result.facts.items():
                facts.setdefault(code, {})[path] = data
        for rule_cls in self.rules:
            # A rule about the whole run (RB301's coverage) runs when a configuration of
            # the run enables it, with the run's settings (else the first such one's).
            owner = next((c for c in (self.config, *self._configs[1:])
                          if rule_cls.code in c.enabled), None)
            if owner is None or rule_cls.internal:
                continue
            if rule_cls.finish is Rule.finish:
                continue
            rule = rule_cls(owner.settings.get(rule_cls.code, {}))
            try:
                findings.extend(rule.finish(facts.get(rule_cls.code, {}), run))
            except Exception as exc:
                crash = _file_finding(
                    RuleCrash, run.root_display,
                    f"Rule {rule_cls.code} ({rule_cls.name}) crashed while summarising the run: "
                    f"{exc.__class__.__name__}: {exc}")
                location = run.location(sorted(results))
                if location is not None:  # about the run: shown at the configuration
                    crash = dataclasses.replace(crash, details=(("location", location),))
                findings.append(crash)
        findings.sort(key=Finding.sort_key)
        # A rule reports a place once (a loop's body is walked until its labels settle).
        seen: set[tuple[Any, ...]] = set()
        unique: list[Finding] = []
        for finding in findings:
            key = (finding.path, finding.line, finding.column, finding.end_line,
                   finding.end_column, finding.code, finding.message)
            if key not in seen:
                seen.add(key)
                unique.append(finding)
        return RunResult(unique, facts, len(results), cached)

