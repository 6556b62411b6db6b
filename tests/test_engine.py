"""The engine: the LibCST path and its metadata, crash isolation, parallelism, the cache."""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path

import libcst as cst
import libcst.metadata as meta

from reviewbot import registry
from reviewbot.cache import ResultCache
from reviewbot.config import Overrides, build_config
from reviewbot.context import RunContext
from reviewbot.engine import Engine, FileResult
from reviewbot.packs import load_packs
from reviewbot.rule import CstRule

from conftest import FIXTURES, REPO, check_source


class PrintCall(CstRule):
    """Reports calls of the builtin print, found by qualified name."""

    code = "RB990"
    name = "test-print-call"
    summary = "A test rule"
    METADATA_DEPENDENCIES = (meta.QualifiedNameProvider, meta.ParentNodeProvider)
    triggers = ("print",)

    def visit_Call(self, node: cst.Call) -> None:
        names = {q.name for q in self.get_metadata(meta.QualifiedNameProvider, node.func, set())}
        if "builtins.print" in names:
            parent = self.get_metadata(meta.ParentNodeProvider, node)
            self.report(node, f"print call under {type(parent).__name__}")


class Crashes(CstRule):
    """Raises on every name."""

    code = "RB991"
    name = "test-crashes"
    summary = "A test rule"

    def visit_Name(self, node: cst.Name) -> None:
        raise ValueError("boom")


class KillsWorker(CstRule):
    """Kills its own process on a file that asks for it."""

    code = "RB992"
    name = "test-kills-worker"
    summary = "A test rule"
    triggers = ("KILL_ME",)

    def visit_Module(self, node: cst.Module) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


def engine_for(root: Path, rules, jobs=1, cache=None, table=None, use_triggers=True) -> Engine:
    config = build_config(table or {"select": ["RB0"]}, None, "", root, Overrides())
    config = dataclasses.replace(config, enabled=config.enabled | {r.code for r in rules})
    return Engine(config, load_packs(config.rule_packs, root, None), jobs=jobs, cache=cache,
                  rules=(*registry.RULES, *rules), use_triggers=use_triggers)


def test_cst_rule_sees_qualified_names_parents_and_positions(tmp_path):
    source = "import builtins as b\n\nx = 1\nif x:\n    b.print('hi')\n    print(x)\n"
    findings = check_source(tmp_path, source, PrintCall)
    assert [(f.line, f.column, f.end_line, f.end_column, f.message) for f in findings] == [
        (5, 5, 5, 18, "print call under Expr"),
        (6, 5, 6, 13, "print call under Expr"),
    ]


def test_shadowed_print_is_not_the_builtin(tmp_path):
    source = "def print(*a):\n    pass\n\nprint(1)\n"
    assert check_source(tmp_path, source, PrintCall) == []


def test_a_crashing_rule_becomes_rb002_and_others_still_run(tmp_path):
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("print(1)\n")
    engine = engine_for(tmp_path, [Crashes, PrintCall])
    result = engine.run(sorted(tmp_path.glob("*.py")), RunContext("."), tmp_path)
    by_code = {}
    for f in result.findings:
        by_code.setdefault(f.code, []).append(f)
    assert [f.path for f in by_code["RB002"]] == ["a.py", "b.py"]
    assert "RB991 (test-crashes) crashed on a.py" in by_code["RB002"][0].message
    assert "ValueError: boom" in by_code["RB002"][0].message
    assert [f.path for f in by_code["RB990"]] == ["a.py", "b.py"]


class FinishCrashes(CstRule):
    """Fails while summarising the run."""

    code = "RB992"
    name = "test-finish-crashes"
    summary = "A test rule"

    def finish(self, facts, run):
        raise ValueError("late")


def test_a_rule_crashing_at_the_end_is_about_the_run_and_shown_at_the_configuration(
        tmp_path):
    (tmp_path / "b.py").write_text("x = 1\n")
    (tmp_path / "a.py").write_text("y = 2\n")
    engine = engine_for(tmp_path, [FinishCrashes])
    files = sorted(tmp_path.glob("*.py"))
    (crash,) = engine.run(files, RunContext("."), tmp_path).findings
    assert (crash.code, crash.path, crash.run_level) == ("RB002", ".", True)
    assert "RB992 (test-finish-crashes) crashed while summarising the run" in crash.message
    assert crash.location() == ("a.py", 1)  # no configuration: the first file
    run = RunContext(".", config_file="pyproject.toml",
                     config_text="[project]\nname = 'x'\n[tool.reviewbot]\nselect = []\n")
    (crash,) = engine.run(files, run, tmp_path).findings
    assert crash.location() == ("pyproject.toml", 3)


def test_a_file_that_kills_its_worker_loses_only_itself(tmp_path):
    for i in range(12):
        (tmp_path / f"f{i:02}.py").write_text("print(1)\n" + ("KILL_ME = 1\n" if i == 5 else ""))
    engine = engine_for(tmp_path, [KillsWorker, PrintCall], jobs=2)
    result = engine.run(sorted(tmp_path.glob("*.py")), RunContext("."), tmp_path)
    crashes = [f for f in result.findings if f.code == "RB002"]
    assert [f.path for f in crashes] == ["f05.py"]
    assert "killed the worker process" in crashes[0].message
    assert sorted(f.path for f in result.findings if f.code == "RB990") == \
        [f"f{i:02}.py" for i in range(12) if i != 5]


def test_parallel_and_serial_runs_agree(tmp_path):
    files = sorted(REPO.joinpath("reviewbot").rglob("*.py")) + sorted(FIXTURES.rglob("*.py"))
    serial = engine_for(REPO, [PrintCall], jobs=1, table={"select": ["ALL"]})
    parallel = engine_for(REPO, [PrintCall], jobs=2, table={"select": ["ALL"]})
    a = serial.run(files, RunContext("."), REPO)
    b = parallel.run(files, RunContext("."), REPO)
    assert a.findings == b.findings and a.facts == b.facts
    assert len(a.findings) > 10


def test_trigger_shortcut_never_hides_a_finding(tmp_path):
    # Files without a rule's trigger words are skipped for that rule: prove it exact on
    # every Python file of this repository and the fixtures.
    files = sorted(REPO.joinpath("reviewbot").rglob("*.py")) + sorted(REPO.joinpath(
        "tests").rglob("*.py")) + sorted(FIXTURES.rglob("*.py"))
    table = {"select": ["ALL"], "rules": {"RB301": {"exclude": []}, "RB302": {"exclude": []}}}
    with_shortcut = engine_for(REPO, [PrintCall], table=table).run(files, RunContext("."), REPO)
    without = engine_for(REPO, [PrintCall], table=table, use_triggers=False).run(
        files, RunContext("."), REPO)
    assert with_shortcut.findings == without.findings
    assert len(without.findings) > 20

    def nonempty(facts):
        return {code: {path: data for path, data in by_path.items() if data}
                for code, by_path in facts.items()}

    assert nonempty(with_shortcut.facts) == nonempty(without.facts)


def test_cache_returns_the_same_result_and_is_invalidated(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f():\n    pass\n")
    cache_dir = tmp_path / "cache"

    def run(table=None):
        config = build_config(table or {"extend-select": ["RB302"]}, None, "", tmp_path,
                              Overrides())
        packs = load_packs(config.rule_packs, tmp_path, None)
        cache = ResultCache(cache_dir, config.fingerprint() + repr(packs))
        engine = Engine(config, packs, jobs=1, cache=cache)
        return engine.run([src], RunContext("."), tmp_path)

    first = run()
    second = run()
    assert (first.cached, second.cached) == (0, 1)
    assert first.findings == second.findings and len(first.findings) == 2
    assert (cache_dir / ".gitignore").exists()
    src.write_text('def f():\n    """Now documented."""\n')
    third = run()
    assert third.cached == 0 and third.findings == []
    # A different configuration does not reuse the result.
    fourth = run({"extend-select": ["RB302"], "rules": {"RB302": {"ignore-module": False}}})
    assert fourth.cached == 0 and [f.message for f in fourth.findings] == \
        ["Missing docstring in module"]


def test_damaged_cache_is_ignored(tmp_path, run_cli):
    (tmp_path / "m.py").write_text('"""Doc."""\n')
    assert run_cli(["check", "."], cwd=tmp_path).code == 0
    for file in (tmp_path / ".reviewbot_cache").glob("*.json"):
        file.write_bytes(b"not a pickle")
    result = run_cli(["check", "."], cwd=tmp_path)
    assert result.code == 0 and result.err == ""


def test_unwritable_cache_folder_is_not_an_error(tmp_path, run_cli):
    (tmp_path / "m.py").write_text("def f():\n    pass\n")
    (tmp_path / "blocker").write_text("a file where the cache folder would go")
    result = run_cli(["check", ".", "--cache-dir", "blocker/cache"], cwd=tmp_path)
    assert result.code == 1 and "RB301" in result.out and result.err == ""


def test_cache_is_invalidated_when_reviewbot_changes(tmp_path, monkeypatch):
    from reviewbot import cache as cache_module

    src = tmp_path / "m.py"
    src.write_text("def f():\n    pass\n")
    result = FileResult("m.py", [], {"RB301": [("function", "f", 1, False)]})
    first = ResultCache(tmp_path / "c", "cfg")
    first.put("k", result)
    first.save()
    assert ResultCache(tmp_path / "c", "cfg").get("k") == result
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "edited")
    assert ResultCache(tmp_path / "c", "cfg").get("k") is None


def _age(*paths: Path, seconds: int = 60) -> None:
    """Give files a modification time in the past (the run memo skips fresh edits)."""
    for path in paths:
        info = path.stat()
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns - seconds * 1_000_000_000))


def _memo_engine(tmp_path: Path) -> tuple[Engine, ResultCache]:
    config = build_config({}, None, "", tmp_path, Overrides())
    packs = load_packs(config.rule_packs, tmp_path, None)
    cache = ResultCache(tmp_path / "cache", config.fingerprint() + repr(packs))
    return Engine(config, packs, jobs=1, cache=cache), cache


def test_an_unchanged_run_is_answered_by_the_memo_without_reading_a_file(tmp_path,
                                                                          monkeypatch):
    from reviewbot import engine as engine_module

    src = tmp_path / "m.py"
    src.write_text("def f():\n    pass\n")
    _age(src)
    engine, _ = _memo_engine(tmp_path)
    first = engine.run([src], RunContext("."), tmp_path)
    assert [f.code for f in first.findings] == ["RB301"]

    def no_reading(*args, **kwargs):
        raise AssertionError("a file was read")

    monkeypatch.setattr(engine_module, "read_bytes", no_reading)
    engine, cache = _memo_engine(tmp_path)
    second = engine.run([src], RunContext("."), tmp_path)
    assert second.findings == first.findings and second.cached == 1
    assert cache._entries is None  # the per-file results were never loaded
    monkeypatch.undo()

    # An edit changes the file's size or times: the files are read and checked again.
    src.write_text('def f():\n    """Now documented."""\n')
    _age(src, seconds=30)
    engine, _ = _memo_engine(tmp_path)
    assert engine.run([src], RunContext("."), tmp_path).findings == []


def test_the_memo_is_not_written_for_fresh_edits_nor_believed_when_forged(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f():\n    pass\n")
    engine, cache = _memo_engine(tmp_path)
    engine.run([src], RunContext("."), tmp_path)
    assert not cache._memo_file().exists()  # edited within the clock's tick: racy
    _age(src)
    engine, cache = _memo_engine(tmp_path)
    engine.run([src], RunContext("."), tmp_path)
    memo = cache._memo_file()
    assert memo.exists()
    # Someone without the key rewrites the memo to hide the finding: it is not believed.
    header, _, body = memo.read_bytes().partition(b"\n")
    forged = body.replace(b'"RB301"', b'"RB999"')
    assert forged != body
    memo.write_bytes(header + b"\n" + forged)
    engine, _ = _memo_engine(tmp_path)
    assert [f.code for f in engine.run([src], RunContext("."), tmp_path).findings] == ["RB301"]


LOADED = ("import sys\nfrom reviewbot.cli import main\ncode = main(sys.argv[1:])\n"
          "print('LIBCST', 'libcst._nodes.expression' in sys.modules)\nsys.exit(code)\n")


def test_libcst_is_imported_only_for_a_file_parsed_with_it(tmp_path):
    import subprocess
    import sys

    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    (tmp_path / "plain.py").write_text("def f(x):\n    return x\n", encoding="utf-8")

    def loaded() -> bool:
        result = subprocess.run(
            [sys.executable, "-c", LOADED, "check", ".", "--no-cache", "--exit-zero"],
            cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip().splitlines()[-1] == "LIBCST True"

    assert not loaded()  # registry, rules and providers load without it
    # A hot function whose only sync-looking call is on a host tensor: the analysis labels
    # nothing there a CUDA tensor, so no rule that needs one parses it.
    (tmp_path / "runner.py").write_text(
        "import torch\nclass ModelRunner:\n    def execute_model(self, x):\n"
        "        t = torch.zeros(4)\n        return t.tolist()\n",
        encoding="utf-8")
    assert not loaded()
    (tmp_path / "runner.py").write_text(
        "import torch\nclass ModelRunner:\n    def execute_model(self, x):\n"
        "        t = torch.zeros(4, device='cuda')\n        return t.tolist()\n",
        encoding="utf-8")
    assert loaded()
