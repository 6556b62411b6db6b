"""Baselines: `check --write-baseline FILE` records today's findings, `--baseline FILE`
reports only new ones, says how many it suppressed and which entries are stale."""

from __future__ import annotations

import json

import pytest

from reviewbot import baseline
from reviewbot.finding import Finding
from reviewbot.reporters.sources import Sources

SELECT = ["--select", "RB302", "--no-cache"]
RUNNER = '''"""Runner."""


def prepare():
    pass


def step():
    pass
'''


@pytest.fixture
def repo(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "runner.py").write_text(RUNNER, encoding="utf-8")
    return tmp_path


def check(run_cli, repo, *extra, cwd=None):
    return run_cli(["check", ".", *SELECT, *extra], cwd=cwd or repo)


def write_baseline(run_cli, repo, name="baseline.json"):
    result = check(run_cli, repo, "--write-baseline", name)
    assert result.code == 0, result.err
    return repo / name


def edit(repo, old, new, path="src/runner.py"):
    file = repo / path
    text = file.read_text(encoding="utf-8")
    assert old in text
    file.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_the_baseline_file_records_rule_path_and_hashes_not_line_numbers(run_cli, repo):
    result = check(run_cli, repo, "--write-baseline", "baseline.json")
    assert (result.code, result.out) == (0, "")
    assert result.err == "reviewbot: wrote 2 findings to the baseline baseline.json\n"
    data = json.loads((repo / "baseline.json").read_text())
    assert data["version"] == 1 and data["tool"] == "reviewbot"
    assert [(e["code"], e["path"]) for e in data["findings"]] == [("RB302", "src/runner.py")] * 2
    for entry in data["findings"]:
        assert set(entry) == {"code", "path", "line_hash", "context_hash", "message"}
        assert len(entry["line_hash"]) == len(entry["context_hash"]) == 16


def test_known_findings_are_suppressed(run_cli, repo):
    write_baseline(run_cli, repo)
    result = check(run_cli, repo, "--baseline", "baseline.json")
    assert (result.code, result.out) == (0, "All checks passed!\n")
    assert result.err == ("reviewbot: baseline baseline.json: 2 known findings suppressed, "
                          "0 entries no longer match anything\n")


def test_a_line_moved_down_by_edits_above_is_still_known(run_cli, repo):
    write_baseline(run_cli, repo)
    edit(repo, '"""Runner."""\n', '"""Runner."""\n\nimport os\nimport sys\n\nLIMIT = 8\n')
    # An edit right above the line changes its context; the line's own text still matches.
    edit(repo, "def step():", "# the decode step\ndef step():")
    result = check(run_cli, repo, "--baseline", "baseline.json")
    assert result.code == 0 and "RB302" not in result.out
    assert "2 known findings suppressed, 0 entries no longer match" in result.err


def test_a_changed_line_is_reported_again_and_its_entry_is_stale(run_cli, repo):
    write_baseline(run_cli, repo)
    edit(repo, "def step():", "def step(batch):")
    result = check(run_cli, repo, "--baseline", "baseline.json")
    assert result.code == 1
    assert result.out.splitlines()[0] == \
        "src/runner.py:8:1: RB302 Missing docstring in function `step`"
    assert "Found 1 finding." in result.out
    assert result.err.splitlines() == [
        "reviewbot: baseline baseline.json: 1 known finding suppressed, 1 entry no longer "
        "matches anything (fixed, or the line changed):",
        "reviewbot:   src/runner.py: RB302 Missing docstring in function `step`",
    ]


def test_a_fixed_finding_leaves_a_stale_entry(run_cli, repo):
    write_baseline(run_cli, repo)
    edit(repo, "def prepare():\n    pass", 'def prepare():\n    """Prepare."""')
    result = check(run_cli, repo, "--baseline", "baseline.json")
    assert (result.code, result.out) == (0, "All checks passed!\n")
    assert result.err.splitlines()[1:] == [
        "reviewbot:   src/runner.py: RB302 Missing docstring in function `prepare`"]
    assert "1 known finding suppressed, 1 entry no longer matches" in result.err
    # Writing it again drops the stale entry.
    write_baseline(run_cli, repo)
    again = check(run_cli, repo, "--baseline", "baseline.json")
    assert "1 known finding suppressed, 0 entries" in again.err


def test_the_same_finding_on_identical_lines_is_counted(run_cli, repo):
    (repo / "src" / "twice.py").write_text('"""T."""\n\n\ndef f():\n    pass\n\n\n'
                                           'def f():\n    pass\n', encoding="utf-8")
    write_baseline(run_cli, repo)
    assert len(json.loads((repo / "baseline.json").read_text())["findings"]) == 4
    # A third identical definition is one new finding, not known twice over.
    (repo / "src" / "twice.py").write_text('"""T."""\n\n\ndef f():\n    pass\n\n\n'
                                           'def f():\n    pass\n\n\ndef f():\n    pass\n',
                                           encoding="utf-8")
    result = check(run_cli, repo, "--baseline", "baseline.json")
    assert result.code == 1
    assert [line.split(": ")[0] for line in result.out.splitlines()[:-1]] == \
        ["src/twice.py:12:1"]
    assert "4 known findings suppressed, 0 entries" in result.err
    # Down to one: one entry of the two is stale.
    (repo / "src" / "twice.py").write_text('"""T."""\n\n\ndef f():\n    pass\n',
                                           encoding="utf-8")
    result = check(run_cli, repo, "--baseline", "baseline.json")
    assert result.code == 0
    assert "3 known findings suppressed, 1 entry no longer matches" in result.err


def test_paths_are_relative_to_the_repository_root(run_cli, repo):
    write_baseline(run_cli, repo)
    result = run_cli(["check", ".", *SELECT, "--baseline", "../baseline.json"],
                     cwd=repo / "src")
    assert result.code == 0, result.out
    assert "2 known findings suppressed, 0 entries" in result.err


def test_entries_of_files_not_checked_are_not_stale(run_cli, repo):
    (repo / "other.py").write_text("def g():\n    pass\n", encoding="utf-8")
    write_baseline(run_cli, repo)
    result = run_cli(["check", "src", *SELECT, "--baseline", "baseline.json"], cwd=repo)
    assert result.code == 0
    assert "2 known findings suppressed, 0 entries" in result.err


def test_quiet_leaves_out_the_notes(run_cli, repo):
    write_baseline(run_cli, repo)
    edit(repo, "def step():", "def step(batch):")
    result = check(run_cli, repo, "--baseline", "baseline.json", "-q")
    assert result.err == ""
    assert result.out.splitlines() == [
        "src/runner.py:8:1: RB302 Missing docstring in function `step`"]


def test_machine_formats_stay_clean(run_cli, repo):
    write_baseline(run_cli, repo)
    edit(repo, "def step():", "def step(batch):")
    result = check(run_cli, repo, "--baseline", "baseline.json", "--output-format", "json")
    assert [f["line"] for f in json.loads(result.out)] == [8]  # the note is on stderr


def test_baseline_and_write_baseline_do_not_go_together(run_cli, repo):
    result = check(run_cli, repo, "--baseline", "a.json", "--write-baseline", "b.json")
    assert result.code == 2 and "not allowed with argument" in result.err


def _valid_entry(**changes):
    entry = {"code": "RB302", "path": "src/runner.py", "line_hash": "0" * 16,
             "context_hash": "1" * 16, "message": "m"}
    entry.update(changes)
    return entry


@pytest.mark.parametrize("content, message", [
    (b"{not json", "invalid JSON at line 1, column 2"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[]", "expected a JSON object"),
    (b'{"findings": []}', "no 'version' number"),
    (b'{"version": true, "findings": []}', "no 'version' number"),
    (b'{"version": 99, "findings": []}', "version 99 is not supported"),
    (b'{"version": 1, "findings": {}}', "'findings' must be a list"),
    (b'{"version": 1, "findings": [7]}', "findings[0] must be an object"),
    (json.dumps({"version": 1, "findings": [_valid_entry(line_hash="zz")]}).encode(),
     "findings[0].line_hash must be 16 hexadecimal digits"),
    (json.dumps({"version": 1, "findings": [_valid_entry(code="RB1\n::error::x")]}).encode(),
     "findings[0].code must be a rule code"),
    (json.dumps({"version": 1, "findings": [_valid_entry(path=["a"])]}).encode(),
     "findings[0].path must be a path"),
    (json.dumps({"version": 1, "findings": [_valid_entry(message=5)]}).encode(),
     "findings[0].message must be a string"),
    (b"[" * 100_000 + b"]" * 100_000, "invalid JSON"),
    (b'{"version": 1' + b"0" * 5000 + b"}", "invalid JSON"),
])
def test_a_malformed_baseline_is_one_line_and_exit_2(run_cli, repo, content, message):
    (repo / "bad.json").write_bytes(content)
    result = check(run_cli, repo, "--baseline", "bad.json")
    assert result.code == 2
    assert result.out == ""
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert result.err.startswith("reviewbot: error: bad.json: not a reviewbot baseline: ")
    assert message in result.err


@pytest.mark.parametrize("make", ["missing", "folder", "fifo"])
def test_an_unreadable_baseline_is_one_line_and_exit_2(run_cli, repo, make):
    import os

    target = repo / "b.json"
    if make == "folder":
        target.mkdir()
    elif make == "fifo":
        os.mkfifo(target)
    result = check(run_cli, repo, "--baseline", "b.json")
    assert result.code == 2 and result.err.count("\n") == 1
    assert result.err.startswith("reviewbot: error: b.json: cannot read the baseline: ")


def test_a_baseline_that_cannot_be_written_is_one_line_and_exit_2(run_cli, repo):
    result = check(run_cli, repo, "--write-baseline", "no/such/folder/b.json")
    assert result.code == 2 and result.err.count("\n") == 1
    assert "cannot write the baseline" in result.err


def test_entries_outside_the_project_are_ignored(run_cli, repo):
    path = write_baseline(run_cli, repo)
    data = json.loads(path.read_text())
    good = data["findings"]
    for outside in ("../elsewhere/runner.py", "/etc/passwd", "src/../../x.py", "C:/x.py"):
        data["findings"] = [{**e, "path": outside} for e in good] + good
        path.write_text(json.dumps(data))
        result = check(run_cli, repo, "--baseline", "baseline.json")
        assert result.code == 0, outside
        assert result.err.splitlines() == [
            "reviewbot: warning: baseline.json: 2 baseline entries name paths outside the "
            "repository; ignored",
            "reviewbot: baseline baseline.json: 2 known findings suppressed, 0 entries no "
            "longer match anything"]


def test_stale_entries_are_printed_escaped(run_cli, repo):
    path = write_baseline(run_cli, repo)
    data = json.loads(path.read_text())
    data["findings"].append(_valid_entry(path="src/x\n::error::pwned.py",
                                         message="m\n::warning::x \x1b[2J \u202e @all"))
    data["findings"].append(_valid_entry(path="::add-mask::y.py"))
    path.write_text(json.dumps(data))
    result = check(run_cli, repo, "--baseline", "baseline.json")
    assert "2 entries no longer match anything" in result.err
    for line in result.err.splitlines():
        assert line.startswith("reviewbot:")
    assert "src/x\\n::error::pwned.py: RB302 m\\n::warning::x \\x1b[2J \\u202e @all" in \
        result.err
    assert "\x1b" not in result.err and "\u202e" not in result.err
    assert "reviewbot:   ./::add-mask::y.py: RB302 m" in result.err


def test_matching_prefers_the_entry_with_the_same_neighbours(tmp_path):
    """Two identical lines with different neighbours: each finding takes its own entry
    first, so a change next to one of them does not make the other look stale."""
    (tmp_path / "m.py").write_text("a = 1\nx.tolist()\nb = 2\nx.tolist()\nc = 3\n")
    sources = Sources(tmp_path, root=tmp_path)
    findings = [Finding("RB101", "t", "m", "m.py", n, 1, n, 11) for n in (2, 4)]
    entries = [baseline.entry_for(f, sources) for f in findings]
    assert entries[0].line_hash == entries[1].line_hash
    assert entries[0].context_hash != entries[1].context_hash
    known = baseline.Baseline(list(reversed(entries)), "b.json")
    applied = baseline.apply(findings, known, sources)
    assert (applied.new, applied.suppressed, applied.stale) == ([], 2, [])
    # The first occurrence changed: the second still matches its exact entry, and the
    # first's entry is the stale one.
    (tmp_path / "m.py").write_text("a = 1\nx.cpu().tolist()\nb = 2\nx.tolist()\nc = 3\n")
    sources = Sources(tmp_path, root=tmp_path)
    applied = baseline.apply(findings, known, sources)
    assert applied.new == [findings[0]]
    assert applied.stale == [entries[0]]
