"""The engine: read each file, parse it once, run the enabled rules, collect findings.

Files are checked in worker processes (``--jobs``). A rule that raises becomes an
RB002 finding for that file; a file that kills its worker becomes one too, and every
other file is still checked.
"""

from __future__ import annotations

import ast
import gc
import os
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

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
from reviewbot.source import UnreadableSource, decode, read_bytes
from reviewbot.suppression import Suppressions


@dataclass
class FileResult:
    """What checking one file produced."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunResult:
    """What a whole run produced."""

    findings: list[Finding]
    facts: dict[str, dict[str, Any]]  # rule code -> display path -> the file's facts
    files: int
    cached: int


@dataclass(frozen=True)
class FileJob:
    """One file to check, with the names it is reported and matched by."""

    display: str
    rel: str
    data: bytes


class Checker:
    """Checks single files against one configuration; lives in each worker process."""

    def __init__(self, config: Config, packs: PackData,
                 rules: Sequence[type[Rule]] = registry.RULES, use_triggers: bool = True) -> None:
        self.use_triggers = use_triggers  # False only to test that the shortcut is exact
        self.config = config
        self.packs = packs
        self.rules = [r for r in rules if r.code in config.enabled and not r.internal]
        self.ignore_specs = config.per_file_ignore_specs()

    def ignored_codes(self, rel: str) -> set[str]:
        """Codes that per-file-ignores turns off for this file."""
        codes: set[str] = set()
        for spec, spec_codes in self.ignore_specs:
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

    def _check_one(self, job: FileJob) -> FileResult:
        ignored = self.ignored_codes(job.rel)
        result = FileResult(job.display)
        try:
            source = decode(job.data)
        except UnreadableSource as exc:
            if UnreadableFile.code not in ignored:
                result.findings.append(_file_finding(UnreadableFile, job.display, f"Skipped: {exc}"))
            return result
        ctx = FileContext(job.display, source.text, job.rel, self.packs)
        rules = [r for r in self.rules if r.code not in ignored
                 and (not self.use_triggers or r.applies_to(
                     source.text, self.config.settings.get(r.code, {}), self.packs))]
        try:
            if self._parses(ctx):
                plain = [r for r in rules if not issubclass(r, CstRule)]
                cst = [r for r in rules if issubclass(r, CstRule)]
                for rule_cls in plain:
                    rule = rule_cls(self.config.settings.get(rule_cls.code, {}), ctx)
                    try:
                        rule.check_file(ctx)
                    except Exception as exc:  # a rule's bug must not stop the run
                        _crash(ctx, rule_cls, exc)
                if cst:
                    self._run_cst_rules(ctx, cst)
        finally:
            ctx.release()
        findings = [f for f in ctx.findings if f.code not in ignored]
        result.findings = Suppressions.parse(source.text).filter(findings) \
            if findings else []
        result.facts = ctx.facts
        return result

    def _parses(self, ctx: FileContext) -> bool:
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
        unknown = _unknown_future(ctx.ast_tree)
        if unknown is not None:  # the parser accepts it; the compiler refuses the file
            ctx.report(SyntaxErrorRule, f"Syntax error: future feature {unknown.name} is not "
                       "defined", unknown.line, unknown.column)
            return False
        return True

    def _run_cst_rules(self, ctx: FileContext, rules: list[type[CstRule]]) -> None:
        import libcst
        import libcst.metadata

        try:
            wrapper = ctx.metadata_wrapper()
        except libcst.ParserSyntaxError as exc:
            ctx.report(SyntaxErrorRule, f"Syntax error (LibCST): {exc.message}",
                       exc.raw_line, exc.raw_column + 1)
            return
        except RecursionError:
            ctx.report(SyntaxErrorRule, "Syntax error: too deeply nested to parse", 1, 1)
            return
        providers = {libcst.metadata.PositionProvider}
        for rule_cls in rules:
            providers.update(rule_cls.METADATA_DEPENDENCIES)
        try:
            metadata = wrapper.resolve_many(providers)
        except Exception as exc:
            for rule_cls in rules:
                _crash(ctx, rule_cls, exc, "while computing metadata")
            return
        instances = []
        for rule_cls in rules:
            rule = rule_cls(self.config.settings.get(rule_cls.code, {}), ctx)
            rule.metadata = metadata
            instances.append(rule)
        from reviewbot.cst_dispatch import BatchedVisitor

        visitor = BatchedVisitor(instances, lambda rule, exc: _crash(ctx, type(rule), exc))
        try:
            wrapper.module.visit(visitor)
        except RecursionError as exc:
            for rule in instances:
                _crash(ctx, type(rule), exc, "while walking the tree")


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


def _unknown_future(tree: ast.Module) -> _Future | None:
    """A ``from __future__ import`` of a feature this Python does not know."""
    import __future__

    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                if alias.name not in __future__.all_feature_names:
                    return _Future(alias.name, node.lineno, node.col_offset + 1)
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            break  # future imports come first (after the docstring)
    return None


# Worker processes ---------------------------------------------------------------
_worker: Checker | None = None


def _init_worker(config: Config, packs: PackData, rules: Sequence[type[Rule]],
                 use_triggers: bool) -> None:
    global _worker
    _worker = Checker(config, packs, rules, use_triggers)


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
    """Checks a list of files with one configuration, in parallel, using the cache."""

    def __init__(self, config: Config, packs: PackData, *, jobs: int | None = None,
                 cache: ResultCache | None = None,
                 rules: Sequence[type[Rule]] = registry.RULES,
                 progress: Callable[[int, int], None] | None = None,
                 use_triggers: bool = True, roots: Sequence[Path] = ()) -> None:
        self.use_triggers = use_triggers
        # Files whose links resolve outside these folders are not read (none: no limit).
        self.roots = tuple(roots)
        self.config = config
        self.packs = packs
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.cache = cache
        self.rules = tuple(rules)
        self.progress = progress

    def run(self, files: Sequence[Path], run: RunContext, cwd: Path | None = None) -> RunResult:
        """Check ``files`` and finish the run-level rules."""
        from reviewbot.discovery import display_path, inside, relative_to_root

        cwd = cwd or Path.cwd()
        results: dict[str, FileResult] = {}
        todo: list[tuple[str, FileJob]] = []
        done = 0
        for path in files:
            shown = display_path(path, cwd)
            if self.roots and not inside(path, self.roots):
                results[shown] = FileResult(shown, [_file_finding(
                    UnreadableFile, shown, "Skipped: a symbolic link to a file outside the "
                    "project")])
                done += 1
                continue
            try:
                data = read_bytes(str(path), self.config.max_file_size)
            except UnreadableSource as exc:
                results[shown] = FileResult(shown, [_file_finding(UnreadableFile, shown,
                                                                  f"Skipped: {exc}")])
                done += 1
                continue
            key = content_key(shown, data)
            cached = self.cache.get(key) if self.cache else None
            if cached is not None:
                results[shown] = cached
                done += 1
            else:
                todo.append((key, FileJob(shown, relative_to_root(path, self.config.root), data)))
        cached_count = len(results)
        total = len(files)
        self._report_progress(done, total)
        for key, result in self._check(todo, done, total):
            results[result.path] = result
            if self.cache:
                self.cache.put(key, result)
        if self.cache:
            self.cache.save()
        return self._finish(results, run, cached_count)

    def _report_progress(self, done: int, total: int) -> None:
        if self.progress:
            self.progress(done, total)

    def _check(self, todo: list[tuple[str, FileJob]], done: int,
               total: int) -> Iterable[tuple[str, FileResult]]:
        keys = {job.display: key for key, job in todo}
        jobs = [job for _, job in todo]
        workers = worker_count(self.jobs, len(jobs))
        if workers == 1 or len(jobs) < 4:
            checker = Checker(self.config, self.packs, self.rules, self.use_triggers)
            for job in jobs:
                yield keys[job.display], checker.check(job)
                done += 1
                self._report_progress(done, total)
            return
        # Largest files first, in small batches: the workers finish together.
        jobs = sorted(jobs, key=lambda job: len(job.data), reverse=True)
        size = max(1, min(16, len(jobs) // (workers * 8) or 1))
        pending = {job.display: job for job in jobs}
        try:
            with ProcessPoolExecutor(workers, initializer=_init_worker,
                                     initargs=(self.config, self.packs, self.rules, self.use_triggers)) as pool:
                futures = [pool.submit(_check_batch, batch) for batch in _batches(jobs, size)]
                for future in as_completed(futures):
                    for result in future.result():
                        pending.pop(result.path, None)
                        yield keys[result.path], result
                        done += 1
                    self._report_progress(done, total)
        except BrokenProcessPool:
            # A file killed its worker (say, the parser overflowed the C stack): check the
            # rest one file per process so that only the guilty file is lost.
            for job in list(pending.values()):
                yield keys[job.display], self._check_isolated(job)
                done += 1
                self._report_progress(done, total)

    def _check_isolated(self, job: FileJob) -> FileResult:
        try:
            with ProcessPoolExecutor(1, initializer=_init_worker,
                                     initargs=(self.config, self.packs, self.rules, self.use_triggers)) as pool:
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
            if rule_cls.code not in self.config.enabled or rule_cls.internal:
                continue
            if rule_cls.finish is Rule.finish:
                continue
            rule = rule_cls(self.config.settings.get(rule_cls.code, {}))
            try:
                findings.extend(rule.finish(facts.get(rule_cls.code, {}), run))
            except Exception as exc:
                findings.append(_file_finding(
                    RuleCrash, run.root_display,
                    f"Rule {rule_cls.code} ({rule_cls.name}) crashed while summarising the run: "
                    f"{exc.__class__.__name__}: {exc}"))
        findings.sort(key=Finding.sort_key)
        return RunResult(findings, facts, len(results), cached)

