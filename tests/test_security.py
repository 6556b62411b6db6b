"""A pull request controls every file, name, setting and comment reviewbot sees.

Each test is an attack that worked once: code run from the cache, Markdown and workflow
commands injected through file names, the bot's markers forged, files outside the project
read, resources exhausted, a review switched off by the pull request itself.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import shutil
import stat
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, REPO
from reviewbot.cache import ResultCache, content_key
from reviewbot.config import Overrides, load_config
from reviewbot.engine import FILE_RULES_KEY, FileResult, worker_count
from reviewbot.finding import Edit, Finding, Fix
from reviewbot.fixer import FileFix
from reviewbot.packs import load_packs
from reviewbot.reporters import FORMATS

SEED_RUNNER = FIXTURES / "fix" / "before" / "seed_runner.py"
UNDOCUMENTED = "def f():\n    pass\n"


def project(tmp_path: Path) -> Path:
    """A project folder (a git root) to run in."""
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    return root


def one_line_error(result) -> None:
    assert result.code == 2
    assert result.err.count("\n") == 1 and result.err.startswith("reviewbot: error: ")
    assert "Traceback" not in result.err


# 1. The cache --------------------------------------------------------------------------
class _RunsCode:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _cache_for(root: Path, paths=(".",)) -> ResultCache:
    """The cache `reviewbot check` uses in ``root`` with its default configuration."""
    config = load_config([root / p for p in paths], None, Overrides(), root)
    packs = load_packs(config.rule_packs, config.root, config.source,
                       config.key_prefix + "rule-packs")
    return ResultCache(root / ".reviewbot_cache", config.fingerprint() + repr(packs))


def test_a_pickle_under_the_cache_name_runs_nothing(tmp_path, run_cli):
    root = project(tmp_path)
    (root / "m.py").write_text(UNDOCUMENTED)
    marker = tmp_path / "pwned"
    cache = _cache_for(root)
    cache.folder.mkdir()
    payload = pickle.dumps({"x": _RunsCode(str(marker))})
    for name in (cache.file.name, cache.file.with_suffix(".pickle").name,
                 re.sub(r"\.json$", ".pickle", cache.file.name)):
        (cache.folder / name).write_bytes(payload)
    result = run_cli(["check", "."], cwd=root)
    assert result.code == 1 and "RB301" in result.out
    assert not marker.exists()
    assert "pickle" not in (REPO / "reviewbot" / "cache.py").read_text().replace(
        "a pickle", "")


def test_the_cache_is_versioned_signed_json(tmp_path, run_cli):
    root = project(tmp_path)
    (root / "m.py").write_text(UNDOCUMENTED)
    assert run_cli(["check", "."], cwd=root).code == 1
    (file,) = (root / ".reviewbot_cache").glob("results-*.json")
    header, body = file.read_bytes().split(b"\n", 1)
    meta = json.loads(header)
    assert meta["format"] == "reviewbot-cache" and meta["version"] == 3
    entries = json.loads(body)
    # One entry: the file rules (the project rules cannot report in a file without torch,
    # so its second phase is never asked for).
    assert len(entries) == 1
    # Any change to the data (say, a finding removed) breaks the signature: not believed.
    (key,) = [k for k in entries if k.endswith("|file-rules")]
    entries[key]["findings"] = []
    file.write_bytes(header + b"\n" + json.dumps(entries).encode())
    assert _cache_for(root).get(key) is None
    result = run_cli(["check", "."], cwd=root)
    assert result.code == 1 and "RB301" in result.out


def test_a_signed_entry_of_the_wrong_shape_is_ignored(tmp_path):
    cache = ResultCache(tmp_path / "c", "cfg")
    cache.put("k", FileResult("m.py", [], {}))
    cache.save()
    for bad in ({"path": "m.py"}, {"path": 1, "findings": [], "facts": {}},
                {"path": "m.py", "findings": [{"code": "RB301"}], "facts": {}},
                {"path": "m.py", "facts": {}, "findings": [
                    {"code": "X", "name": "n", "message": "m", "path": "m.py",
                     "span": [1, 1, 1, "1"], "severity": "error", "fix": None,
                     "details": []}]},
                {"path": "m.py", "findings": [], "facts": {}, "gate": ["yes", 1]}):
        forged = ResultCache(tmp_path / "c", "cfg")
        forged._entries = {}
        forged.used = {"k": bad}
        forged.save()
        assert ResultCache(tmp_path / "c", "cfg").get("k") is None


def test_a_symlinked_cache_folder_is_not_used(tmp_path, run_cli):
    root = project(tmp_path)
    (root / "m.py").write_text(UNDOCUMENTED)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".reviewbot_cache").symlink_to(elsewhere, target_is_directory=True)
    result = run_cli(["check", "."], cwd=root)
    assert result.code == 1
    assert list(elsewhere.iterdir()) == []


def test_the_cache_gitignore_is_repaired_and_written_atomically(tmp_path, monkeypatch):
    from reviewbot import cache as cache_module

    folder = tmp_path / "c"
    folder.mkdir()
    (folder / ".gitignore").write_text("")  # what a full disk once left behind
    cache = ResultCache(folder, "cfg")
    cache.put("k", FileResult("m.py", [], {}))
    real_fsync = os.fsync

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_module.os, "fsync", full_disk)
    cache.save()  # no error, and no half-written file left
    assert (folder / ".gitignore").read_text() == ""
    assert not [p for p in folder.iterdir() if p.name.startswith(".tmp-")]
    monkeypatch.setattr(cache_module.os, "fsync", real_fsync)
    ResultCache(folder, "cfg").put("k", FileResult("m.py", [], {}))
    again = ResultCache(folder, "cfg")
    again.put("k", FileResult("m.py", [], {}))
    again.save()
    assert (folder / ".gitignore").read_text().splitlines()[-1] == "*"


def test_an_unsigned_no_findings_entry_does_not_hide_a_finding_from_check(tmp_path,
                                                                          run_cli):
    root = project(tmp_path)
    source = root / "m.py"
    source.write_text(UNDOCUMENTED)
    cache = _cache_for(root)
    key = content_key("m.py", source.read_bytes())
    entry = {"path": "m.py", "findings": [], "facts": {}}
    cache.folder.mkdir()
    body = json.dumps({key: entry}).encode()
    header = json.dumps({"format": "reviewbot-cache", "version": 2,
                         "mac": "0" * 64}).encode()
    cache.file.write_bytes(header + b"\n" + body)
    result = run_cli(["check", "."], cwd=root)
    assert result.code == 1 and "RB301" in result.out


# 2. Markdown injection ---------------------------------------------------------------
HOSTILE_NAMES = [
    "a|b<details open>x.py", "x\r## Heading\r.py", "[link](https://evil.example).py",
    "@evil #999 .py", "`` ` ``.py", "<ins>x</ins>.py", "\u202egnp.py", "a\n- [x] <b>.py",
    "www.evil.example.py", "x\\|<img src=x>.py", "![i](https://evil.example/i.png).py",
    "&#64;evil.py", "<!-- -->.py", "|||.py", "a\u200bb.py",
]


def _summary(names):
    from reviewbot.github.diff import ChangedLines, FileChange
    from reviewbot.github.markdown import comment_body, summary_markdown
    from reviewbot.github.review import Outcome, Settings

    changed = ChangedLines({n: FileChange(n, "modified", {1}) for n in names})
    findings = [Finding("RB101", "tolist-on-cuda-tensor",
                        f"`.tolist()` on `{n}` in hot path {n}: it waits", n, 1, 1, 1, 1,
                        "error") for n in names]
    outcome = Outcome(findings=findings, in_summary=findings,
                      coverage={"documented": 0, "total": 1, "coverage": 0.0,
                                "threshold": 80.0, "passed": False,
                                "missing": [f"{n}:1 f" for n in names]},
                      suppressions=[f"{n}:1" for n in names],
                      notes=[f"note about {n}" for n in names])
    text = summary_markdown(outcome, changed, Settings(), "acme/engine", 7)
    bodies = [comment_body(f, None, "https://docs.example/rules.md") for f in findings]
    return text, bodies


def _render(text):
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text)


def _walk(tokens):
    for token in tokens:
        yield token
        yield from _walk(token.children or [])


_MARKER = re.compile(r"<!-- reviewbot:(summary|RB\d{3}) -->\n?")


def _html(tokens):
    """HTML and images in the rendered tokens, less the bot's own hidden markers."""
    return [t for t in tokens if t.type == "image" or t.type in ("html_inline", "html_block")
            and not _MARKER.fullmatch(t.content)]


def test_file_names_and_code_make_no_html_link_or_heading(tmp_path):
    text, bodies = _summary(HOSTILE_NAMES)
    tokens = list(_walk(_render(text)))
    assert _html(tokens) == []
    links = [t for t in tokens if t.type == "link_open"]
    assert links == []
    headings = [t for t in tokens if t.type == "heading_open"]
    assert len(headings) == 4  # reviewbot, Walkthrough, Pre-merge checks, Findings not posted
    # Each table keeps its rows and its columns: no name split a cell or a row.
    rows = [t for t in tokens if t.type == "tr_open"]
    cells_per_row = []
    count = None
    for t in tokens:
        if t.type == "tr_open":
            count = 0
        elif t.type in ("td_open", "th_open"):
            count += 1
        elif t.type == "tr_close":
            cells_per_row.append(count)
    walkthrough = 1 + len(HOSTILE_NAMES)
    assert cells_per_row[:walkthrough] == [4] * walkthrough
    assert len(rows) >= walkthrough
    for body in bodies:
        body_tokens = list(_walk(_render(body)))
        assert _html(body_tokens) == []
        assert not [t for t in body_tokens if t.type == "heading_open"]
        # The rule's documentation is the only link.
        assert [t.attrs["href"] for t in body_tokens if t.type == "link_open"] == [
            "https://docs.example/rules.md#rb101-tolist-on-cuda-tensor"]


def test_no_mention_or_reference_outside_code_spans():
    text, bodies = _summary(HOSTILE_NAMES)
    for markdown in (text, *bodies):
        plain = [t.content for t in _walk(_render(markdown)) if t.type == "text"]
        joined = " ".join(plain)
        assert not re.search(r"@\w", joined), joined
        assert not re.search(r"#999", joined), joined
        # Nor anything a GFM renderer would autolink.
        assert "://" not in joined and "www." not in joined, joined
        assert "\u202e" not in markdown and "\u200b" not in markdown


def test_bidi_and_control_characters_are_shown_escaped():
    from reviewbot.github.markdown import code, escape

    assert code("a\u202eb\rc") == r"`a\u202eb\rc`"
    assert escape("x\ny") == r"x\\ny"  # shown as x\ny
    assert code("a|b", table=True) == r"`a\|b`"


# 3. Workflow commands from file names --------------------------------------------------
_NAME = st.lists(st.sampled_from(list("ab:#[]/.%,_ -\\\"'") + [
    "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029", "\t", "\x1b",
    "::", "##[", "::add-mask::", "::error::", "##[group]", "\u202e"]), min_size=1,
    max_size=12).map(lambda parts: "".join(parts) + ".py")


def _findings_for(name: str) -> list[Finding]:
    fix = Fix("safe", f"Read `{name}` through the helper",
              (Edit(1, 1, 1, 2, f"{name}\n::error::edit"),))
    return [
        Finding("RB101", "tolist-on-cuda-tensor", f"`.tolist()` on `{name}` in {name}",
                name, 1, 1, 1, 2, "error", fix),
        Finding("RB301", "docstring-coverage", "Docstring coverage is 0.00%", name, 1, 1, 1,
                1, "error", details=(("missing", [f"{name}:3 {name}"]),)),
        Finding("RB003", "unreadable-file", f"Skipped: {name}", name, 1, 1, 1, 1, "error"),
    ]


def _command_lines(output: str) -> list[str]:
    return [line for line in output.splitlines()
            if line.lstrip().startswith(("::", "##["))]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=_NAME)
def test_no_workflow_command_comes_from_a_file_name(name):
    findings = _findings_for(name)
    for format_name, write in FORMATS.items():
        out = io.StringIO()
        write(findings, out, False)
        lines = _command_lines(out.getvalue())
        if format_name == "github":
            # Only the commands the reporter writes: one per finding, each on one line.
            assert len(out.getvalue().splitlines()) == len(findings)
            assert all(re.match(r"::(error|warning) ", line) for line in lines)
            assert len(lines) == len(findings)
        else:
            assert lines == [], (format_name, lines)
    diff = FileFix(name, "x = 1\n", "x = 2\n").diff()
    assert _command_lines(diff) == []
    from reviewbot.reporters import coverage

    out = io.StringIO()
    coverage.write({name: [("function", "f", 1, False)]}, 80.0, out)
    assert _command_lines(out.getvalue()) == []


def test_a_hostile_file_name_on_disk_injects_nothing(tmp_path, run_cli):
    root = project(tmp_path)
    name = "a\n::add-mask::X\n::error::y.py"
    shutil.copy(SEED_RUNNER, root / name)
    for args in (["check", "."], ["check", ".", "--select", "ALL"], ["fix", "."],
                 ["check", ".", "--coverage-report"], ["check", ".", "--explain-hot-paths"]):
        result = run_cli(args, cwd=root)
        assert result.code in (0, 1), result.err
        assert _command_lines(result.out) == [] and _command_lines(result.err) == [], args
    result = run_cli(["check", ".", "--output-format", "github"], cwd=root)
    assert all(line.startswith(("::error ", "::warning ")) for line in result.out.splitlines())


def test_in_actions_the_diff_of_hostile_code_cannot_issue_commands(tmp_path, monkeypatch):
    from reviewbot import cli

    root = project(tmp_path)
    text = SEED_RUNNER.read_text().replace(
        "import torch\n", 'import torch\nNOTE = """\n  ::error::injected\n##[group]x\n'
        '::add-mask::x\n"""\n', 1)
    (root / "runner.py").write_text(text)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.chdir(root)
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    assert cli.main(["fix", "--no-cache", "."]) == 1
    lines = out.getvalue().splitlines()
    token = lines[0].removeprefix("::stop-commands::")
    assert re.fullmatch(r"[0-9a-f]{32}", token)
    assert lines[-1] == f"::{token}::"
    # The code's own command-like lines are in the diff, but only between the two.
    assert "   ::error::injected" in lines[1:-1] and " ##[group]x" in lines[1:-1]
    assert _command_lines("\n".join(lines[:1] + lines[-1:])) == lines[:1] + lines[-1:]


# 4. Only the bot's own comments count ---------------------------------------------------
review_only = pytest.mark.skipif(
    __import__("importlib").util.find_spec("github") is None, reason="needs PyGithub")


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    root = tmp_path / "ws"
    (root / "runner").mkdir(parents=True)
    shutil.copy(FIXTURES / "pr" / "after" / "model_runner.py",
                root / "runner" / "model_runner.py")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(FIXTURES / "pr" / "event.json"))
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/engine")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_" + "x" * 36)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "step-summary.md"))
    monkeypatch.setenv("REVIEWBOT_RETRY_BACKOFF", "0")
    monkeypatch.setenv("REVIEWBOT_GITHUB_PACE", "0")
    monkeypatch.delenv("RUNNER_TEMP", raising=False)
    return root


@pytest.fixture
def fake(httpserver, monkeypatch):
    pytest.importorskip("github")
    from github_fake import FakeGitHub
    from test_review import pr_files

    fake = FakeGitHub(httpserver, pr_files())
    monkeypatch.setenv("GITHUB_API_URL", fake.base)
    return fake


def test_a_stranger_holding_the_markers_neither_silences_nor_takes_over(run_cli, workspace,
                                                                       fake):
    mallory = {"login": "mallory", "id": 666, "type": "User"}
    fake.review_comments.append({"id": 1, "path": "runner/model_runner.py", "line": 67,
                                 "original_line": 67, "user": mallory,
                                 "body": "lgtm <!-- reviewbot:RB201 -->"})
    fake.issue_comments.append({"id": 2, "user": mallory,
                                "body": "<!-- reviewbot:summary --> keep this",
                                "url": f"{fake.repo_url}/issues/comments/2"})
    result = run_cli(["review"], cwd=workspace)
    assert result.code == 1
    assert [c["line"] for r in fake.reviews for c in r.get("comments", [])] == [67]
    assert fake.issue_comments[0]["body"] == "<!-- reviewbot:summary --> keep this"
    assert len(fake.issue_comments) == 2 and fake.paths("PATCH") == []


def test_the_identity_is_the_authenticated_user(run_cli, workspace, fake):
    fake.login = "reviewbot-app[bot]"
    run_cli(["review"], cwd=workspace)
    assert "/user" in fake.paths("GET")
    # A comment by github-actions[bot] is not this token's: it does not count.
    fake.review_comments[0]["user"] = {"login": "github-actions[bot]", "id": 1}
    fake.reviews.clear()
    run_cli(["review"], cwd=workspace)
    assert [c["line"] for r in fake.reviews for c in r.get("comments", [])] == [67]


def test_a_marker_quoted_inside_a_comment_does_not_count():
    pytest.importorskip("github")
    from reviewbot.github.markdown import comment_body
    from reviewbot.github.review import _codes_in

    finding = Finding("RB101", "tolist-on-cuda-tensor",
                      "`.tolist()` on `x['<!-- reviewbot:RB102 -->']`", "a.py", 1, 1, 1, 2,
                      "error")
    body = comment_body(finding, None, "https://docs.example/rules.md")
    assert _codes_in(body) == ["RB101"]
    assert _codes_in("<!-- reviewbot:RB102 -->\nthanks") == []


# 5. Configuration reads nothing outside the project ---------------------------------
SECRET = "hunter2-do-not-print"


@pytest.mark.parametrize("spec", ["ABSOLUTE", "../secret.yml", "sub/../../secret.yml",
                                  "link.yml"])
def test_rule_packs_outside_the_project_are_refused(tmp_path, run_cli, spec):
    root = project(tmp_path)
    secret = tmp_path / "secret.yml"
    secret.write_text(f"name: x\nbad: [{SECRET}\n")
    (root / "link.yml").symlink_to(secret)
    spec = str(secret) if spec == "ABSOLUTE" else spec
    (root / ".reviewbot.yml").write_text(f"rule-packs: [{json.dumps(spec)}]\n")
    (root / "m.py").write_text('"""Doc."""\n')
    result = run_cli(["check", "."], cwd=root)
    one_line_error(result)
    assert "rule-packs" in result.err and SECRET not in result.err


def test_yaml_errors_name_the_place_not_the_text(tmp_path, run_cli):
    root = project(tmp_path)
    (root / "pack.yml").write_text(f"name: x\nhot-paths: [{SECRET}\n")
    (root / ".reviewbot.yml").write_text(f"rule-packs: [pack.yml]\nselect: {SECRET}: [\n")
    result = run_cli(["check", "."], cwd=root)
    one_line_error(result)
    assert SECRET not in result.err and "line 2" in result.err
    (root / ".reviewbot.yml").write_text("rule-packs: [pack.yml]\n")
    result = run_cli(["check", "."], cwd=root)
    one_line_error(result)
    assert SECRET not in result.err and "pack.yml" in result.err


def _laughs(levels: int = 9) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("where", ["config", "pack"])
def test_a_billion_laughs_is_refused_in_bounded_memory(tmp_path, run_cli, where):
    root = project(tmp_path)
    (root / "m.py").write_text('"""Doc."""\n')
    if where == "config":
        (root / ".reviewbot.yml").write_text(_laughs())
    else:
        (root / "pack.yml").write_text("name: x\n" + _laughs())
        (root / ".reviewbot.yml").write_text("rule-packs: [pack.yml]\n")
    tracemalloc.start()
    try:
        result = run_cli(["check", "."], cwd=root)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    one_line_error(result)
    assert "aliases expand" in result.err
    assert peak < 64 * 1024 * 1024


# 6. Links out of the project -----------------------------------------------------------
@pytest.mark.parametrize("command", [["check", "."], ["check", "link.py"],
                                     ["fix", "--apply", "."], ["fix", "."]])
def test_a_link_to_a_file_outside_the_project_is_skipped(tmp_path, run_cli, command):
    root = project(tmp_path)
    outside = tmp_path / "outside.py"
    outside.write_text(f"def {SECRET.replace('-', '_')}():\n    x.tolist()\n")
    before = outside.read_bytes()
    (root / "link.py").symlink_to(outside)
    result = run_cli(command + ["--select", "ALL"], cwd=root)
    assert SECRET.replace("-", "_") not in result.out + result.err
    assert outside.read_bytes() == before
    if command[0] == "check":
        assert "link.py:1:1: RB003" in result.out and "outside the project" in result.out


def test_explain_hot_paths_reads_no_file_outside_the_project(tmp_path, run_cli):
    root = project(tmp_path)
    outside = tmp_path / "outside.py"
    outside.write_text("class HunterModelRunner:\n    def execute_model(self):\n"
                       "        return 1\n")
    (root / "link.py").symlink_to(outside)
    shutil.copy(outside, root / "inside.py")
    result = run_cli(["check", ".", "--explain-hot-paths"], cwd=root)
    assert "inside.py: HunterModelRunner.execute_model" in result.out
    assert "link.py" not in result.out


# 7. Resource limits ----------------------------------------------------------------------
def test_jobs_are_clamped_to_files_and_cores(tmp_path, run_cli):
    root = project(tmp_path)
    for i in range(7):
        (root / f"m{i}.py").write_text('"""Doc."""\n')
    result = run_cli(["check", ".", "--jobs", "100000", "-v"], cwd=root)
    assert result.code == 0
    workers = min(7, os.cpu_count() or 1)
    assert f"{workers} worker process" in result.err
    assert "--jobs 100000 clamped to 7 files" in result.err
    assert worker_count(100000, 7) == workers and worker_count(None, 0) == 1


def test_a_file_over_max_file_size_is_one_rb003(tmp_path, run_cli):
    root = project(tmp_path)
    (root / "pyproject.toml").write_text('[tool.reviewbot]\nmax-file-size = "1KiB"\n')
    (root / "big.py").write_text("x = 1\n" * 400)
    (root / "small.py").write_text('"""Doc."""\n')
    result = run_cli(["check", "."], cwd=root)
    assert result.code == 1
    lines = [line for line in result.out.splitlines() if ": RB" in line]
    assert lines == ["big.py:1:1: RB003 Skipped: larger than max-file-size (2400 bytes, the "
                     "limit is 1024); raise max-file-size to check it"]


def test_max_file_size_has_a_documented_default_and_is_validated(tmp_path, run_cli):
    from reviewbot.config import DEFAULT_MAX_FILE_SIZE

    assert DEFAULT_MAX_FILE_SIZE == 4 * 1024 * 1024
    assert "`max-file-size`" in (REPO / "README.md").read_text() and \
        "4 MiB" in (REPO / "README.md").read_text()
    root = project(tmp_path)
    (root / "pyproject.toml").write_text('[tool.reviewbot]\nmax-file-size = "lots"\n')
    (root / "m.py").write_text("")
    result = run_cli(["check", "."], cwd=root)
    one_line_error(result)
    assert "max-file-size" in result.err


# 8. Event files --------------------------------------------------------------------------
def _event(**changes):
    event = json.loads((FIXTURES / "pr" / "event.json").read_text())
    for dotted, value in changes.items():
        target = event
        parts = dotted.split("__")
        for part in parts[:-1]:
            target = target[part]
        if value is KeyError:
            del target[parts[-1]]
        else:
            target[parts[-1]] = value
    return event


@pytest.mark.parametrize("changes, field", [
    ({"pull_request__number": KeyError}, "pull_request.number"),
    ({"pull_request__number": "7"}, "pull_request.number"),
    ({"pull_request__number": True}, "pull_request.number"),
    ({"pull_request__number": -1}, "pull_request.number"),
    ({"pull_request__head": KeyError}, "pull_request.head.sha"),
    ({"pull_request__base__sha": "HEAD~1"}, "pull_request.base.sha"),
    ({"repository__full_name": "../../user/repos?x="}, "repository.full_name"),
    ({"repository__full_name": "acme/.."}, "repository.full_name"),
    ({"repository": KeyError}, "repository.full_name"),
    ({"pull_request": [1]}, "pull_request"),
])
def test_a_malformed_event_names_the_field(tmp_path, run_cli, workspace, fake, monkeypatch,
                                           changes, field):
    path = tmp_path / "event.json"
    path.write_text(json.dumps(_event(**changes)))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(path))
    monkeypatch.delenv("GITHUB_REPOSITORY")
    result = run_cli(["review"], cwd=workspace)
    one_line_error(result)
    assert field in result.err
    assert fake.requests == []  # nothing was asked of the API


def test_a_malformed_repository_variable_is_refused(run_cli, workspace, fake, monkeypatch):
    monkeypatch.setenv("GITHUB_REPOSITORY", "../../user/repos?x=")
    result = run_cli(["review"], cwd=workspace)
    one_line_error(result)
    assert "GITHUB_REPOSITORY" in result.err and fake.requests == []


# 9. Small ones ---------------------------------------------------------------------------
def test_fix_apply_skips_a_read_only_file_unless_asked(tmp_path, run_cli):
    root = project(tmp_path)
    target = root / "runner.py"
    shutil.copy(SEED_RUNNER, target)
    target.chmod(0o444)
    before = target.read_bytes()
    result = run_cli(["fix", "--apply", "."], cwd=root)
    assert result.code == 1
    assert "runner.py: is read-only; not rewritten" in result.err
    assert target.read_bytes() == before
    result = run_cli(["fix", "--apply", "--include-read-only", "."], cwd=root)
    assert target.read_bytes() != before
    assert stat.S_IMODE(target.stat().st_mode) == 0o444


def test_the_cache_goes_to_the_project_root(tmp_path, run_cli):
    root = project(tmp_path)
    (root / "sub").mkdir()
    shutil.copy(SEED_RUNNER, root / "sub" / "runner.py")
    run_cli(["fix", "--apply", "proj/sub/"], cwd=tmp_path)
    assert not (tmp_path / ".reviewbot_cache").exists()
    assert (root / ".reviewbot_cache").is_dir()
    assert not (root / "sub" / ".reviewbot_cache").exists()


@pytest.mark.parametrize("flag", ["--select", "--ignore", "--extend-select"])
def test_an_empty_rule_list_is_a_usage_error(tmp_path, run_cli, flag):
    (tmp_path / "m.py").write_text(UNDOCUMENTED)
    result = run_cli(["check", ".", flag, ","], cwd=tmp_path)
    one_line_error(result)


# 1 and 10. The review's configuration and cache are not the pull request's ---------------
def test_review_never_reads_a_cache_from_the_checked_tree(tmp_path, run_cli, workspace,
                                                          fake, monkeypatch):
    # A forged "no findings" entry, signed as reviewbot itself would sign it, committed
    # where `reviewbot check` looks: check believes it, review never reads it.
    source = workspace / "runner" / "model_runner.py"
    cache = _cache_for(workspace)
    shown = "runner/model_runner.py"
    cache.put(content_key(shown, source.read_bytes()) + FILE_RULES_KEY,
              FileResult(shown, [], {}))
    cache.save()
    checked = run_cli(["check", "."], cwd=workspace)
    assert "RB201" not in checked.out  # the forgery is good enough to fool check
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    monkeypatch.setenv("RUNNER_TEMP", str(runner_temp))
    result = run_cli(["review"], cwd=workspace)
    assert result.code == 1
    assert [c["line"] for r in fake.reviews for c in r.get("comments", [])] == [67]
    assert list((runner_temp / "reviewbot-cache").glob("results-*.json"))
    # RUNNER_TEMP inside the checkout is not used either.
    monkeypatch.setenv("RUNNER_TEMP", str(workspace))
    fake.reviews.clear()
    fake.review_comments.clear()
    run_cli(["review"], cwd=workspace)
    assert [c["line"] for r in fake.reviews for c in r.get("comments", [])] == [67]
    assert not (workspace / "reviewbot-cache").exists()


def test_config_from_base_ignores_the_pull_requests_configuration(run_cli, workspace, fake):
    (workspace / ".reviewbot.yml").write_text('ignore: ["ALL"]\n')
    head = run_cli(["review"], cwd=workspace)
    assert head.code == 0 and fake.reviews == []
    base_sha = "f" * 40
    fake.contents[(".reviewbot.yml", base_sha)] = \
        "rule-packs: [pytorch, inference-engines, packs/engine.yml]\n"
    fake.contents[("packs/engine.yml", base_sha)] = "name: engine\n"
    result = run_cli(["review", "--config-from", "base"], cwd=workspace)
    assert result.code == 1, result.err
    assert [c["line"] for r in fake.reviews for c in r.get("comments", [])] == [67]
    assert "from the base commit" in fake.issue_comments[-1]["body"]
    # A base commit without a configuration means the defaults, not the head's file.
    fake.contents.clear()
    fake.reviews.clear()
    fake.review_comments.clear()
    result = run_cli(["review", "--config-from", "base"], cwd=workspace)
    assert result.code == 1 and len(fake.reviews) == 1


def test_the_summary_counts_the_suppressions_the_pr_adds(run_cli, workspace, fake):
    path = workspace / "runner" / "model_runner.py"
    lines = path.read_text().splitlines(keepends=True)
    assert lines[65].rstrip().endswith("torch.empty(")
    lines[65] = lines[65].rstrip("\n") + "  # noqa: RB201\n"
    path.write_text("".join(lines))
    result = run_cli(["review"], cwd=workspace)
    assert result.code == 0  # the finding is suppressed ...
    summary = fake.issue_comments[-1]["body"]
    # ... and the summary says so.
    assert "| Suppression comments added | warning | 1 on added lines: " \
           "`runner/model_runner.py:66` |" in summary


# The inserted event-sync helper never changes what the program does ---------------------
READER = '''import torch


class Reader(torch.nn.Module):
    """Reads the sampled ids back every step."""

    def __init__(self) -> None:
        """A bound for the first buffer."""
        super().__init__()
        self.max_num_reqs = 4

    def forward(self, ids: torch.Tensor) -> list:
        """The ids as lists."""
        return ids.tolist()
'''


def _fixed_reader(tmp_path, run_cli, name="fixed_reader"):
    """``READER`` after `reviewbot fix --apply`, imported as a real module."""
    import importlib.util
    import sys

    path = tmp_path / f"{name}.py"
    path.write_text(READER)
    result = run_cli(["fix", "--apply", "--no-cache", path.name], cwd=tmp_path)
    assert result.code == 0 and "Applied 1 fix" in result.err, result.err
    text = path.read_text()
    assert "self._to_list(ids)" in text and "threading.local()" in text
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def reader_module(tmp_path, run_cli):
    import sys

    pytest.importorskip("torch")
    module = _fixed_reader(tmp_path, run_cli)
    yield module
    sys.modules.pop("fixed_reader", None)


def test_a_fixed_module_can_be_deep_copied_and_pickled(reader_module):
    import copy

    import torch

    reader = reader_module.Reader()
    before = copy.deepcopy(reader), pickle.loads(pickle.dumps(reader))
    assert reader(torch.tensor([[1], [2]])) == [[1], [2]]  # used (the CPU path)
    after = copy.deepcopy(reader), pickle.loads(pickle.dumps(reader))
    for clone in (*before, *after):
        assert clone(torch.tensor([[3]])) == [[3]]
    # Nothing the helper needs lives on the instance.
    assert not [v for v in vars(reader).values()
                if type(v).__module__.startswith(("torch.cuda", "_thread"))]


def _cpu_helper(owner=None):
    import test_fix_helper

    return test_fix_helper.method_helper(owner)


def test_the_buffer_is_pinned_on_the_cpu_whatever_the_default_device():
    torch = pytest.importorskip("torch")
    from test_fix_helper import FakeCuda

    helper, events, shim = _cpu_helper()
    ids = torch.arange(6).reshape(3, 2)
    with torch.device("meta"):  # as under torch.set_default_device("cuda")
        got = helper(ids.as_subclass(FakeCuda))
    assert got == ids.tolist()
    assert shim.devices == ["cpu"] and shim.allocations == [True]


def test_threads_sharing_a_module_get_their_own_results():
    torch = pytest.importorskip("torch")
    import threading

    from test_fix_helper import FakeCuda, FakeEvent

    helper, events, shim = _cpu_helper()
    errors: list = []
    FakeEvent.pause = 0.0002  # the copy is in flight while the other thread runs

    def work(offset: int) -> None:
        for step in range(150):
            ids = torch.arange(offset + step, offset + step + 4).reshape(4, 1)
            if helper(ids.as_subclass(FakeCuda)) != ids.tolist():
                errors.append((offset, step))

    try:
        threads = [threading.Thread(target=work, args=(k * 10_000,)) for k in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        FakeEvent.pause = 0.0
    assert errors == []
    assert len(FakeEvent.made) == 3  # one event per thread (and device), made on first use


def test_the_event_is_recorded_on_the_tensors_stream_and_device():
    torch = pytest.importorskip("torch")
    from test_fix_helper import FakeCuda, FakeEvent

    class OnSecondGpu(FakeCuda):
        @property
        def device(self):  # type: ignore[override]
            return torch.device("cuda", 1)

    helper, events, shim = _cpu_helper()
    a = torch.arange(4).reshape(2, 2)
    assert helper(a.as_subclass(FakeCuda)) == a.tolist()
    assert helper(a.as_subclass(OnSecondGpu)) == a.tolist()
    assert helper(a.as_subclass(OnSecondGpu)) == a.tolist()
    first, second = FakeEvent.made  # one event per device
    assert first.streams == [("stream", torch.device("cpu"))]
    assert second.streams == [("stream", torch.device("cuda", 1))] * 2
    # The copy was issued inside the same stream's context.
    assert shim.entered == [("stream", torch.device("cpu"))] + \
        [("stream", torch.device("cuda", 1))] * 2


_cuda = pytest.mark.skipif(
    not (__import__("importlib").util.find_spec("torch") is not None
         and __import__("torch").cuda.is_available()), reason="needs a CUDA device")


@pytest.mark.gpu
@_cuda
def test_gpu_the_helper_works_under_a_cuda_default_device(reader_module):
    import torch

    reader = reader_module.Reader()
    ids = torch.randint(0, 1000, (8, 1), device="cuda")
    torch.set_default_device("cuda")
    try:
        assert reader(ids) == ids.tolist()
        with torch.device("cuda"):
            assert reader(ids[:3]) == ids[:3].tolist()
    finally:
        torch.set_default_device("cpu")


@pytest.mark.gpu
@_cuda
def test_gpu_two_threads_on_one_module_get_their_own_results(reader_module):
    import threading

    import torch

    reader = reader_module.Reader()
    wrong: list = []

    def work(seed: int) -> None:
        stream = torch.cuda.Stream()
        generator = torch.Generator(device="cuda").manual_seed(seed)
        with torch.cuda.stream(stream):
            for _ in range(3000):
                ids = torch.randint(0, 1 << 30, (64, 1), device="cuda", generator=generator)
                ids = ids * 2 + 1  # queued work the readback must wait for
                expected = ids.cpu().tolist()
                if reader(ids) != expected:
                    wrong.append(seed)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


@pytest.mark.gpu
@_cuda
def test_gpu_a_tensor_from_a_side_stream_reads_back_right(reader_module):
    import torch

    reader = reader_module.Reader()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a = torch.randn(2048, 2048, device="cuda")
        for _ in range(10):
            a = a @ a
            a = a / a.norm()
        ids = (a[:16, :1] * 1000).long()
        got = reader(ids)  # read on the stream that produced it
        side.synchronize()
        assert got == ids.tolist()


@pytest.mark.gpu
@_cuda
@pytest.mark.skipif(__import__("importlib").util.find_spec("torch") is None
                    or __import__("torch").cuda.device_count() < 2, reason="needs two GPUs")
def test_gpu_a_module_on_the_second_gpu_reads_back_right(reader_module):
    import torch

    reader = reader_module.Reader()
    for device in ("cuda:0", "cuda:1", "cuda:1", "cuda:0"):
        ids = torch.randint(0, 1000, (8, 1), device=device) * 3
        assert reader(ids) == ids.tolist()


@pytest.mark.gpu
@_cuda
def test_gpu_a_used_module_can_be_deep_copied_and_pickled(reader_module):
    import copy

    import torch

    reader = reader_module.Reader()
    ids = torch.arange(4, device="cuda").reshape(4, 1)
    assert reader(ids) == ids.tolist()
    clone = copy.deepcopy(reader)
    again = pickle.loads(pickle.dumps(reader))
    assert clone(ids) == again(ids) == ids.tolist()
