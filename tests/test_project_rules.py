"""A project's own CstRules (rule-modules), the analysis-backed providers, the LibCST gate."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import types
from pathlib import Path

import libcst as cst
import libcst.metadata as meta
import pytest

from reviewbot import registry
from reviewbot.context import FileContext
from reviewbot.engine import _active_in, _function_local, _with_a_hot_candidate
from reviewbot.packs import load_packs
from reviewbot.providers import (DeviceProvider, FileFacts, HotPathProvider,
                                 SyncAllowedProvider)
from reviewbot.rule import CstRule, Invalid, Valid

from conftest import REPO, check_source

DOC = REPO / "docs" / "custom-rules.md"


def doc_example() -> str:
    """The example rule exactly as docs/custom-rules.md shows it."""
    return re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S).group(1)


@pytest.fixture(autouse=True)
def built_in_rules_after():
    """Each test leaves the registry and sys.modules as it found them."""
    before = set(sys.modules)
    path = list(sys.path)
    yield
    registry.set_project_rules(())
    for name in set(sys.modules) - before:
        if name.split(".")[0] in ("my_engine", "other_rules"):
            del sys.modules[name]
    sys.path[:] = path


RUNNER = """\
import torch

class ModelRunner:
    def execute_model(self, x):
        y = x.cuda() * 2
        z = torch.zeros(3)
        a = z.numpy()
        return self._read(y)

    def _read(self, y):
        return y.numpy()

    def load(self):
        return torch.zeros(3, device="cuda").numpy()
"""


def project(root: Path, config: str, files: dict[str, str] | None = None) -> Path:
    (root / "my_engine").mkdir(parents=True, exist_ok=True)
    (root / "my_engine" / "__init__.py").write_text("")
    (root / "my_engine" / "lint_rules.py").write_text(doc_example())
    (root / "pyproject.toml").write_text("[tool.reviewbot]\n" + config)
    (root / "runner.py").write_text(RUNNER)
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


RULES = 'rule-modules = ["my_engine.lint_rules"]\n'


def findings(run_cli, root: Path, *args: str) -> list[dict]:
    result = run_cli(["check", ".", "--no-cache", "--output-format", "json", *args], cwd=root)
    assert result.code in (0, 1), result.err
    return json.loads(result.out)


def test_the_documented_example_reports_the_cuda_readback_in_the_hot_path(tmp_path, run_cli):
    root = project(tmp_path, RULES)
    found = findings(run_cli, root, "--select", "ENG")
    # Line 7 is a CPU tensor, line 14 a cold function: only line 11 is reported.
    assert [(f["code"], f["path"], f["line"], f["column"], f["end_column"]) for f in found] \
        == [("ENG101", "runner.py", 11, 16, 25)]
    assert "hot path execute_model -> _read" in found[0]["message"]
    assert "moved with .cuda() at line 5" in found[0]["message"]
    assert found[0]["name"] == "numpy-on-cuda-tensor"
    # The same in worker processes, and in the list of rules with its kind.
    assert findings(run_cli, root, "--select", "ENG", "--jobs", "2") == found
    listed = run_cli(["rules"], cwd=root).out.splitlines()
    assert any(line.startswith("ENG101") and "kind: cst" in line for line in listed)


def test_project_rules_are_configured_and_suppressed_like_built_in_ones(tmp_path, run_cli):
    root = project(tmp_path, RULES + 'ignore = ["ENG1"]\n')
    assert [f for f in findings(run_cli, root) if f["code"] == "ENG101"] == []
    root = project(tmp_path, RULES + '[tool.reviewbot.per-file-ignores]\n"runner.py" = ["ENG101"]\n')
    assert findings(run_cli, root, "--select", "ENG") == []
    root = project(tmp_path, RULES)
    text = RUNNER.replace("return y.numpy()", "return y.numpy()  # noqa: ENG101")
    (root / "runner.py").write_text(text)
    assert findings(run_cli, root, "--select", "ENG") == []


def test_a_chain_through_another_module_comes_from_the_link(tmp_path, run_cli):
    root = project(tmp_path, RULES, {
        "engine/__init__.py": "",
        "engine/runner.py": """
            import torch
            from engine.ops import to_host

            class ModelRunner:
                def execute_model(self, batch):
                    return to_host(batch)
        """,
        "engine/ops.py": """
            import torch
            def to_host(batch):
                counts = torch.ones(4, device="cuda")
                return counts.numpy()
        """})
    (root / "runner.py").unlink()
    found = findings(run_cli, root, "--select", "ENG")
    assert [(f["path"], f["line"]) for f in found] == [("engine/ops.py", 5)]
    assert "ModelRunner.execute_model -> to_host (engine/ops.py)" in found[0]["message"]


def test_project_code_is_off_with_isolated_or_the_environment(tmp_path, run_cli, monkeypatch):
    root = project(tmp_path, RULES + 'extend-select = ["ENG101"]\n')
    assert [f["code"] for f in findings(run_cli, root)].count("ENG101") == 1
    assert "ENG101" not in [f["code"] for f in findings(run_cli, root, "--isolated")]
    monkeypatch.setenv("REVIEWBOT_NO_PROJECT_CODE", "1")
    # Named, selected, not imported: the project's codes select nothing.
    sys.modules.pop("my_engine.lint_rules", None)
    assert "ENG101" not in [f["code"] for f in findings(run_cli, root)]
    assert "my_engine.lint_rules" not in sys.modules
    assert "--isolated" in run_cli(["check", "--isolated", "--config", "pyproject.toml", "."],
                                   cwd=root).err


@pytest.mark.parametrize("modules,message", [
    ('["../evil"]', "expected a dotted module name such as my_project.lint_rules, got '../evil'"),
    ('["my_engine/lint_rules"]', "expected a dotted module name"),
    ('["my_engine..x"]', "expected a dotted module name"),
    ('["my_engine.class"]', "expected a dotted module name"),
    ('["/tmp/x.py"]', "expected a dotted module name"),
    ('"my_engine.lint_rules"', "expected a list of dotted module names"),
    ('["my_engine.missing"]', "cannot import 'my_engine.missing': ModuleNotFoundError"),
    ('["my_engine.broken"]', "cannot import 'my_engine.broken': RuntimeError: first line"),
    ('["my_engine.exits"]', "cannot import 'my_engine.exits': SystemExit: 3"),
    ('["my_engine.ast_rule"]', "my_engine.ast_rule.Mine is not a CstRule"),
    ('["my_engine.empty"]', "module 'my_engine.empty' defines no CstRule with a code"),
    ('["my_engine.rb_code"]', "code RB101 is reviewbot's"),
    ('["my_engine.bad_code"]', "code 'eng-1': expected capital letters then digits"),
    ('["my_engine.bad_name"]', "name 'Not Kebab': expected a kebab-case name"),
    ('["my_engine.lint_rules", "my_engine.twin"]', "share the code ENG101"),
    ('["json"]', "module 'json' is already imported from"),
])
def test_a_bad_rule_module_is_one_line_and_exit_2(tmp_path, run_cli, modules, message):
    rule = "from reviewbot.rule import {base}\nclass Mine({base}):\n    code = {code!r}\n" \
           "    name = {name!r}\n"
    root = project(tmp_path, f"rule-modules = {modules}\n", {
        "my_engine/broken.py": "raise RuntimeError('first line\\nsecond line')\n",
        "my_engine/exits.py": "import sys\nsys.exit(3)\n",
        "my_engine/ast_rule.py": rule.format(base="Rule", code="ENG9", name="mine"),
        "my_engine/empty.py": "X = 1\n",
        "my_engine/rb_code.py": rule.format(base="CstRule", code="RB101", name="mine"),
        "my_engine/bad_code.py": rule.format(base="CstRule", code="eng-1", name="mine"),
        "my_engine/bad_name.py": rule.format(base="CstRule", code="ENG9", name="Not Kebab"),
        "my_engine/twin.py": rule.format(base="CstRule", code="ENG101", name="twin"),
    })
    result = run_cli(["check", "."], cwd=root)
    assert result.code == 2
    assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
    assert message in result.err and "rule-modules" in result.err
    assert "second line" not in result.err


def test_a_folder_configuration_cannot_name_rule_modules(tmp_path, run_cli):
    root = project(tmp_path, RULES, {"sub/.reviewbot.yml": "rule-modules: [my_engine.lint_rules]\n",
                                     "sub/m.py": "x = 1\n"})
    result = run_cli(["check", "."], cwd=root)
    assert result.code == 2 and "project root's configuration" in result.err


def test_a_project_rule_that_raises_is_rb002(tmp_path, run_cli):
    root = project(tmp_path, 'rule-modules = ["my_engine.raising"]\n', {
        "my_engine/raising.py": """
            from reviewbot.rule import CstRule

            class Raises(CstRule):
                '''Fails on every call.'''
                code = "ENG7"
                name = "raises"
                def visit_Call(self, node):
                    raise ValueError("mine")
        """})
    found = findings(run_cli, root, "--select", "ENG7")
    # Every file with a call: one RB002 each, and nothing else.
    assert {f["code"] for f in found} == {"RB002"}
    assert sorted(f["path"] for f in found) == ["my_engine/lint_rules.py", "my_engine/raising.py",
                                                "runner.py"]
    crash = next(f for f in found if f["path"] == "runner.py")
    assert "Rule ENG7 (raises) crashed on runner.py: ValueError: mine" in crash["message"]


def test_review_ignores_the_pull_requests_rule_modules(tmp_path, monkeypatch):
    from reviewbot.github.diff import ChangedLines, FileChange
    from reviewbot.github.review import Settings, check_changes

    root = project(tmp_path, RULES + 'extend-select = ["ENG101"]\n'
                   '[tool.reviewbot.rules.ENG101]\nsome-option = 1\n',
                   # A built-in rule's finding (`.numpy()` alone would raise on CUDA).
                   {"runner.py": RUNNER.replace("return y.numpy()", "return y.cpu().numpy()")})
    imported: list[str] = []
    real = __import__("importlib").import_module
    monkeypatch.setattr("importlib.import_module",
                        lambda name, *a: imported.append(name) or real(name, *a))
    changed = ChangedLines({"runner.py": FileChange("runner.py", added=set(range(1, 15)))})
    outcome = check_changes(Settings(filter_mode="nofilter"), changed, root)
    assert "my_engine.lint_rules" not in imported and "my_engine.lint_rules" not in sys.modules
    codes = [f.code for f in outcome.findings]
    assert "RB103" in codes and "ENG101" not in codes


# `review --base-rule-modules`: the base commit's modules, never the checkout's ----------

BASE = "f" * 40  # the base commit of fixtures/pr/event.json


@pytest.fixture
def pr(tmp_path, httpserver, monkeypatch):
    """A pull request adding runner.py: its checkout (with rule modules of its own that
    leave a marker when imported), and a fake GitHub whose base commit names and holds
    the documented rule module."""
    pytest.importorskip("github")
    from conftest import FIXTURES
    from github_fake import FakeGitHub

    root = project(tmp_path / "ws", RULES)
    marker = tmp_path / "imported"
    hostile = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for rel in ("my_engine/__init__.py", "my_engine/lint_rules.py", "my_engine/helpers.py",
                "engine_helpers.py"):
        (root / rel).write_text(hostile + "raise SystemExit('the pull request')\n")
    lines = RUNNER.splitlines()
    patch = f"@@ -0,0 +1,{len(lines)} @@\n" + "\n".join("+" + line for line in lines)
    fake = FakeGitHub(httpserver, [{"filename": "runner.py", "status": "added",
                                    "patch": patch, "sha": "1" * 40}])
    fake.contents[("pyproject.toml", BASE)] = "[tool.reviewbot]\n" + RULES
    fake.contents[("my_engine/__init__.py", BASE)] = ""
    fake.contents[("my_engine/lint_rules.py", BASE)] = doc_example()
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    for name, value in {"GITHUB_API_URL": fake.base, "RUNNER_TEMP": str(runner_temp),
                        "GITHUB_EVENT_PATH": str(FIXTURES / "pr" / "event.json"),
                        "GITHUB_REPOSITORY": "acme/engine", "GITHUB_TOKEN": "t0ken",
                        "REVIEWBOT_RETRY_BACKOFF": "0", "REVIEWBOT_GITHUB_PACE": "0"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("REVIEWBOT_NO_PROJECT_CODE", raising=False)
    return types.SimpleNamespace(root=root, fake=fake, marker=marker, temp=runner_temp)


def posted(fake) -> list[tuple[str, int, str]]:
    return [(c["path"], c["line"], c["body"].rsplit("reviewbot:", 1)[1][:-4])
            for r in fake.reviews for c in r.get("comments", [])]


def test_review_imports_the_base_commits_rule_modules_only_when_asked(pr, run_cli,
                                                                      monkeypatch):
    path = list(sys.path)
    off = run_cli(["review", "--config-from", "base"], cwd=pr.root)
    assert off.code == 0, off.err
    assert posted(pr.fake) == [] and "my_engine.lint_rules" not in sys.modules
    assert "Rule modules" not in pr.fake.issue_comments[-1]["body"]

    on = run_cli(["review", "--config-from", "base", "--base-rule-modules"], cwd=pr.root)
    assert on.code == 0, on.err  # ENG101 is a warning
    assert posted(pr.fake) == [("runner.py", 11, "ENG101")]
    (comment,) = pr.fake.reviews[0]["comments"]
    assert comment["body"].startswith("**ENG101** numpy-on-cuda-tensor (warning)")
    assert "in hot path execute\\_model -\\> \\_read" in comment["body"]
    assert "Rule modules imported from the base commit: `my_engine.lint_rules`" in \
        pr.fake.issue_comments[-1]["body"]
    assert not pr.marker.exists()  # the pull request's copies were never imported
    # The folder they came from is gone, and the run left sys.path and sys.modules as
    # they were: a second run imports them again, and repeats no comment.
    assert list(pr.temp.glob("reviewbot-rule-modules-*")) == []
    assert sys.path == path and "my_engine" not in sys.modules
    again = run_cli(["review", "--config-from", "base", "--base-rule-modules"], cwd=pr.root)
    assert again.code == 0 and len(pr.fake.reviews) == 1, again.err
    assert "1 findings were already commented" in pr.fake.issue_comments[-1]["body"]

    # The environment's switch wins over the flag.
    monkeypatch.setenv("REVIEWBOT_NO_PROJECT_CODE", "1")
    pr.fake.review_comments.clear()
    assert run_cli(["review", "--config-from", "base", "--base-rule-modules"],
                   cwd=pr.root).code == 0
    assert len(pr.fake.reviews) == 1 and not pr.marker.exists()
    assert "Rule modules" not in pr.fake.issue_comments[-1]["body"]


def test_worker_processes_import_the_base_modules_too(pr, run_cli, monkeypatch):
    # Spawned workers (as on macOS, or forkserver) import the rules by module name with the
    # parent's sys.path: the base commit's folder is there, and still exists, for the run.
    import functools
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    spawned = functools.partial(ProcessPoolExecutor,
                                mp_context=multiprocessing.get_context("spawn"))
    monkeypatch.setattr("reviewbot.engine.ProcessPoolExecutor", spawned)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    for index in range(4):
        (pr.root / f"runner{index}.py").write_text(RUNNER)
        pr.fake.files.append({**pr.fake.files[0], "filename": f"runner{index}.py"})
    result = run_cli(["review", "--config-from", "base", "--base-rule-modules", "--reporter",
                      "annotations"], cwd=pr.root)
    assert result.code == 0, result.err
    found = re.findall(r"file=(runner\d?\.py),line=(\d+),.*title=(\w+)::", result.out)
    assert sorted(found) == [(f"runner{i}.py", "11", "ENG101") for i in ("", 0, 1, 2, 3)]
    assert not pr.marker.exists()


def test_a_package_imported_from_elsewhere_is_refused(pr, run_cli, monkeypatch):
    elsewhere = types.ModuleType("my_engine")
    elsewhere.__file__ = str(pr.root / "my_engine" / "__init__.py")
    monkeypatch.setitem(sys.modules, "my_engine", elsewhere)
    result = run_cli(["review", "--config-from", "base", "--base-rule-modules"], cwd=pr.root)
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert "package 'my_engine' is already imported from" in result.err
    assert "not from the base commit" in result.err and not pr.marker.exists()


def test_the_base_modules_digest_keys_the_reviews_cache(pr, run_cli):
    flags = ["review", "--config-from", "base", "--base-rule-modules", "--reporter",
             "annotations"]
    first = run_cli(flags, cwd=pr.root)
    assert "ENG101" in first.out and list((pr.temp / "reviewbot-cache").iterdir())
    pr.fake.contents[("my_engine/lint_rules.py", BASE)] = doc_example().replace(
        "in hot path", "on the hot path")
    second = run_cli(flags, cwd=pr.root)
    assert "on the hot path" in second.out, second.out


def test_a_base_module_cannot_import_the_pull_requests_modules(pr, run_cli, monkeypatch):
    # A package module of the project that the base commit's module imports is not read:
    # the import fails, and the pull request's copy is not imported instead.
    pr.fake.contents[("my_engine/lint_rules.py", BASE)] = \
        "from my_engine.helpers import shared\n" + doc_example()
    result = run_cli(["review", "--config-from", "base", "--base-rule-modules"], cwd=pr.root)
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err
    assert ("rule-modules: cannot import 'my_engine.lint_rules': ModuleNotFoundError: No "
            "module named 'my_engine.helpers'") in result.err
    assert not pr.marker.exists()
    # Nor with the checkout on sys.path (`python -m` run in it), where the checkout's regular
    # package would win over the base commit's namespace package (no __init__.py).
    monkeypatch.syspath_prepend(str(pr.root))
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    del pr.fake.contents[("my_engine/__init__.py", BASE)]
    pr.fake.contents[("my_engine/lint_rules.py", BASE)] = "import engine_helpers\n" + \
        doc_example()
    path = list(sys.path)
    result = run_cli(["review", "--config-from", "base", "--base-rule-modules"], cwd=pr.root)
    assert result.code == 2 and "No module named 'engine_helpers'" in result.err, result.err
    assert not pr.marker.exists() and sys.path == path
    assert list(pr.temp.glob("reviewbot-rule-modules-*")) == []


@pytest.mark.parametrize("modules,files,message", [
    ('["../evil"]', {}, "expected a dotted module name such as my_project.lint_rules"),
    ('["my_engine.missing"]', {}, "cannot import 'my_engine.missing': neither "
                                  "my_engine/missing.py nor my_engine/missing/__init__.py is a "
                                  "file at the base commit ffffffffffff"),
    ('["my_engine.lint_rules"]', {"my_engine/lint_rules.py": "#" * (1024 * 1024 + 1)},
     "my_engine/lint_rules.py at the base commit: too large for a rule module"),
    ('["my_engine.lint_rules"]', {"my_engine/__init__.py": "#" * (1024 * 1024 + 1)},
     "my_engine/__init__.py at the base commit: too large for a rule module"),
    (str([f"my_engine.m{i}" for i in range(33)]).replace("'", '"'), {},
     "at most 32 modules are read from the base commit, got 33"),
])
def test_a_bad_base_rule_module_is_one_line_and_exit_2(pr, run_cli, modules, files, message):
    pr.fake.contents[("pyproject.toml", BASE)] = f"[tool.reviewbot]\nrule-modules = {modules}\n"
    for rel, text in files.items():
        pr.fake.contents[(rel, BASE)] = text
    result = run_cli(["review", "--config-from", "base", "--base-rule-modules"], cwd=pr.root)
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert result.err.startswith("reviewbot: error: ") and message in result.err, result.err
    assert pr.fake.reviews == [] and not pr.marker.exists()
    assert list(pr.temp.glob("reviewbot-rule-modules-*")) == []


def test_base_rule_modules_need_the_base_configuration(pr, run_cli):
    result = run_cli(["review", "--base-rule-modules"], cwd=pr.root)
    assert result.code == 2 and "--base-rule-modules needs --config-from base" in result.err
    assert pr.fake.requests == [] and not pr.marker.exists()


def test_a_rule_modules_files_stay_in_the_repository():
    from reviewbot.errors import ReviewbotError
    from reviewbot.github.base_rules import module_files

    assert module_files("a.b.c", "python") == (
        ["python/a/__init__.py", "python/a/b/__init__.py"],
        ["python/a/b/c/__init__.py", "python/a/b/c.py"])
    assert module_files("rules", "") == ([], ["rules/__init__.py", "rules.py"])
    for name, folder in (("a.b", ".."), ("a", "../x"), ("a", "x/../.."), ("a", "/etc")):
        with pytest.raises(ReviewbotError, match="expected a path inside the repository"):
            module_files(name, folder)


# The providers ------------------------------------------------------------------------

def example_rule() -> type[CstRule]:
    module = types.ModuleType("docs_example")
    exec(compile(doc_example(), str(DOC), "exec"), module.__dict__)
    return module.NumpyOnCudaTensor


class Facts(CstRule):
    """Reports every expression statement's call with the facts the providers give."""

    code = "TST1"
    name = "test-facts"
    summary = "A test rule"
    METADATA_DEPENDENCIES = (DeviceProvider, SyncAllowedProvider, HotPathProvider)

    def visit_FunctionDef(self, node):
        chain = self.get_metadata(HotPathProvider, node)
        self.report(node.name, f"def {node.name.value}: {chain}")

    def visit_Call(self, node):
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "numpy":
            device = self.get_metadata(DeviceProvider, node.func.value)
            allowed = self.get_metadata(SyncAllowedProvider, node.func.value)
            self.report(node, f"{device.kind if device else None} {allowed}")


def test_the_providers_read_devices_hot_paths_and_sync_allowed_blocks(tmp_path):
    source = ("import torch\n\nclass ModelRunner:\n"
              "    def execute_model(self, x):\n"
              "        y = x.cuda()  # é\n"
              "        s = 'é'; y.numpy()\n"
              "        with sync_allowed():\n"
              "            y.numpy()\n"
              "        (\n            y\n        ).numpy()\n"
              "        def inner():\n            return y.numpy()\n"
              "    def cold(self):\n        torch.zeros(2).numpy()\n")
    found = [(f.line, f.column, f.message) for f in check_source(tmp_path, source, Facts)]
    assert found == [
        (4, 9, "def execute_model: ('execute_model',)"),
        (6, 18, "cuda 0"),  # a character column after the two-byte é
        (8, 13, "cuda 2"),  # MARKED: in a sync-allowed block
        (9, 9, "cuda 0"),  # the parentheses are the expression's, as in ast
        (12, 13, "def inner: None"),  # not a function the analysis indexes
        (13, 20, "cuda 0"),  # a closure is walked with its function
        (14, 9, "def cold: None"),
        (15, 9, "cpu 0"),  # a cold function is walked when first asked about
    ]


def test_spans_are_computed_for_the_walked_function_only():
    path = REPO / "reviewbot" / "analysis" / "gpu.py"
    text = path.read_text(encoding="utf-8")
    ctx = FileContext(str(path), text)
    module = cst.parse_module(text)
    whole = meta.MetadataWrapper(module, unsafe_skip_copy=True).resolve(meta.PositionProvider)
    facts = FileFacts(ctx, module)
    target = next(s for s in module.body if isinstance(s, cst.ClassDef)
                  and s.name.value == "FunctionWalker")
    method = next(s for s in target.body.body if isinstance(s, cst.FunctionDef)
                  and s.name.value == "label")
    facts.walking[:] = [method]
    nodes = []
    method.visit(type("Collect", (cst.CSTVisitor,), {
        "on_visit": lambda self, node: nodes.append(node) or True})())
    assert len(nodes) > 500
    assert all(facts.position(node) == whole[node] for node in nodes)
    assert (facts.placed_functions, facts.whole_module) == (1, False)
    facts.walking.clear()
    assert facts.position(module.body[0]) == whole[module.body[0]]  # outside: the module's
    assert facts.whole_module


def test_the_gate_needs_a_candidate_in_a_hot_function(tmp_path, monkeypatch):
    parses: list[int] = []
    real = cst.parse_module
    monkeypatch.setattr(cst, "parse_module", lambda text, *a: parses.append(1) or real(text, *a))
    rule = example_rule()
    # No candidate; a candidate only in a cold function (the ast analysis knows the hot
    # ones); a hot function but no entry point's word in the file: LibCST is never run.
    for source in [HOT_WITHOUT_CANDIDATE, COLD_CANDIDATE,
                   COLD_CANDIDATE.replace("ModelRunner", "Loader").replace("execute_model", "f")]:
        parses.clear()
        assert check_source(tmp_path, source, rule) == []
        assert parses == []
    parses.clear()
    assert [f.line for f in check_source(tmp_path, RUNNER, rule)] == [11] and parses == [1]


HOT_WITHOUT_CANDIDATE = ("import torch\nclass ModelRunner:\n    def execute_model(self, x):\n"
                         "        return x.cuda().tolist()\n")
COLD_CANDIDATE = ("import torch\nclass ModelRunner:\n    def execute_model(self, x):\n"
                  "        return x\n    def load(self):\n"
                  "        return torch.zeros(1, device='cuda').numpy()\n")


def gate_admits(rule: type[CstRule], example: Invalid) -> bool:
    """Whether the engine's gate lets an example's file reach the rule's LibCST walk."""
    packs = load_packs(("pytorch", "inference-engines"), REPO, None)
    settings = {**rule.default_settings(), **example.options}
    if not rule.applies_to(example.code, settings, packs):
        return False
    ctx = FileContext(example.path, example.code, packs=packs)
    if _with_a_hot_candidate(ctx, [rule]) != [rule]:
        return False
    if example.line is None or not (rule.HOT_ONLY or rule.LOCAL_CANDIDATES):
        return True
    # The function of the reported line is walked for the rule (and, for a rule that
    # reads only inside its functions, parsed).
    local = _function_local(ctx, [rule])
    chosen = local if local is not None else [
        info for qualname, info in ctx.gpu.functions.items()
        if _active_in([rule], qualname in ctx.gpu.hot, info.summary.text)]
    return any(info.node.lineno <= example.line <= (info.node.end_lineno or 0)
               for info in chosen)


def _cst_rules() -> list[type[CstRule]]:
    rules = [r for r in registry.RULES if issubclass(r, CstRule)]
    example = example_rule()
    example.INVALID = [Invalid(RUNNER, line=11)]
    example.VALID = [Valid(RUNNER.replace("x.cuda()", "x.cpu()"))]
    return [*rules, example]


@pytest.mark.parametrize("rule", _cst_rules(), ids=lambda r: r.code)
def test_every_invalid_example_of_a_cst_rule_passes_its_gate(tmp_path, rule):
    assert rule.INVALID, f"{rule.code} has no Invalid example"
    for example in rule.INVALID:
        assert gate_admits(rule, example), example.code
        reported = [f.line for f in check_source(tmp_path, example.code, rule, example.options)
                    if f.code == rule.code]
        assert reported and (example.line is None or example.line in reported)
    for example in rule.VALID:
        assert [f for f in check_source(tmp_path, example.code, rule, example.options)
                if f.code == rule.code] == []


def test_the_gate_check_can_fail():
    rule = example_rule()
    assert not gate_admits(rule, Invalid(RUNNER.replace("numpy", "tolist")))
    assert not gate_admits(rule, Invalid(COLD_CANDIDATE))
    assert gate_admits(rule, Invalid(COLD_CANDIDATE.replace("return x\n", "return x.numpy()\n")))
    # A candidate of a function-local rule in another function than the reported one.
    sync = registry.BY_CODE["RB101"]
    two = ("import torch\nclass ModelRunner:\n    def execute_model(self, x):\n"
           "        y = self.other(x)\n        return y.cuda()\n"
           "    def other(self, y):\n        return y.tolist()\n")
    assert gate_admits(sync, Invalid(two, line=7))
    assert not gate_admits(sync, Invalid(two, line=5))
    assert gate_admits(sync, Invalid(two.replace("y.cuda()", "y.cuda().tolist()"), line=5))


class EveryNumpyCall(CstRule):
    """Reports every `.numpy()` call it is shown."""

    code = "TST2"
    name = "test-every-numpy-call"
    summary = "A test rule"
    CANDIDATES = ("numpy",)
    HOT_ONLY = True

    def visit_Call(self, node):
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "numpy":
            self.report(node, "seen")


def test_a_hot_only_walk_skips_cold_bodies_but_not_closures_of_hot_functions(tmp_path):
    source = ("import torch\nclass ModelRunner:\n    def execute_model(self, x):\n"
              "        def inner():\n            return x.numpy()\n"
              "        return inner(), x.numpy()\n"
              "    def load(self):\n        return torch.zeros(1).numpy()\n")
    assert [f.line for f in check_source(tmp_path, source, EveryNumpyCall)] == [5, 6]
