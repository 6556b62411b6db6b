"""Reporters: the JSON contract, SARIF against the official schema, GitHub commands, text."""

from __future__ import annotations

import io
import json

import jsonschema
import pytest

from reviewbot.finding import Edit, Finding, Fix
from reviewbot.reporters import github, sarif, text

from conftest import REPO

SCHEMA = json.loads((REPO / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
CONTRACT_KEYS = {"code", "name", "message", "path", "line", "column", "end_line",
                 "end_column", "severity", "fix"}


def sample() -> list[Finding]:
    fix = Fix("unsafe", "Size the buffer by max_num_reqs",
              (Edit(3, 9, 3, 27, "self.max_num_reqs"),))
    return [
        Finding("RB001", "syntax-error", "Syntax error: expected ':'", "pkg/a.py", 4, 31, 4, 32,
                "error"),
        Finding("RB302", "missing-docstring", "Missing docstring in function `f`", "pkg/b.py",
                1, 1, 1, 1, "warning", fix),
        Finding("RB301", "docstring-coverage", "Docstring coverage is 50.00%, 100%, a:b",
                "pkg", 1, 1, 1, 1, "warning"),
    ]


def test_json_contract_on_the_fixtures(run_cli):
    result = run_cli(["check", "fixtures", "--no-cache", "--output-format", "json"], cwd=REPO)
    findings = json.loads(result.out)
    assert isinstance(findings, list) and findings
    for f in findings:
        assert CONTRACT_KEYS <= set(f)
        assert f["line"] >= 1 and f["column"] >= 1
        assert (f["end_line"], f["end_column"]) >= (f["line"], f["column"])
        assert f["severity"] in ("error", "warning")
        assert f["fix"] is None or f["fix"]["applicability"] in ("safe", "unsafe", "display")
    paths = {f["path"] for f in findings}
    assert "fixtures/bad-input/missing_colon.py" in paths  # as given, relative to the cwd
    syntax = next(f for f in findings if f["path"].endswith("missing_colon.py"))
    assert (syntax["code"], syntax["line"], syntax["column"]) == ("RB001", 4, 31)


def test_json_of_a_fix_lists_its_edits():
    out = io.StringIO()
    from reviewbot.reporters import json_report

    json_report.write(sample(), out, False)
    data = json.loads(out.getvalue())
    assert data[1]["fix"] == {"applicability": "unsafe",
                              "message": "Size the buffer by max_num_reqs",
                              "edits": [{"line": 3, "column": 9, "end_line": 3,
                                         "end_column": 27, "content": "self.max_num_reqs"}]}


def test_sarif_validates_against_the_official_schema(tmp_path):
    (tmp_path / "pkg").mkdir()
    log = sarif.build(sample())
    jsonschema.validate(log, SCHEMA)
    run = log["runs"][0]
    assert log["version"] == "2.1.0"
    assert [r["ruleId"] for r in run["results"]] == ["RB001", "RB302", "RB301"]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for result in run["results"]:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
    region = run["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 4, "startColumn": 31, "endLine": 4, "endColumn": 32}
    assert run["results"][1]["fixes"][0]["artifactChanges"][0]["replacements"][0][
        "insertedContent"] == {"text": "self.max_num_reqs"}


def test_sarif_schema_rejects_a_broken_log():
    # The validation above must be able to fail.
    log = sarif.build(sample())
    log["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(log, SCHEMA)


def test_sarif_of_the_fixtures_validates(run_cli):
    result = run_cli(["check", "fixtures", "--no-cache", "--output-format", "sarif"], cwd=REPO)
    log = json.loads(result.out)
    jsonschema.validate(log, SCHEMA)
    assert len(log["runs"][0]["results"]) == len(json.loads(run_cli(
        ["check", "fixtures", "--no-cache", "--output-format", "json"], cwd=REPO).out))


def test_github_workflow_commands(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    out = io.StringIO()
    github.write(sample(), out, False)
    lines = out.getvalue().splitlines()
    assert lines[0] == ("::error file=pkg/a.py,line=4,col=31,endLine=4,endColumn=32,"
                        "title=RB001::Syntax error: expected ':' (syntax-error)")
    assert lines[1].startswith("::warning file=pkg/b.py,line=1,col=1,")
    # A finding about a folder has no file; '%' and newlines are escaped.
    assert lines[2] == ("::warning title=RB301::Docstring coverage is 50.00%25, 100%25, a:b "
                        "(docstring-coverage)")


def test_github_escapes_properties():
    out = io.StringIO()
    github.write([Finding("RB302", "missing-docstring", "line1\nline2", "we,ird:name.py",
                          1, 1, 1, 1)], out, False)
    assert "file=we%2Cird%3Aname.py" in out.getvalue()
    assert "line1%0Aline2" in out.getvalue()


def test_text_report_lines_summary_and_fix_marks():
    out = io.StringIO()
    text.write(sample(), out, color=False)
    lines = out.getvalue().splitlines()
    assert lines[0] == "pkg/a.py:4:31: RB001 Syntax error: expected ':'"
    assert lines[1] == "pkg/b.py:1:1: RB302 [~] Missing docstring in function `f`"
    assert lines[-1] == ("Found 3 findings. [~] 1 fixable with "
                         "`reviewbot fix --apply --unsafe-fixes`.")
    assert "\033[" not in out.getvalue()
    safe = Finding("RB101", "tolist-on-cuda-tensor", "m", "pkg/c.py", 2, 1, 2, 9, "error",
                   Fix("safe", "helper", (Edit(2, 1, 2, 9, "self._to_list(x)"),)))
    display = Finding("RB102", "item-on-cuda-tensor", "m", "pkg/c.py", 3, 1, 3, 9, "error",
                      Fix("display", "keep it on the GPU"))
    out = io.StringIO()
    text.write([*sample(), safe, display], out, color=False)
    lines = out.getvalue().splitlines()
    assert "pkg/c.py:2:1: RB101 [*] m" in lines and "pkg/c.py:3:1: RB102 m" in lines
    assert lines[-1] == ("Found 5 findings. [*] 1 fixable with `reviewbot fix --apply`. "
                         "[~] 1 more with `--unsafe-fixes`.")


def test_text_colour_only_when_asked_or_on_a_terminal(run_cli):
    plain = run_cli(["check", "fixtures/runner", "--no-cache"], cwd=REPO)
    assert "\033[" not in plain.out  # captured output is not a terminal
    forced = run_cli(["check", "fixtures/runner", "--no-cache", "--color", "always"], cwd=REPO)
    assert "\033[1m" in forced.out


def test_clean_run_says_so(tmp_path, run_cli):
    (tmp_path / "m.py").write_text('"""Doc."""\n')
    result = run_cli(["check", "."], cwd=tmp_path)
    assert (result.code, result.out) == (0, "All checks passed!\n")


def test_output_file(tmp_path, run_cli):
    (tmp_path / "m.py").write_text("def f():\n    pass\n")
    result = run_cli(["check", ".", "--output-format", "json", "-o", "report.json"],
                     cwd=tmp_path)
    assert result.code == 1 and result.out == ""
    assert json.loads((tmp_path / "report.json").read_text())[0]["code"] == "RB301"


def test_coverage_report_table(run_cli):
    result = run_cli(["check", "fixtures/runner", "--no-cache", "--coverage-report"], cwd=REPO)
    lines = result.out.splitlines()
    assert lines[0].split() == ["file", "definitions", "documented", "missing", "percent"]
    assert lines[2].split() == ["fixtures/runner/model_runner.py", "9", "3", "6", "33.33%"]
    assert "Docstring coverage FAILED: 3 of 9 definitions documented (33.33%), threshold 80.00%" \
        in result.out
    # Reported once for the run and once for the file below the threshold.
    assert [line.split(":")[0] for line in lines if "RB301" in line] == \
        ["fixtures/runner", "fixtures/runner/model_runner.py"]


def test_json_escapes_c1_controls_and_bidirectional_characters():
    from reviewbot.reporters import json_report

    message = "a\x9b31mb\x85c\u202ed\u2066e\u200bf\x7fg"
    out = io.StringIO()
    json_report.write([Finding("RB302", "missing-docstring", message, "p.py", 1, 1, 1, 1)],
                      out, False)
    text = out.getvalue()
    for char in "\x9b\x85\u202e\u2066\u200b\x7f":
        assert char not in text
    assert "\\u009b" in text and "\\u202e" in text
    assert json.loads(text)[0]["message"] == message  # the same data


def test_github_shows_terminal_escapes_and_bidi_controls_escaped():
    out = io.StringIO()
    github.write([Finding("RB302", "missing-docstring", "red \x1b[31m\u202e\x9b", "a\x1b.py",
                          1, 1, 1, 1)], out, False)
    text = out.getvalue()
    assert "\x1b" not in text and "\u202e" not in text and "\x9b" not in text
    assert "file=a\\x1b.py," in text
    assert text.endswith("::red \\x1b[31m\\u202e\\x9b (missing-docstring)\n")
