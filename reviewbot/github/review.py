"""``reviewbot review``: check a pull request's changed Python files and review it.

One review with a line comment per finding on the lines the pull request changes (a
committable suggestion where the fix only edits the commented lines), and one summary
comment, found again by a hidden marker and edited in place, with a walkthrough and the
pre-merge checks. Annotations and the job summary are written too; when posting is not
allowed (a fork's read-only token) they are all there is.

Nothing from the pull request is executed: its files are read as text and parsed.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence, TextIO

from reviewbot.changed_docs import changed_coverage
from reviewbot.errors import ReviewbotError
from reviewbot.finding import Finding
from reviewbot.github.base_config import (BaseConfiguration, base_configuration, base_file,
                                         repository_path)
from reviewbot.github.diff import ChangedLines, FileChange, parse_patch
from reviewbot.github.event import Event, read_event
from reviewbot.github.markdown import SUMMARY_MARKER, comment_body, summary_markdown
from reviewbot.links import RULES_DOCS

DOCS_URL = RULES_DOCS
REPORTERS = ("github-pr-review", "github-check", "annotations")
FAIL_LEVELS = ("none", "any", "warning", "error")
_RANK = {"info": 0, "warning": 1, "error": 2}
# A check run's name and the summary's heading: nothing that Markdown reads as markup.
TOOL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}")


@dataclass
class Settings:
    """The review's inputs (the action's, or the command line's)."""

    filter_mode: str = "added"
    fail_level: str = "error"
    reporter: str = "github-pr-review"
    max_comments: int = 25
    docstring_threshold: float | None = None
    paths: Sequence[str] = (".",)
    config: str | None = None
    config_from: str = "head"  # "base": configuration and packs from the base commit
    # A baseline file (repository-relative): its known findings are not reported; with
    # config_from "base" it is read from the base commit too.
    baseline: str | None = None
    level: str | None = None  # info | warning | error for every finding (None: severity)
    tool_name: str = "reviewbot"  # the check run's name and the summary's heading
    overrides: Any = None  # a reviewbot.config.Overrides from the command line
    # A trace written by `reviewbot trace`: confirmed findings say so, and syncs the run saw
    # that no rule reported are RB108 findings (as `reviewbot check --trace`).
    trace: str | None = None
    # With config_from "base": import the rule modules its configuration names, as the
    # base commit has them (reviewbot.github.base_rules); off, they are named, not imported.
    base_rule_modules: bool = False


@dataclass
class Comment:
    """One line comment of the review."""

    finding: Finding
    path: str
    line: int
    start_line: int | None
    body: str

    def payload(self) -> dict[str, Any]:
        """The comment as the reviews API takes it."""
        data: dict[str, Any] = {"path": self.path, "line": self.line, "side": "RIGHT",
                                "body": self.body}
        if self.start_line is not None and self.start_line < self.line:
            data["start_line"] = self.start_line
            data["start_side"] = "RIGHT"
        return data


@dataclass
class Outcome:
    """What the review found and did."""

    findings: list[Finding] = field(default_factory=list)  # on changed lines
    comments: list[Comment] = field(default_factory=list)  # posted as line comments
    in_summary: list[Finding] = field(default_factory=list)  # over the limit, or rejected
    repeated: int = 0  # already posted by an earlier run
    notes: list[str] = field(default_factory=list)
    coverage: dict[str, Any] | None = None
    summary: str = ""
    suppressions: list[str] = field(default_factory=list)  # "path:line" added by the PR
    config_note: str = ""  # where the configuration came from
    baselined: int = 0  # findings the baseline knows, not reported


def _token() -> str:
    token = os.environ.get("GITHUB_TOKEN") or os.environ.get("INPUT_GITHUB_TOKEN")
    if not token:
        raise ReviewbotError("no token: set GITHUB_TOKEN (the action passes "
                             "inputs.github_token)")
    return token


def connect(token: str) -> Any:
    """A PyGithub client for GITHUB_API_URL, with bounded retries on rate limits and 5xx."""
    from github import Auth, Github
    from github.GithubRetry import GithubRetry

    base_url = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    backoff = float(os.environ.get("REVIEWBOT_RETRY_BACKOFF", "1.0"))
    pace = os.environ.get("REVIEWBOT_GITHUB_PACE")
    pacing = {} if pace is None else {"seconds_between_requests": float(pace),
                                      "seconds_between_writes": float(pace)}
    retry = GithubRetry(total=5, backoff_factor=backoff,
                        status_forcelist=[429, *range(500, 600)],
                        secondary_rate_wait=min(60.0, 60 * backoff), max_rate_limit_wait=120)
    return Github(auth=Auth.Token(token), base_url=base_url, retry=retry, timeout=30, **pacing)


def _scrub(text: str, token: str) -> str:
    return text.replace(token, "***") if token else text


def changed_files(pr: Any) -> ChangedLines:
    """Every file of the pull request (all pages) with its added and hunk lines."""
    changed = ChangedLines()
    for file in pr.get_files():
        change = parse_patch(file.filename, file.patch, file.status)
        changed.files[change.path] = change
    return changed


def _python(change: FileChange, root: Path) -> bool:
    return change.path.endswith(".py") and change.status != "removed" and \
        (root / change.path).is_file()


def run_review(settings: Settings, out: TextIO, err: TextIO, cwd: Path | None = None) -> int:
    """Review the pull request of the event; the exit status follows ``fail_level``."""
    from github import GithubException
    from requests.exceptions import RequestException

    from reviewbot.project_rules import project_code_allowed

    api_errors = (GithubException, RequestException)

    cwd = cwd or Path.cwd()
    if not TOOL_NAME.fullmatch(settings.tool_name):
        raise ReviewbotError("--tool-name: expected letters, digits, spaces, '.', '_' or '-' "
                             "(at most 64)")
    if settings.base_rule_modules and settings.config_from != "base":
        raise ReviewbotError("--base-rule-modules needs --config-from base (the modules are "
                             "read from the base commit, never from the checkout)")
    event = read_event()
    repository, number = event.repository, event.number
    token = _token()
    gh = connect(token)
    base_config: BaseConfiguration | None = None
    try:
        try:
            repo = gh.get_repo(repository)
            pr = repo.get_pull(number)
            changed = changed_files(pr)
            base_config = base_configuration(
                repo, event, settings.config, settings.paths, _overrides(settings), cwd,
                rule_modules=settings.base_rule_modules and project_code_allowed()) \
                if settings.config_from == "base" else None
            known = review_baseline(settings, repo, event, cwd)
        except api_errors as exc:
            raise ReviewbotError(_scrub(f"cannot read pull request #{number} of {repository}: "
                                        f"{_api_error(exc)}", token)) from None
        outcome = check_changes(settings, changed, cwd, base_config, known)
        outcome.summary = summary_markdown(outcome, changed, settings, repository, number)
        _write_step_summary(outcome.summary)
        _annotations(outcome, settings, out)
        if settings.reporter == "github-pr-review":
            try:
                identity = authenticated_login(gh)
                _post_review(pr, outcome, settings, cwd, identity)
                outcome.summary = summary_markdown(outcome, changed, settings, repository,
                                                   number)
                _upsert_summary(pr, outcome.summary, identity)
            except _ReadOnly as exc:
                err.write(f"reviewbot: {exc}\n")
            except api_errors as exc:
                raise ReviewbotError(_scrub(f"posting the review failed: {_api_error(exc)}",
                                            token)) from None
        elif settings.reporter == "github-check":
            try:
                _post_check(repo, event, outcome, settings)
            except api_errors as exc:
                if getattr(exc, "status", None) == 403:
                    err.write("reviewbot: the token cannot create check runs (403); the "
                              "findings are in the annotations and the job summary\n")
                else:
                    raise ReviewbotError(_scrub(f"creating the check run failed: "
                                                f"{_api_error(exc)}", token)) from None
        err.write(f"reviewbot: {len(outcome.findings)} findings on changed lines, "
                  f"{len(outcome.comments)} line comments posted"
                  f"{f', {outcome.baselined} known from the baseline' if known else ''}\n")
        return exit_status(outcome, settings)
    finally:
        # The base commit's rule modules stay importable (worker processes import them
        # by name) until the run ends.
        if base_config is not None:
            base_config.close()


def _api_error(exc: Any) -> str:
    if not hasattr(exc, "status"):  # requests: retries used up, or no connection
        import re

        found = re.search(r"Caused by \w+\('(.*?)'\)", str(exc))
        return f"{found.group(1) if found else exc.__class__.__name__} (after retries)"
    data = getattr(exc, "data", None)
    message = data.get("message") if isinstance(data, dict) else None
    return f"HTTP {getattr(exc, 'status', '?')}: {message or 'no message'}"


class _ReadOnly(Exception):
    """The token may not write to the pull request (a fork's)."""


def exit_status(outcome: Outcome, settings: Settings) -> int:
    """1 when a finding (or a failed check) is at or above ``fail_level``."""
    if settings.fail_level == "none":
        return 0
    coverage_fails = bool(outcome.coverage and not outcome.coverage["passed"])
    levels = [_RANK[getattr(settings, "level", None) or f.severity] for f in outcome.findings]
    if settings.fail_level == "any":
        return 1 if levels or coverage_fails else 0
    if settings.fail_level == "warning":
        return 1 if any(n >= _RANK["warning"] for n in levels) or coverage_fails else 0
    return 1 if any(n >= _RANK["error"] for n in levels) else 0


# Checking -------------------------------------------------------------------------------
def review_baseline(settings: Settings, repo: Any, event: Event, cwd: Path) -> Any:
    """The baseline the review filters by (None without one): the checkout's file, or with
    ``config_from: base`` the base commit's (a pull request cannot add its own findings
    to it); a base commit without the file means an empty baseline."""
    from reviewbot import baseline

    if not settings.baseline:
        return None
    if settings.config_from != "base":
        return baseline.read(str(cwd / settings.baseline), settings.baseline)
    rel = repository_path(settings.baseline, cwd, "baseline")
    data = base_file(repo, event.base_sha, rel, baseline.MAX_BYTES)
    shown = f"{rel} (base commit {event.base_sha[:12]})"
    if data is None:
        return baseline.Baseline([], shown)
    return baseline.parse(data, shown)


def check_changes(settings: Settings, changed: ChangedLines, cwd: Path,
                  base: BaseConfiguration | None = None, known: Any = None) -> Outcome:
    """Check the changed Python files; keep the findings the filter mode keeps."""
    from reviewbot.config import load_config
    from reviewbot.context import RunContext
    from reviewbot.discovery import display_path
    from reviewbot.engine import Engine
    from reviewbot.packs import load_packs, with_packs

    trace = None
    if settings.trace:
        from reviewbot.trace.attach import load

        trace = load(str(cwd / settings.trace))
    files = [cwd / c.path for c in changed.files.values() if _python(c, cwd)]
    if base is not None:
        config, packs = base.config, base.packs
    else:
        config_file = Path(settings.config) if settings.config else None
        if config_file is not None and not config_file.is_file():
            raise ReviewbotError(f"{settings.config}: configuration file not found")
        config = load_config([cwd / p for p in settings.paths], config_file,
                             _overrides(settings), cwd)
        packs = load_packs(config.rule_packs, config.root, config.source,
                           config.key_prefix + "rule-packs")
    in_scope = [f for f in files if _under(f, [cwd / p for p in settings.paths])
                and _under(f, [cwd])]
    outcome = Outcome()
    outcome.config_note = base.note if base is not None else ""
    if in_scope:
        from reviewbot.analysis.project import (IndexCache, engine_pack_names,
                                                project_index_files)

        # The whole checkout is indexed (hot paths cross modules), as `check` does it; its
        # summaries are cached only beside the results, never inside the checked tree.
        index_root, project_files = project_index_files(in_scope, config, cwd)
        extra = engine_pack_names(config, index_root, project_files)
        if extra:  # shipped packs, by name: nothing is read from the checkout
            packs = with_packs(packs, load_packs(tuple(extra), config.root, config.source,
                                                 config.key_prefix + "rule-packs"))
        if config.default_device is not None:
            packs = dataclasses.replace(packs, default_device=config.default_device)
        results = review_cache(config, packs, cwd)
        engine = Engine(config, packs, cache=results, roots=(cwd.resolve(),),
                        project_root=index_root, project_files=project_files,
                        index_cache=IndexCache(results.folder if results is not None else None))
        result = engine.run(in_scope, RunContext("."), cwd)
        findings = result.findings
        if trace is not None:
            from reviewbot.trace.attach import Project, attach

            findings = attach(findings, trace, in_scope, cwd, config,
                              Project(packs, index_root, project_files, engine.index_cache),
                              sys.stderr)
        if known is not None:
            from reviewbot.baseline import apply
            from reviewbot.reporters.sources import Sources

            applied = apply(findings, known, Sources(cwd, (cwd.resolve(),), cwd,
                                                     config.max_file_size), scopes=())
            findings, outcome.baselined = applied.new, applied.suppressed
        for finding in findings:
            path = display_path(Path(cwd / finding.path), cwd) if not Path(
                finding.path).is_absolute() else finding.path
            if finding.code == "RB301":
                continue  # the pre-merge check below counts the changed definitions only
            if changed.keeps(path, finding.line, finding.end_line, settings.filter_mode):
                outcome.findings.append(finding)
    if known is not None:
        outcome.notes.append(f"Not reported: {outcome.baselined} findings in the changed files "
                             f"that the baseline {known.source} knows.")
    if "RB301" in config.enabled:
        outcome.coverage = changed_coverage(in_scope, changed, config, cwd)
    outcome.suppressions = added_suppressions(in_scope, changed, cwd)
    outcome.findings.sort(key=lambda f: (f.severity != "error", f.path, f.line, f.code))
    return outcome


def _overrides(settings: Settings) -> Any:
    """The command line's overrides, with ``--docstring-threshold`` as RB301's option.

    A review imports no project code from the checkout: ``rule-modules`` is read but not
    loaded, since the modules there are the pull request's files and the review runs with
    the workflow's token. Only ``--base-rule-modules`` imports them, as the base commit has
    them (reviewbot.github.base_config)."""
    from reviewbot.config import Overrides

    given = getattr(settings, "overrides", None) or Overrides()
    return dataclasses.replace(given, options=(*given.options, *_threshold(settings)),
                               project_code=False)


def _threshold(settings: Settings) -> tuple[tuple[str, str, Any], ...]:
    if settings.docstring_threshold is None:
        return ()
    return (("RB301", "threshold", settings.docstring_threshold),)


def review_cache(config: Any, packs: Any, cwd: Path) -> Any:
    """A result cache under ``$RUNNER_TEMP``, never one inside the checked tree (a pull
    request could commit one saying "no findings"); none outside Actions."""
    from reviewbot.cache import ResultCache

    temp = os.environ.get("RUNNER_TEMP")
    if not temp:
        return None
    folder = Path(temp) / "reviewbot-cache"
    try:
        resolved, tree = folder.resolve(), cwd.resolve()
    except (OSError, RuntimeError):
        return None
    if resolved == tree or tree in resolved.parents:
        return None
    return ResultCache(folder, config.fingerprint() + repr(packs))


def added_suppressions(files: list[Path], changed: ChangedLines, cwd: Path) -> list[str]:
    """``path:line`` of each suppression comment on a line the pull request adds (``path:line
    (whole file)`` for a ``# reviewbot: ignore-file``)."""
    from reviewbot.source import UnreadableSource, decode, read_bytes
    from reviewbot.suppression import Suppressions, file_ignore_line

    found = []
    for file in files:
        try:
            rel = file.resolve().relative_to(cwd.resolve()).as_posix()
        except ValueError:
            continue
        change = changed.files.get(rel)
        if change is None or not change.added:
            continue
        try:
            text = decode(read_bytes(str(file), 16 * 1024 * 1024)).text
        except UnreadableSource:
            continue
        whole = file_ignore_line(text)
        if whole is not None and whole in change.added:
            found.append(f"{rel}:{whole} (whole file)")
        lines = Suppressions.parse(text).by_line
        found.extend(f"{rel}:{line}" for line in sorted(lines) if line in change.added)
    return found


def _under(path: Path, roots: list[Path]) -> bool:
    resolved = path.resolve()
    return any(resolved == r.resolve() or resolved.is_relative_to(r.resolve()) for r in roots)


# Posting ----------------------------------------------------------------------------------
def plan_comments(outcome: Outcome, settings: Settings, existing: set[tuple[str, int, str]],
                  cwd: Path) -> None:
    """Choose the line comments: not repeated, at most ``max_comments``, most severe first."""
    for finding in outcome.findings:
        comment = build_comment(finding, cwd)
        key = (comment.path, comment.line, finding.code)
        if key in existing:
            outcome.repeated += 1
            continue
        if len(outcome.comments) >= settings.max_comments:
            outcome.in_summary.append(finding)
            continue
        outcome.comments.append(comment)


def build_comment(finding: Finding, cwd: Path) -> Comment:
    """The comment of a finding: on the lines its fix edits when it can be a suggestion,
    otherwise on the finding's own lines."""
    path = finding.path.replace("\\", "/")
    suggestion = None
    start, end = finding.line, finding.end_line or finding.line
    if finding.fix is not None and finding.fix.edits and finding.fix.applicability in (
            "safe", "unsafe") and not finding.fix.imports:
        lines_touched = {n for e in finding.fix.edits for n in range(e.line, e.end_line + 1)}
        first, last = min(lines_touched), max(lines_touched)
        if finding.line <= first and last <= max(finding.end_line, finding.line):
            text = _read(cwd / path)
            if text is not None:
                suggestion = _suggest(text, finding, first, last)
                if suggestion is not None:
                    start, end = first, last
    body = comment_body(finding, suggestion, DOCS_URL)
    return Comment(finding, path, end, start if start != end else None, body)


def _read(path: Path) -> str | None:
    from reviewbot.source import UnreadableSource, decode, read_bytes

    try:
        return decode(read_bytes(str(path))).text
    except UnreadableSource:
        return None


def _suggest(text: str, finding: Finding, first: int, last: int) -> str | None:
    from reviewbot.fixer import apply_edits
    from reviewbot.source import split_lines

    lines = split_lines(text)
    if last > len(lines):
        return None
    block = "\n".join(lines[first - 1:last]) + "\n"
    shifted = [type(e)(e.line - first + 1, e.column, e.end_line - first + 1, e.end_column,
                       e.content) for e in finding.fix.edits]  # type: ignore[union-attr]
    new = apply_edits(block, shifted)
    return new if new != block else None


ACTIONS_BOT = "github-actions[bot]"


def authenticated_login(gh: Any) -> str:
    """Who the token acts as (``GET /user``); the Actions token may not ask, and acts as
    ``github-actions[bot]``. Only this identity's comments count as the bot's own."""
    from github import GithubException

    try:
        login = gh.get_user().login
    except GithubException as exc:
        if exc.status in (401, 403, 404):
            return ACTIONS_BOT
        raise
    return login if isinstance(login, str) and login else ACTIONS_BOT


def _author(comment: Any) -> str | None:
    try:
        user = comment.user
        return user.login if user is not None else None
    except Exception:  # a comment without an author (deleted account)
        return None


def _existing_comments(pr: Any, identity: str) -> set[tuple[str, int, str]]:
    found: set[tuple[str, int, str]] = set()
    for comment in pr.get_review_comments():
        if _author(comment) != identity:
            continue  # anyone can write the marker; only the bot's own comments count
        body = comment.body or ""
        line = comment.line or comment.original_line
        for code in _codes_in(body):
            found.add((comment.path, int(line or 0), code))
    return found


def _codes_in(body: str) -> list[str]:
    """The rule of a line comment: its marker is the body's last line (a marker quoted in
    the code of a suggestion or a message does not count)."""
    last = body.rstrip("\n").rsplit("\n", 1)[-1]
    found = re.fullmatch(r"<!-- reviewbot:([A-Z]+[0-9]+) -->", last)
    return [found.group(1)] if found else []


def _post_review(pr: Any, outcome: Outcome, settings: Settings, cwd: Path,
                 identity: str) -> None:
    from github import GithubException

    plan_comments(outcome, settings, _existing_comments(pr, identity), cwd)
    if not outcome.comments:
        return
    body = (f"reviewbot found {len(outcome.findings)} findings on the changed lines; "
            f"{len(outcome.comments)} are commented below. The summary comment has the "
            "pre-merge checks.")
    try:
        pr.create_review(body=body, event="COMMENT",
                         comments=[c.payload() for c in outcome.comments])
    except GithubException as exc:
        if exc.status == 403:
            outcome.in_summary[:0] = [c.finding for c in outcome.comments]
            outcome.comments = []
            raise _ReadOnly("the token may not comment on this pull request (403, as for a "
                            "fork's read-only token); the findings are in the annotations and "
                            "the job summary") from None
        if exc.status != 422:
            raise
        # A line GitHub will not take (outside the diff it has): those go to the summary.
        rejected = [c.finding for c in outcome.comments]
        outcome.comments = []
        outcome.in_summary[:0] = rejected
        outcome.notes.append(f"GitHub rejected the line comments ({_api_error(exc)}); "
                             f"{len(rejected)} findings are listed here instead.")
        pr.create_review(body=body.split(";")[0] + "; see the summary comment.",
                         event="COMMENT")


def _upsert_summary(pr: Any, text: str, identity: str) -> None:
    for comment in pr.get_issue_comments():
        if (comment.body or "").startswith(SUMMARY_MARKER) and _author(comment) == identity:
            if comment.body != text:
                comment.edit(text)
            return
    pr.create_issue_comment(text)


def _post_check(repo: Any, event: Event, outcome: Outcome, settings: Settings) -> None:
    head = event.head_sha
    levels = {"info": "notice", "warning": "warning", "error": "failure"}
    annotations = [{"path": f.path, "start_line": f.line, "end_line": max(f.line, f.end_line),
                    "annotation_level": levels[getattr(settings, "level", None)
                                               or f.severity],
                    "title": f"{f.code} {f.name}", "message": f.message}
                   for f in outcome.findings[:50]]
    failed = exit_status(outcome, settings) != 0
    repo.create_check_run(name=getattr(settings, "tool_name", "reviewbot"), head_sha=head, status="completed",
                          conclusion="failure" if failed else "success",
                          output={"title": f"{len(outcome.findings)} findings",
                                  "summary": outcome.summary, "annotations": annotations})


def _write_step_summary(text: str) -> None:
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
    except OSError as exc:
        sys.stderr.write(f"reviewbot: warning: cannot write the job summary ({exc.strerror})\n")


def _annotations(outcome: Outcome, settings: Settings, out: TextIO) -> None:
    from reviewbot.reporters import github

    shown = outcome.findings[:settings.max_comments]
    if shown:
        github.write(shown, out, False, level_of_all=getattr(settings, "level", None))

