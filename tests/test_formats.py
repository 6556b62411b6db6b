"""The output formats beyond text/json/sarif/github: concise, full, json-lines, rdjson (against
reviewdog's DiagnosticResult schema), gitlab (against GitLab's code quality report schema),
junit (against a JUnit XSD) and pylint; hostile text never breaks out of any of them."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from reviewbot import cli
from reviewbot.finding import Edit, Finding, Fix
from reviewbot.reporters import (FORMATS, concise, full, gitlab, json_lines, junit, pylint,
                                 rdjson, write_report)
from reviewbot.reporters.sources import Sources
from reviewbot.textsafe import printable

from conftest import REPO

DATA = REPO / "tests" / "data"
RDJSON_SCHEMA = json.loads((DATA / "rdjson-diagnostic-result.schema.json").read_text())
GITLAB_SCHEMA = json.loads((DATA / "gitlab-code-quality.schema.json").read_text())

# Everything a message, a path or a line of code could hold to break out of its place:
# markup, quotes, line breaks, workflow commands, terminal escapes, mentions, separators.
HOSTILE = ('<script>alert(1)</script> & "q" \'s\' ]]> <!-- x -->\n::error file=a.py::pwned'
           '\r\n##[warning]log \x1b[31mred\x1b]0;title\x07 @octocat #1 [l](https://e.example)'
           ' \u2028sep\u2029 \u0085nel \u202eevil \x00nul \x0c\x0bend')
HOSTILE_PATH = 'pkg/a<b>&"c\n::error::x\x1b[2J @admin.py'
RAW = ["\x1b", "\r", "\n", "\u2028", "\u2029", "\u0085", "\u202e", "\x00", "\x07", "\x0b",
       "\x0c"]


def sample() -> list[Finding]:
    safe = Fix("safe", "Use the helper", (Edit(2, 5, 2, 15, "self._to_list(x)"),))
    return [
        Finding("RB101", "tolist-on-cuda-tensor", "`.tolist()` on `x`: it waits", "pkg/a.py",
                2, 5, 2, 15, "error", safe),
        Finding("RB302", "missing-docstring", "Missing docstring in function `f`",
                "pkg/a.py", 4, 1, 4, 6, "warning",
                Fix("unsafe", "Add one", (Edit(4, 1, 4, 1, '"""Doc."""'),))),
        Finding("RB001", "syntax-error", "Syntax error: expected ':'", "pkg/b.py", 1, 7, 1, 7,
                "error"),
    ]


def hostile() -> list[Finding]:
    return [Finding("RB101", "tolist-on-cuda-tensor", HOSTILE, HOSTILE_PATH, 1, 1, 1, 4,
                    "error", Fix("safe", HOSTILE, (Edit(1, 1, 1, 4, "y"),))),
            Finding("RB302", "missing-docstring", HOSTILE, "pkg/a.py", 2, 1, 2, 2),
            Finding("RB001", "syntax-error", "m", COMMAND_PATH, 1, 1, 1, 1, "error")]


# A path that would start a line with a workflow command.
COMMAND_PATH = "::add-mask::x.py"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """pkg/a.py and pkg/b.py on disk (the lines the sample findings point at)."""
    (tmp_path / ".git").mkdir()
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("def g(x):\n    x.tolist()\n\ndef f():\n    pass\n",
                              encoding="utf-8")
    (pkg / "b.py").write_text("def f()\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def render(name: str, findings, root: Path | None = None, **options) -> str:
    out = io.StringIO()
    source = Sources(root or Path.cwd())
    write_report(name, findings, out, False, source=source, **options)
    return out.getvalue()


def assert_no_raw_controls(text: str) -> None:
    for char in RAW:
        if char == "\n":
            continue
        assert char not in text, repr(char)


def assert_no_command_lines(text: str) -> None:
    for line in text.split("\n"):
        assert not line.lstrip().startswith(("::", "##[")), line


def test_every_format_is_offered_by_the_cli():
    assert set(cli.OUTPUT_FORMATS) == set(FORMATS)
    for name in ("concise", "full", "json-lines", "rdjson", "gitlab", "junit", "pylint"):
        assert name in FORMATS
    parser = cli.build_parser()
    args = parser.parse_args(["check"])
    assert args.output_format == "text"  # the default stays


# concise and pylint -----------------------------------------------------------------------
def test_concise_is_one_line_per_finding_and_the_summary(project):
    with_details = Finding("RB301", "docstring-coverage", "Coverage is 50.00%", "pkg", 1, 1,
                           1, 1, details=(("missing", ["pkg/a.py:4 f"]),))
    lines = render("concise", [*sample(), with_details]).splitlines()
    assert lines == [
        "pkg/a.py:2:5: RB101 [*] `.tolist()` on `x`: it waits",
        "pkg/a.py:4:1: RB302 [~] Missing docstring in function `f`",
        "pkg/b.py:1:7: RB001 Syntax error: expected ':'",
        "pkg:1:1: RB301 Coverage is 50.00%",  # no "missing:" lines below it
        "Found 4 findings. [*] 1 fixable with `reviewbot fix --apply`. "
        "[~] 1 more with `--unsafe-fixes`.",
    ]
    assert render("concise", sample(), summary=False).splitlines() == lines[:3]


def test_pylint_lines():
    out = io.StringIO()
    pylint.write(sample(), out, False)
    assert out.getvalue().splitlines() == [
        "pkg/a.py:2: [RB101] `.tolist()` on `x`: it waits",
        "pkg/a.py:4: [RB302] Missing docstring in function `f`",
        "pkg/b.py:1: [RB001] Syntax error: expected ':'",
    ]


@pytest.mark.parametrize("name", ["text", "concise", "pylint", "full"])
def test_line_formats_keep_hostile_text_on_its_line(name, project):
    text = render(name, hostile())
    assert_no_raw_controls(text)
    assert_no_command_lines(text)
    header = [line for line in text.splitlines() if "RB101" in line][0]
    assert header.startswith("pkg/a<b>&\"c\\n::error::x\\x1b[2J @admin.py:1")
    assert [line for line in text.splitlines() if "RB001" in line][0].startswith(
        "./::add-mask::x.py:1")
    assert "\\n::error file=a.py::pwned\\r\\n##[warning]log \\x1b[31mred" in header
    assert "\\u2028sep\\u2029 \\x85nel \\u202eevil \\x00nul \\x0c\\x0bend" in header


# full ---------------------------------------------------------------------------------------
def test_full_shows_the_line_and_underlines_the_columns(project):
    text = render("full", sample()[:1])
    assert text.splitlines() == [
        "pkg/a.py:2:5: RB101 [*] `.tolist()` on `x`: it waits",
        "  |",
        "1 | def g(x):",
        "2 |     x.tolist()",
        "  |     ^^^^^^^^^^ RB101",
        "3 |",
        "  |",
        "  = help: Use the helper",
        "",
        "Found 1 finding. [*] 1 fixable with `reviewbot fix --apply`.",
    ]


def test_full_underlines_several_lines_and_an_empty_range(project):
    (project / "pkg" / "c.py").write_text("x = f(\n    a,\n    b)\n", encoding="utf-8")
    span = Finding("RB104", "implicit-sync", "m", "pkg/c.py", 1, 5, 3, 6)
    point = Finding("RB001", "syntax-error", "m", "pkg/c.py", 3, 7, 3, 7, "error")
    lines = render("full", [span, point], summary=False).splitlines()
    assert lines[:9] == [
        "pkg/c.py:1:5: RB104 m",
        "  |",
        "1 | x = f(",
        "  |     ^^",
        "2 |     a,",
        "  |     ^^",
        "3 |     b)",
        "  |     ^ RB104",
        "  |",
    ]
    # A zero-width range (an error at the end of a line) still gets one caret.
    assert lines[-4:-1] == ["3 |     b)", "  |       ^ RB001", "  |"]


def test_full_sanitises_the_source_line_and_keeps_the_caret_under_the_code(project):
    code = "\tx = '\x1b[31m::error::日本\u202e' + y.tolist()  # \r\n"
    (project / "pkg" / "h.py").write_bytes(code.encode("utf-8"))
    start = code.index("y.tolist()")
    finding = Finding("RB101", "tolist-on-cuda-tensor", "m", "pkg/h.py", 1, start + 1, 1,
                      start + 11, "error")
    lines = render("full", [finding], summary=False).splitlines()
    shown, carets = lines[2], lines[3]
    assert shown == "1 |     x = '\\x1b[31m::error::日本\\u202e' + y.tolist()  #"
    assert_no_raw_controls("\n".join(lines))
    # The carets start under "y" as the line is shown (tab as 4 columns, each CJK
    # character as 2, escapes as their text) and span ".tolist()"'s 10 characters.
    before = shown.index("y.tolist()")
    wide = shown[:before].count("日") + shown[:before].count("本")
    assert carets == "  |" + " " * (before - 3 + wide) + "^" * 10 + " RB101"


def test_full_cuts_a_long_line_around_the_columns(project):
    code = "x = [" + "日, " * 150 + "y.tolist()" + ", 0" * 200 + "]"
    (project / "pkg" / "long.py").write_text(code + "\n", encoding="utf-8")
    start = code.index("y.tolist()")
    finding = Finding("RB101", "n", "m", "pkg/long.py", 1, start + 1, 1, start + 11)
    shown, carets = render("full", [finding], summary=False).splitlines()[2:4]
    assert shown.startswith("1 | ...") and shown.endswith("...")
    assert len(shown) < 220
    # The carets sit under "y.tolist()" as shown: CJK characters take two columns.
    before = shown.index("y.tolist()")
    wide = shown[:before].count("日")
    assert carets == "  |" + " " * (before - 3 + wide) + "^" * 10 + " RB101"


def test_full_without_the_file_shows_the_finding_alone(tmp_path):
    text = render("full", [Finding("RB003", "unreadable-file", "Skipped", "gone.py", 1, 1,
                                   1, 1, "error")], tmp_path)
    assert text.splitlines()[:2] == ["gone.py:1:1: RB003 Skipped", ""]


def test_full_does_not_read_a_file_outside_the_project(tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("secret = 1\n", encoding="utf-8")
    inside = tmp_path / "project"
    inside.mkdir()
    (inside / "link.py").symlink_to(outside)
    out = io.StringIO()
    full.write([Finding("RB003", "unreadable-file", "m", "link.py", 1, 1, 1, 2)], out, False,
               source=Sources(inside, (inside.resolve(),)))
    assert "secret" not in out.getvalue()


# json-lines ---------------------------------------------------------------------------------
def test_json_lines_is_one_object_per_finding_with_the_json_contract(project):
    text = render("json-lines", [*sample(), *hostile()])
    lines = text.split("\n")
    assert lines[-1] == "" and len(lines) == 7
    expected = [*sample(), *hostile()]
    for line, finding in zip(lines, expected):
        data = json.loads(line)
        assert data == {**finding.to_json(), "schema_version": 1}
    assert json.loads(lines[3])["message"] == HOSTILE  # the data, exactly
    assert json.loads(lines[3])["path"] == HOSTILE_PATH
    assert_no_raw_controls(text)  # JSON escapes controls; the separators too
    # The json array carries the same objects.
    array = json.loads(render("json", expected))
    assert array == [json.loads(line) for line in lines[:-1]]


# rdjson -------------------------------------------------------------------------------------
def test_rdjson_validates_against_reviewdogs_schema(project):
    data = json.loads(render("rdjson", [*sample(), *hostile()]))
    jsonschema.validate(data, RDJSON_SCHEMA)
    assert data["source"] == {"name": "reviewbot",
                              "url": "https://github.com/reviewbot-dev/reviewbot"}
    assert data["severity"] == "ERROR"
    first = data["diagnostics"][0]
    assert first["location"] == {"path": "pkg/a.py", "range": {
        "start": {"line": 2, "column": 5}, "end": {"line": 2, "column": 15}}}
    assert first["severity"] == "ERROR"
    assert first["code"] == {"value": "RB101", "url": "https://github.com/reviewbot-dev/"
                             "reviewbot/blob/main/docs/rules.md#rb101-tolist-on-cuda-tensor"}
    assert first["suggestions"] == [{"range": {"start": {"line": 2, "column": 5},
                                               "end": {"line": 2, "column": 15}},
                                     "text": "self._to_list(x)"}]
    # Only safe fixes become suggestions.
    assert "suggestions" not in data["diagnostics"][1]
    assert data["diagnostics"][2]["severity"] == "ERROR"


def test_rdjson_schema_rejects_what_reviewdog_rejects(project):
    data = json.loads(render("rdjson", sample()))
    for broken in ({**data, "version": 1},  # protobuf's parser refuses unknown keys
                   {**data, "severity": "FATAL"},
                   {**data, "diagnostics": [{"message": 1}]},
                   {**data, "diagnostics": [{"location": {"range": {"end": {}}}}]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, RDJSON_SCHEMA)


def test_rdjson_columns_are_utf8_bytes(project):
    (project / "pkg" / "u.py").write_text('s = "日本" + x.tolist()\n', encoding="utf-8")
    line = 's = "日本" + x.tolist()'
    col = line.index("x.tolist()") + 1
    finding = Finding("RB101", "tolist-on-cuda-tensor", "m", "pkg/u.py", 1, col, 1, col + 10,
                      "error", Fix("safe", "h", (Edit(1, col, 1, col + 10, "h(x)"),)))
    (diagnostic,) = json.loads(render("rdjson", [finding]))["diagnostics"]
    start = len(line[:col - 1].encode("utf-8")) + 1
    assert start == col + 4  # each of the two characters is 3 bytes
    assert diagnostic["location"]["range"] == {"start": {"line": 1, "column": start},
                                               "end": {"line": 1, "column": start + 10}}
    assert diagnostic["suggestions"][0]["range"]["start"]["column"] == start


def test_rdjson_leaves_out_fixes_that_need_an_import_and_ranges_of_folders(project):
    needs_import = Fix("safe", "h", (Edit(2, 5, 2, 15, "h(x)"),), imports=("threading",))
    findings = [Finding("RB101", "tolist-on-cuda-tensor", "m", "pkg/a.py", 2, 5, 2, 15,
                        "error", needs_import),
                Finding("RB301", "docstring-coverage", "m", "pkg", 1, 1, 1, 1)]
    first, folder = json.loads(render("rdjson", findings))["diagnostics"]
    assert "suggestions" not in first
    assert folder["location"] == {"path": "pkg"}


def test_rdjson_messages_make_no_markup_link_or_mention(project):
    from markdown_it import MarkdownIt

    data = json.loads(render("rdjson", hostile()[:2]))
    for diagnostic in data["diagnostics"]:
        message = diagnostic["message"]
        assert "\n" not in message and "\r" not in message
        tokens = list(_walk(MarkdownIt("commonmark").parse(message)))
        assert not [t for t in tokens if t.type in ("html_inline", "html_block", "link_open",
                                                    "image", "heading_open")]
        plain = " ".join(t.content for t in tokens if t.type == "text")
        assert not re.search(r"@\w", plain) and "#1" not in plain and "://" not in plain
        assert "@octocat" in message  # still there, inside a code span
    assert data["diagnostics"][0]["location"]["path"] == HOSTILE_PATH  # data, for matching


def _walk(tokens):
    for token in tokens:
        yield token
        yield from _walk(token.children or [])


# gitlab -------------------------------------------------------------------------------------
def test_gitlab_validates_against_the_code_quality_schema(project):
    report = json.loads(render("gitlab", [*sample(), *hostile()]))
    jsonschema.validate(report, GITLAB_SCHEMA)
    first = report[0]
    assert first["description"] == "RB101: `.tolist()` on `x`: it waits"
    assert (first["check_name"], first["severity"]) == ("RB101", "major")
    assert first["location"] == {"path": "pkg/a.py", "lines": {"begin": 2}}
    assert report[1]["severity"] == "minor"
    assert re.fullmatch(r"[0-9a-f]{32}", first["fingerprint"])
    assert len({issue["fingerprint"] for issue in report}) == len(report)
    for issue in report:
        assert "\n" not in issue["description"]
        assert_no_raw_controls(issue["description"])


def test_gitlab_schema_rejects_a_broken_report(project):
    report = json.loads(render("gitlab", sample()))
    for key, value in (("severity", "error"), ("location", {"path": "a.py"}),
                       ("fingerprint", None)):
        broken = [dict(report[0], **{key: value})]
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, GITLAB_SCHEMA)


def test_gitlab_fingerprints_follow_the_line_not_its_number(project):
    path = project / "pkg" / "a.py"
    finding = sample()[0]
    before = json.loads(render("gitlab", [finding]))[0]["fingerprint"]
    # Lines added above: the finding moves down two lines, same text, same fingerprint.
    path.write_text("import os\n\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    moved = dataclasses.replace(finding, line=4, end_line=4)
    assert json.loads(render("gitlab", [moved]))[0]["fingerprint"] == before
    # Re-indenting keeps it too; changing the code does not.
    path.write_text(path.read_text(encoding="utf-8").replace("    x.tolist()",
                                                             "        x.tolist()"))
    assert json.loads(render("gitlab", [moved]))[0]["fingerprint"] == before
    path.write_text(path.read_text(encoding="utf-8").replace("x.tolist()", "x.cpu().tolist()"))
    assert json.loads(render("gitlab", [moved]))[0]["fingerprint"] != before


def test_gitlab_fingerprints_of_the_same_finding_on_identical_lines_differ(project):
    (project / "pkg" / "d.py").write_text("x.tolist()\nx.tolist()\n", encoding="utf-8")
    twice = [Finding("RB101", "tolist-on-cuda-tensor", "m", "pkg/d.py", n, 1, n, 11)
             for n in (1, 2)]
    prints = [i["fingerprint"] for i in json.loads(render("gitlab", twice))]
    assert prints[0] != prints[1]


def test_gitlab_paths_are_relative_to_the_repository_root(project, monkeypatch):
    monkeypatch.chdir(project / "pkg")
    source = Sources(project / "pkg", root=project)
    (issue,) = gitlab.build([Finding("RB101", "n", "m", "a.py", 2, 5, 2, 15)], source)
    assert issue["location"]["path"] == "pkg/a.py"


# junit --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def junit_schema():
    xmlschema = pytest.importorskip("xmlschema")
    return xmlschema.XMLSchema(str(DATA / "junit.xsd"))


def test_junit_validates_against_the_xsd(junit_schema):
    out = io.StringIO()
    junit.write([*sample(), *hostile()], out, False)
    document = out.getvalue()
    junit_schema.validate(document)
    root = ET.fromstring(document.encode("ascii"))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures")) == ("6", "6")
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["pkg/a.py", "pkg/b.py", printable(HOSTILE_PATH),
                                               COMMAND_PATH]
    assert [s.get("tests") for s in suites] == ["3", "1", "1", "1"]
    case = suites[0].find("testcase")
    assert case.get("name") == "RB101 tolist-on-cuda-tensor (2:5)"
    assert (case.get("classname"), case.get("file"), case.get("line")) == \
        ("pkg/a.py", "pkg/a.py", "2")
    failure = case.find("failure")
    assert failure.get("type") == "RB101"
    assert failure.get("message") == "`.tolist()` on `x`: it waits"
    assert failure.text == "pkg/a.py:2:5: RB101 `.tolist()` on `x`: it waits"


def test_junit_keeps_hostile_text_as_text(junit_schema):
    out = io.StringIO()
    junit.write(hostile() + [Finding("RB101", "n", "lone \ud800 surrogate \ufffe", "x.py",
                                     1, 1, 1, 1)], out, False)
    document = out.getvalue()
    junit_schema.validate(document)
    assert document.isascii()
    assert "<script>" not in document and "]]>" not in document
    root = ET.fromstring(document.encode("ascii"))
    # Nothing added an element: the markup in the message is text of one attribute.
    assert sorted({e.tag for e in root.iter()}) == ["failure", "testcase", "testsuite",
                                                    "testsuites"]
    messages = [f.get("message") for f in root.iter("failure")]
    assert messages[:2] == [printable(HOSTILE)] * 2
    assert messages[3] == "lone \\ud800 surrogate \\ufffe"
    for value in messages:
        assert_no_raw_controls(value)


def test_junit_of_a_clean_run_is_one_passing_case(junit_schema):
    out = io.StringIO()
    junit.write([], out, False)
    junit_schema.validate(out.getvalue())
    root = ET.fromstring(out.getvalue().encode())
    (case,) = root.iter("testcase")
    assert list(case) == [] and root.get("failures") == "0"


def test_junit_schema_rejects_a_broken_document(junit_schema):
    xmlschema = pytest.importorskip("xmlschema")
    for broken in ('<testsuites><testsuite name="a" tests="x"/></testsuites>',
                   '<testsuites><testsuite name="a" tests="1"><testcase name="t"/>'
                   '</testsuite></testsuites>',
                   '<testsuites><testsuite name="a" tests="1"><testcase name="t" '
                   'classname="c"><failure/><error/></testcase></testsuite></testsuites>'):
        with pytest.raises(xmlschema.XMLSchemaValidationError):
            junit_schema.validate(broken)


# The command line, on files with hostile names and code ---------------------------------------
HOSTILE_FILE = 'we<ird>&"q\n::error::x\x1b[31m @admin.py'


@pytest.fixture
def hostile_tree(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "clean.py").write_text('"""Doc."""\n', encoding="utf-8")
    (tmp_path / HOSTILE_FILE).write_text(
        '"""::error::x \x1b[2J @admin <b>&"."""\n\ndef f(\n', encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("name", cli.OUTPUT_FORMATS)
def test_each_format_from_the_cli_on_hostile_files(name, hostile_tree, run_cli,
                                                   junit_schema):
    result = run_cli(["check", ".", "--no-cache", "--output-format", name], cwd=hostile_tree)
    assert result.code == 1, result.err
    assert result.err == ""
    out = result.out
    if name != "github":  # workflow commands are that format's point; tested in its own
        assert_no_command_lines(out)
    assert_no_raw_controls(out)
    if name in ("json", "sarif", "rdjson", "gitlab"):
        data = json.loads(out)
        if name == "rdjson":
            jsonschema.validate(data, RDJSON_SCHEMA)
            paths = [d["location"]["path"] for d in data["diagnostics"]]
        elif name == "gitlab":
            jsonschema.validate(data, GITLAB_SCHEMA)
            paths = [i["location"]["path"] for i in data]
        elif name == "json":
            paths = [f["path"] for f in data]
        else:
            from urllib.parse import unquote

            # SARIF's URIs are percent-encoded: the name comes back whole once decoded.
            paths = [unquote(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
                     for r in data["runs"][0]["results"]]
        assert any(HOSTILE_FILE in p for p in paths)
    elif name == "json-lines":
        records = [json.loads(line) for line in out.splitlines()]
        assert HOSTILE_FILE in [r["path"] for r in records]
    elif name == "junit":
        junit_schema.validate(out)
        assert printable(HOSTILE_FILE) in [s.get("name") for s in
                                           ET.fromstring(out.encode()).iter("testsuite")]
    elif name == "github":  # one command; its file property escaped, nothing raw
        assert out.count("\n") == 1
        assert out.startswith('::error file=we<ird>&"q%0A%3A%3Aerror%3A%3Ax\\x1b[31m @admin.py,')
    else:
        assert printable(HOSTILE_FILE) in out
