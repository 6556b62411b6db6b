"""The command line: ``reviewbot check``, ``fix``, ``review``, ``verify``, ``trace``,
``explain`` and ``rules``.

Exit status: 0 no findings, 1 findings, 2 usage, configuration or internal error.
No input ever ends in a traceback; set REVIEWBOT_DEBUG=1 to see one for an internal error.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Sequence, TextIO

from reviewbot import __version__
from reviewbot.errors import ReviewbotError
from reviewbot.textsafe import line_start, printable

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
# `check --output-format` (reviewbot.reporters.FORMATS has a writer for each).
OUTPUT_FORMATS = ("text", "concise", "full", "json", "json-lines", "sarif", "github",
                  "rdjson", "gitlab", "junit", "pylint")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line and exit 2, as argparse does, plus a hint
        self.exit(EXIT_ERROR, f"reviewbot: error: {message} (see `{self.prog} --help`)\n")


def _codes(value: str) -> list[str]:
    codes = [c.strip() for c in value.split(",") if c.strip()]
    if not codes:
        raise argparse.ArgumentTypeError(f"expected comma-separated rule codes or prefixes, "
                                         f"got {value!r}")
    return codes


def _option(value: str) -> tuple[str, str, Any]:
    import yaml

    if "=" not in value or "." not in value.split("=", 1)[0]:
        raise argparse.ArgumentTypeError(f"expected CODE.option=value, got {value!r}")
    target, raw = value.split("=", 1)
    code, key = target.split(".", 1)
    try:
        parsed = yaml.safe_load(raw) if raw.strip() else raw
    except yaml.YAMLError:
        parsed = raw
    return code.strip(), key.strip(), parsed


def _jobs(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = _Parser(prog="reviewbot", description="Code review for GPU inference engines.")
    parser.add_argument("--version", action="version", version=f"reviewbot {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    check = sub.add_parser("check", help="check files and report findings",
                           description="Check Python files and report findings.")
    check.add_argument("paths", nargs="*", default=[], metavar="PATH",
                       help="files or folders to check (default: .)")
    check.add_argument("--output-format", choices=OUTPUT_FORMATS, default="text",
                       metavar="FORMAT", help="how findings are written: "
                       f"{', '.join(OUTPUT_FORMATS)} (default: text)")
    check.add_argument("--output-file", "-o", metavar="FILE",
                       help="write the report to FILE instead of standard output")
    _add_run_options(check)
    check.add_argument("--coverage-report", action="store_true",
                       help="also print a table of each file's docstring coverage (the "
                            "findings and the exit status stay the same)")
    check.add_argument("--include-unknown", action="store_true",
                       help="RB1xx: also report tensors whose device is unknown (as warnings)")
    check.add_argument("--explain-hot-paths", action="store_true",
                       help="list the functions the RB1xx rules treat as hot, with the chain "
                            "of calls from an entry point, and exit")
    check.add_argument("--exit-zero", action="store_true",
                       help="exit 0 even when there are findings")
    check.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                       help="colour the text report (default: on a terminal only)")
    check.add_argument("--since", metavar="REF",
                       help="report only findings on lines changed since REF (git diff REF), "
                            "e.g. origin/main before a push")
    check.add_argument("--statistics", action="store_true",
                       help="print how many findings each rule has instead of the findings")
    check.add_argument("--quiet", "-q", action="store_true",
                       help="print the findings only: no summary line, no notes")
    check.add_argument("--fix", action="store_true",
                       help="apply the safe fixes, then report the findings that remain")
    check.add_argument("--unsafe-fixes", action="store_true",
                       help="with --fix, --fix-only, --diff or --show-fixes: include the "
                            "fixes marked unsafe ([~] in the report)")
    check.add_argument("--diff", action="store_true",
                       help="print a unified diff of the fixes and write nothing (exit 1 "
                            "when there is one)")
    check.add_argument("--fix-only", action="store_true",
                       help="apply the fixes and do not report the findings that remain")
    check.add_argument("--show-fixes", action="store_true",
                       help="list the fixes applied (or available), by file and code")
    check.add_argument("--add-noqa", action="store_true",
                       help="write `# noqa: CODE` at the end of each reported line, so that "
                            "the findings of today are suppressed")
    check.add_argument("--show-settings", action="store_true",
                       help="print the configuration resolved for the first path and exit")
    check.add_argument("--show-files", action="store_true",
                       help="print the files that would be checked and exit")
    check.add_argument("--stdin-filename", metavar="PATH",
                       help="with `-` as the path: the name of the source read from standard "
                            "input (shown, matched by per-file-ignores, and where the "
                            "configuration is looked up)")
    check.add_argument("--trace", metavar="FILE",
                       help="a trace written by `reviewbot trace`: findings the run confirmed "
                            "say how often they ran and waited, and syncs the run saw that "
                            "no rule reported become RB108 findings")
    known = check.add_mutually_exclusive_group()
    known.add_argument("--baseline", metavar="FILE",
                       help="report only findings that the baseline FILE does not record")
    known.add_argument("--write-baseline", metavar="FILE",
                       help="record today's findings in FILE (a baseline) and exit 0")

    fix = sub.add_parser("fix", help="show the fixes as a diff, or apply them",
                         description="Print a unified diff of every fix (exit 1 when there "
                                     "is one), or write them with --apply.")
    fix.add_argument("paths", nargs="*", default=[], metavar="PATH",
                     help="files or folders to fix (default: .)")
    fix.add_argument("--apply", action="store_true",
                     help="write the fixes into the files instead of printing a diff")
    fix.add_argument("--unsafe-fixes", action="store_true",
                     help="include fixes marked unsafe ([~] in the report)")
    fix.add_argument("--include-read-only", action="store_true",
                     help="with --apply, also rewrite files without write permission "
                          "(skipped with a warning otherwise)")
    _add_run_options(fix)

    review = sub.add_parser(
        "review", help="review the pull request of a GitHub Actions event",
        description="Check a pull request's changed Python files and post one review with "
                    "line comments and suggestions, and one summary comment with the "
                    "pre-merge checks. Reads GITHUB_EVENT_PATH, GITHUB_REPOSITORY, "
                    "GITHUB_TOKEN and GITHUB_API_URL.")
    review.add_argument("paths", nargs="*", default=["."], metavar="PATH",
                        help="where to look for changed files (default: .)")
    review.add_argument("--filter-mode", choices=("added", "diff_context", "file", "nofilter"),
                        default="added", help="which findings to keep (default: added lines)")
    review.add_argument("--fail-level", choices=("none", "any", "warning", "error"),
                        default="error", help="exit 1 when a finding is at this level or "
                        "above; any: any finding or failed check (default: error)")
    review.add_argument("--reporter", choices=("github-pr-review", "github-check",
                                               "github-pr-check", "annotations"),
                        default="github-pr-review",
                        help="github-pr-check is reviewdog's name of github-check")
    review.add_argument("--level", choices=("info", "warning", "error"), default=None,
                        help="report every finding at this level (default: its severity)")
    review.add_argument("--tool-name", default="reviewbot", metavar="NAME",
                        help="the name of the check run and of the summary's heading")
    for flag, kind in (("--select", _codes), ("--extend-select", _codes),
                       ("--ignore", _codes), ("--option", _option)):
        review.add_argument(flag, type=kind, action="append", default=[],
                            help=argparse.SUPPRESS)
    for flag in ("--exclude", "--extend-exclude"):
        review.add_argument(flag, action="append", default=[], help=argparse.SUPPRESS)
    review.add_argument("--max-comments", type=_jobs, default=25, metavar="N",
                        help="line comments per run, most severe first (default 25)")
    review.add_argument("--docstring-threshold", type=float, default=None, metavar="PERCENT",
                        help="RB301's threshold for the changed definitions")
    review.add_argument("--config", metavar="FILE")
    review.add_argument("--config-from", choices=("head", "base"), default="head",
                        help="read the configuration (and rule packs given by path) from the "
                             "pull request's head checkout, or from its base commit through "
                             "the API, so that the pull request cannot change its own review "
                             "(default: head)")
    review.add_argument("--base-rule-modules", action="store_true",
                        help="with --config-from base, import the rule-modules its "
                             "configuration names, read from the base commit (never from the "
                             "checkout); off by default: they are named, not imported. "
                             "REVIEWBOT_NO_PROJECT_CODE=1 turns it off")
    review.add_argument("--trace", metavar="FILE",
                        help="a trace written by `reviewbot trace` (as `check --trace`)")
    review.add_argument("--baseline", metavar="FILE",
                        help="leave out the findings this baseline (reviewbot check "
                             "--write-baseline) records; read from the base commit with "
                             "--config-from base")

    verify = sub.add_parser(
        "verify", help="prove fixed readbacks return the same and stop stalling (GPU)",
        description="Check the event-sync helpers in fixed files: same results as .tolist() "
                    "on every dtype and shape, no sync under torch's sync debug mode, and "
                    "the stall other threads no longer see; with --scenario, run real code "
                    "before and after the fix and compare every returned value.")
    verify.add_argument("paths", nargs="+", metavar="PATH", help="fixed files or folders")
    verify.add_argument("--scenario", metavar="FILE",
                        help="a Python file with TARGET (module path) and run(module, device)")
    verify.add_argument("--before", metavar="DIR",
                        help="the code before the fix (default: git HEAD of the first path)")
    verify.add_argument("--output-format", choices=("text", "json"), default="text")
    verify.add_argument("--output-file", "-o", metavar="FILE")
    verify.add_argument("--require-gpu", action="store_true",
                        help="exit 2 when there is no CUDA device instead of skipping")
    verify.add_argument("--min-stall-ratio", type=float, metavar="R",
                        help="fail when a helper cuts the worker's stall (20 ms pending) by "
                             "less than R times")
    verify.add_argument("--seed", type=int, default=0, help="seed of the random test values")
    verify.add_argument("--iterations", type=_jobs, default=30, metavar="N",
                        help="stall measurements per variant (default 30)")
    verify.add_argument("--all-helpers", action="store_true",
                        help="also check the project's own helpers of the same shape, not "
                             "only those `reviewbot fix` inserted")
    verify.add_argument("--device", choices=("cuda", "cpu"), default=None,
                        help=argparse.SUPPRESS)

    trace = sub.add_parser(
        "trace", help="run a program and record the GPU->host syncs it really makes (GPU)",
        description="Run a program with hooks in every Python process it starts and record "
                    "each synchronising CUDA call: where (the innermost frame in the "
                    "project), its stack, kind, count and, in an optional profiler window, "
                    "how long it waited. The program's output and exit status pass through. "
                    "`reviewbot check --trace FILE` reports against it.")
    trace.add_argument("--output", "-o", default="trace.json", metavar="FILE",
                       help="where the merged trace is written (default: trace.json)")
    trace.add_argument("--profile-steps", type=int, default=None, metavar="N",
                       help="profile the first N syncs after recording starts "
                            "(torch.profiler): their wait times")
    trace.add_argument("--profile-seconds", type=float, default=None, metavar="S",
                       help="profile the first S seconds after the first recorded sync "
                            "(with --profile-steps, whichever ends first; default 60)")
    warm = trace.add_mutually_exclusive_group()
    warm.add_argument("--skip-seconds", type=float, default=None, metavar="S",
                      help="leave out the syncs of the first S seconds (warm-up)")
    warm.add_argument("--skip-syncs", type=int, default=None, metavar="K",
                      help="leave out each process's first K syncs (warm-up)")
    trace.add_argument("--wait-for-start", action="store_true",
                       help="record only from the program's reviewbot.trace.start() call")
    trace.add_argument("--config", metavar="FILE",
                       help="configuration whose rule packs name the allow regions "
                            "(default: the nearest one)")
    trace.add_argument("--no-sync-debug-mode", action="store_true",
                       help="leave torch's sync debug mode off (the gpu-trace callbacks "
                            "still record): for programs run with warnings as errors")
    trace.add_argument("--allow-no-cuda", action="store_true",
                       help="run even without torch or a CUDA device (the hooks load and "
                            "record the processes, and no sync)")
    trace.add_argument("--events-dir", metavar="DIR",
                       help="keep each process's events file (JSON lines) in DIR")
    trace.add_argument("--quiet", "-q", action="store_true",
                       help="print nothing of our own after the program's output")
    trace.add_argument("program", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                       help="the program and its arguments, after `--`")

    explain = sub.add_parser(
        "explain", help="say why the analysis labels a line's expressions as it does",
        description="For FILE:LINE, print each expression's device label and its evidence, "
                    "and whether the enclosing function is hot, through which chain of calls "
                    "(across modules).")
    explain.add_argument("target", metavar="FILE:LINE")
    _add_run_options(explain)

    sub.add_parser("server", help="run the language server (LSP) for editors",
                   description="Serve reviewbot's findings and fixes to an editor over the "
                               "Language Server Protocol, on standard input and output "
                               "(needs pip install 'reviewbot[lsp]').")

    rules = sub.add_parser("rules", help="list the rules, or show one rule's documentation",
                           description="List every rule, or print one rule's documentation.")
    rules.add_argument("rule", nargs="?", metavar="CODE", help="a rule code or name")
    rules.add_argument("--output-format", choices=("text", "json", "markdown"), default="text")
    return parser


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    """Options that choose rules, files and configuration: the same for check and fix."""
    parser.add_argument("--select", type=_codes, action="append", metavar="CODES",
                        help="comma-separated codes or prefixes to enable (replaces the "
                             "default set)")
    parser.add_argument("--extend-select", type=_codes, action="append", default=[],
                        metavar="CODES", help="codes or prefixes to enable as well")
    parser.add_argument("--ignore", type=_codes, action="append", default=[], metavar="CODES",
                        help="codes or prefixes to disable")
    parser.add_argument("--exclude", action="append", metavar="PATTERN",
                        help="gitignore-style pattern of files to skip (replaces the defaults)")
    parser.add_argument("--extend-exclude", action="append", default=[], metavar="PATTERN",
                        help="gitignore-style pattern of files to skip as well")
    parser.add_argument("--force-exclude", action="store_true",
                        help="apply excludes to files named on the command line too "
                             "(pre-commit)")
    parser.add_argument("--config", metavar="FILE",
                        help="configuration file (pyproject.toml or .reviewbot.yml); default: "
                             "the nearest one above the first path")
    parser.add_argument("--isolated", action="store_true",
                        help="read no configuration file (the defaults and the command line "
                             "only), so import none of the project's rule-modules")
    parser.add_argument("--option", type=_option, action="append", default=[],
                        metavar="CODE.KEY=VALUE",
                        help="set a rule option, e.g. RB301.threshold=80")
    parser.add_argument("--jobs", "-j", type=_jobs, default=None, metavar="N",
                        help="worker processes (default: all cores)")
    parser.add_argument("--no-cache", action="store_true",
                        help="neither read nor write the cache")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="cache folder (default: $REVIEWBOT_CACHE_DIR, else "
                             ".reviewbot_cache at the project root: the configuration's "
                             "folder, else the git root)")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="say where the configuration, the cache and the workers come from")


def _open_report(path: str | None) -> TextIO | None:
    """The file named by --output-file, opened for writing (None: standard output)."""
    if not path:
        return None
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as exc:
        raise ReviewbotError(f"{path}: cannot write the report ({exc.strerror})") from None


def _use_color(choice: str, stream: TextIO) -> bool:
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


class _Progress:
    """A one-line progress bar on standard error, only on a terminal and for many files."""

    MIN_FILES = 48

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.enabled = stream.isatty()
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total < self.MIN_FILES:
            return
        width = 30
        filled = width * done // max(total, 1)
        self.stream.write(f"\r[{'=' * filled}{' ' * (width - filled)}] {done}/{total} files")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()


def _root_display(paths: Sequence[str]) -> str:
    shown = [os.path.normpath(p) for p in paths] or ["."]
    if len(shown) == 1:
        return shown[0]
    try:
        return os.path.commonpath(shown) or "."
    except ValueError:  # absolute and relative paths mixed
        return "."


@dataclasses.dataclass
class _Run:
    """What check and fix share: configuration, packs, files, and a ready engine."""

    config: Any
    packs: Any
    files: list[Path]
    paths: list[str]
    cwd: Path
    cache: Any
    roots: tuple[Path, ...] = ()
    project_root: Path | None = None
    project_files: list[Path] | None = None
    index_cache: Any = None
    source_root: Path | None = None  # the git root above the first path (SARIF's %SRCROOT%)
    configs: Any = None  # each file's configuration (reviewbot.config.Configs)

    def run_context(self) -> Any:
        """The RunContext of a run: what was checked, and the configuration file when it
        lies in the source root (where a finding about the whole run can be shown)."""
        from reviewbot.context import RunContext
        from reviewbot.discovery import display_path

        run = RunContext(_root_display(self.paths))
        source = self.config.source
        if source is not None and self.source_root is not None:
            path = Path(os.path.abspath(source))
            try:
                path.resolve().relative_to(self.source_root)
                run.config_text = path.read_text(encoding="utf-8", errors="replace")
            except (ValueError, OSError):
                return run
            run.config_file = display_path(path, self.cwd)
        return run

    def report_context(self) -> Any:
        """What the reporters need: the working directory and the source root."""
        from reviewbot.reporters import ReportContext

        return ReportContext(self.cwd, self.source_root or self.cwd,
                             self.config.max_file_size)

    def engine(self, jobs: int | None, progress: Any = None) -> Any:
        """An engine for these files, with the project index when there is one."""
        from reviewbot.engine import Engine

        return Engine(self.config, self.packs, jobs=jobs, cache=self.cache, progress=progress,
                      roots=self.roots, project_root=self.project_root,
                      project_files=self.project_files, index_cache=self.index_cache,
                      configs=self.configs)


def _stdin_lookup(name: str | None) -> str:
    """Where the configuration of a source read from standard input is looked up: its
    ``--stdin-filename`` when that exists, else the nearest folder of it that does."""
    if not name:
        return "."
    candidate = Path(name)
    while not os.path.lexists(candidate):
        if candidate.parent == candidate or str(candidate.parent) in ("", "."):
            return "."
        candidate = candidate.parent
    return str(candidate)


def _warn_target_version(config: Any) -> None:
    """One warning when target-version is newer than the Python that parses the files."""
    target = config.target_tuple()
    running = sys.version_info[:2]
    if target is not None and target > running:
        sys.stderr.write(
            f"reviewbot: warning: target-version is {config.target_version} but this is "
            f"Python {running[0]}.{running[1]}: syntax newer than {running[0]}.{running[1]} "
            "cannot be parsed and is reported as RB001 in its file; run reviewbot with "
            f"Python {target[0]}.{target[1]} or newer\n")


def _prepare(args: argparse.Namespace, cwd: Path | None = None) -> _Run:
    """Read the configuration and the packs, and find the files (exit 2 on bad input),
    as a run in ``cwd`` (default: the working directory) would."""
    from reviewbot.cache import CACHE_DIR_NAME, ResultCache
    from reviewbot.config import Configs, Overrides, build_config, common_folder, load_config
    from reviewbot.project_rules import project_code_allowed
    from reviewbot.analysis.project import engine_pack_names, project_index_files
    from reviewbot.discovery import allowed_roots, discover, project_root, source_root
    from reviewbot.packs import load_packs

    cwd = cwd or Path.cwd()
    stdin = getattr(args, "stdin", False)
    paths = args.paths or ["."]
    if stdin:  # the source comes from standard input; its name need not exist
        paths = [_stdin_lookup(getattr(args, "stdin_filename", None))]
    for raw in paths:  # before any configuration is read: a typo in a path is exit 2
        if not os.path.lexists(cwd / raw):
            raise ReviewbotError(f"{printable(raw)}: no such file or directory")
    include_unknown = getattr(args, "include_unknown", False)
    isolated = getattr(args, "isolated", False)
    overrides = Overrides(
        select=tuple(c for group in args.select for c in group) if args.select else None,
        extend_select=tuple(c for group in args.extend_select for c in group),
        ignore=tuple(c for group in args.ignore for c in group),
        exclude=tuple(args.exclude) if args.exclude else None,
        extend_exclude=tuple(args.extend_exclude),
        options=tuple(args.option) + tuple(
            (rule.code, "include-unknown", True) for rule in _rules_with("include-unknown")
            if include_unknown),
        project_code=project_code_allowed() and not isolated,
    )
    config_file = Path(args.config) if args.config else None
    if isolated and config_file is not None:
        raise ReviewbotError("--isolated reads no configuration file: drop --config or it")
    if config_file is not None and not config_file.is_file():
        raise ReviewbotError(f"{args.config}: configuration file not found")
    if isolated:
        config = build_config({}, None, "", cwd.resolve(), overrides)
    else:
        config = load_config([Path(p) for p in paths], config_file, overrides, cwd)
    _warn_target_version(config)
    files = [] if stdin else discover(paths, config, force_exclude=args.force_exclude, cwd=cwd)
    configs = Configs(config, overrides, explicit=config_file is not None or isolated,
                      top=common_folder([Path(p) for p in paths], cwd))
    # Every file's own configuration is read (and validated) before anything is checked.
    for path in files:
        configs.index(path)
    if stdin and getattr(args, "stdin_filename", None):
        configs.index(Path(os.path.abspath(args.stdin_filename)))
    root = project_root(paths, config, cwd)
    index_root, project_files = project_index_files(files, config, cwd,
                                                    () if args.force_exclude else paths,
                                                    configs.enabled())
    cache = index_cache = None
    cache_dir = args.cache_dir or os.environ.get("REVIEWBOT_CACHE_DIR")  # the flag wins
    folder = Path(cache_dir) if cache_dir else root / CACHE_DIR_NAME
    if index_root is not None:
        from reviewbot.analysis.project import IndexCache

        index_cache = IndexCache(None if args.no_cache else folder)
    packs = load_packs((*config.rule_packs, *engine_pack_names(config, index_root,
                                                                project_files, index_cache)),
                       config.root, config.source, config.key_prefix + "rule-packs")
    if config.default_device is not None:
        packs = dataclasses.replace(packs, default_device=config.default_device)
    if not args.no_cache:
        cache = ResultCache(folder, config.fingerprint() + repr(packs))
    if getattr(args, "verbose", False):
        from reviewbot.engine import worker_count

        err = sys.stderr
        err.write(f"reviewbot: configuration: {printable(config.source or '(defaults)')}\n")
        for own in configs.all[1:]:
            err.write(f"reviewbot: configuration of the files below {printable(str(own.root))}: "
                      f"{printable(str(own.source))}\n")
        err.write(f"reviewbot: project root: {printable(str(root))}\n")
        err.write(f"reviewbot: cache: {printable(str(cache.folder)) if cache else 'off'}"
                  f"{'' if cache is None or cache.usable else ' (not used: a link, or no key)'}\n")
        if index_root is not None:
            err.write(f"reviewbot: project index: {printable(str(index_root))}, "
                      f"{len(project_files)} files; packs: {', '.join(packs.names)}\n")
        workers = worker_count(args.jobs, len(files))
        why = ""
        if args.jobs is not None and workers < args.jobs:
            why = (f" (--jobs {args.jobs} clamped to {len(files)} files and "
                   f"{os.cpu_count() or 1} cores)")
        err.write(f"reviewbot: {workers} worker process{'es' if workers != 1 else ''}{why}\n")
    return _Run(config, packs, list(files), list(paths), cwd, cache,
                allowed_roots(paths, root, cwd), index_root, project_files, index_cache,
                source_root(cwd / paths[0], root), configs)




_FIX_MODES = ("fix", "fix_only", "diff", "add_noqa")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse combinations of check's flags that do not go together (exit 2)."""
    modes = [m for m in _FIX_MODES if getattr(args, m)]
    if args.fix and args.fix_only:
        modes.remove("fix")  # --fix-only is --fix without the report
    if len(modes) > 1:
        raise ReviewbotError(f"{' and '.join(_flag(m) for m in modes)} cannot be combined")
    for other in ("baseline", "write_baseline", "since"):
        if modes and getattr(args, other):
            raise ReviewbotError(f"{_flag(modes[0])} cannot be combined with {_flag(other)}")
    if args.show_settings and args.show_files:
        raise ReviewbotError("--show-settings and --show-files cannot be combined")
    if "-" in args.paths and len(args.paths) > 1:
        raise ReviewbotError("`-` (standard input) must be the only path")
    if args.stdin_filename is not None and args.paths and args.paths != ["-"]:
        raise ReviewbotError("--stdin-filename names standard input: give `-` as the only "
                             "path, or no path")
    args.stdin = args.paths == ["-"] or (args.stdin_filename is not None and not args.paths)
    if args.stdin and args.add_noqa:
        raise ReviewbotError("--add-noqa writes files; it cannot take standard input")
    if args.stdin and args.show_files:
        raise ReviewbotError("--show-files lists files; it cannot take standard input")
    if args.trace and (modes or args.stdin):
        raise ReviewbotError(f"--trace cannot be combined with "
                             f"{_flag(modes[0]) if modes else 'standard input'}")


def run_check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``reviewbot check``."""
    from reviewbot.reporters.sources import Sources, repository_root

    _check_flags(args)
    prepared = _prepare(args)
    config, packs, files, paths, cwd = (prepared.config, prepared.packs, prepared.files,
                                        prepared.paths, prepared.cwd)
    if args.show_settings:
        return show_settings(prepared, out)
    if args.show_files:
        from reviewbot.discovery import display_path

        for path in files:
            out.write(line_start(display_path(path, cwd)) + "\n")
        return EXIT_CLEAN
    if args.explain_hot_paths:
        return explain_hot_paths(files, packs, cwd, out, prepared.roots,
                                 config.max_file_size, prepared)
    if args.stdin:
        return _check_stdin(args, prepared, out, err)

    from reviewbot import baseline

    known = baseline.read(args.baseline) if args.baseline else None
    trace = None
    if args.trace:
        from reviewbot.trace.attach import load

        trace = load(args.trace)  # a bad trace is exit 2 before anything is checked
    progress = _Progress(err)
    engine = prepared.engine(args.jobs, progress)
    try:
        result = engine.run(files, prepared.run_context(), cwd)
    finally:
        progress.close()
    if trace is not None:
        from reviewbot.trace.attach import Project, attach

        project = Project(packs, prepared.project_root, prepared.project_files,
                          prepared.index_cache)
        result.findings = attach(result.findings, trace, files, cwd, config, project, err,
                                 args.quiet)

    if args.add_noqa:
        return _add_noqa(prepared, result.findings, err)
    fixing = args.fix or args.fix_only or args.diff
    fixed: _Fixed | None = None
    if fixing:
        fixed = fix_files(prepared, engine, result.findings, args.unsafe_fixes,
                          write=not args.diff, include_read_only=False, err=err,
                          read_only_hint="")
        if args.diff:
            _write_diffs(fixed.files, out)
        if args.show_fixes:
            _show_fixes([f for file in fixed.files for f in file.applied],
                        "Would fix {}" if args.diff else "Fixed {}",
                        err if args.diff or args.output_format not in _HUMAN else out)
        if args.diff or args.fix_only or not args.quiet:
            _fix_summary(fixed, args.diff, err)
        if args.diff:
            return EXIT_FINDINGS if fixed.files or fixed.failures else EXIT_CLEAN
        if args.fix_only:
            return EXIT_FINDINGS if fixed.failures else EXIT_CLEAN
        if fixed.files:  # what remains once the fixes are in
            progress = _Progress(err)
            engine = prepared.engine(args.jobs, progress)
            try:
                result = engine.run(files, prepared.run_context(), cwd)
            finally:
                progress.close()

    sources = Sources(cwd, prepared.roots, repository_root(prepared.roots[0] if prepared.roots
                                                           else cwd), config.max_file_size)
    if args.write_baseline:
        baseline.record_run(args.write_baseline, result.findings, sources, err, args.quiet)
        return EXIT_CLEAN
    if known is not None:
        result.findings = baseline.filter_run(known, result.findings, sources, paths, err,
                                              args.quiet)
    if args.since:
        from reviewbot.github.diff import from_git

        changed = from_git(args.since, paths, cwd)
        result.findings = [f for f in result.findings if not f.run_level
                           and changed.keeps(f.path, f.line, f.end_line, "added")]
        if "RB301" in config.enabled:  # as the review's check: the changed definitions
            from reviewbot.changed_docs import changed_coverage, coverage_finding

            docs = coverage_finding(changed_coverage(files, changed, config, cwd),
                                    _root_display(paths), cwd)
            if docs is not None:
                result.findings = sorted([*result.findings, docs], key=lambda f: f.sort_key())
    _report(args, prepared, result, sources, out, err)
    if args.show_fixes and not fixing:
        from reviewbot.fixer import allowed

        _show_fixes([f for f in result.findings if allowed(f.fix, args.unsafe_fixes)],
                    "{} fixable with --fix", out if args.output_format in _HUMAN else err)
    if not files:
        err.write("reviewbot: warning: no Python files found to check\n")
    return EXIT_FINDINGS if result.findings and not args.exit_zero else EXIT_CLEAN


# Formats read by people: a list of fixes may follow the report on the same stream.
_HUMAN = ("text", "concise", "full")


def _report(args: argparse.Namespace, prepared: _Run, result: Any, sources: Any,
            out: TextIO, err: TextIO) -> None:
    """Write the report of ``result`` where --output-file (or ``out``) says."""
    from reviewbot.reporters import statistics, write_report

    config = prepared.config
    handle = _open_report(args.output_file)
    target: TextIO = handle or out
    try:
        if args.coverage_report:
            from reviewbot.reporters import coverage

            table_out = target if args.output_format == "text" else err
            coverage.write(result.facts.get("RB301", {}),
                           float(config.settings["RB301"]["threshold"]), table_out)
        color = handle is None and _use_color(args.color, target)
        if args.statistics:
            statistics.write(result.findings, target, color, args.output_format,
                             not args.quiet)
        else:
            write_report(args.output_format, result.findings, target, color,
                         not args.quiet, sources, prepared.report_context())
    finally:
        if handle is not None:
            handle.close()


def _show_fixes(findings: Sequence[Any], title: str, out: TextIO) -> None:
    """``--show-fixes``: the fixes by file, then by code, with how many of each."""
    from collections import Counter

    by_file: dict[str, Counter[tuple[str, str]]] = {}
    for finding in findings:
        by_file.setdefault(finding.path, Counter())[(finding.code, finding.name)] += 1
    total = sum(sum(c.values()) for c in by_file.values())
    out.write(title.format(f"{total} {'finding' if total == 1 else 'findings'}")
              + (":\n" if total else ".\n"))
    for path in sorted(by_file):
        out.write(f"- {printable(path)}:\n")
        for (code, name), count in sorted(by_file[path].items()):
            out.write(f"    {count} x {code} ({name})\n")


def _fix_summary(fixed: "_Fixed", dry_run: bool, err: TextIO) -> None:
    noun = "fix" if fixed.fixes == 1 else "fixes"
    files_noun = "file" if len(fixed.files) == 1 else "files"
    verb = "Would apply" if dry_run else "Applied"
    err.write(f"{verb} {fixed.fixes} {noun} in {len(fixed.files)} {files_noun}.")
    if fixed.held_back:
        err.write(f" {fixed.held_back} more with --unsafe-fixes.")
    if fixed.failures:
        err.write(f" {fixed.failures} {'file' if fixed.failures == 1 else 'files'} left "
                  "unchanged (see the warnings).")
    err.write("\n")


def _write_diffs(files: Sequence[Any], out: TextIO) -> None:
    """The diffs of fixed files. The diff shows the checked code line by line; in an
    Actions log a line of it could read as a workflow command (the runner ignores leading
    blanks), so they are off while it is printed."""
    stop_token = ""
    for fixed in files:
        if not stop_token and os.environ.get("GITHUB_ACTIONS") == "true":
            import secrets

            stop_token = secrets.token_hex(16)
            out.write(f"::stop-commands::{stop_token}\n")
        out.write(fixed.diff())
    if stop_token:
        out.write(f"::{stop_token}::\n")


@dataclasses.dataclass
class _Fixed:
    """What a fixing pass over the checked files gave."""

    files: list[Any]  # a FileFix for each file that changed (written, unless a dry run)
    failures: int = 0  # files that could not be fixed or written
    held_back: int = 0  # unsafe fixes left out

    @property
    def fixes(self) -> int:
        """How many fixes were applied (or would be)."""
        return sum(len(f.applied) for f in self.files)


def fix_files(prepared: _Run, engine: Any, findings: Sequence[Any], unsafe: bool, *,
              write: bool, include_read_only: bool, err: TextIO,
              read_only_hint: str) -> _Fixed:
    """Fix every checked file with a fix among ``findings`` (of one checking pass of
    ``engine``); with ``write``, through :func:`write_file`. Each file that cannot be fixed
    or written gets one warning and is left as it was."""
    from reviewbot.discovery import display_path, inside, relative_to_root
    from reviewbot.fixer import Fixer, allowed

    config, cwd = prepared.config, prepared.cwd
    by_shown = {display_path(path, cwd): path for path in prepared.files}
    todo = sorted({f.path for f in findings if allowed(f.fix, unsafe) and f.path in by_shown})
    held_back = sum(1 for f in findings
                    if not unsafe and allowed(f.fix, True) and not allowed(f.fix, False))
    fixer = Fixer(config, prepared.packs, engine.rules, unsafe=unsafe, configs=prepared.configs,
                  facts=engine.file_facts)
    outcome = _Fixed([], 0, held_back)
    for shown in todo:
        path = by_shown[shown]
        if prepared.roots and not inside(path, prepared.roots):
            continue  # it became a link out of the project since it was checked
        fixed = fixer.fix_file(path, shown, relative_to_root(path, config.root))
        if fixed.error is not None:
            outcome.failures += 1
            err.write(f"reviewbot: warning: {printable(shown)}: {printable(fixed.error)}\n")
            continue
        if not fixed.changed:
            continue
        if write and not write_file(path, fixed, include_read_only, err, read_only_hint):
            outcome.failures += 1
            continue
        outcome.files.append(fixed)
    return outcome


def write_file(path: Path, fixed: Any, include_read_only: bool, err: TextIO,
               read_only_hint: str = "") -> bool:
    """Write a changed file atomically (reviewbot.fixer.write_atomic): a read-only file
    (unless ``include_read_only``), a symbolic link, or a file changed on disk since it
    was read is left alone with a one-line warning. Whether it was written."""
    from reviewbot.fixer import FixError, write_atomic

    if path.is_symlink():
        err.write(f"reviewbot: warning: {printable(fixed.path)}: is a symbolic link; not "
                  "rewritten\n")
        return False
    if not include_read_only and not _writable(path):
        err.write(f"reviewbot: warning: {printable(fixed.path)}: is read-only; not "
                  f"rewritten{read_only_hint}\n")
        return False
    try:
        write_atomic(path, fixed)
    except FixError as exc:
        err.write(f"reviewbot: warning: {printable(str(exc))}\n")
        return False
    return True


def _add_noqa(prepared: _Run, findings: Sequence[Any], err: TextIO) -> int:
    """``check --add-noqa``: a noqa comment for every finding in a file, written safely."""
    from reviewbot import registry
    from reviewbot.discovery import display_path, inside
    from reviewbot.fixer import FileFix, _compiles
    from reviewbot.noqa import add_noqa
    from reviewbot.source import UnreadableSource, decode, read_bytes
    from reviewbot.suppression import Suppressions

    by_shown = {display_path(path, prepared.cwd): path for path in prepared.files}
    internal = {r.code for r in registry.RULES if r.internal}
    wanted: dict[str, list[Any]] = {}
    for finding in findings:
        if finding.run_level or finding.path not in by_shown or finding.code in internal:
            continue  # the whole run (RB301's coverage), or RB0xx: no line to suppress
        wanted.setdefault(finding.path, []).append(finding)
    added = written = failures = 0
    for shown in sorted(wanted):
        path = by_shown[shown]
        if prepared.roots and not inside(path, prepared.roots):
            continue
        try:
            data = read_bytes(str(path), prepared.config.max_file_size)
            source = decode(data)
        except UnreadableSource as exc:
            failures += 1
            err.write(f"reviewbot: warning: {printable(shown)}: skipped: {printable(str(exc))}\n")
            continue
        lines: dict[int, set[str]] = {}
        for finding in wanted[shown]:
            lines.setdefault(finding.line, set()).add(finding.code)
        result = add_noqa(source.text, lines)
        for line, why in result.skipped:
            err.write(f"reviewbot: warning: {printable(shown)}:{line}: no noqa comment "
                      f"added ({why})\n")
        if result.text == source.text:
            failures += bool(result.skipped)
            continue
        # The comments must leave the code as it was and suppress what they are for.
        if _compiles(source.text, shown) is None and _compiles(result.text, shown) is not None:
            failures += 1
            err.write(f"reviewbot: warning: {printable(shown)}: adding noqa comments would "
                      "break the code; the file is left as it was\n")
            continue
        suppressions = Suppressions.parse(result.text)
        skipped = {line for line, _ in result.skipped}
        missed = [f for f in wanted[shown] if f.line not in skipped
                  and not suppressions.suppresses(f)]
        if missed:
            failures += 1
            err.write(f"reviewbot: warning: {printable(shown)}:{missed[0].line}: a noqa "
                      "comment there would not be honoured; the file is left as it was\n")
            continue
        fixed = FileFix(shown, old=source.text, new=result.text, data=data,
                        encoding=source.encoding, bom=source.bom)
        if not write_file(path, fixed, False, err):
            failures += 1
            continue
        added += result.added
        written += 1
        failures += bool(result.skipped)
    err.write(f"Added {added} noqa {'code' if added == 1 else 'codes'} in {written} "
              f"{'file' if written == 1 else 'files'}.")
    if failures:
        err.write(f" {failures} {'file' if failures == 1 else 'files'} not (fully) "
                  "annotated (see the warnings).")
    err.write("\n")
    return EXIT_FINDINGS if failures else EXIT_CLEAN


def _check_stdin(args: argparse.Namespace, prepared: _Run, out: TextIO, err: TextIO) -> int:
    """``reviewbot check -``: the source read from standard input, checked alone (no
    project index); with --fix or --fix-only the fixed source goes to standard output and
    the report to standard error. Nothing is written to disk."""
    from reviewbot.discovery import relative_to_root
    from reviewbot.engine import Checker, FileJob, _file_finding
    from reviewbot.fixer import Fixer, allowed
    from reviewbot.reporters.sources import Sources
    from reviewbot.rules.rb003_unreadable_file import UnreadableFile
    from reviewbot.source import UnreadableSource, _too_large, decode, split_lines

    config, cwd = prepared.config, prepared.cwd
    shown = args.stdin_filename or "-"
    # The name's own configuration (the nearest one above it) chooses rules and options.
    own = prepared.configs.index(Path(os.path.abspath(shown))) if args.stdin_filename else 0
    rel = relative_to_root(Path(os.path.abspath(shown)), prepared.configs.all[own].root) \
        if args.stdin_filename else "-"
    data = _read_stdin(config.max_file_size)
    engine = prepared.engine(1)
    checker = Checker(config, prepared.packs, engine.rules, configs=prepared.configs.all)
    run = prepared.run_context()

    def check(payload: bytes) -> Any:
        if len(payload) > config.max_file_size:
            found = engine._finish({}, run, 0)
            found.findings = [_file_finding(UnreadableFile, shown, "Skipped: " + _too_large(
                len(payload), config.max_file_size))]
            return found
        return engine._finish({shown: checker.check(FileJob(shown, rel, payload, config=own))},
                              run, 0)

    result = check(data)
    try:
        source = decode(data) if len(data) <= config.max_file_size else None
    except UnreadableSource:
        source = None
    fixing = args.fix or args.fix_only or args.diff
    report_out = out
    if fixing:
        new_data = data
        fixed = None
        if source is not None and any(allowed(f.fix, args.unsafe_fixes)
                                      for f in result.findings):
            fixed = Fixer(config, prepared.packs, engine.rules, unsafe=args.unsafe_fixes,
                          configs=prepared.configs,
                          facts=engine.file_facts).fix_text(shown, rel, source.text,
                                                             source.encoding, own)
            if fixed.error is not None:
                err.write(f"reviewbot: warning: {printable(shown)}: {printable(fixed.error)}\n")
                fixed = None
            elif fixed.changed:
                new_data = (b"\xef\xbb\xbf" if source.bom else b"") + \
                    fixed.new.encode(source.encoding)
        applied = fixed.applied if fixed is not None and fixed.changed else []
        if args.diff:
            if fixed is not None and fixed.changed:
                _write_diffs([fixed], out)
        else:
            _write_source(new_data, out)
        if args.show_fixes:
            _show_fixes(applied, "Would fix {}" if args.diff else "Fixed {}", err)
        if args.diff:
            return EXIT_FINDINGS if applied else EXIT_CLEAN
        if args.fix_only:
            return EXIT_CLEAN
        if applied:
            result = check(new_data)
            source = decode(new_data)
        report_out = err
    sources = Sources(cwd, (), cwd, config.max_file_size)
    sources._files[shown] = split_lines(source.text) if source is not None else None
    _report(args, prepared, result, sources, report_out, err)
    if args.show_fixes and not fixing:
        _show_fixes([f for f in result.findings if allowed(f.fix, args.unsafe_fixes)],
                    "{} fixable with --fix", report_out if args.output_format in _HUMAN else err)
    return EXIT_FINDINGS if result.findings and not args.exit_zero else EXIT_CLEAN


def _read_stdin(limit: int) -> bytes:
    """Standard input's bytes, at most one more than ``limit`` (too large is RB003)."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text stream put in place of standard input
        return (sys.stdin.read() if sys.stdin is not None else "").encode("utf-8")
    return stream.read(limit + 1)


def _write_source(data: bytes, out: TextIO) -> None:
    """The (fixed) source, byte for byte, on standard output."""
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        out.flush()
        buffer.write(data)
        buffer.flush()
    else:
        out.write(data.decode("utf-8", errors="surrogateescape"))


def show_settings(prepared: _Run, out: TextIO) -> int:
    """``check --show-settings``: the configuration resolved for the first path: rule
    selection, per-file-ignores and options from its own (nearest) configuration, the rest
    from the project root's."""
    from reviewbot import registry

    config, packs = prepared.config, prepared.packs
    first = prepared.paths[0] if prepared.paths else "."
    own = prepared.configs.for_path(Path(os.path.abspath(prepared.cwd / first))) \
        if prepared.configs is not None else config

    def line(key: str, value: str) -> None:
        out.write(f"{key}: {printable(value)}\n")

    def listing(values: Any) -> str:
        return ", ".join(str(v) for v in values) or "(none)"

    line("path", first)
    line("config file", own.source or "(none: the defaults)")
    line("root config file", config.source or "(none: the defaults)")
    line("project root", str(config.root))
    line("enabled rules", listing(sorted(own.enabled)))
    line("target-version", config.target_version or "(not set)")
    line("rule-packs", listing(config.rule_packs))
    line("packs in use", listing(packs.names))
    line("devices.default", packs.default_device)
    line("engine-packs", str(config.engine_packs).lower())
    line("respect-gitignore", str(config.respect_gitignore).lower())
    line("max-file-size", f"{config.max_file_size} bytes")
    line("exclude", listing(config.exclude))
    out.write("per-file-ignores:" + ("" if own.per_file_ignores else " (none)") + "\n")
    for pattern, codes in own.per_file_ignores:
        out.write(f"  {printable(pattern)}: {listing(sorted(codes))}\n")
    out.write("options:\n")
    for rule in registry.RULES:
        if rule.code not in own.enabled:
            continue
        for name, value in own.settings.get(rule.code, {}).items():
            out.write(f"  {rule.code}.{printable(str(name))} = {printable(repr(value))}\n")
    return EXIT_CLEAN


def run_fix(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``reviewbot fix``: a diff of every fix, or (``--apply``) the fixes written."""
    prepared = _prepare(args)
    # One checking pass over everything (parallel, cached) finds the files worth fixing.
    engine = prepared.engine(args.jobs)
    result = engine.run(prepared.files, prepared.run_context(), prepared.cwd)
    fixed = fix_files(prepared, engine, result.findings, args.unsafe_fixes, write=args.apply,
                      include_read_only=args.include_read_only, err=err,
                      read_only_hint=" (--include-read-only rewrites it)")
    if not args.apply:
        _write_diffs(fixed.files, out)
    noun = "fix" if fixed.fixes == 1 else "fixes"
    files_noun = "file" if len(fixed.files) == 1 else "files"
    if args.apply:
        err.write(f"Applied {fixed.fixes} {noun} in {len(fixed.files)} {files_noun}.")
    else:
        err.write(f"Would apply {fixed.fixes} {noun} in {len(fixed.files)} {files_noun}"
                  f"{'; run with --apply to write them' if fixed.fixes else ''}.")
    if fixed.held_back:
        err.write(f" {fixed.held_back} more with --unsafe-fixes.")
    if fixed.failures:
        err.write(f" {fixed.failures} {'file' if fixed.failures == 1 else 'files'} left "
                  "unchanged (see the warnings).")
    err.write("\n")
    if args.apply:
        return EXIT_FINDINGS if fixed.failures else EXIT_CLEAN
    return EXIT_FINDINGS if fixed.fixes or fixed.failures else EXIT_CLEAN



def _writable(path: Path) -> bool:
    """Whether the file's mode lets its owner (or us) write it."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return bool(mode & stat.S_IWUSR) and os.access(path, os.W_OK)


def run_review_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``reviewbot review``."""
    import importlib.util

    for module, package in (("github", "PyGithub"), ("unidiff", "unidiff")):
        if importlib.util.find_spec(module) is None:
            raise ReviewbotError(f"reviewbot review needs {package}: "
                                 "pip install 'reviewbot[github]'")
    from reviewbot.github.review import Settings, run_review

    from reviewbot.config import Overrides

    overrides = Overrides(
        select=tuple(c for group in args.select for c in group) or None,
        extend_select=tuple(c for group in args.extend_select for c in group),
        ignore=tuple(c for group in args.ignore for c in group),
        exclude=tuple(args.exclude) or None, extend_exclude=tuple(args.extend_exclude),
        options=tuple(args.option))
    reporter = "github-check" if args.reporter == "github-pr-check" else args.reporter
    settings = Settings(args.filter_mode, args.fail_level, reporter, args.max_comments,
                        args.docstring_threshold, tuple(args.paths), args.config,
                        args.config_from, args.baseline, args.level, args.tool_name,
                        overrides, args.trace, args.base_rule_modules)
    return run_review(settings, out, err)


def run_verify(args: argparse.Namespace, out: TextIO) -> int:
    """``reviewbot verify``."""
    import json

    from reviewbot.verify.helpers import VerifyError
    from reviewbot.verify.run import Options, verify, write_text

    options = Options(args.paths, args.scenario, args.before, args.require_gpu,
                      args.min_stall_ratio, args.seed, args.iterations, args.device,
                      args.all_helpers)
    try:
        report, code = verify(options)
    except VerifyError as exc:
        raise ReviewbotError(str(exc)) from None
    handle = _open_report(args.output_file)
    target: TextIO = handle or out
    try:
        if args.output_format == "json":
            target.write(json.dumps(report, indent=2) + "\n")
        else:
            write_text(report, target)
    finally:
        if handle is not None:
            handle.close()
    return code


def run_server() -> int:
    """``reviewbot server``: the language server, on standard input and output."""
    import importlib.util

    for module, package in (("pygls", "pygls"), ("lsprotocol", "lsprotocol")):
        if importlib.util.find_spec(module) is None:
            raise ReviewbotError(f"reviewbot server needs {package}: "
                                 "pip install 'reviewbot[lsp]'")
    from reviewbot.server import main as serve

    return serve()


def run_explain(args: argparse.Namespace, out: TextIO) -> int:
    """``reviewbot explain FILE:LINE``."""
    from reviewbot.analysis.project import IndexCache
    from reviewbot.discovery import inside
    from reviewbot.explain import explain, linked_facts, parse_target

    path_text, line = parse_target(args.target)
    args.paths = [path_text]
    args.force_exclude = False
    prepared = _prepare(args)
    path = Path(os.path.abspath(path_text))
    if not path.is_file():
        raise ReviewbotError(f"{printable(path_text)}: not a file")
    if prepared.roots and not inside(path, prepared.roots):
        raise ReviewbotError(f"{printable(path_text)}: a link to a file outside the project")
    facts = None
    if prepared.project_root is not None:
        facts = linked_facts(prepared.project_root, prepared.project_files or [path],
                             prepared.packs, prepared.index_cache or IndexCache(None))
    return explain(path, line, path_text, prepared.packs, facts, prepared.project_root, out)


def explain_hot_paths(files: Sequence[Path], packs: Any, cwd: Path, out: TextIO,
                      roots: Sequence[Path] = (), max_bytes: int | None = None,
                      prepared: Any = None) -> int:
    """Print the packs in use, then each file's hot functions and the call chain (across
    modules, through the project index) that makes each one hot."""
    from reviewbot.analysis.project import IndexCache
    from reviewbot.explain import linked_facts

    out.write(line_start(f"packs: {printable(', '.join(packs.names)) or 'none'} "
                         f"(devices.default: {packs.default_device})") + "\n")
    facts = root = None
    if prepared is not None and prepared.project_root is not None:
        root = prepared.project_root
        facts = linked_facts(root, prepared.project_files or list(files), packs,
                             prepared.index_cache or IndexCache(None))

    from reviewbot.analysis.gpu import ModuleAnalyzer
    from reviewbot.discovery import display_path, inside
    from reviewbot.source import UnreadableSource, decode, parse_quietly, read_bytes

    total = 0
    for path in files:
        shown = display_path(path, cwd)
        if roots and not inside(path, roots):
            continue  # a link out of the project: `reviewbot check` reports it (RB003)
        try:
            text = decode(read_bytes(str(path), max_bytes)).text
            tree = parse_quietly(text)
        except (UnreadableSource, SyntaxError, ValueError, RecursionError):
            continue  # `reviewbot check` reports these files
        linked = None
        if facts is not None:
            try:
                linked = facts.for_file(path.resolve().relative_to(root.resolve()).as_posix())
            except ValueError:
                linked = None
        hot = ModuleAnalyzer(tree, packs, (), text, linked_hot=linked).hot_paths()
        for qualname, chain in hot.items():
            out.write(line_start(f"{shown}: {qualname}  ({' -> '.join(chain)})") + "\n")
        total += len(hot)
    out.write(f"{total} hot function{'s' if total != 1 else ''} in {len(files)} "
              f"file{'s' if len(files) != 1 else ''}\n")
    return EXIT_CLEAN


def _rules_with(option: str) -> list[Any]:
    from reviewbot import registry

    return [r for r in registry.RULES if any(o.name == option for o in r.options)]


def run_rules(args: argparse.Namespace, out: TextIO) -> int:
    """``reviewbot rules [CODE]``."""
    import json

    from reviewbot import registry

    if args.rule:
        rule = registry.get_rule(args.rule)
        if args.output_format == "json":
            json.dump(_rule_json(rule), out, indent=2)
            out.write("\n")
        else:
            out.write(f"# {rule.name} ({rule.code})\n\n")
            out.write(f"Kind: {rule.kind} ({_KIND_WORDS.get(rule.kind, rule.kind)}). "
                      f"Fix safety: {rule.fix_safety}. "
                      f"{'On' if rule.default_enabled or rule.internal else 'Off'} by default.\n\n")
            out.write(rule.docs() + "\n")
        return EXIT_CLEAN
    if args.output_format == "json":
        json.dump([_rule_json(r) for r in registry.RULES], out, indent=2)
        out.write("\n")
    elif args.output_format == "markdown":
        out.write(rules_markdown())
    else:
        code_width = max(len(r.code) for r in registry.RULES)
        width = max(len(r.name) for r in registry.RULES)
        # As wide as the longest kind and fix safety ("sometimes"), so every summary starts
        # together.
        kind_width = max(len(r.kind) for r in registry.RULES)
        fix_width = max(len(r.fix_safety) for r in registry.RULES)
        for r in registry.RULES:
            state = "" if r.default_enabled or r.internal else "  (off by default)"
            out.write(f"{r.code.ljust(code_width)}  {r.name.ljust(width)}  "
                      f"kind: {r.kind.ljust(kind_width)}  fix: {r.fix_safety.ljust(fix_width)}  "
                      f"{r.summary}{state}\n")
    return EXIT_CLEAN


_KIND_WORDS = {
    "internal": "reported by the engine itself",
    "analysis": "filters what a runtime trace records",
    "ast": "reads CPython's ast of the file",
    "cst": "a LibCST visitor reading the analysis's facts as metadata",
}


def _rule_json(rule: Any) -> dict[str, Any]:
    return {
        "code": rule.code, "name": rule.name, "summary": rule.summary,
        "severity": rule.severity, "default_enabled": rule.default_enabled or rule.internal,
        "fix_safety": rule.fix_safety, "kind": rule.kind,
        "options": [{"name": o.name, "default": o.default, "help": o.help} for o in rule.options],
        "docs": rule.docs(),
    }


def rules_markdown() -> str:
    """Every rule's documentation as one Markdown page (docs/rules.md is generated from it)."""
    from reviewbot import registry

    parts = ["# reviewbot rules\n",
             "Generated by `reviewbot rules --output-format markdown`; do not edit.\n",
             "Kinds: " + "; ".join(f"`{k}`: {w}" for k, w in _KIND_WORDS.items()) + ".\n",
             "| code | name | summary | kind | fix | default |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in registry.RULES:
        on = "on" if r.default_enabled or r.internal else "off"
        parts.append(f"| {r.code} | [{r.name}](#{r.code.lower()}-{r.name}) | {r.summary} | "
                     f"{r.kind} | {r.fix_safety} | {on} |")
    for r in registry.RULES:
        body = r.docs().split("\n", 1)
        parts.append(f"\n## {r.code} {r.name}\n\n{body[0]}\n")
        if len(body) > 1:
            parts.append(body[1].replace("\n## ", "\n### ").strip() + "\n")
    return "\n".join(parts).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    try:
        if args.command == "check":
            return run_check(args, sys.stdout, sys.stderr)
        if args.command == "review":
            return run_review_command(args, sys.stdout, sys.stderr)
        if args.command == "verify":
            return run_verify(args, sys.stdout)
        if args.command == "fix":
            return run_fix(args, sys.stdout, sys.stderr)
        if args.command == "rules":
            return run_rules(args, sys.stdout)
        if args.command == "explain":
            return run_explain(args, sys.stdout)
        if args.command == "server":
            return run_server()
        if args.command == "trace":
            from reviewbot.trace.run import run_trace

            return run_trace(args, sys.stderr)
    except ReviewbotError as exc:
        sys.stderr.write(f"reviewbot: error: {printable(str(exc))}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("reviewbot: interrupted\n")
        return 130
    except BrokenPipeError:
        # The reader went away (`reviewbot check | head`): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_CLEAN
    except Exception as exc:  # the promise: never a traceback
        if os.environ.get("REVIEWBOT_DEBUG"):
            raise
        sys.stderr.write(f"reviewbot: internal error: {exc.__class__.__name__}: "
                         f"{printable(str(exc))} "
                         "(set REVIEWBOT_DEBUG=1 for the traceback)\n")
        return EXIT_ERROR
    parser.error(f"unknown command {args.command!r}")
    return EXIT_ERROR
