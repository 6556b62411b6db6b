"""Reporters: the JSON contract, SARIF against the official schema and code scanning's
rules, GitHub commands, text."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from reviewbot import registry
from reviewbot.finding import Edit, Finding, Fix
from reviewbot.links import HOMEPAGE, RULES_DOCS
from reviewbot.reporters import ReportContext, github, sarif, text

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
                "pkg", 1, 1, 1, 1, "warning",
                details=(("location", {"path": "pyproject.toml", "line": 2}),)),
    ]


def sample_tree(root: Path) -> ReportContext:
    """The files sample() names, in a folder that is its own source root."""
    (root / "pkg").mkdir()
    (root / "pkg" / "a.py").write_text("import os\n" * 3 + "def f(x)\n", encoding="utf-8")
    (root / "pkg" / "b.py").write_text("def f():\n    pass\n", encoding="utf-8")
    (root / "pyproject.toml").write_text("[tool.reviewbot.rules.RB301]\nthreshold = 90\n",
                                         encoding="utf-8")
    return ReportContext(root, root)


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


def locations(log: dict) -> list[tuple[str, dict]]:
    """(uri, region) of each result."""
    return [(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
             r["locations"][0]["physicalLocation"].get("region"))
            for r in log["runs"][0]["results"]]


def test_sarif_validates_against_the_official_schema(tmp_path):
    log = sarif.build(sample(), sample_tree(tmp_path))
    jsonschema.validate(log, SCHEMA)
    run = log["runs"][0]
    assert log["version"] == "2.1.0"
    assert run["columnKind"] == "unicodeCodePoints"
    assert [r["ruleId"] for r in run["results"]] == ["RB001", "RB302", "RB301"]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for result in run["results"]:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
    region = run["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 4, "startColumn": 31, "endLine": 4, "endColumn": 32}
    assert run["results"][1]["fixes"][0]["artifactChanges"][0]["replacements"][0][
        "insertedContent"] == {"text": "self.max_num_reqs"}
    # The finding about the whole run is shown at its location, on the whole line.
    assert locations(log)[2] == ("pyproject.toml", {"startLine": 2, "startColumn": 1,
                                                    "endLine": 2, "endColumn": 15})


def test_sarif_schema_rejects_a_broken_log(tmp_path):
    # The validation above must be able to fail.
    log = sarif.build(sample(), sample_tree(tmp_path))
    log["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(log, SCHEMA)


def test_sarif_of_the_fixtures_validates(run_cli):
    result = run_cli(["check", "fixtures", "--no-cache", "--output-format", "sarif"], cwd=REPO)
    log = json.loads(result.out)
    jsonschema.validate(log, SCHEMA)
    assert len(log["runs"][0]["results"]) == len(json.loads(run_cli(
        ["check", "fixtures", "--no-cache", "--output-format", "json"], cwd=REPO).out))


def test_every_sarif_result_has_a_file_and_a_whole_region(run_cli):
    log = json.loads(run_cli(["check", "fixtures", "--no-cache", "--output-format", "sarif"],
                             cwd=REPO).out)
    run = log["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == REPO.as_uri() + "/"
    for result in run["results"]:
        where = result["locations"][0]["physicalLocation"]
        assert where["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert (REPO / where["artifactLocation"]["uri"]).is_file(), where
        assert set(where["region"]) == {"startLine", "startColumn", "endLine", "endColumn"}
    (coverage,) = [r for r in run["results"] if r["ruleId"] == "RB301"]
    where = coverage["locations"][0]["physicalLocation"]
    # fixtures/.reviewbot.yml configures the run; its third line is `  RB301:`.
    assert where["artifactLocation"]["uri"] == "fixtures/.reviewbot.yml"
    assert where["region"] == {"startLine": 3, "startColumn": 1, "endLine": 3,
                               "endColumn": len("  RB301:") + 1}


def test_sarif_paths_start_at_the_repository_root_from_any_folder(run_cli):
    from_root = json.loads(run_cli(["check", "fixtures/runner", "--no-cache",
                                    "--output-format", "sarif"], cwd=REPO).out)
    from_sub = json.loads(run_cli(["check", "runner", "--no-cache", "--output-format",
                                   "sarif"], cwd=REPO / "fixtures").out)
    assert "fixtures/runner/model_runner.py" in [uri for uri, _ in locations(from_sub)]
    assert locations(from_sub) == locations(from_root)
    assert [r["partialFingerprints"] for r in from_sub["runs"][0]["results"]] == \
        [r["partialFingerprints"] for r in from_root["runs"][0]["results"]]
    assert from_sub["runs"][0]["originalUriBaseIds"] == \
        from_root["runs"][0]["originalUriBaseIds"]


RUNNER = """\
import torch


class ModelRunner:
    def __init__(self):
        self.ids = torch.zeros(4, device="cuda")

    def execute_model(self):
        x = self.ids.tolist()
        x = self.ids.tolist()
        return x
"""


def _sarif_results(run_cli, folder: Path) -> list[dict]:
    result = run_cli(["check", "pkg", "--no-cache", "--select", "RB101", "--output-format",
                      "sarif"], cwd=folder)
    return json.loads(result.out)["runs"][0]["results"]


def test_fingerprints_survive_lines_added_above_and_tell_equal_lines_apart(tmp_path, run_cli):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "pkg").mkdir()
    runner = tmp_path / "pkg" / "runner.py"
    runner.write_text(RUNNER, encoding="utf-8")
    before = _sarif_results(run_cli, tmp_path)
    assert [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in before] \
        == [9, 10]
    first, second = (r["partialFingerprints"]["reviewbotLineHash/v1"] for r in before)
    assert re.fullmatch(r"[0-9a-f]{32}:1", first) and second == first[:-1] + "2"

    # Lines added above and the code re-indented: the same alerts.
    runner.write_text('"""Runner."""\n# a comment\n\n' + RUNNER.replace(
        "        x = self.ids.tolist()", "        x  =  self.ids.tolist()", 1), encoding="utf-8")
    after = _sarif_results(run_cli, tmp_path)
    assert [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in after] \
        == [12, 13]
    assert [r["partialFingerprints"] for r in after] == [r["partialFingerprints"]
                                                       for r in before]
    # The reported line changed: another alert.
    runner.write_text(RUNNER.replace("x = self.ids.tolist()", "y = self.ids.tolist()", 1),
                      encoding="utf-8")
    changed = _sarif_results(run_cli, tmp_path)
    assert changed[0]["partialFingerprints"] != before[0]["partialFingerprints"]
    assert changed[1]["partialFingerprints"]["reviewbotLineHash/v1"].endswith(":1")


def test_fingerprints_hash_the_rule_the_path_and_the_line():
    base = sarif.line_hash("RB101", "pkg/a.py", "    x = y.tolist()")
    assert base == sarif.line_hash("RB101", "pkg/a.py", "x  =  y.tolist()  ")
    assert base != sarif.line_hash("RB102", "pkg/a.py", "x = y.tolist()")
    assert base != sarif.line_hash("RB101", "pkg/b.py", "x = y.tolist()")
    assert base != sarif.line_hash("RB101", "pkg/a.py", "x = z.tolist()")


def _heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchors of the Markdown headings: lower case, punctuation dropped, spaces
    as hyphens."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in markdown.splitlines() if line.startswith("#")}


def test_sarif_rules_link_their_docs_and_the_tool_its_home(tmp_path):
    driver = sarif.build([], sample_tree(tmp_path))["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == HOMEPAGE
    anchors = _heading_anchors((REPO / "docs" / "rules.md").read_text(encoding="utf-8"))
    assert len(driver["rules"]) == len(registry.RULES)
    for rule in driver["rules"]:
        page, anchor = rule["helpUri"].split("#")
        assert page == RULES_DOCS and anchor in anchors, rule["helpUri"]
        assert anchor.startswith(rule["id"].lower() + "-")


def test_sarif_run_level_finding_without_configuration_goes_to_the_least_documented_file(
        tmp_path, run_cli):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("def f():\n    pass\n", encoding="utf-8")
    (tmp_path / "src" / "b.py").write_text("x = 1\n\ndef g():\n    pass\n\n\n"
                                           "def h():\n    pass\n", encoding="utf-8")
    result = run_cli(["check", ".", "--no-cache", "--output-format", "sarif"],
                     cwd=tmp_path / "src")
    (coverage,) = json.loads(result.out)["runs"][0]["results"]
    where = coverage["locations"][0]["physicalLocation"]
    assert where["artifactLocation"] == {"uri": "src/b.py", "uriBaseId": "%SRCROOT%"}
    assert where["region"] == {"startLine": 1, "startColumn": 1, "endLine": 1,
                               "endColumn": len("x = 1") + 1}
    text_report = run_cli(["check", ".", "--no-cache"], cwd=tmp_path / "src").out
    assert text_report.startswith(".: RB301 Docstring coverage is 0.00% (0 of 3 ")
    data = json.loads(run_cli(["check", ".", "--no-cache", "--output-format", "json"],
                              cwd=tmp_path / "src").out)
    assert (data[0]["path"], data[0]["details"]["location"]) == \
        (".", {"path": "b.py", "line": 1})


def test_a_configuration_outside_the_repository_is_not_where_coverage_is_shown(tmp_path,
                                                                                run_cli):
    repo, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    repo.mkdir()
    elsewhere.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "m.py").write_text("def f():\n    pass\n", encoding="utf-8")
    (elsewhere / "pyproject.toml").write_text("[tool.reviewbot.rules.RB301]\nthreshold = 90\n",
                                              encoding="utf-8")
    result = run_cli(["check", ".", "--no-cache", "--config", "../elsewhere/pyproject.toml",
                      "--output-format", "sarif"], cwd=repo)
    log = json.loads(result.out)
    assert log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == \
        repo.resolve().as_uri() + "/"
    assert locations(log) == [("m.py", {"startLine": 1, "startColumn": 1, "endLine": 1,
                                        "endColumn": len("def f():") + 1})]
    inside = run_cli(["check", ".", "--no-cache", "--output-format", "sarif"], cwd=repo)
    assert locations(json.loads(inside.out))[0][0] == "m.py"  # no configuration at all
    (repo / "pyproject.toml").write_text("[project]\nname = 'm'\n\n[tool.reviewbot]\n",
                                         encoding="utf-8")
    with_config = run_cli(["check", ".", "--no-cache", "--output-format", "sarif"], cwd=repo)
    assert locations(json.loads(with_config.out)) == [
        ("pyproject.toml", {"startLine": 4, "startColumn": 1, "endLine": 4,
                            "endColumn": len("[tool.reviewbot]") + 1})]


def test_sarif_uris_are_encoded_and_messages_cannot_embed_links(tmp_path):
    (tmp_path / "we ird#%").mkdir()
    (tmp_path / "we ird#%" / "é.py").write_text("x = 1\n", encoding="utf-8")
    hostile = Finding("RB101", "tolist-on-cuda-tensor",
                      r"`.tolist()` on `d['[click](https://evil.example)']` \[x](1)",
                      "we ird#%/é.py", 1, 1, 1, 6, "error")
    outside = Finding("RB101", "tolist-on-cuda-tensor", "m", str(tmp_path / "other.py"),
                      1, 1, 1, 2, "error")
    (tmp_path / "other.py").write_text("y\n", encoding="utf-8")
    log = sarif.build([hostile, outside], ReportContext(tmp_path, tmp_path / "we ird#%"))
    run = log["runs"][0]
    message = run["results"][0]["message"]["text"]
    assert re.search(r"(?<!\\)(?:\\\\)*[\[\]]", message) is None  # every bracket escaped
    assert re.sub(r"\\(.)", r"\1", message) == hostile.message  # nothing else changed
    assert locations(log)[0][0] == "%C3%A9.py"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].endswith("/we%20ird%23%25/")
    # A file outside the source root: an absolute URI, no base.
    assert run["results"][1]["locations"][0]["physicalLocation"]["artifactLocation"] == \
        {"uri": (tmp_path / "other.py").resolve().as_uri()}
    jsonschema.validate(log, SCHEMA)


MULTITOOL_VERSION = "5.7.0"  # what .ci/run installs


def _multitool() -> str | None:
    """The SARIF Multitool's own binary: $SARIF_MULTITOOL, else the npm package as .ci/run
    installs it (under .ci-tools/) or as `npm install -g` does. Its npm wrapper runs the
    binary through a shell, where the `;` of "Sarif;Gh" would end the command: the binary
    is run directly."""
    given = os.environ.get("SARIF_MULTITOOL")
    if given:
        return given if os.access(given, os.X_OK) else None
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None:
        return None
    folders = [REPO / ".ci-tools" / "node_modules"]
    if npm is not None:
        found = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=60)
        if found.returncode == 0 and found.stdout.strip():
            folders.append(Path(found.stdout.strip()))
    for folder in folders:
        package = folder / "@microsoft" / "sarif-multitool"
        if not package.is_dir():
            continue
        binary = subprocess.run([node, "-p", "require(process.argv[1])", str(package)],
                                capture_output=True, text=True, timeout=60).stdout.strip()
        if binary and os.access(binary, os.X_OK):
            return binary
    return None


@pytest.fixture(scope="module")
def multitool() -> str:
    """The Multitool's binary, or the test is skipped, saying how to install it."""
    found = _multitool()
    if found is None:
        pytest.skip("the SARIF Multitool is not installed (.ci/run installs it: npm install "
                    f"--prefix .ci-tools @microsoft/sarif-multitool@{MULTITOOL_VERSION})")
    return found


def _multitool_results(multitool: str, log: dict, folder: Path) -> list[tuple[str, str, str]]:
    """(rule, level, message id) of every problem the Multitool finds in a log, with the
    SARIF rules and GitHub code scanning's rules ("Gh")."""
    given, report = folder / "given.sarif", folder / "validation.sarif"
    given.write_text(json.dumps(log), encoding="utf-8")
    done = subprocess.run([multitool, "validate", "--rule-kind", "Sarif;Gh", str(given),
                           "--output", str(report), "--log", "ForceOverwrite"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and report.is_file(), done.stdout + done.stderr
    run = json.loads(report.read_text(encoding="utf-8"))["runs"][0]
    return [(r["ruleId"], r.get("level", "warning"), r["message"].get("id", ""))
            for r in run.get("results", [])]


def test_sarif_passes_the_multitool_with_githubs_rules(multitool, tmp_path, run_cli):
    result = run_cli(["check", ".", "--no-cache", "--output-format", "sarif"],
                     cwd=REPO / "fixtures")
    log = json.loads(result.out)
    assert {r["ruleId"] for r in log["runs"][0]["results"]} >= {"RB001", "RB101", "RB301"}
    assert _multitool_results(multitool, log, tmp_path) == []

    # The check can fail: a run-level result naming only a folder (no region), as before.
    (coverage,) = [r for r in log["runs"][0]["results"] if r["ruleId"] == "RB301"]
    coverage["locations"][0]["physicalLocation"] = {
        "artifactLocation": {"uri": "fixtures", "uriBaseId": "%SRCROOT%"}}
    del log["runs"][0]["tool"]["driver"]["informationUri"]
    found = {rule for rule, _, _ in _multitool_results(multitool, log, tmp_path)}
    assert {"SARIF2017", "SARIF2005"} <= found, found


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


def test_text_report_puts_findings_about_the_run_last_without_a_position():
    run = Finding("RB301", "docstring-coverage", "Docstring coverage is 0.00%", "src", 1, 1,
                  1, 1, details=(("location", {"path": "pyproject.toml", "line": 1}),
                                 ("missing", ["src/a.py:1 f"])))
    gpu = Finding("RB101", "tolist-on-cuda-tensor", "m", "src/z.py", 9, 5, 9, 20, "error")
    out = io.StringIO()
    text.write([run, gpu], out, color=False)  # as the engine sorts them: "src" < "src/z.py"
    assert out.getvalue().splitlines() == [
        "src/z.py:9:5: RB101 m",
        "src: RB301 Docstring coverage is 0.00%",
        "    missing: src/a.py:1 f",
        "Found 2 findings."]


def test_the_fixture_runs_text_report_ends_with_the_coverage(run_cli):
    lines = run_cli(["check", "fixtures/runner", "--no-cache"], cwd=REPO).out.splitlines()
    assert lines[0].startswith("fixtures/runner/model_runner.py:105:35: RB101")
    assert lines[1].startswith("fixtures/runner: RB301 Docstring coverage is 33.33%")
    assert all(line.startswith("    missing: ") for line in lines[2:-1])


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
    # The table is extra output: RB301 is still reported once, for the run.
    assert [line.split(":")[0] for line in lines if "RB301" in line] == ["fixtures/runner"]


def test_coverage_report_changes_neither_findings_nor_exit_status(tmp_path, run_cli):
    (tmp_path / "a.py").write_text("def f():\n    pass\n\ndef g():\n    pass\n")
    (tmp_path / "b.py").write_text('def h():\n    """Doc."""\n')
    for extra in ([], ["--exit-zero"], ["--select", "RB3"]):
        args = ["check", ".", "--no-cache", "--output-format", "json", *extra]
        plain = run_cli(args, cwd=tmp_path)
        table = run_cli([*args, "--coverage-report"], cwd=tmp_path)
        assert json.loads(table.out) == json.loads(plain.out)
        assert table.code == plain.code
        assert "definitions" in table.err and "definitions" not in plain.err  # the table
    text = run_cli(["check", ".", "--no-cache", "--coverage-report"], cwd=tmp_path)
    assert text.code == 1
    assert [line for line in text.out.splitlines() if "RB301" in line] == [
        line for line in run_cli(["check", ".", "--no-cache"], cwd=tmp_path).out.splitlines()
        if "RB301" in line]


def test_rb301_per_file_option_reports_each_file_below_the_threshold(tmp_path, run_cli):
    (tmp_path / "a.py").write_text("def f():\n    pass\n\ndef g():\n    pass\n")
    (tmp_path / "b.py").write_text('def h():\n    """Doc."""\n')
    result = run_cli(["check", ".", "--no-cache", "--output-format", "json",
                      "--option", "RB301.per-file=true"], cwd=tmp_path)
    assert result.code == 1
    assert sorted(f["path"] for f in json.loads(result.out) if f["code"] == "RB301") == \
        [".", "a.py"]


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
