"""The project index and the link phase: hot paths and devices across modules."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from reviewbot.analysis.project import (IndexCache, Linker, build_index, module_name,
                                        project_root, summarise)
from reviewbot.packs import load_packs


def write_project(root: Path, files: dict[str, str], config: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("[tool.reviewbot]\n" + config, encoding="utf-8")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def sync_findings(run_cli, root: Path, *paths: str, extra: tuple[str, ...] = ()) -> list[dict]:
    result = run_cli(["check", *(paths or (".",)), "--output-format", "json", "--select", "RB1",
                      *extra], cwd=root)
    assert result.code in (0, 1), result.err
    return json.loads(result.out)


def sync_sites(run_cli, root: Path) -> list[tuple[str, int, str]]:
    """(path, line, code) of each RB1xx finding in the project, sorted."""
    return sorted((f["path"], f["line"], f["code"]) for f in sync_findings(run_cli, root))


RUNNER = """
    import torch
    from engine.ops import apply_penalties

    class ModelRunner:
        def __init__(self):
            self.buf = torch.zeros(8, device="cuda")

        def execute_model(self, batch):
            return apply_penalties(self.buf)
"""

OPS = """
    import torch
    def apply_penalties(logits):
        counts = torch.ones(4, device="cuda")
        return counts.tolist()
"""


def test_a_helper_in_another_module_is_hot_through_its_caller(tmp_path, run_cli):
    root = write_project(tmp_path, {"engine/__init__.py": "", "engine/runner.py": RUNNER,
                                    "engine/ops.py": OPS})
    found = sync_findings(run_cli, root)
    assert [(f["code"], f["path"], f["line"]) for f in found] == [("RB101", "engine/ops.py", 5)]
    assert "ModelRunner.execute_model -> apply_penalties (engine/ops.py)" in found[0]["message"]
    # Only the helper's file is given (as pre-commit does): the index still reads the caller.
    assert len(sync_findings(run_cli, root, "engine/ops.py")) == 1


def test_editing_the_caller_changes_the_findings_of_the_callee(tmp_path, run_cli):
    root = write_project(tmp_path, {"engine/__init__.py": "", "engine/runner.py": RUNNER,
                                    "engine/ops.py": OPS})
    assert len(sync_findings(run_cli, root)) == 1  # fills the cache
    (root / "engine/runner.py").write_text(textwrap.dedent(RUNNER).replace(
        "return apply_penalties(self.buf)", "return self.buf"), encoding="utf-8")
    assert sync_findings(run_cli, root) == []  # ops.py is unchanged, its result is not reused
    (root / "engine/runner.py").write_text(textwrap.dedent(RUNNER), encoding="utf-8")
    assert len(sync_findings(run_cli, root)) == 1


def test_an_edit_the_link_cannot_see_reuses_the_recorded_facts(tmp_path, run_cli,
                                                                 monkeypatch):
    root = write_project(tmp_path, {"engine/__init__.py": "", "engine/runner.py": RUNNER,
                                    "engine/ops.py": OPS})
    assert len(sync_findings(run_cli, root)) == 1  # links, and records the facts
    # A comment and a new line above the helper: its line moves, the summary the link
    # reads does not change. The file is checked again with the recorded facts; no link.
    monkeypatch.setattr(Linker, "link", lambda self: pytest.fail("linked again"))
    (root / "engine/ops.py").write_text("# the penalties\n\n" + textwrap.dedent(OPS),
                                        encoding="utf-8")
    found = sync_findings(run_cli, root)
    assert [(f["path"], f["line"]) for f in found] == [("engine/ops.py", 7)]
    assert "ModelRunner.execute_model -> apply_penalties (engine/ops.py)" in found[0]["message"]
    # Recorded facts that do not match their digest (damaged, or written by an older
    # run) are not used: the project is linked again.
    monkeypatch.undo()
    facts = next((root / ".reviewbot_cache").glob("links-*.json"))
    facts.write_bytes(facts.read_bytes().replace(b"execute_model", b"execute_modex"))
    (root / "engine/ops.py").write_text(textwrap.dedent(OPS), encoding="utf-8")
    found = sync_findings(run_cli, root)
    assert [(f["path"], f["line"]) for f in found] == [("engine/ops.py", 5)]
    assert "execute_modex" not in found[0]["message"]
    # An edit the link does see (the caller no longer calls the helper) links again.
    (root / "engine/runner.py").write_text(textwrap.dedent(RUNNER).replace(
        "return apply_penalties(self.buf)", "return self.buf"), encoding="utf-8")
    assert sync_findings(run_cli, root) == []


def test_a_changed_reviewbot_links_again(tmp_path, run_cli, monkeypatch):
    from reviewbot import cache

    root = write_project(tmp_path, {"engine/__init__.py": "", "engine/runner.py": RUNNER,
                                    "engine/ops.py": OPS})
    assert len(sync_findings(run_cli, root)) == 1
    links = []
    link = Linker.link
    monkeypatch.setattr(Linker, "link", lambda self: links.append(1) or link(self))
    (root / "engine/ops.py").write_text("# one\n" + textwrap.dedent(OPS), encoding="utf-8")
    assert len(sync_findings(run_cli, root)) == 1
    assert links == []  # an edit the link cannot see: the recorded facts are reused
    # The same project checked by other code (an upgrade, an editable install being
    # worked on): the facts the old link phase recorded are not believed.
    monkeypatch.setattr(cache, "code_fingerprint", lambda: "another reviewbot")
    (root / "engine/ops.py").write_text("# two\n" + textwrap.dedent(OPS), encoding="utf-8")
    assert len(sync_findings(run_cli, root)) == 1
    assert links == [1]


def test_summaries_are_read_only_to_link_and_written_in_full_only_in_bulk(
        tmp_path, run_cli, monkeypatch):
    from reviewbot.analysis import project

    monkeypatch.setattr(project, "RECENT_SUMMARIES", 1)  # three modules: a cold run is bulk
    root = write_project(tmp_path, {"engine/__init__.py": "", "engine/runner.py": RUNNER,
                                    "engine/ops.py": OPS})
    assert len(sync_findings(run_cli, root)) == 1
    cache = root / ".reviewbot_cache"
    (summaries,) = cache.glob("summaries-v*.json")
    (recent,) = cache.glob("summaries-recent-v*.json")
    written = summaries.read_bytes()

    def stored_entries(path: Path) -> dict:
        return json.loads(path.read_bytes().partition(b"\n")[2])

    assert len(stored_entries(summaries)) == 3 and stored_entries(recent) == {}
    # An edit the link cannot see: the stored summaries are not even read.
    with monkeypatch.context() as patch:
        patch.setattr(IndexCache, "stored", property(lambda self: pytest.fail("read them")))
        (root / "engine/ops.py").write_text("# the penalties\n\n" + textwrap.dedent(OPS),
                                            encoding="utf-8")
        assert [f["line"] for f in sync_findings(run_cli, root)] == [7]
    assert summaries.read_bytes() == written and len(stored_entries(recent)) == 1
    # An edit the link sees: linked again, and only the new summary is written (the
    # comment's, no longer used, is dropped).
    (root / "engine/ops.py").write_text(textwrap.dedent(OPS) + "\ndef extra():\n"
                                        "    return apply_penalties(None)\n", encoding="utf-8")
    assert [f["line"] for f in sync_findings(run_cli, root)] == [5]
    assert summaries.read_bytes() == written
    assert [set(v["functions"]) >= {"extra"} for v in stored_entries(recent).values()] \
        == [True]
    # Summaries the cache lost are made again when a link needs them.
    summaries.unlink()
    recent.unlink()
    (root / "engine/runner.py").write_text(textwrap.dedent(RUNNER) + "\ndef other():\n"
                                           "    return torch.zeros(1)\n", encoding="utf-8")
    found = sync_findings(run_cli, root)
    assert [f["line"] for f in found] == [5]
    assert "ModelRunner.execute_model -> apply_penalties (engine/ops.py)" in found[0]["message"]
    assert len(stored_entries(summaries)) == 3


def test_the_engines_a_project_imports_are_remembered_per_file(tmp_path, monkeypatch):
    import time
    from types import SimpleNamespace

    from reviewbot import source
    from reviewbot.analysis import project

    root = write_project(tmp_path / "p", {"app/__init__.py": "", "app/a.py": "import os\n",
                                          "app/b.py": "from sglang.srt import x\n"})
    files = sorted(root.rglob("*.py"))
    config = SimpleNamespace(engine_packs=True, rule_packs=(), max_file_size=1 << 20)
    now = time.time_ns
    monkeypatch.setattr(project.time, "time_ns", lambda: now() + 10**10)  # none is racy
    reads: list[str] = []
    read = source.read_bytes
    monkeypatch.setattr(source, "read_bytes", lambda path, *a: reads.append(path) or
                        read(path, *a))
    memo = IndexCache(tmp_path / "cache")
    assert project.engine_pack_names(config, root, files, memo) == ["sglang"]
    assert len(reads) == 3
    memo.save()
    reads.clear()
    assert project.engine_pack_names(config, root, files, IndexCache(tmp_path / "cache")) \
        == ["sglang"]
    assert reads == []  # nothing changed: no file is read for it
    memo = IndexCache(tmp_path / "cache")
    (root / "app/b.py").write_text("import os, sys\n")
    assert project.engine_pack_names(config, root, files, memo) == []
    assert reads == [str(root / "app/b.py")]  # only the edited file
    # A file modified within the file system's clock tick is read every time.
    monkeypatch.setattr(project.time, "time_ns", now)
    memo.save()
    reads.clear()
    (root / "app/a.py").write_text("import sglang\n")
    assert project.engine_pack_names(config, root, files, IndexCache(tmp_path / "cache")) \
        == ["sglang"]


def test_a_benchmarks_loop_starts_no_hot_path(tmp_path, run_cli):
    runner = """
        from eng.ops import apply_penalties

        class ModelRunner:
            def execute_model(self, batch):
                return apply_penalties(batch)
    """
    root = write_project(tmp_path / "a", {"eng/__init__.py": "", "eng/ops.py": OPS,
                                          "eng/benchmark/__init__.py": "",
                                          "eng/benchmark/one_batch.py": runner})
    assert sync_findings(run_cli, root) == []  # it times the step: not the engine's path
    root = write_project(tmp_path / "b", {"eng/__init__.py": "", "eng/ops.py": OPS,
                                          "eng/runner.py": runner})
    assert [f["path"] for f in sync_findings(run_cli, root)] == ["eng/ops.py"]


def test_a_call_on_an_untyped_result_reaches_only_a_class_its_function_names(
        tmp_path, run_cli):
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/kernels.py": """
            import importlib

            def _jit_row_module():
                return importlib.import_module("row_kernels")

            def _verify_executor_for(key):
                return importlib.import_module(key).executor

            def row_compact(x):
                module = _jit_row_module()
                module.run_compact(x)

            def verify(x):
                executor = _verify_executor_for("spec")
                executor.run_checked(x)
        """,
        "eng/verify.py": """
            import torch

            class VerifyExecutor:
                def run_compact(self, x):
                    return torch.ones(4, device="cuda").tolist()

                def run_checked(self, x):
                    return torch.ones(4, device="cuda").tolist()
        """,
        "eng/runner.py": """
            from eng.kernels import row_compact, verify

            class ModelRunner:
                def execute_model(self, x):
                    row_compact(x)
                    verify(x)
        """,
    })
    found = sync_findings(run_cli, root)
    # A kernel module's `run_compact` is not VerifyExecutor's; `_verify_executor_for`
    # speaks of the class whose method it calls.
    assert [(f["path"], f["line"]) for f in found] == [("eng/verify.py", 9)]
    assert "-> verify (eng/kernels.py) -> VerifyExecutor.run_checked" in found[0]["message"]


def test_attributes_inheritance_and_interfaces_carry_hotness(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/runner.py": """
            import torch
            import vllm
            from eng.sampler import Sampler
            from eng.procs import make_processors

            class ModelRunner:
                def __init__(self):
                    self.sampler = Sampler()
                    self.procs = make_processors()

                def execute_model(self, logits: torch.Tensor):
                    out = torch.zeros(4, device="cuda")
                    for proc in self.procs:
                        proc.apply_logits(out)
                    return self.sampler.sample_ids(out)
        """,
        "eng/sampler.py": """
            import torch

            class Sampler:
                def sample_ids(self, logits: torch.Tensor):
                    return logits.argmax(-1).tolist()
        """,
        "eng/procs.py": """
            import torch

            class LogitsProc:
                def apply_logits(self, logits: torch.Tensor):
                    raise NotImplementedError

            class MinTokens(LogitsProc):
                def apply_logits(self, logits: torch.Tensor):
                    if logits.sum() > 0:
                        pass

            class BadWords(LogitsProc):
                def apply_logits(self, logits: torch.Tensor):
                    return logits.max().item()

            class Bias(LogitsProc):
                def apply_logits(self, logits):
                    return logits

            class Temperature(LogitsProc):
                def apply_logits(self, logits):
                    return logits

            def make_processors():
                return [MinTokens(), BadWords(), Bias(), Temperature()]
        """,
    })
    found = {(f["path"], f["line"], f["code"]) for f in sync_findings(run_cli, root)}
    assert found == {("eng/sampler.py", 6, "RB101"), ("eng/procs.py", 10, "RB104"),
                     ("eng/procs.py", 15, "RB102")}


def test_start_up_functions_stop_the_link(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "e/__init__.py": "",
        "e/runner.py": """
            import torch
            from e.warm import profile_run

            class ModelRunner:
                def execute_model(self):
                    profile_run(torch.zeros(2, device="cuda"))
        """,
        "e/warm.py": """
            def profile_run(x):
                return x.tolist()
        """,
    })
    assert sync_findings(run_cli, root) == []


def test_import_cycles_and_recursion_end(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "c/__init__.py": "",
        "c/a.py": """
            import torch
            from c.b import pong

            class ModelRunner:
                def execute_model(self):
                    return ping(torch.ones(2, device="cuda"), 3)

            def ping(x, n):
                return pong(x, n - 1) if n else x.tolist()
        """,
        "c/b.py": """
            from c.a import ping

            def pong(x, n):
                x.item()
                return ping(x, n)
        """,
        "c/broken.py": "def f(:\n",
    })
    found = sync_findings(run_cli, root, extra=("--select", "RB0,RB1"))
    codes = {(f["path"], f["code"]) for f in found}
    assert ("c/broken.py", "RB001") in codes
    assert ("c/a.py", "RB101") in codes


def test_a_file_that_does_not_parse_adds_nothing_to_the_index(tmp_path):
    assert summarise("def f(:\n", "m") is None
    root = write_project(tmp_path, {"p/__init__.py": "", "p/ok.py": "def f():\n    g()\n",
                                    "p/bad.py": "class (:\n"})
    index = build_index(root, sorted(root.rglob("*.py")), IndexCache(None))
    assert index.modules["p.bad"].summary is None
    assert index.modules["p.ok"].summary["functions"]["f"]["calls"] == []


def test_module_names_and_the_project_root(tmp_path):
    root = write_project(tmp_path, {"python/pkg/sub/mod.py": "", "src/lib2/x.py": ""})
    assert project_root([root / "python/pkg/sub/mod.py"]) == root
    assert module_name(root / "python/pkg/sub/mod.py", root=root) == "pkg.sub.mod"
    assert module_name(root / "src/lib2/x.py", root=root) == "lib2.x"
    wheel = tmp_path / "wheel"
    (wheel / "eng").mkdir(parents=True)
    (wheel / "eng/__init__.py").write_text("")
    (wheel / "eng/m.py").write_text("")
    # No marker above it (tmp_path has one: use a fresh folder chain inside the wheel).
    assert module_name(wheel / "eng/m.py") == "eng.m"


def test_relative_imports_and_re_exports_resolve(tmp_path):
    root = write_project(tmp_path, {
        "pkg/__init__.py": "from .impl import Worker\n",
        "pkg/impl.py": "class Worker:\n    def execute_model(self):\n        helper()\n\n"
                       "def helper():\n    pass\n",
        "pkg/user.py": "from pkg import Worker\n\ndef run_step(w: Worker):\n"
                       "    w.execute_model()\n",
    })
    packs = load_packs(("pytorch",), root, None)
    index = build_index(root, sorted(root.rglob("*.py")), IndexCache(None))
    linker = Linker(index, packs)
    assert linker.resolve_class("pkg.Worker") == "pkg.impl.Worker"
    assert linker.callees("pkg.user.run_step") == ["pkg.impl.Worker.execute_model"]
    assert linker.callees("pkg.impl.Worker.execute_model") == ["pkg.impl.helper"]


def test_the_index_cache_is_data_and_survives_a_damaged_file(tmp_path):
    root = write_project(tmp_path, {"q/__init__.py": "", "q/m.py": "def f():\n    g()\n"})
    folder = tmp_path / "cache"
    cache = IndexCache(folder)
    build_index(root, sorted(root.rglob("*.py")), cache)
    cache.save()
    header, _, body = next(folder.glob("index-*.json")).read_bytes().partition(b"\n")
    assert json.loads(header)["mac"] and json.loads(body)
    again = build_index(root, sorted(root.rglob("*.py")), IndexCache(folder))
    assert again.summarised == 0  # everything came from the cache
    next(folder.glob("index-*.json")).write_text("{not json")
    assert build_index(root, sorted(root.rglob("*.py")), IndexCache(folder)).summarised == 2


ENGINE_FILE = """
    import torch
    import vllm

    class ModelRunner:
        def execute_model(self, lens: torch.Tensor, lens_cpu: torch.Tensor):
            total = lens.sum().item()
            host_total = lens_cpu.sum().item()
            return total, host_total
"""


def test_the_engine_pack_and_the_default_device(tmp_path, run_cli):
    root = write_project(tmp_path, {"r/__init__.py": "", "r/runner.py": ENGINE_FILE})
    found = sync_findings(run_cli, root)
    # `import vllm` picks the vllm pack, whose devices.default is cuda; the *_cpu name is
    # evidence of the host.
    assert [(f["code"], f["line"]) for f in found] == [("RB102", 7)]
    assert "devices.default: cuda" in found[0]["message"]
    explained = run_cli(["check", "--explain-hot-paths", "."], cwd=root)
    assert "vllm" in explained.out
    # Only the generic pack: the device stays unknown, nothing is reported.
    stepping = ENGINE_FILE.replace("def execute_model", "def step")  # hot in the generic pack
    generic = write_project(tmp_path / "off", {"r/__init__.py": "", "r/runner.py": stepping},
                            "engine-packs = false\nrule-packs = [\"pytorch\"]\n")
    assert sync_findings(run_cli, generic) == []
    explained = run_cli(["check", "--explain-hot-paths", "."], cwd=generic)
    assert "packs: pytorch (devices.default: unknown)" in explained.out
    on = write_project(tmp_path / "on", {"r/__init__.py": "", "r/runner.py": stepping.replace(
        "import vllm", "")}, "rule-packs = [\"pytorch\"]\ndevices = { default = \"cuda\" }\n")
    assert [f["line"] for f in sync_findings(run_cli, on)] == [7]


@pytest.mark.parametrize("value", ["\"gpu\"", "3"])
def test_a_bad_default_device_is_a_configuration_error(tmp_path, run_cli, value):
    root = write_project(tmp_path, {"m.py": "x = 1\n"}, f"devices = {{ default = {value} }}\n")
    result = run_cli(["check", "."], cwd=root)
    assert result.code == 2 and "devices.default" in result.err and "Traceback" not in result.err


GUARDED = """
    import os
    import torch
    import vllm
    from vllm import envs

    class ModelRunner:
        def execute_model(self, x: torch.Tensor):
            if envs.VLLM_DEBUG_NANS:
                x.isnan().sum().item()
            if self.in_capture:
                x.tolist()
            if current_platform.is_xpu():
                torch.xpu.synchronize()
            if self._scale is None:
                self._scale = x.max().item()
            self.timed(x)
            return x.sum().item()

        def timed(self, x: torch.Tensor):
            if not self.should_time:
                return
            torch.cuda.synchronize()
"""


def test_debug_capture_platform_and_once_only_blocks_are_not_per_step(tmp_path, run_cli):
    root = write_project(tmp_path, {"g/__init__.py": "", "g/runner.py": GUARDED})
    found = sync_findings(run_cli, root)
    assert [(f["code"], f["line"]) for f in found] == [("RB102", 18)]


def test_declared_fields_paired_buffers_and_aliases(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "s/__init__.py": "",
        "s/batch.py": """
            from dataclasses import dataclass
            import numpy as np
            import torch

            @dataclass
            class Batch:
                seq_lens: torch.Tensor
                req_ids: np.ndarray  # a list has no .tolist(): see the Python-value test
                done_mask: torch.Tensor
        """,
        "s/backend.py": """
            import torch
            import sglang
            from s.batch import Batch

            class Updater:
                def __init__(self, sliding):
                    if sliding:
                        self.update = self.update_sliding
                    else:
                        self.update = self.update_plain

                def update(self, batch):
                    raise NotImplementedError

                def update_sliding(self, batch: Batch):
                    return batch.seq_lens.max().item()

                def update_plain(self, batch: Batch):
                    ids = batch.req_ids.tolist()
                    kept = batch.seq_lens[batch.done_mask]
                    return ids, kept, self.buffers.np.tolist(), self.buffers.gpu.tolist()

            class TritonAttnBackend:
                def __init__(self):
                    self.updater = Updater(True)

                def init_forward_metadata(self, batch: Batch):
                    self.updater.update(batch)
        """,
    })
    found = {(f["line"], f["code"]) for f in sync_findings(run_cli, root)}
    assert found == {(17, "RB102"), (21, "RB104"), (22, "RB101")}


def test_explain_says_why(tmp_path, run_cli):
    root = write_project(tmp_path, {"engine/__init__.py": "", "engine/runner.py": RUNNER,
                                    "engine/ops.py": OPS})
    result = run_cli(["explain", "engine/ops.py:5"], cwd=root)
    assert result.code == 0, result.err
    assert "hot, through ModelRunner.execute_model -> apply_penalties (engine/ops.py)" in result.out
    assert "counts -> cuda" in result.out and "allocated on" in result.out
    cold = run_cli(["explain", "engine/runner.py:6"], cwd=root)
    assert "start-up code" in cold.out
    for bad in ("engine/ops.py", "engine/ops.py:0", "engine/ops.py:99", "nope.py:1"):
        result = run_cli(["explain", bad], cwd=root)
        assert result.code == 2 and result.err.count("\n") == 1, (bad, result.err)


def test_custom_ops_reach_the_function_they_register(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "k/__init__.py": "",
        "k/layer.py": """
            import torch
            from torch import nn

            class Mixer(nn.Module):
                def forward(self, x):
                    torch.ops.k.mixer_op(x)

            def mixer_op(x):
                self = lookup()
                self.mixer_forward(x)

            class Impl:
                def mixer_forward(self, x: torch.Tensor):
                    return torch.zeros(3, device="cuda").tolist()
        """,
    })
    assert [f["line"] for f in sync_findings(run_cli, root)] == [15]


def test_a_forged_index_entry_is_not_believed(tmp_path, run_cli):
    root = write_project(tmp_path, {"engine/__init__.py": "", "engine/runner.py": RUNNER,
                                    "engine/ops.py": OPS})
    assert len(sync_findings(run_cli, root)) == 1
    index = next((root / ".reviewbot_cache").glob("index-*.json"))
    header, _, body = index.read_bytes().partition(b"\n")
    summaries = json.loads(body)
    for entry in summaries.values():  # make the runner call nothing: ops would look cold
        for info in ((entry.get("s") if "s" in entry else None) or {}).get(
                "functions", {}).values():
            info["calls"] = []
    index.write_bytes(header + b"\n" + json.dumps(summaries).encode())
    for results in (root / ".reviewbot_cache").glob("results-*.json"):
        results.unlink()
    assert len(sync_findings(run_cli, root)) == 1


def test_more_implicit_syncs(tmp_path, run_cli):
    root = write_project(tmp_path, {"p/__init__.py": "", "p/runner.py": """
        import torch

        class ModelRunner:
            def execute_model(self):
                a = torch.zeros(4, device="cuda")
                keep = torch.ones(4, dtype=torch.bool, device="cuda")
                same = torch.equal(a, a)
                a[keep] = a * 2
                a[keep] = 0.0
                return same
    """})
    found = [(f["code"], f["line"]) for f in sync_findings(run_cli, root)]
    assert found == [("RB104", 8), ("RB104", 9)]


def test_multimodal_metadata_named_by_the_packs_stays_on_the_host(tmp_path, run_cli):
    root = write_project(tmp_path, {"m/__init__.py": "", "m/vision.py": """
        import torch
        from torch import nn

        class VisionTower(nn.Module):
            def forward(self, pixels: torch.Tensor, grid_thw: torch.Tensor):
                sizes = grid_thw.prod(-1).tolist()
                return pixels.sum().item(), sizes
    """})
    assert [(f["code"], f["line"]) for f in sync_findings(run_cli, root)] == [("RB102", 8)]


def test_a_deep_inheritance_chain_and_call_chain_do_not_crash_the_link(tmp_path, run_cli):
    classes = "\n".join(f"class C{i}(C{i - 1}):\n    def step(self):\n        self.f{i}()\n"
                         f"    def f{i}(self):\n        self.step()\n" for i in range(1, 3000))
    forward = "class Last(C2999):\n    def forward(self, x):\n        return x\n"
    root = write_project(tmp_path, {"d/__init__.py": "", "d/deep.py":
                                    "from torch import nn\nclass C0(nn.Module):\n    pass\n"
                                    + classes + forward})
    result = run_cli(["check", ".", "--select", "RB1"], cwd=root)
    # The link phase finishes; the file's own walk may give up on it as an RB002, per file.
    assert result.code in (0, 1) and "internal error" not in result.err, result.err


HOST_FLOWS = {
    "eng/__init__.py": "",
    # The step: calls helpers in other modules, some with host values.
    "eng/runner.py": """
        import functools
        import torch
        import vllm
        from eng.ops import count_tokens, lengths_of, shapes_of
        from eng.outputs import StepOutput

        class ModelRunner:
            def execute_model(self, ids: torch.Tensor, lens: torch.Tensor,
                              out: StepOutput):
                lens_cpu = lens.cpu()
                shapes_of(lens_cpu)              # a host value: not taken for the GPU
                count_tokens(ids)                # no host value: stays on the GPU
                lengths_of(lens, hint=None)      # the hint not passed: fallback runs
                self.grid(ids.shape[0])
                out.ids = out.ids.cpu()          # the output's field is copied to host
                return out

            @functools.lru_cache(maxsize=8)
            def grid(self, n: int):
                return torch.arange(n, device="cuda").tolist()   # once per n
    """,
    "eng/ops.py": """
        import torch

        def shapes_of(shapes: torch.Tensor):
            return shapes.tolist()

        def count_tokens(ids: torch.Tensor):
            return ids.sum().item()

        def lengths_of(lens: torch.Tensor, hint: torch.Tensor | None = None):
            if hint is None:
                hint = lens.max().item()   # only when a caller did not pass it
            return hint

        def moved(maps: torch.Tensor):
            device = maps.device
            assert maps.device.type == "cpu"
            counts = torch.zeros(4, device=device)
            return counts.max().item()
    """,
    "eng/outputs.py": """
        import torch
        from dataclasses import dataclass

        @dataclass
        class StepOutput:
            ids: torch.Tensor
            logits: torch.Tensor
    """,
    "eng/reader.py": """
        import torch
        from eng.outputs import StepOutput
        from eng.ops import moved

        class Reader:
            def execute_model(self, out: StepOutput, x: torch.Tensor):
                a = out.ids.tolist()        # a field the project copies to the host
                b = out.logits.tolist()     # declared torch.Tensor, never moved: GPU
                c = nonzero_of(self.table[0] == torch.tensor([3]))  # a host tensor: host
                d = x._needs_fusion and x.skip_bias_add   # flags on a tensor object
                e = moved(x)
                return a, b, c, d, e

        def nonzero_of(mask: torch.Tensor):
            return mask.nonzero()
    """,
    "eng/cpu/attn.py": """
        import torch

        class CpuAttention(torch.nn.Module):
            def forward(self, seq_lens: torch.Tensor):
                return seq_lens.max().item()   # the CPU backend's own folder
    """,
    "tests/test_runner.py": """
        import torch

        class TinyModel(torch.nn.Module):
            def forward(self, x: torch.Tensor):
                return x.sum().item()      # a test's model is not the engine's step
    """,
}


def test_host_values_across_modules_and_paths_off_the_cuda_path(tmp_path, run_cli):
    root = write_project(tmp_path, HOST_FLOWS, 'devices = { default = "cuda" }\n')
    found = {(f["path"], f["line"]) for f in sync_findings(run_cli, root)}
    # Still found: the helper given a GPU tensor, and the field nobody moves to the host.
    assert ("eng/ops.py", 8) in found
    assert ("eng/reader.py", 9) in found
    # Not reported: a parameter a caller fills with a host value (`lens_cpu`), a
    # memoised function, an optional parameter's fallback, a field copied to the host
    # elsewhere, a host tensor in an op, flags set on a tensor object, a device read
    # before an assert that the tensor is on the CPU, the CPU backend's folder, tests.
    for quiet in (("eng/ops.py", 5), ("eng/runner.py", 22), ("eng/ops.py", 12),
                  ("eng/reader.py", 8), ("eng/reader.py", 16), ("eng/reader.py", 11),
                  ("eng/ops.py", 19), ("eng/cpu/attn.py", 6), ("tests/test_runner.py", 6)):
        assert quiet not in found, quiet


def test_isinstance_names_what_a_value_is(tmp_path, run_cli):
    # `assert isinstance(meta, Metadata)` and `meta: Metadata | None = None` make the
    # declared fields readable; `isinstance(x, dict)` makes `x` a container whose elements
    # are of unknown device, not a host tensor.
    root = write_project(tmp_path, {
        "m/__init__.py": "",
        "m/meta.py": """
            from dataclasses import dataclass
            import torch

            @dataclass
            class Base:
                num_reqs: int

            @dataclass
            class MambaMeta(Base):
                block_first_p: torch.Tensor | None
        """,
        "m/layer.py": """
            import torch
            import vllm
            from m.meta import Base, MambaMeta

            class Layer(torch.nn.Module):
                def forward(self, x, raw, other):
                    meta: Base | None = None
                    if raw is not None:
                        assert isinstance(raw, dict)
                        meta = raw["layer.0"]
                        assert isinstance(meta, MambaMeta)
                    if isinstance(other, MambaMeta):
                        firsts = other.block_first_p.tolist()
                    elements = raw["k"].tolist()
                    return meta.block_first_p.tolist(), elements
        """,
    })
    found = {(f["line"], f["code"]) for f in sync_findings(run_cli, root)}
    assert found == {(14, "RB101"), (16, "RB101")}


def test_a_host_list_copied_to_a_device_taken_to_be_the_gpu(tmp_path, run_cli):
    # devices.default: cuda (the vllm pack): `device=device` of unknown device is the GPU,
    # so RB107 reports the blocking copy of a Python list, as it does for device="cuda".
    root = write_project(tmp_path, {"r/__init__.py": "", "r/runner.py": """
        import torch
        import vllm

        class ModelRunner:
            def execute_model(self, lens: list[int], device: torch.device):
                staged = torch.tensor(lens, device=device)
                pinned = torch.tensor(lens, pin_memory=True).to(device, non_blocking=True)
                return staged, pinned
    """})
    result = run_cli(["check", ".", "--select", "RB107", "--output-format", "json"], cwd=root)
    found = [(f["code"], f["line"]) for f in json.loads(result.out)]
    assert found == [("RB107", 7)]


def test_fields_configured_keep_on_cpu_stay_on_the_host(tmp_path, run_cli):
    # keep_on_cpu=True in a dict display, a subscript assignment, or a loop over the keys:
    # a parameter of that name is a host tensor in every module; other fields are not.
    root = write_project(tmp_path, {
        "mm/__init__.py": "",
        "mm/processor.py": """
            def field_config(Field, video):
                fields = {"grid_thw": Field.batched("image", keep_on_cpu=True)}
                fields["frame_counts"] = Field.flat("video", keep_on_cpu=True)
                fields["pixel_values"] = Field.flat("video")
                for key in ("audio_counts", "emission_counts"):
                    fields[key] = Field.batched("video", keep_on_cpu=True)
                return fields
        """,
        "mm/model.py": """
            import torch
            import vllm

            class Model(torch.nn.Module):
                def forward(self, grid_thw: torch.Tensor, frame_counts: torch.Tensor,
                            audio_counts: torch.Tensor, emission_counts: torch.Tensor,
                            pixel_values: torch.Tensor):
                    a = grid_thw.tolist()
                    b = frame_counts.tolist()
                    c = audio_counts.tolist()
                    d = emission_counts.tolist()
                    return pixel_values.tolist()
        """,
    })
    found = [(f["path"], f["line"]) for f in sync_findings(run_cli, root)]
    assert found == [("mm/model.py", 13)]


def test_a_mappings_keys_are_python_values(tmp_path, run_cli):
    # Keys of `.items()`/`.keys()` index a dict without touching the GPU; `.is_inference()`
    # is tensor metadata. A CUDA tensor used as a Python index is still reported.
    root = write_project(tmp_path, {"r/__init__.py": "", "r/runner.py": """
        import torch
        import vllm
        from dataclasses import dataclass

        @dataclass
        class Intermediate:
            tensors: dict[str, torch.Tensor]

        class ModelRunner:
            def execute_model(self, inter: Intermediate, other: Intermediate, x: torch.Tensor):
                out = {k: v[:4].copy_(other.tensors[k]) for k, v in inter.tensors.items()}
                names = [other.tensors[k] for k in inter.tensors.keys()]
                if x.is_inference():
                    pass
                ids = torch.ones(2, dtype=torch.int64, device="cuda")
                return out, names, names[ids[0]]
    """})
    found = [(f["code"], f["line"]) for f in sync_findings(run_cli, root)]
    assert found == [("RB104", 17)]


@pytest.mark.parametrize("command", [["fix", "--apply"], ["check", "--fix"]])
def test_a_finding_hot_through_another_module_is_fixed(tmp_path, run_cli, command):
    root = write_project(tmp_path, {"engine/__init__.py": "", "engine/runner.py": RUNNER,
                                    "engine/ops.py": OPS})
    result = run_cli([*command, "."], cwd=root)
    assert result.code in (0, 1), result.err
    fixed = (root / "engine" / "ops.py").read_text(encoding="utf-8")
    assert "counts.tolist()" not in fixed and "_to_list(counts)" in fixed
    compile(fixed, "ops.py", "exec")
    # Fixed once: the second run finds nothing left to fix in that file.
    assert sync_findings(run_cli, root, "engine/ops.py") == []


def test_a_forward_dispatched_through_a_returned_bound_method(tmp_path, run_cli):
    # `self._forward = self.dispatch()` where dispatch returns `self.forward_cuda` on the
    # CUDA branch: a subclass's forward_cuda is hot through the base's forward; what the
    # other-platform branch returns is not.
    root = write_project(tmp_path, {
        "k/__init__.py": "",
        "k/custom_op.py": """
            import torch
            import vllm

            def is_rocm():
                return False

            class CustomOp(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self._forward = self.dispatch()

                def forward(self, *args):
                    return self._forward(*args)

                def forward_cuda(self, x):
                    raise NotImplementedError

                def forward_hip(self, x):
                    raise NotImplementedError

                def dispatch(self):
                    if is_rocm():
                        return self.forward_hip
                    return self.forward_cuda
        """,
        "k/norm.py": """
            import torch
            from k.custom_op import CustomOp

            class Norm(CustomOp):
                def forward_cuda(self, x: torch.Tensor):
                    return x.sum().item()

                def forward_hip(self, x: torch.Tensor):
                    return x.max().item()
        """,
    })
    found = [(f["path"], f["line"]) for f in sync_findings(run_cli, root)]
    assert found == [("k/norm.py", 7)]


def test_a_tensor_returned_by_an_imported_function(tmp_path, run_cli):
    # `from pkg.layout import local_lens as lens_of`: the project annotates it `-> Tensor`,
    # so under devices.default: cuda its result is taken to be on the GPU, through a method.
    root = write_project(tmp_path, {
        "p/__init__.py": "",
        "p/layout.py": """
            import torch

            def local_lens(lens: torch.Tensor, size: int) -> torch.Tensor:
                return lens // size

            def host_lens(lens, size):
                return lens
        """,
        "p/backend.py": """
            import torch
            import sglang
            from p.layout import local_lens as lens_of, host_lens

            class TritonAttnBackend:
                def _lens(self, lens):
                    return lens_of(lens, 2)

                def init_forward_metadata(self, batch):
                    lens = self._lens(batch.x)
                    other = host_lens(batch.x, 2)
                    return int(lens.sum().item()), int(other.sum().item())
        """,
    })
    found = [(f["path"], f["line"], f["code"]) for f in sync_findings(run_cli, root)]
    assert found == [("p/backend.py", 13, "RB102")]


def test_an_attribute_made_by_a_factory_annotated_with_its_class(tmp_path, run_cli):
    # `self.dispatcher = create_dispatcher()` (annotated `-> BaseDispatcher`): its calls
    # reach every implementation, and their `self._impl = _Impl()` (a private class).
    root = write_project(tmp_path, {
        "e/__init__.py": "",
        "e/dispatch.py": """
            import torch

            class BaseDispatcher:
                def dispatch(self, x):
                    raise NotImplementedError

            class _Impl:
                def run(self, x: torch.Tensor):
                    return x.sum().item()

            class FastDispatcher(BaseDispatcher):
                def __init__(self):
                    self._impl = _Impl()

                def dispatch(self, x):
                    return self._impl.run(x)

            def create_dispatcher() -> BaseDispatcher:
                return FastDispatcher()
        """,
        "e/layer.py": """
            import torch
            import sglang
            from e.dispatch import create_dispatcher

            class MoE(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.dispatcher = create_dispatcher()

                def forward(self, x):
                    return self.dispatcher.dispatch(x)
        """,
    })
    found = [(f["path"], f["line"]) for f in sync_findings(run_cli, root)]
    assert found == [("e/dispatch.py", 10)]


def test_a_logging_level_guard_is_off_the_per_step_path(tmp_path, run_cli):
    root = write_project(tmp_path, {"r/__init__.py": "", "r/runner.py": """
        import torch
        import vllm

        _KERNEL_LOG_LEVEL = 0

        class ModelRunner:
            def execute_model(self, x: torch.Tensor):
                if _KERNEL_LOG_LEVEL >= 5:
                    print(x.sum().item())
                if self.enable_logging:
                    print(x.max().item())
                return x.min().item()
    """})
    assert [f["line"] for f in sync_findings(run_cli, root)] == [13]


def test_a_mixin_method_is_an_entry_point_of_the_class_that_inherits_it(tmp_path, run_cli):
    # The pack names `*Scheduler.event_loop_*`; the event loop is written in a mixin that
    # Scheduler inherits. A subclass that overrides it is judged by its own method.
    root = write_project(tmp_path, {
        "s/__init__.py": "",
        "s/mixin.py": """
            import torch

            class DecodeMixin:
                def event_loop_decode(self):
                    flags = torch.ones(4, device="cuda")
                    return flags.sum().item()
        """,
        "s/scheduler.py": """
            import sglang
            from s.mixin import DecodeMixin

            class Scheduler(DecodeMixin):
                pass

            class Helper(DecodeMixin):
                pass
        """,
    })
    found = [(f["path"], f["line"]) for f in sync_findings(run_cli, root)]
    assert found == [("s/mixin.py", 7)]
    assert "Scheduler.event_loop_decode (inherited DecodeMixin.event_loop_decode)" in \
        sync_findings(run_cli, root)[0]["message"]
    # Without a subclass the pack names, the mixin's loop is not an entry point.
    (root / "s" / "scheduler.py").write_text("import sglang\nfrom s.mixin import DecodeMixin\n"
                                              "class Helper(DecodeMixin):\n    pass\n",
                                              encoding="utf-8")
    assert sync_findings(run_cli, root) == []


def test_the_last_operand_of_a_boolean_operator_used_as_a_value_is_not_tested(tmp_path, run_cli):
    # `a and t` as a value returns `t` itself; in a condition (or before the last operand)
    # the CUDA tensor is converted to bool, which syncs.
    root = write_project(tmp_path, {"r/__init__.py": "", "r/runner.py": """
        import torch
        import vllm

        class ModelRunner:
            def execute_model(self, state, flag: bool):
                t = torch.ones(4, device="cuda")
                passed = state and t
                first = t or state
                if flag and t:
                    pass
                return passed, first
    """})
    found = sorted(f["line"] for f in sync_findings(run_cli, root))
    assert found == [9, 10]


def test_values_chosen_or_counted_from_a_mask_are_not_a_mask(tmp_path, run_cli):
    root = write_project(tmp_path, {"r/__init__.py": "", "r/runner.py": """
        import torch
        import vllm

        class ModelRunner:
            def execute_model(self, x: torch.Tensor, table: torch.Tensor):
                valid = x > 0
                rows = torch.where(valid, x, 0)
                counts = torch.cumsum(valid, 0)
                both = torch.where(valid, valid, x < 5)
                return table[rows], table[counts], table[both]
    """})
    found = [(f["code"], f["line"], f["column"]) for f in sync_findings(run_cli, root)]
    assert [(c, l) for c, l, _ in found] == [("RB104", 11)]
    assert "table[both]" in sync_findings(run_cli, root)[0]["message"]


def test_a_built_class_wins_over_an_unannotated_factory_for_an_attribute(tmp_path, run_cli):
    # `self.proposer = get_proposer()` (no return annotation) first, `Proposer()` later:
    # the attribute is a Proposer, so its method in another module is hot.
    root = write_project(tmp_path, {
        "r/__init__.py": "",
        "r/spec.py": """
            import torch

            def get_proposer():
                return None

            class Proposer:
                def score(self, x: torch.Tensor):
                    return x.sum().item()
        """,
        "r/runner.py": """
            import vllm
            from r.spec import Proposer, get_proposer

            class ModelRunner:
                def __init__(self):
                    self.proposer = get_proposer()

                def load_model(self):
                    self.proposer = Proposer()

                def execute_model(self, x):
                    return self.proposer.score(x)
        """,
    })
    assert [(f["path"], f["line"]) for f in sync_findings(run_cli, root)] == [("r/spec.py", 9)]


def test_python_values_the_code_shows_whatever_names_and_annotations_say(tmp_path, run_cli):
    # A function annotated `-> torch.Tensor` that returns `.item()`, a str method that shares
    # its name with a project function returning a tensor, a shape's element, and the
    # metadata of a module's parameter: all Python values, none of them a sync.
    root = write_project(tmp_path, {
        "p/__init__.py": "",
        "p/utils.py": """
            import torch

            def count_pages(lens: torch.Tensor, size: int) -> torch.Tensor:
                return (lens // size).sum().item()

            def pages_tensor(lens: torch.Tensor, size: int) -> torch.Tensor:
                return lens // size

            def split(x: torch.Tensor, n: int) -> torch.Tensor:
                return x[:n]
        """,
        "p/backend.py": """
            import torch
            import sglang
            from p.utils import count_pages, pages_tensor

            class TritonAttnBackend:
                def __init__(self):
                    self.proj = torch.nn.Linear(4, 4)

                def init_forward_metadata(self, batch, name):
                    pages = count_pages(batch.lens_cpu, 4)
                    if pages > 2:
                        return None
                    layer = int(name.split(".")[-1])
                    if batch.x.shape[1] > 4:
                        return layer
                    if self.proj.weight.dim() != 2 or not self.proj.weight.is_contiguous():
                        return None
                    if pages_tensor(batch.lens, 4) > 2:
                        return None
                    return layer
        """,
    })
    found = [(f["path"], f["line"], f["code"]) for f in sync_findings(run_cli, root)]
    assert found == [("p/backend.py", 19, "RB104")]


@pytest.mark.parametrize("inherited_on_cuda,expected", [
    (False, {("eng/lora/wrapper_gpu.py", 7, "RB102")}),
    # A subclass on the CUDA path inherits the base's method: the base's syncs are hot too.
    (True, {("eng/lora/wrapper_gpu.py", 7, "RB102"), ("eng/lora/wrapper_base.py", 9, "RB101"),
            ("eng/lora/wrapper_base.py", 9, "RB104")}),
])
def test_a_base_method_every_cuda_subclass_overrides_is_not_hot(tmp_path, run_cli,
                                                                inherited_on_cuda, expected):
    files = {
        "eng/__init__.py": "",
        "eng/lora/__init__.py": "",
        "eng/runner.py": """
            import torch
            import vllm
            from eng.lora.wrapper_base import WrapperBase

            class ModelRunner:
                def __init__(self, wrapper: WrapperBase):
                    self.wrapper = wrapper

                def execute_model(self, mapping: torch.Tensor):
                    return self.wrapper.update(mapping)
        """,
        "eng/lora/wrapper_base.py": """
            import torch

            class WrapperBase:
                def update(self, mapping: torch.Tensor):
                    return self._prefill(mapping)

                def _prefill(self, mapping: torch.Tensor):
                    return mapping.unique().tolist()
        """,
        "eng/lora/wrapper_gpu.py": """
            import torch
            from eng.lora.wrapper_base import WrapperBase

            class WrapperGPU(WrapperBase):
                def update(self, mapping: torch.Tensor):
                    return mapping.max().item()
        """,
        "eng/lora/wrapper_cpu.py": """
            from eng.lora.wrapper_base import WrapperBase

            class WrapperCPU(WrapperBase):
                pass
        """,
    }
    if inherited_on_cuda:
        files["eng/lora/wrapper_triton.py"] = (
            "from eng.lora.wrapper_base import WrapperBase\n\n\n"
            "class WrapperTriton(WrapperBase):\n    pass\n")
    root = write_project(tmp_path, files, config='devices = {default = "cuda"}\n')
    found = {(f["path"], f["line"], f["code"]) for f in sync_findings(run_cli, root)}
    assert found == expected


def test_one_item_of_a_kept_field_and_a_kept_key_stay_on_the_host(tmp_path, run_cli):
    # `image_spatial_crop` is one row of the kept `images_spatial_crop`; `kwargs.get(...)` and
    # `kwargs[...]` of a kept key are host tensors too. Other keys are not.
    root = write_project(tmp_path, {
        "mm/__init__.py": "",
        "mm/model.py": """
            import torch
            import vllm

            def fields(Field):
                return dict(images_spatial_crop=Field.batched("image", keep_on_cpu=True),
                            video_counts=Field.batched("video", keep_on_cpu=True),
                            pixel_values=Field.batched("image"))

            class Model(torch.nn.Module):
                def forward(self, image_spatial_crop: torch.Tensor, **kwargs):
                    n = int(image_spatial_crop.prod().item())
                    self._read(kwargs.get("video_counts"))
                    self._read(kwargs["video_counts"])
                    return self._pixels(kwargs["pixel_values"])

                def _read(self, counts: torch.Tensor):
                    return counts.tolist()

                def _pixels(self, pixels: torch.Tensor):
                    return pixels.tolist()
        """,
    }, config='devices = {default = "cuda"}\n')
    found = [(f["path"], f["line"]) for f in sync_findings(run_cli, root)]
    assert found == [("mm/model.py", 21)]


@pytest.mark.parametrize("receiver,expected", [
    ("markov_head", {("eng/heads.py", 7, "RB102")}),
    # A name that speaks of no candidate's class: every method of that name may run.
    ("thing", {("eng/heads.py", 7, "RB102"), ("eng/lora.py", 7, "RB101")}),
])
def test_a_method_on_an_unknown_object_is_chosen_by_the_objects_name(tmp_path, run_cli,
                                                                     receiver, expected):
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/runner.py": f"""
            import torch
            import vllm

            def draft_block({receiver}, hidden):
                return {receiver}.init_state(hidden)

            class ModelRunner:
                def execute_model(self, head, hidden):
                    return draft_block(head, hidden)
        """,
        "eng/heads.py": """
            import torch

            class GatedMarkovHead:
                def init_state(self, hidden):
                    state = torch.zeros(4, device="cuda")
                    return state.sum().item()
        """,
        "eng/lora.py": """
            import torch

            class LoRAManager:
                def init_state(self, paths=None):
                    slots = torch.zeros(4, device="cuda")
                    return slots.tolist()
        """,
    })
    found = {(f["path"], f["line"], f["code"]) for f in sync_findings(run_cli, root)}
    assert found == expected


def test_a_union_of_a_tensor_and_containers_is_a_tensor_field():
    summary = summarise(textwrap.dedent("""
        from typing import List, Optional, Union
        import torch

        class Result:
            ids: Optional[Union[torch.Tensor, List[torch.Tensor], List[List[int]]]] = None
            rows: torch.Tensor | list[int] | None = None
            count: Union[torch.Tensor, int] = 0
            lens: Union[List[int], List[List[int]]] = None
    """), "p.result")
    assert summary["classes"]["Result"]["fields"] == {
        "ids": "tensor", "rows": "tensor", "lens": "host"}


def test_a_tensor_function_of_host_tensors_returns_a_host_tensor(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "p/__init__.py": "",
        "p/layout.py": """
            import torch

            def local_lens(lens: torch.Tensor, size: int) -> torch.Tensor:
                return lens // size
        """,
        "p/backend.py": """
            import torch
            import sglang
            from p.layout import local_lens

            class TritonAttnBackend:
                def init_forward_metadata(self, batch):
                    host = local_lens(batch.seq_lens_cpu, 2).tolist()
                    return local_lens(batch.seq_lens, 2).tolist()
        """,
    }, config='devices = {default = "cuda"}\n')
    found = [(f["path"], f["line"], f["code"]) for f in sync_findings(run_cli, root)]
    assert found == [("p/backend.py", 9, "RB101")]


def test_a_tensor_function_given_a_device_may_return_a_gpu_tensor(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "p/__init__.py": "",
        "p/utils.py": """
            import torch

            def async_h2d(data: torch.Tensor, target) -> torch.Tensor:
                return data.to(target, non_blocking=True)
        """,
        "p/model.py": """
            import torch
            import sglang
            from p.utils import async_h2d

            class TritonAttnBackend:
                def init_forward_metadata(self, batch, x):
                    lens = async_h2d(batch.seq_lens_cpu, x.device)
                    return lens.tolist()
        """,
    }, config='devices = {default = "cuda"}\n')
    found = [(f["path"], f["line"], f["code"]) for f in sync_findings(run_cli, root)]
    assert found == [("p/model.py", 9, "RB101")]


def test_arguments_unpacked_from_a_tuple_keep_their_devices(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "mm/__init__.py": "",
        "mm/model.py": """
            import torch
            import vllm

            def fields(Field):
                return dict(video_counts=Field.batched("video", keep_on_cpu=True))

            class Model(torch.nn.Module):
                def forward(self, **kwargs):
                    inputs = (kwargs.get("video_counts"), torch.ones(2, device="cuda"))
                    return self._video(*inputs)

                def _video(self, counts: torch.Tensor, frames: torch.Tensor):
                    return counts.tolist(), frames.tolist()
        """,
    }, config='devices = {default = "cuda"}\n')
    found = [(f["path"], f["line"], f["column"]) for f in sync_findings(run_cli, root)]
    assert found == [("mm/model.py", 14, 33)]
    assert "allocated on the device 'cuda'" in sync_findings(run_cli, root)[0]["message"]


def test_settings_flags_and_class_constants_are_python_values(tmp_path, run_cli):
    # Another class declares tensors under the same names: a configuration object's
    # attribute, a predicate method of a module and a class-level constant are still values.
    root = write_project(tmp_path, {
        "m/__init__.py": "",
        "m/state.py": """
            from dataclasses import dataclass
            import torch

            @dataclass
            class State:
                post_norm: torch.Tensor
                fused: torch.Tensor
        """,
        "m/model.py": """
            import torch
            import vllm

            class VitConfig:
                image_size: int = 224

                def __init__(self, post_norm=True):
                    self.post_norm = post_norm

            class Norm(torch.nn.Module):
                fused = True

                def wants_fp32_input(self, n):
                    return n > 4

            class Vit(torch.nn.Module):
                def __init__(self, config: VitConfig):
                    super().__init__()
                    self.config = config
                    self.norm = Norm()

                def forward(self, x: torch.Tensor, norm: Norm):
                    if self.config.post_norm and norm.fused:
                        x = x * 2
                    if self.norm.wants_fp32_input(x.shape[0]):
                        x = x.float()
                    if x.sum() > 0:
                        return x
                    return -x
        """,
    }, config='devices = {default = "cuda"}\n')
    found = [(f["path"], f["line"], f["code"]) for f in sync_findings(run_cli, root)]
    assert found == [("m/model.py", 28, "RB104")]


def test_mixed_callers_objects_named_after_their_class_and_array_unions(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/outputs.py": """
            from typing import NamedTuple
            import numpy as np
            import torch

            class TokenTensors(NamedTuple):
                ids: torch.Tensor

                def tolists(self):
                    return self.ids.cpu().numpy()

            def parse(token_ids: torch.Tensor, vocab: int):
                return token_ids.cpu().numpy()

            def only_host(token_ids: torch.Tensor):
                return token_ids.cpu().numpy()

            def to_host(x: torch.Tensor | np.ndarray | list, out):
                n = len(x)
                out[:n] = x
                return x.cpu()
        """,
        "eng/runner.py": """
            import torch
            from eng.outputs import TokenTensors, only_host, parse, to_host

            class ModelRunner:
                def __init__(self):
                    self.ids_cpu = torch.zeros(8, dtype=torch.int64, pin_memory=True)

                def execute_model(self, sampled, token_tensors):
                    ids = sampled.sampled_token_ids
                    a = parse(self.ids_cpu, 4)      # a host value here ...
                    b = self._bookkeeping(ids)
                    c = only_host(self.ids_cpu)     # every hot caller passes a host value
                    d = token_tensors.tolists()     # named after its class
                    e = to_host(ids, self.ids_cpu)  # a tensor or an array
                    return a, b, c, d, e

                def _bookkeeping(self, ids):
                    return parse(ids, 4)            # ... not here: it may be on the GPU
        """,
    }, 'devices = { default = "cuda" }\n')
    found = {(f["path"], f["line"]) for f in sync_findings(run_cli, root)}
    assert ("eng/outputs.py", 13) in found  # parse: one hot caller passes a GPU tensor
    assert ("eng/outputs.py", 10) in found  # TokenTensors.tolists is hot
    assert ("eng/outputs.py", 16) not in found  # only_host: host values only
    assert ("eng/outputs.py", 21) not in found  # `torch.Tensor | np.ndarray`: not the GPU


def test_a_serving_loop_that_runs_a_batch_is_hot_without_an_engine_pack(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "srv/__init__.py": "",
        "srv/loop.py": """
            import torch

            class Server:
                def __init__(self):
                    self.lens = torch.zeros(8, dtype=torch.int64, device="cuda")

                def serve_forever(self):
                    while True:
                        batch = self.next_batch()
                        self.run_batch(batch)

                def next_batch(self):
                    return int(self.lens.sum().item())

                def run_batch(self, batch):
                    return batch

                def report(self):
                    return int(self.lens.sum().item())
        """,
    }, 'engine-packs = false\ndevices = { default = "cuda" }\n')
    found = {(f["path"], f["line"]) for f in sync_findings(run_cli, root)}
    assert ("srv/loop.py", 14) in found  # called by the loop that runs a batch
    assert ("srv/loop.py", 20) not in found  # called by nothing per step


def test_a_benchmark_loop_is_not_the_engines_per_step_code(tmp_path, run_cli):
    step = """
        import torch

        class Bench:
            def __init__(self, runner):
                self.runner = runner
                self.out = torch.zeros(8, device="cuda")

            def run(self, steps):
                for _ in range(steps):
                    self.runner.execute_model(None)
                    err = self.out.abs().max().item()
                return err
    """
    root = write_project(tmp_path, {"eng/__init__.py": "", "eng/bench.py": step,
                                    "eng/benchmarks/__init__.py": "",
                                    "eng/benchmarks/forward.py": step},
                         'devices = { default = "cuda" }\n')
    found = {(f["path"], f["line"]) for f in sync_findings(run_cli, root)}
    assert ("eng/bench.py", 12) in found
    assert ("eng/benchmarks/forward.py", 12) not in found


def test_the_values_of_a_mapping_field_declared_to_hold_tensors(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/info.py": """
            import dataclasses
            from typing import Dict, Optional, Tuple
            import torch

            @dataclasses.dataclass
            class BatchInfo:
                processors: Optional[Dict[int, Tuple[object, torch.Tensor]]] = None
                masks: Dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
                names: Dict[str, Tuple[str, int]] = dataclasses.field(default_factory=dict)
        """,
        "eng/sampler.py": """
            import torch
            from eng.info import BatchInfo

            class Sampler:
                def forward(self, logits: torch.Tensor, info: BatchInfo):
                    for _, (processor, mask) in info.processors.items():
                        rows = mask.nonzero()
                    kept = {k: m for k, m in info.masks.items() if m.any()}
                    for name, count in info.names.values():
                        if count:
                            pass
                    return rows, kept
        """,
    }, 'devices = { default = "cuda" }\n')
    found = {(f["path"], f["line"]) for f in sync_findings(run_cli, root)}
    assert ("eng/sampler.py", 8) in found  # the tuple's tensor
    assert ("eng/sampler.py", 9) in found  # a mapping of tensors, in a comprehension
    assert ("eng/sampler.py", 11) not in found  # no tensor among the values


def test_values_a_reader_knows_are_not_cuda_tensors_or_per_step(tmp_path, run_cli):
    # Each quiet line is a sync-looking call that a reader of the code knows is harmless:
    # a method no tensor has, the else of a named isinstance test, the parts a module walk
    # yields, a test for another device type, work once per key or per cache, tensors a
    # comment declares on the host. The last line is the control: still reported.
    root = write_project(tmp_path, {"e/__init__.py": "", "e/meta.py": """
        from dataclasses import dataclass
        import torch

        @dataclass
        class PoolMeta:
            prompt_lens: torch.Tensor  # CPU tensor
            token_ids: torch.Tensor
    """, "e/runner.py": """
        import torch
        import vllm
        from e.meta import PoolMeta

        class ModelRunner:
            pools = {}

            def __init__(self):
                self.model = torch.nn.Linear(4, 4)

            def execute_model(self, norm: torch.Tensor, alpha: torch.Tensor, z: torch.Tensor,
                              counts: torch.Tensor,  # host tensor, filled by the scheduler
                              meta: PoolMeta):
                if norm.fused_kernel_ok(z):
                    pass
                is_tensor = isinstance(alpha, torch.Tensor)
                if is_tensor:
                    pass
                else:
                    scale = float(alpha)
                for prefix, part in self.model.named_modules():
                    if prefix:
                        pass
                if z.device.type == "mps":
                    z = z.to("cpu")
                self.first_launch(z)
                pool = self.pools.get(z.shape[0])
                if pool is None:
                    torch.cuda.synchronize()
                    self.pools[z.shape[0]] = pool = object()
                lens = meta.prompt_lens.tolist()
                ids = meta.token_ids.tolist()
                return counts.tolist(), lens, ids

            def first_launch(self, z):
                key = z.shape
                if key in self._launched:
                    return
                torch.cuda.synchronize()
                self._launched.add(key)
    """})
    found = [(f["line"], f["code"]) for f in sync_findings(run_cli, root)]
    assert found == [(33, "RB101")]


def test_the_block_for_a_left_out_argument_is_quiet_when_every_hot_caller_passes_it(
        tmp_path, run_cli):
    # `plan` and `key_of` read the GPU only when a caller leaves out the host copy; every
    # hot caller passes it (directly, or through a parameter its own caller fills), so
    # those blocks are not per step. `span` is given a field that may be None. A flag every
    # hot caller sets (`top`) decides its test; one left to its default does not.
    root = write_project(tmp_path, {"e/__init__.py": "", "e/attn.py": """
        import torch

        def plan(lens: torch.Tensor, lens_host=None):
            if lens_host is None:
                n = lens.tolist()
            else:
                n = lens_host
            return n

        def key_of(lens: torch.Tensor, layout=None):
            if layout is not None:
                return layout
            return tuple(lens.tolist())

        def span(lens: torch.Tensor, sizes_host=None):
            if sizes_host is None:
                n = lens.tolist()
            else:
                n = sizes_host
            return n

        def forward_plan(lens: torch.Tensor, lens_host=None):
            return plan(lens, lens_host=lens_host)

        def top(values: torch.Tensor, no_copy: bool = False):
            if not no_copy:
                values = values.tolist()
            return values

        def top_default(values: torch.Tensor, no_copy: bool = False):
            if not no_copy:
                values = values.tolist()
            return values
    """, "e/runner.py": """
        import torch
        import vllm
        from e.attn import forward_plan, key_of, plan, span, top, top_default

        class ModelRunner:
            def execute_model(self, lens: torch.Tensor, batch):
                bounds = [0, 4]
                plan(lens, lens_host=tuple(bounds))
                forward_plan(lens, lens_host=bounds)
                key_of(lens, layout=("ragged", 4))
                top(lens, no_copy=True)
                top_default(lens)  # the default: copies
                return span(lens, sizes_host=batch.sizes_host)
    """})
    found = [(f["path"], f["line"]) for f in sync_findings(run_cli, root)]
    assert found == [("e/attn.py", 18), ("e/attn.py", 33)]


def test_preempting_a_request_is_a_rare_event_not_a_step(tmp_path, run_cli):
    root = write_project(tmp_path, {"e/__init__.py": "", "e/sched.py": """
        import torch

        class Scheduler:
            def schedule(self):
                self.preempt_to_schedule()
                return self.plan()

            def preempt_to_schedule(self):
                return torch.ones(4, device="cuda").tolist()

            def plan(self):
                return torch.ones(4, device="cuda").tolist()
    """})
    assert [f["line"] for f in sync_findings(run_cli, root)] == [13]


def test_a_summary_whose_call_records_have_the_wrong_shape_is_recomputed():
    from reviewbot.analysis.project import _valid_summary

    good = summarise("def f(x, p=None):\n    if p is None:\n        g(k=1)\n", "m")
    assert _valid_summary(good) and good["functions"]["f"]["passes"] == {"g:k": ""}
    for key, bad in (("passes", ["g:k"]), ("passes", {"g:k": 1}), ("none_guards", [3])):
        broken = json.loads(json.dumps(good))
        broken["functions"]["f"][key] = bad
        assert not _valid_summary(broken), (key, bad)


def test_a_summary_whose_predicate_records_have_the_wrong_shape_is_recomputed():
    # What a cache file says of predicates, their blocks and a class's host copies is
    # checked like the rest: a wrong shape makes the file's summary be made again.
    from reviewbot.analysis.project import _valid_summary

    good = summarise("import os\n"
                     "def on():\n    return os.environ.get('X') == '1'\n"
                     "def g(x):\n    return x\n"
                     "def f(x):\n    if on():\n        g(x)\n"
                     "class C:\n    def __init__(self, t):\n        self.h = t.cpu()\n", "m")
    functions = good["functions"]
    assert _valid_summary(good) and functions["on"]["predicate"] == [1, 0]
    assert functions["f"]["pred_blocks"] == [["Q:m.on", 0, ["Q:m.g"], []]]
    assert good["classes"]["C"]["copies"] == {"h": True}
    for where, key, bad in (("f", "pred_blocks", "Q:m.on"),
                            ("f", "pred_blocks", [["Q:m.on", 0, "g", []]]),
                            ("f", "pred_blocks", [["Q:m.on", 2, [], []]]),
                            ("on", "predicate", [2, 0]), ("on", "predicate", "yes")):
        broken = json.loads(json.dumps(good))
        broken["functions"][where][key] = bad
        assert not _valid_summary(broken), (key, bad)
    broken = json.loads(json.dumps(good))
    broken["classes"]["C"]["copies"] = {"h": "yes"}
    assert not _valid_summary(broken)


def test_host_evidence_a_reader_sees_wins_over_the_default_device(tmp_path, run_cli):
    # Each pair: the same readback, once where the code says the value is on the host (not
    # reported) and once where nothing does (reported).
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/lens.py": """
            import torch

            def lengths(batch) -> torch.Tensor:
                return batch.lens
        """,
        "eng/runner.py": """
            import torch
            from eng.lens import lengths

            class ModelRunner:
                def execute_model(self, batch, ids: torch.Tensor):
                    lens_cpu = lengths(batch)
                    a = lens_cpu.sum().item()
                    lens = lengths(batch)
                    b = lens.sum().item()
                    with torch.device("cpu"):
                        made = lengths(batch)
                        c = made.max().item()
                    d = ids.numpy()
                    e = ids.numpy(force=True)
                    return a, b, c, d, e
        """,
        "eng/vision.py": """
            import torch

            class Merger(torch.nn.Module):
                def forward(self, hidden: torch.Tensor, image_sizes: torch.Tensor,
                            grid_thw: torch.Tensor, lens: torch.Tensor):
                    n = image_sizes.tolist()
                    m = grid_thw.tolist()
                    moved = grid_thw.to(hidden.device)
                    return n, m, moved.tolist(), lens.tolist()
        """,
    }, config='devices = {default = "cuda"}\n')
    found = sync_sites(run_cli, root)
    assert found == [("eng/runner.py", 10, "RB102"), ("eng/runner.py", 15, "RB103"),
                     ("eng/vision.py", 10, "RB101"), ("eng/vision.py", 10, "RB101")], found
    messages = sorted(f["message"].partition(" in hot path")[0]
                      for f in sync_findings(run_cli, root) if f["path"] == "eng/vision.py")
    assert messages == ["`.tolist()` on `lens`", "`.tolist()` on `moved`"], messages


def test_values_used_under_the_cpu_device_and_calls_of_builtin_method_names(tmp_path,
                                                                           run_cli):
    # A tensor that is CUDA only by devices.default is a host value where the code works on
    # it under `with torch.device("cpu")`; one made on the GPU is not. A call of a built-in
    # type's method on an object of unknown type (`self.hash.to_bytes`) is not taken for
    # the project's method of that name; a name no built-in has still is.
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/serde.py": """
            import torch

            class Serializer:
                def to_bytes(self, t: torch.Tensor):
                    return t.cpu().numpy().tobytes()

                def pack_tensor(self, t: torch.Tensor):
                    return t.cpu().numpy().tobytes()
        """,
        "eng/runner.py": """
            import torch

            class ModelRunner:
                def __init__(self):
                    self.buf = torch.zeros(8, device="cuda")

                def execute_model(self, batch, weights: torch.Tensor, other: torch.Tensor):
                    with torch.device("cpu"):
                        uniq, counts = torch.unique_consecutive(weights, return_counts=True)
                        a = counts.tolist()
                        b = self.buf.tolist()
                    c = other.tolist()
                    key = self.hash.to_bytes(8, "big")
                    packed = self.codec.pack_tensor(other)
                    return a, b, c, key, packed
        """,
    }, config='devices = {default = "cuda"}\n')
    found = sync_sites(run_cli, root)
    assert found == [("eng/runner.py", 12, "RB101"), ("eng/runner.py", 13, "RB101"),
                     ("eng/serde.py", 9, "RB103")], found


def test_a_negated_debug_flag_in_a_condition_is_no_debug_guard(tmp_path, run_cli):
    # `if x and not self.debug:` runs when debugging is off, on the usual path; `if x and
    # self.debug:` runs only when debugging.
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/runner.py": """
            import torch

            class ModelRunner:
                def __init__(self):
                    self.buf = torch.zeros(8, device="cuda")

                def execute_model(self, batch):
                    if batch and not self.debug:
                        a = self.buf.tolist()
                    if batch and self.debug:
                        b = self.buf.tolist()
                    return batch
        """,
    })
    assert sync_sites(run_cli, root) == [("eng/runner.py", 10, "RB101")]


def test_a_check_that_runs_only_for_float16_activations_is_not_per_step(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/encoder.py": """
            import torch

            class AudioEncoder(torch.nn.Module):
                def forward(self, hidden: torch.Tensor):
                    if hidden.dtype == torch.float16 and torch.isinf(hidden).any():
                        hidden = hidden.clamp(-1000, 1000)
                    if torch.half == hidden.dtype:
                        n = hidden.abs().max().item()
                    if hidden.dtype == torch.bfloat16 and torch.isnan(hidden).any():
                        hidden = hidden.nan_to_num()
                    return hidden
        """,
    }, config='devices = {default = "cuda"}\n')
    found = sync_sites(run_cli, root)
    assert found == [("eng/encoder.py", 10, "RB104")], found


def test_a_worker_of_a_class_chosen_at_run_time_and_guards_that_or_and_negate(tmp_path,
                                                                             run_cli):
    # The serving loop's worker is built from a class picked at run time: every project
    # implementation of the method it calls is on the hot path, though there are more than a
    # few of them and they share no base class.
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/workers.py": "\nimport torch\n" + "".join(
            f"\nclass Worker{i}:\n    def __init__(self):\n"
            f"        self.buf = torch.zeros(8, device='cuda')\n\n"
            f"    def generate_tokens(self, batch):\n        return self.buf.tolist()\n"
            for i in range(4)),
        "eng/scheduler.py": """
            import torch
            from eng.platforms import is_npu, is_cuda, is_hip

            def pick_worker(name):
                return None

            class Scheduler:
                def __init__(self, algo):
                    WorkerClass = pick_worker(algo)
                    self.draft_worker = WorkerClass()
                    self.model_worker = self.draft_worker
                    self.buf = torch.zeros(8, device="cuda")

                def event_loop(self):
                    while True:
                        self.run_batch(self.next_batch())

                def run_batch(self, batch):
                    self.renorm(batch)
                    return self.model_worker.generate_tokens(batch)

                def renorm(self, batch):
                    if not (is_cuda() or is_hip()):
                        a = self.buf.tolist()
                    if not is_npu() or batch is None:
                        return None
                    return self.buf.tolist()
        """,
        "eng/platforms.py": """
            def is_npu():
                return False

            def is_cuda():
                return True

            def is_hip():
                return False
        """,
    })
    found = sync_sites(run_cli, root)
    assert found == [("eng/workers.py", 9 + 7 * i, "RB101") for i in range(4)], found


def test_a_field_named_as_a_shape_gets_no_default_device(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/batch.py": """
            from dataclasses import dataclass
            import torch

            @dataclass
            class Batch:
                raw_latent_shape: torch.Tensor
                latent_lens: torch.Tensor
        """,
        "eng/runner.py": """
            import torch
            from eng.batch import Batch

            class ModelRunner:
                def execute_model(self, batch: Batch):
                    frames = int(batch.raw_latent_shape[1])
                    longest = int(batch.latent_lens[0])
                    return frames, longest
        """,
    }, config='devices = {default = "cuda"}\n')
    found = sync_sites(run_cli, root)
    assert found == [("eng/runner.py", 8, "RB104")], found


def test_getattr_gives_the_attribute_not_a_python_value(tmp_path, run_cli):
    # `getattr(self, name)` may be a tensor field: it is not a Python container that a CUDA
    # index would be read into, as a list is.
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/runner.py": """
            import torch

            class ModelRunner:
                def __init__(self):
                    self.temperatures = torch.ones(8, device="cuda")
                    self.top_ps = torch.ones(8, device="cuda")

                def execute_model(self, keep: torch.Tensor):
                    keep = keep.to("cuda")
                    for name in ("temperatures", "top_ps"):
                        value = getattr(self, name, None)
                        if value is not None:
                            setattr(self, name, value[keep])
                    names = ["temperatures", "top_ps"]
                    return names[keep[0]]
        """,
    })
    found = sync_sites(run_cli, root)
    assert found == [("eng/runner.py", 16, "RB104")], found


def test_other_platform_settings_and_graph_capture_are_not_per_step(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/runner.py": """
            import torch

            class ModelRunner:
                def __init__(self):
                    self.buf = torch.zeros(8, device="cuda")
                    self.graphs = {}

                def execute_model(self, batch):
                    if self.io_backend == "kernel_ascend":
                        a = self.buf.cpu()
                    if self.impl in ("intel_xpu", "npu"):
                        b = self.buf.tolist()
                    if self.impl != "intel_xpu":
                        c = self.buf.tolist()
                    else:
                        d = self.buf.tolist()
                    if self.mode == "cpu_offload":
                        e = self.buf.tolist()
                    if batch.key not in self.graphs:
                        self._capture(batch.key)
                    return self.graphs[batch.key].replay()

                def _capture(self, key):
                    n = int(self.buf.max().item())
                    torch.cuda.synchronize()
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        self.buf.add_(n)
                    self.graphs[key] = g
        """,
    })
    found = sorted((f["line"], f["code"]) for f in sync_findings(run_cli, root))
    assert found == [(15, "RB101"), (19, "RB101")], found


@pytest.mark.parametrize("call,expected", [
    ("rows(self.buf, no_copy=True)", []),
    ("forward_rows(self.buf, no_copy=True)", []),  # passed on by a wrapper
    ("rows(self.buf)", [("eng/rows.py", 5)]),
    ("forward_rows(self.buf, no_copy=False)", [("eng/rows.py", 5)]),
])
def test_a_conditional_expression_on_a_flag_every_hot_caller_sets(tmp_path, run_cli, call,
                                                                   expected):
    root = write_project(tmp_path, {
        "eng/__init__.py": "",
        "eng/rows.py": """
            import torch

            def rows(t: torch.Tensor, no_copy: bool = False):
                return t if no_copy else t.tolist()

            def forward_rows(t: torch.Tensor, no_copy: bool = False):
                return rows(t, no_copy=no_copy)
        """,
        "eng/runner.py": f"""
            import torch
            from eng.rows import rows, forward_rows

            class ModelRunner:
                def __init__(self):
                    self.buf = torch.zeros(8, device="cuda")

                def execute_model(self, batch):
                    return {call}
        """,
    })
    found = [(f["path"], f["line"]) for f in sync_findings(run_cli, root)]
    assert found == expected


def test_a_property_that_hands_out_an_attribute_gives_its_class(tmp_path, run_cli):
    # `self.worker` is a base class's property returning `self._worker`, which the subclass
    # builds: the call reaches that class's method in another module, not the other
    # classes' methods of the same name (four of them: too many to link by name alone).
    others = "".join(f"""
            class Other{n}:
                def draft(self, x: torch.Tensor):
                    return x.max().item()
        """ for n in range(4))
    root = write_project(tmp_path, {
        "s/__init__.py": "",
        "s/drafts.py": """
            import torch

            class DraftWorker:
                def draft(self, x: torch.Tensor):
                    return x.sum().item()
        """ + others,
        "s/base.py": """
            class SpecWorkerBase:
                @property
                def worker(self):
                    \"\"\"The draft worker.\"\"\"
                    return self._worker
        """,
        "s/runner.py": """
            import vllm
            from s.base import SpecWorkerBase
            from s.drafts import DraftWorker

            class ModelRunner(SpecWorkerBase):
                def __init__(self):
                    self._worker = DraftWorker()

                def execute_model(self, x):
                    return self.worker.draft(x)
        """,
    })
    assert [(f["path"], f["line"]) for f in sync_findings(run_cli, root)] == [("s/drafts.py", 6)]


def test_what_a_cache_fill_calls_runs_once_not_per_step(tmp_path, run_cli):
    # `if self._bitmask is None: ...; self._bitmask = self.backend.allocate(...)` fills a
    # cache on the first step only: the helper it calls (in another module) is not hot, so
    # its pinned allocation is not per step. The same helper called every step is.
    root = write_project(tmp_path, {
        "g/__init__.py": "",
        "g/backend.py": """
            import torch

            class Backend:
                def allocate(self, n):
                    return torch.full((n, 4), -1, dtype=torch.int32, pin_memory=True)

                def fresh(self, n):
                    return torch.full((n, 4), -1, dtype=torch.int32, pin_memory=True)
        """,
        "g/manager.py": """
            import vllm
            from g.backend import Backend

            class Scheduler:
                def __init__(self):
                    self.backend = Backend()
                    self._bitmask = None

                def schedule(self, ids):
                    if self._bitmask is None:
                        assert self.backend is not None
                        size = len(ids) * 4
                        self._bitmask = self.backend.allocate(size)
                    return self._bitmask, self.backend.fresh(len(ids))
        """,
    })
    result = run_cli(["check", ".", "--no-cache", "--select", "RB202", "--output-format",
                      "json"], cwd=root)
    assert [(f["path"], f["line"]) for f in json.loads(result.out)] == [("g/backend.py", 9)]


def test_a_module_that_never_names_torch_still_reads_cuda_tensors(tmp_path, run_cli):
    # The scorer's module imports no torch: the proposals it reads are another module's
    # CUDA tensors, and its `.tolist()` runs every step.
    root = write_project(tmp_path, {
        "e/__init__.py": "",
        "e/interfaces.py": """
            from dataclasses import dataclass

            import torch

            @dataclass
            class Proposals:
                token_ids: torch.Tensor
        """,
        "e/scorer.py": """
            from e.interfaces import Proposals

            class Scorer:
                def score(self, proposals: Proposals):
                    return proposals.token_ids.tolist()
        """,
        "e/worker.py": """
            import vllm
            from e.scorer import Scorer

            class SpecWorker:
                def __init__(self):
                    self.scorer = Scorer()

                def execute_model(self, proposals):
                    return self.scorer.score(proposals)
        """,
    })
    assert [(f["path"], f["line"], f["code"]) for f in sync_findings(run_cli, root)] == [
        ("e/scorer.py", 6, "RB101")]


def test_a_field_holding_another_class_gives_that_class_fields(tmp_path, run_cli):
    # `result: Union[GenResult, EmbResult]`; `GenResult.out` holds an `Out`, whose
    # `logprobs` is declared a tensor: `result.out.logprobs` is a CUDA tensor by default,
    # also through a tuple unpacked from the fields. A field of a host type stays host.
    root = write_project(tmp_path, {
        "q/__init__.py": "",
        "q/types.py": """
            from dataclasses import dataclass
            from typing import List, Optional

            import torch

            @dataclass
            class Out:
                logprobs: Optional[torch.Tensor] = None
                ids: Optional[List[int]] = None

            @dataclass
            class GenResult:
                out: Out
                bid: int

            @dataclass
            class EmbResult:
                emb: torch.Tensor
        """,
        "q/mixin.py": """
            from typing import Union

            from q.types import EmbResult, GenResult

            class OutputMixin:
                def process_batch_result(self, result: Union[GenResult, EmbResult]):
                    (out, bid) = (result.out, result.bid)
                    first = result.out.logprobs.tolist()
                    second = out.logprobs.tolist()
                    return first, second, out.ids.count(0)
        """,
        "q/scheduler.py": """
            import sglang
            from q.mixin import OutputMixin

            class Scheduler(OutputMixin):
                def event_loop(self, batches):
                    while True:
                        self.process_batch_result(self.run_batch(batches))
        """,
    })
    assert [(f["path"], f["line"]) for f in sync_findings(run_cli, root)] == [
        ("q/mixin.py", 9), ("q/mixin.py", 10)]


def test_a_parameter_annotated_with_a_module_class_runs_a_module(tmp_path, run_cli):
    # The sampler is handed to __init__ (annotated with an nn.Module class of another
    # module) and kept on self: what calling it returns is on the model's device.
    root = write_project(tmp_path, {
        "m/__init__.py": "",
        "m/samp.py": """
            import torch.nn as nn

            class SpecDecodeBaseSampler(nn.Module):
                def forward(self, x):
                    return x
        """,
        "m/worker.py": """
            import vllm
            from m.samp import SpecDecodeBaseSampler

            class SpecWorker:
                def __init__(self, spec_decode_sampler: SpecDecodeBaseSampler):
                    self.spec_decode_sampler = spec_decode_sampler

                def execute_model(self, probs):
                    ids = self.spec_decode_sampler(probs)
                    return ids.tolist()
        """,
    })
    assert [(f["path"], f["line"]) for f in sync_findings(run_cli, root)] == [("m/worker.py", 11)]


def test_a_zero_dim_host_tensor_in_an_op_on_cuda_tensors_leaves_it_on_the_gpu(tmp_path, run_cli):
    # `torch.tensor(window + 1)` is a 0-dim host tensor: PyTorch takes it as a number
    # beside CUDA tensors, so the minimum is on the GPU. A host tensor of several elements
    # would say the default device was wrong (tensors of one op share a device).
    root = write_project(tmp_path, {
        "f/__init__.py": "",
        "f/backend.py": """
            import torch
            import vllm

            class AttnMetadataBuilder:
                def build(self, seq_lens: torch.Tensor, window: int):
                    lens = torch.minimum(seq_lens, torch.tensor(window + 1))
                    total = lens.sum().item()
                    host = torch.minimum(seq_lens, torch.tensor([window, window]))
                    return total, host.sum().item()
        """,
    })
    assert [(f["path"], f["line"]) for f in sync_findings(run_cli, root)] == [("f/backend.py", 8)]


def test_a_method_the_annotated_class_lacks_is_found_by_name(tmp_path, run_cli):
    # The field is annotated `TokenAllocator`, which has no `alloc_extend`: the object is
    # a `PagedAllocator` (no common base), whose method is the one that runs.
    root = write_project(tmp_path, {
        "k/__init__.py": "",
        "k/pools.py": """
            import torch

            class TokenAllocator:
                def alloc(self, n):
                    return None

            class PagedAllocator:
                def __init__(self, device):
                    self.ret = torch.empty((), dtype=torch.int64, device=device)

                def alloc_extend(self, n):
                    return self.ret.item()
        """,
        "k/batch.py": """
            import sglang
            from k.pools import TokenAllocator

            class ScheduleBatch:
                allocator: TokenAllocator = None

                def prepare_for_extend(self, n):
                    return self.allocator.alloc_extend(n)
        """,
    })
    assert [(f["path"], f["line"]) for f in sync_findings(run_cli, root)] == [("k/pools.py", 13)]


def test_a_field_allocated_on_a_device_is_a_tensor_field_across_modules(tmp_path, run_cli):
    # The pool's table is made on the pool's device in its __init__ (no annotation), and
    # the queue in another module copies a row of it to the host every step; the pool's
    # pinned staging buffer and its CPU mirror are host tensors.
    root = write_project(tmp_path, {
        "d/__init__.py": "",
        "d/pool.py": """
            import torch

            class ReqToTokenPool:
                def __init__(self, size, device):
                    self.req_to_token = torch.zeros((size, 8), dtype=torch.int32, device=device)
                    self.staging = torch.zeros(size, dtype=torch.int32, pin_memory=True)
                    self.table_cpu = torch.zeros(size, device="cpu")
        """,
        "d/queue.py": """
            import sglang
            from d.pool import ReqToTokenPool

            class DecodeQueue:
                def __init__(self, pool: ReqToTokenPool):
                    self.req_to_token_pool = pool

                def pop_preallocated(self, idx):
                    rows = self.req_to_token_pool.req_to_token[idx].cpu()
                    staged = self.req_to_token_pool.staging[idx].tolist()
                    return rows, staged, self.req_to_token_pool.table_cpu[idx].item()

            class Scheduler:
                def __init__(self, queue: DecodeQueue):
                    self.queue = queue

                def event_loop_normal(self):
                    while True:
                        self.queue.pop_preallocated(0)
                        self.run_batch(None)
        """,
    })
    assert [(f["path"], f["line"], f["code"]) for f in sync_findings(run_cli, root)] == [
        ("d/queue.py", 10, "RB103")]


def test_a_bound_method_handed_to_a_helper_as_a_callback_is_called(tmp_path, run_cli):
    # `set_active(requests, self._apply, self.manager.set_mapping)`: the helper in another
    # module calls both, every step; a callback passed on a continuation line counts too.
    root = write_project(tmp_path, {
        "l/__init__.py": "",
        "l/utils.py": """
            def set_active(requests, apply_func, set_mapping_func):
                apply_func(requests)
                set_mapping_func(requests)
        """,
        "l/manager.py": """
            import torch

            class Manager:
                def __init__(self, device):
                    self.indices = torch.zeros(8, dtype=torch.int64, device=device)

                def set_mapping(self, requests):
                    return self.indices.max().item()
        """,
        "l/runner.py": """
            import torch
            import vllm
            from l.manager import Manager
            from l.utils import set_active

            class ModelRunner:
                def __init__(self, device):
                    self.manager = Manager(device)
                    self.lens = torch.zeros(8, device=device)

                def execute_model(self, requests):
                    set_active(requests, self._apply,
                               self.manager.set_mapping)

                def _apply(self, requests):
                    return self.lens.sum().item()
        """,
    })
    assert sorted((f["path"], f["line"]) for f in sync_findings(run_cli, root)) == [
        ("l/manager.py", 9), ("l/runner.py", 17)]


def test_a_logits_processor_runs_every_step_without_an_engine_pack(tmp_path, run_cli):
    # A project with no engine pack: a logits processor's __call__ runs on every step's
    # logits (the sampler walks a list of them), so its readback is reported.
    root = write_project(tmp_path, {
        "g/__init__.py": "",
        "g/processors.py": """
            import torch

            class BanTokensLogitsProcessor:
                def __init__(self, banned):
                    self.banned = banned

                def __call__(self, input_ids, scores: torch.Tensor):
                    if scores.isinf().all():
                        return scores
                    return scores
        """,
    })
    assert [(f["path"], f["line"]) for f in sync_findings(run_cli, root)] == [
        ("g/processors.py", 9)]


def test_a_module_held_in_an_attribute_of_a_declared_class_and_a_named_device_check(tmp_path,
                                                                                     run_cli):
    # The sampler class declares fields (so the parameter is an object of a known class),
    # and its name says nn.Module: calling `self.sampler(...)` gives a CUDA tensor. A block
    # behind `device_type != "cuda"` (a name for `scores.device.type`) runs off the GPU.
    root = write_project(tmp_path, {
        "s/__init__.py": "",
        "s/sampler.py": """
            from dataclasses import dataclass

            import torch

            class RejectionSampler(torch.nn.Module):
                probs_dtype: torch.dtype = torch.float32

                def forward(self, probs):
                    return probs.argmax(-1)
        """,
        "s/worker.py": """
            import torch
            import vllm
            from s.sampler import RejectionSampler

            class SpecWorker:
                def __init__(self, sampler: RejectionSampler):
                    self.sampler = sampler

                def execute_model(self, probs, scores: torch.Tensor):
                    accepted = self.sampler(probs)
                    kept = accepted[accepted != -1]
                    device_type = scores.device.type
                    if device_type != "cuda":
                        scores = scores.to("cpu").float()
                    return kept, scores
        """,
    })
    assert [(f["path"], f["line"], f["code"]) for f in sync_findings(run_cli, root)] == [
        ("s/worker.py", 12, "RB104")]


def test_the_copy_that_moves_a_field_to_the_host_is_itself_a_sync(tmp_path, run_cli):
    # `out.logprobs = out.logprobs.tolist()` makes the field's device depend on when it is
    # read, so elsewhere no default device is taken; but this line reads it before the move.
    root = write_project(tmp_path, {
        "o/__init__.py": "",
        "o/types.py": """
            from dataclasses import dataclass
            from typing import Optional

            import torch

            @dataclass
            class Output:
                logprobs: Optional[torch.Tensor] = None
        """,
        "o/processor.py": """
            import sglang
            from o.types import Output

            class Scheduler:
                def process_batch_result(self, out: Output):
                    out.logprobs = out.logprobs.tolist()
                    return out

                def stream_output(self, out: Output):
                    return out.logprobs.tolist()

                def event_loop_normal(self):
                    while True:
                        self.stream_output(self.process_batch_result(self.run_batch()))
        """,
    })
    assert [(f["path"], f["line"]) for f in sync_findings(run_cli, root)] == [("o/processor.py", 7)]


def test_a_class_named_like_a_model_that_is_no_module_holds_no_outputs(tmp_path, run_cli):
    # `LoRAModel` holds adapter weights (no nn.Module base): what its methods return says
    # nothing about the GPU, so `if not lora_model.check_name(n):` is no sync.
    root = write_project(tmp_path, {
        "r/__init__.py": "",
        "r/lora.py": """
            class LoRAModel:
                def __init__(self, loras):
                    self.loras = loras

                def check_name(self, name):
                    return name in self.loras
        """,
        "r/runner.py": """
            import torch
            import vllm
            from r.lora import LoRAModel

            class ModelRunner:
                def execute_model(self, lora_model: LoRAModel, names):
                    kept = [n for n in names if not lora_model.check_name(n)]
                    if lora_model.check_name("lm_head"):
                        return kept
                    return names
        """,
    })
    assert sync_findings(run_cli, root) == []


def test_the_elements_of_a_parameter_annotated_as_a_tuple_of_tensors(tmp_path, run_cli):
    # `rows, toks = index: tuple[torch.Tensor, torch.Tensor]`, `parts[0]` of a tuple of
    # tensors and a loop over them: each element is a tensor (CUDA by devices.default in an
    # engine); the tuple itself, a tuple of ints, an element named as shape metadata and
    # the elements of a list of tensors (often per-item host data) are not.
    root = write_project(tmp_path, {
        "s/__init__.py": "",
        "s/logits.py": """
            import torch
            import vllm

            class MinTokensLogitsProcessor:
                def _restore(self, logits: torch.Tensor,
                             index: tuple[torch.Tensor, torch.Tensor],
                             parts: tuple[torch.Tensor, ...], shape: tuple[int, int],
                             items: list[torch.Tensor],
                             packed: tuple[torch.Tensor, torch.Tensor]):
                    rows, toks = index
                    patches, token_grids = packed
                    token_grids.tolist()
                    items[0].tolist()
                    if index:
                        pass
                    unique = torch.unique_consecutive(rows)
                    first = parts[0].item()
                    for part in parts:
                        part.tolist()
                    height, width = shape
                    return int(height), width

                def apply(self, logits: torch.Tensor) -> torch.Tensor:
                    return self._restore(logits, (logits, logits), (logits,), (1, 2), [],
                                         (logits, logits))
        """,
    })
    assert sync_sites(run_cli, root) == [("s/logits.py", 17, "RB104"),
                                         ("s/logits.py", 18, "RB102"),
                                         ("s/logits.py", 20, "RB101")]


def test_a_field_set_on_a_local_object_is_read_back_as_set(tmp_path, run_cli):
    # `out.logprobs = logprobs[idx]` (CUDA) read back by `out.logprobs.tolist()` in the same
    # function is a sync, though elsewhere the field is moved to the host and so has no
    # device of its own; a field set from a host copy is not; nor is one after the object
    # is bound again.
    root = write_project(tmp_path, {
        "w/__init__.py": "",
        "w/types.py": """
            from dataclasses import dataclass
            from typing import Optional

            import torch

            @dataclass
            class Output:
                logprobs: Optional[torch.Tensor] = None
                ranks: Optional[torch.Tensor] = None
        """,
        "w/worker.py": """
            import torch
            import sglang
            from w.types import Output

            class Worker:
                def verify(self, out: Output, logits: torch.Tensor, idx):
                    logprobs = torch.log_softmax(logits, dim=-1)
                    out.logprobs = logprobs[idx]
                    out.ranks = torch.zeros(4)
                    first = out.logprobs.tolist()
                    second = out.ranks.tolist()
                    out = Output()
                    return first, second, out.logprobs

                def process(self, out: Output):
                    out.logprobs = out.logprobs.tolist()
                    return out.logprobs[0]

                def forward_batch_generation(self, batch):
                    out = self.verify(Output(), batch.logits, batch.idx)
                    return self.process(out[2])
        """,
    })
    assert sync_sites(run_cli, root) == [("w/worker.py", 11, "RB101"),
                                         ("w/worker.py", 17, "RB101")]


def test_a_class_a_factory_function_makes_overrides_the_interface_it_is_named_for(
        tmp_path, run_cli):
    # `class FastPrefillBuilder(underlying_builder):` inside a factory subclasses a builder
    # chosen at run time: the runner's hot `builder.build(...)` reaches its override, and
    # the helper it calls; a method of such a class is checked like any other.
    root = write_project(tmp_path, {
        "a/__init__.py": "",
        "a/builder.py": """
            import torch

            class AttentionMetadataBuilder:
                def build(self, meta):
                    raise NotImplementedError

            class FlashMetadataBuilder(AttentionMetadataBuilder):
                def build(self, meta):
                    return meta

            class WeightLoader:
                def build(self, meta):
                    return meta
        """,
        "a/fast.py": """
            import torch

            def shrink(ids: torch.Tensor):
                lens = torch.bincount(ids)
                return int(lens.max().item())

            def create_fast_backend(backend):
                base = backend.get_builder_cls()

                class FastPrefillBuilder(base):
                    def build(self, ids: torch.Tensor):
                        ids.cpu()
                        return super().build(shrink(ids))

                class FastLoader(base):
                    def load(self, ids: torch.Tensor):
                        return shrink(ids)

                return FastPrefillBuilder
        """,
        "a/runner.py": """
            import torch
            import vllm
            from a.builder import AttentionMetadataBuilder

            class GPUModelRunner:
                def __init__(self, builder: AttentionMetadataBuilder):
                    self.builder = builder

                def execute_model(self, meta):
                    return self.builder.build(meta)
        """,
    })
    assert sync_sites(run_cli, root) == [("a/fast.py", 6, "RB102"),
                                         ("a/fast.py", 13, "RB103")]


def test_building_a_dataclass_runs_its_post_init_but_init_is_start_up(tmp_path, run_cli):
    root = write_project(tmp_path, {
        "m/__init__.py": "",
        "m/meta.py": """
            from dataclasses import dataclass

            import torch

            @dataclass
            class FlexMetadata:
                query_start_loc: torch.Tensor

                def __post_init__(self):
                    self.doc_ids = self.query_start_loc.tolist()

            class Other:
                def __init__(self, x: torch.Tensor):
                    self.n = x.item()
        """,
        "m/runner.py": """
            import torch
            import vllm
            from m.meta import FlexMetadata, Other

            class GPUModelRunner:
                def execute_model(self, q: torch.Tensor):
                    Other(q)
                    return FlexMetadata(query_start_loc=q)
        """,
    })
    assert sync_sites(run_cli, root) == [("m/meta.py", 11, "RB101")]


def test_a_call_on_an_object_named_for_the_end_of_its_class_names(tmp_path, run_cli):
    # `verify_input.verify(...)` on an object of unknown class reaches the classes whose
    # names end in its words (`NgramVerifyInput`, `EagleVerifyInput`), not other `verify`s;
    # a one-word name (`output.verify()`) names no class.
    root = write_project(tmp_path, {
        "n/__init__.py": "",
        "n/spec.py": """
            import torch

            class NgramVerifyInput:
                def verify(self, accept: torch.Tensor):
                    return accept.tolist()

            class EagleVerifyInput:
                def verify(self, accept: torch.Tensor):
                    return accept.sum().item()

            class Checkpoint:
                def verify(self, accept: torch.Tensor):
                    return accept.cpu()
        """,
        "n/worker.py": """
            import sglang

            class NgramWorker:
                def forward_batch_generation(self, batch):
                    verify_input = batch.spec_info
                    output = batch.output
                    output.verify(batch.accept)
                    return verify_input.verify(batch.accept)
        """,
    })
    assert sync_sites(run_cli, root) == [("n/spec.py", 6, "RB101"), ("n/spec.py", 10, "RB102")]


def test_a_field_declared_a_python_list_that_the_code_calls_tolist_on_is_a_tensor(
        tmp_path, run_cli):
    # `next_token_ids: List[int]` holding the sampler's tensor: the code's `.tolist()` says
    # the declaration is wrong. A numpy array (which has `.tolist()`), a list the code
    # only iterates and one named as a host value (`seq_lens_cpu`) stay host values.
    root = write_project(tmp_path, {
        "g/__init__.py": "",
        "g/result.py": """
            from dataclasses import dataclass
            from typing import List, Optional

            import numpy as np

            @dataclass
            class GenerationBatchResult:
                next_token_ids: Optional[List[int]]
                extend_lens: List[int]
                scores: np.ndarray
                seq_lens_cpu: List[int]
        """,
        "g/scheduler.py": """
            import sglang
            import torch
            from g.result import GenerationBatchResult

            class Scheduler:
                def process_batch_result(self, result: GenerationBatchResult):
                    (next_token_ids, extend_lens) = (result.next_token_ids, result.extend_lens)
                    ids = next_token_ids.tolist()
                    scores = result.scores.tolist()
                    lens = result.seq_lens_cpu
                    if isinstance(lens, torch.Tensor):
                        lens = lens.tolist()
                    return ids, scores, lens, [n + 1 for n in extend_lens]

                def event_loop_normal(self):
                    while True:
                        self.process_batch_result(self.run_batch())
        """,
    })
    found = sync_findings(run_cli, root)
    assert [(f["path"], f["line"], f["code"]) for f in found] == [
        ("g/scheduler.py", 9, "RB101")]
    assert "declared a Python value but `.tolist()` is called on it" in found[0]["message"]


def test_a_mask_made_on_the_host_and_moved_to_the_gpu_is_still_a_mask(tmp_path, run_cli):
    # `masks = draft_cpu >= 0` (of unknown device), moved with `.to(device)`: indexing a
    # CUDA tensor with it syncs; indexing with the host copy of a CUDA mask does not.
    root = write_project(tmp_path, {
        "b/__init__.py": "",
        "b/gdn.py": """
            import torch
            import vllm

            class GDNAttentionMetadataBuilder:
                def build(self, query_start_loc: torch.Tensor, draft_cpu):
                    query_lens = query_start_loc[1:] - query_start_loc[:-1]
                    masks = draft_cpu >= 0
                    masks = masks.to(query_start_loc.device, non_blocking=True)
                    spec = query_lens[~masks]
                    host = draft_cpu[(query_lens > 0).cpu()]
                    return spec, host
        """,
    })
    assert sync_sites(run_cli, root) == [("b/gdn.py", 10, "RB104"), ("b/gdn.py", 11, "RB103")]


def test_a_host_copy_into_another_objects_field_moves_no_field_to_the_host(tmp_path, run_cli):
    # `meta.seq_lens = batch.seq_lens.tolist()` puts a list in the metadata's field; the
    # batch's `seq_lens` is still its declared tensor. Moved in place (`out.ids =
    # out.ids.tolist()`), a field's readers elsewhere may see the list.
    root = write_project(tmp_path, {
        "c/__init__.py": "",
        "c/batch.py": """
            from dataclasses import dataclass
            from typing import Optional

            import torch

            @dataclass
            class ScheduleBatch:
                seq_lens: torch.Tensor
                out_ids: Optional[torch.Tensor] = None
        """,
        "c/backend.py": """
            import sglang
            from c.batch import ScheduleBatch

            class DualChunkBackend:
                def init_forward_metadata(self, meta, batch: ScheduleBatch):
                    meta.seq_lens = batch.seq_lens.tolist()
                    batch.out_ids = batch.out_ids.tolist()
        """,
        "c/worker.py": """
            import sglang
            from c.batch import ScheduleBatch

            class EAGLEWorker:
                def forward_batch_generation(self, batch: ScheduleBatch):
                    total = batch.seq_lens.sum().item()
                    return total, batch.out_ids.tolist()
        """,
    })
    assert sync_sites(run_cli, root) == [("c/backend.py", 7, "RB101"),
                                         ("c/backend.py", 8, "RB101"),
                                         ("c/worker.py", 7, "RB102")]


def test_a_new_function_that_calls_nothing_links_nothing_again(tmp_path, run_cli,
                                                                       monkeypatch):
    # A helper that calls nothing carries nothing the link reads: adding one reuses the
    # recorded link. One whose name a call already spelled (the caller was written first)
    # links again: the call now reaches it; so does one the packs make an entry point.
    root = write_project(tmp_path, {"engine/__init__.py": "", "engine/runner.py": RUNNER,
                                    "engine/ops.py": OPS,
                                    "mine.yml": "name: mine\nhot-paths:\n"
                                                "  entry-points: [decode_step]\n"},
                         config='rule-packs = ["pytorch", "inference-engines", "mine.yml"]\n')
    assert len(sync_findings(run_cli, root)) == 1
    links = []
    real_link = Linker.link
    monkeypatch.setattr(Linker, "link", lambda self: links.append(1) or real_link(self))
    ops = root / "engine/ops.py"
    ops.write_text(textwrap.dedent(OPS) + "\ndef _fmt(x):\n    return str(x)\n",
                   encoding="utf-8")
    found = sync_findings(run_cli, root)
    assert [(f["path"], f["line"]) for f in found] == [("engine/ops.py", 5)]
    assert links == []
    runner = root / "engine/runner.py"
    runner.write_text(textwrap.dedent(RUNNER).replace(
        "return apply_penalties(self.buf)",
        "return apply_penalties(self.buf), ops._late(self.buf)").replace(
        "from engine.ops import apply_penalties",
        "from engine.ops import apply_penalties\nimport engine.ops as ops"), encoding="utf-8")
    assert len(sync_findings(run_cli, root)) == 1  # `ops._late` is not there yet
    assert links == [1]
    ops.write_text(ops.read_text(encoding="utf-8") + "\ndef _late(buf):\n    return buf\n",
                   encoding="utf-8")
    assert len(sync_findings(run_cli, root)) == 1
    assert links == [1, 1]
    ops.write_text(ops.read_text(encoding="utf-8") + "\ndef _unused(buf):\n    return buf\n"
                   "\ndef unused(buf):\n    return buf\n", encoding="utf-8")
    assert len(sync_findings(run_cli, root)) == 1
    assert links == [1, 1]
    # A function the packs make an entry point is hot by its name: linked again.
    ops.write_text(ops.read_text(encoding="utf-8") + "\ndef decode_step(buf):\n"
                   "    return buf\n", encoding="utf-8")
    assert len(sync_findings(run_cli, root)) == 1
    assert links == [1, 1, 1]


def test_summaries_made_without_a_link_do_not_let_a_stale_link_be_reused(tmp_path, run_cli):
    # `explain` indexes the edited module and stores its summary without linking: the next
    # check must still see that the new function (whose name a call spells) needs a link.
    root = write_project(tmp_path, {
        "engine/__init__.py": "",
        "engine/batch.py": """
            from dataclasses import dataclass
            import torch

            @dataclass
            class Batch:
                seq_lens: torch.Tensor
        """,
        "engine/runner.py": """
            import torch
            import vllm
            import engine.ops as ops

            class ModelRunner:
                def execute_model(self, batch):
                    return ops._late(batch)
        """,
        "engine/ops.py": "import torch\n\ndef lens(batch, n):\n    return batch.seq_lens\n",
    })
    assert sync_findings(run_cli, root) == []
    (root / "engine/ops.py").write_text(
        "import torch\n\ndef lens(batch, n):\n    return batch.seq_lens\n"
        "\ndef _late(batch):\n    if batch.seq_lens[0] > 0:\n        return 1\n    return 0\n",
        encoding="utf-8")
    assert run_cli(["explain", "engine/ops.py:7"], cwd=root).code == 0
    assert sync_sites(run_cli, root) == [("engine/ops.py", 7, "RB104")]


def test_a_function_that_calls_nothing_says_nothing_of_what_methods_return(tmp_path, run_cli,
                                                                           monkeypatch):
    # A module-level `compute_scores` of unknown return does not veto "every
    # `compute_scores` returns a tensor" for the module's method: adding or removing one
    # changes no finding, so the recorded link may stay.
    root = write_project(tmp_path, {
        "engine/__init__.py": "",
        "engine/heads.py": """
            import torch

            class Head(torch.nn.Module):
                def compute_scores(self, x) -> torch.Tensor:
                    return x
        """,
        "engine/runner.py": """
            import torch
            import vllm

            class ModelRunner:
                def execute_model(self, batch):
                    n = self.heads[0].compute_scores(batch)
                    if n > 0:
                        return 1
                    return 0
        """,
        "engine/util.py": "import torch\n\ndef compute_scores(x):\n    return x\n",
    })
    assert sync_sites(run_cli, root) == [("engine/runner.py", 8, "RB104")]
    monkeypatch.setattr(Linker, "link", lambda self: pytest.fail("linked again"))
    (root / "engine/util.py").write_text("import torch\n", encoding="utf-8")
    assert sync_sites(run_cli, root) == [("engine/runner.py", 8, "RB104")]


def test_a_tuple_parameter_by_negative_index_and_with_too_many_targets(tmp_path, run_cli):
    # `index[-1]` is the last element; unpacking into more names than the annotation has
    # says the annotation is wrong, so no element is taken for a tensor.
    root = write_project(tmp_path, {
        "t/__init__.py": "",
        "t/logits.py": """
            import torch
            import vllm

            class PenaltyLogitsProcessor:
                def apply(self, logits: torch.Tensor,
                          index: tuple[torch.Tensor, torch.Tensor]):
                    last = index[-1].item()
                    a, b, c = index
                    return last, a.tolist(), c.tolist()
        """,
    })
    assert sync_sites(run_cli, root) == [("t/logits.py", 8, "RB102")]


def test_a_device_passed_in_a_dict_of_keyword_arguments(tmp_path, run_cli):
    # `i32 = dict(dtype=torch.int32, device=self.device)`; `torch.zeros(n, **i32)`: on the
    # device the dict names (CUDA by devices.default for an unknown one); a dict naming the
    # CPU, and one rebound to a dict without a device, do not put the buffer on the GPU.
    root = write_project(tmp_path, {
        "s/__init__.py": "",
        "s/indexer.py": """
            import torch
            import vllm

            class ModelRunner:
                def execute_model(self, n, device):
                    return self.build(n, device), self.build_host(n), self.rebound(n, device)

                def build(self, n, device):
                    i32 = dict(dtype=torch.int32, device=device)
                    ends = torch.zeros(n, **i32)
                    return ends.tolist()

                def build_host(self, n):
                    i32 = {"dtype": torch.int32, "device": "cpu"}
                    ends = torch.zeros(n, **i32)
                    return ends.tolist()

                def rebound(self, n, device):
                    i32 = dict(dtype=torch.int32, device=device)
                    i32 = dict(dtype=torch.int32)
                    ends = torch.zeros(n, **i32)
                    return ends.tolist()
        """,
    }, config='devices = {default = "cuda"}\n')
    found = sync_findings(run_cli, root)
    assert [(f["path"], f["line"]) for f in found] == [("s/indexer.py", 12)]
    assert "allocated on the device in `**i32`" in found[0]["message"]


def test_a_test_of_the_device_or_the_type_narrows_an_unknown_value(tmp_path, run_cli):
    # `if not ids.is_cpu:` / `if ids.is_cuda:` put `ids` on the GPU in their block;
    # `isinstance(out, torch.Tensor)` makes `out` a tensor (CUDA by devices.default). Neither
    # holds after the block, nor for a name that says host, nor in the `else`, nor for a
    # field the project moves to the host (`result.embeddings`: a tensor, maybe a host one).
    root = write_project(tmp_path, {
        "s/__init__.py": "",
        "s/worker.py": """
            import torch
            import vllm

            class ModelRunner:
                def execute_model(self, batch, out_cpu):
                    self.convert(batch)
                    ids = batch.ids
                    if not ids.is_cpu:
                        ids = ids.cpu()
                    lens = batch.lens
                    if lens.is_cuda:
                        n = lens.sum().item()
                    out = batch.out
                    if isinstance(out, torch.Tensor):
                        out = out.tolist()
                    else:
                        out = out.tolist()
                    if isinstance(out_cpu, torch.Tensor):
                        out_cpu = out_cpu.tolist()
                    other = batch.other
                    if isinstance(other, torch.Tensor):
                        pass
                    return other.tolist()

                def take_draft_token_ids(self):
                    if isinstance(self._draft_ids, torch.Tensor):
                        return self._draft_ids.tolist()
                    return self._draft_ids

                def convert(self, result):
                    result.embeddings = result.embeddings.cpu()
                    embeddings = result.embeddings
                    if isinstance(embeddings, torch.Tensor):
                        embeddings = embeddings.tolist()
                    return embeddings
        """,
    }, config='devices = {default = "cuda"}\n')
    found = sync_findings(run_cli, root)
    assert [(f["line"], f["code"]) for f in found] == [(10, "RB103"), (13, "RB102"),
                                                       (16, "RB101"), (28, "RB101")]
    assert "`ids` is checked to be on the GPU (`not ids.is_cpu`)" in found[0]["message"]
    assert "`out` is checked to be a tensor" in found[2]["message"]


def test_a_class_moving_its_own_field_leaves_other_classes_fields_on_the_gpu(tmp_path,
                                                                             run_cli):
    # `self.accept_lens = self.accept_lens.cpu()` in one result class: its readers may see
    # the host copy; the same-named field of the draft input (declared a tensor) is still on
    # the GPU. Read from an object of unknown class, the field may be the moved one.
    root = write_project(tmp_path, {
        "c/__init__.py": "",
        "c/result.py": """
            from dataclasses import dataclass
            from typing import Optional

            import torch

            @dataclass
            class BatchResult:
                accept_lens: Optional[torch.Tensor] = None

                def copy_to_cpu(self):
                    self.accept_lens = self.accept_lens.to("cpu", non_blocking=True)
        """,
        "c/spec.py": """
            from dataclasses import dataclass

            import torch

            @dataclass
            class DraftInput:
                accept_lens: torch.Tensor
        """,
        "c/worker.py": """
            import sglang
            from c.result import BatchResult
            from c.spec import DraftInput

            class NgramWorker:
                def forward_batch_generation(self, batch, spec: DraftInput, result: BatchResult):
                    lens = spec.accept_lens.cpu()
                    return lens, result.accept_lens.tolist(), batch.accept_lens.tolist()
        """,
    })
    assert sync_sites(run_cli, root) == [("c/worker.py", 8, "RB103")]


def test_fields_an_interface_leaves_to_its_subclasses_and_moves_through_an_attribute(
        tmp_path, run_cli):
    # `batch.spec_info: SpecInput` holds one of its subclasses: `hidden_states`, which they
    # all declare a tensor, is on the GPU. The result class moving its output's field
    # (`self.out.hidden_states = ....to("cpu")`) moves the output class's field only. A field
    # annotated where `__init__` sets it (`self.track: Optional[Tensor] = None`) is declared.
    root = write_project(tmp_path, {
        "c/__init__.py": "",
        "c/spec.py": """
            from dataclasses import dataclass
            from typing import Optional

            import torch

            class SpecInput:
                def is_draft(self):
                    return True

            @dataclass
            class EagleDraftInput(SpecInput):
                hidden_states: Optional[torch.Tensor] = None

            class NgramVerifyInput(SpecInput):
                pass

            @dataclass
            class LogitsOutput:
                hidden_states: torch.Tensor

            @dataclass
            class BatchResult:
                out: LogitsOutput

                def copy_to_cpu(self):
                    self.out.hidden_states = self.out.hidden_states.to("cpu", non_blocking=True)

            class Req:
                def __init__(self):
                    self.track: Optional[torch.Tensor] = None  # shape (2)

            @dataclass
            class ScheduleBatch:
                spec_info: Optional[SpecInput] = None
        """,
        "c/scheduler.py": """
            import sglang
            from c.spec import LogitsOutput, Req, ScheduleBatch

            class Scheduler:
                def process_batch_result(self, batch: ScheduleBatch, out: LogitsOutput,
                                         req: Req):
                    first = batch.spec_info.hidden_states[0].cpu()
                    states = out.hidden_states.tolist()
                    return first, states, req.track[0].item()
        """,
    })
    assert sync_sites(run_cli, root) == [("c/scheduler.py", 8, "RB103"),
                                         ("c/scheduler.py", 10, "RB102")]


def test_a_decorators_wrapper_an_aliased_return_class_and_a_closure(tmp_path, run_cli):
    # `@with_transfer` wraps a hot function: its wrapper's calls run every step. The group
    # getter returns `ConnectorType`, an alias of the interface: the implementation's
    # `save_layer` is hot. There, a closure annotated `-> torch.Tensor` returns a tensor
    # computed from its (CUDA) argument. `get_group().wait_layer()`, a method called on a
    # function's result, reaches the implementation too.
    root = write_project(tmp_path, {
        "kv/__init__.py": "",
        "kv/base.py": """
            import torch

            class ConnectorBase:
                def save_layer(self, name: str, kv: torch.Tensor) -> None:
                    raise NotImplementedError

                def wait_layer(self, name: str) -> None:
                    raise NotImplementedError

            ConnectorType = ConnectorBase
        """,
        "kv/example.py": """
            import torch
            from kv.base import ConnectorBase

            class ExampleConnector(ConnectorBase):
                def save_layer(self, name: str, kv: torch.Tensor) -> None:
                    def extract(layer: torch.Tensor, rows) -> torch.Tensor:
                        return layer[rows]

                    part = extract(kv, [0, 1])
                    self.store[name] = part.cpu()

                def wait_layer(self, name: str) -> None:
                    torch.cuda.synchronize()
        """,
        "kv/state.py": """
            from kv.base import ConnectorType

            _GROUP = None

            def get_group() -> ConnectorType:
                return _GROUP
        """,
        "kv/utils.py": """
            from kv.state import get_group

            def with_transfer(func):
                def wrapper(*args, **kwargs):
                    get_group().wait_layer("layer")
                    out = func(*args, **kwargs)
                    group = get_group()
                    group.save_layer("layer", out)
                    return out
                return wrapper
        """,
        "kv/model.py": """
            import torch
            import vllm
            from kv.utils import with_transfer

            class Attention(torch.nn.Module):
                def forward(self, q):
                    return attend(q)

            @with_transfer
            def attend(q):
                return q * 2
        """,
    }, config='devices = {default = "cuda"}\n')
    found = sync_findings(run_cli, root)
    assert [(f["path"], f["line"], f["code"]) for f in found] == [
        ("kv/example.py", 11, "RB103"), ("kv/example.py", 14, "RB105")]
    assert "with_transfer" in found[0]["message"]
    assert "returned by `extract()`" in found[0]["message"]


def test_a_function_that_imports_its_callee_itself_makes_it_hot(tmp_path, run_cli):
    # `from engine.ops import apply_penalties` inside the hot method (as engines do against
    # import cycles): the call reaches the helper in the other module, as a module-level
    # import would; a name the module imports at its top is not changed for other functions.
    root = write_project(tmp_path, {
        "engine/__init__.py": "",
        "engine/runner.py": """
            import torch

            class ModelRunner:
                def __init__(self):
                    self.buf = torch.zeros(8, device="cuda")

                def execute_model(self, batch):
                    from engine.ops import apply_penalties
                    return apply_penalties(self.buf)

                def load_model(self):
                    return apply_penalties(self.buf)
        """,
        "engine/ops.py": OPS,
    })
    assert sync_sites(run_cli, root) == [("engine/ops.py", 5, "RB101")]
    explained = run_cli(["explain", "engine/ops.py:5"], cwd=root)
    assert "ModelRunner.execute_model" in explained.out


def test_reading_a_property_runs_its_getter(tmp_path, run_cli):
    # `attn_metadata.decode_metadata` in a hot forward (same module) and `meta.seq_lens_cpu`
    # in the runner (another module): each getter runs on the read, so its sync is per step.
    # A getter nobody hot reads, and a read of a plain field of the same name, are not.
    root = write_project(tmp_path, {
        "b/__init__.py": "",
        "b/meta.py": """
            from dataclasses import dataclass

            import torch

            @dataclass
            class CommonMeta:
                seq_lens: torch.Tensor

                @property
                def seq_lens_cpu(self):
                    return self.seq_lens.to("cpu")

                @property
                def unused_view(self):
                    return self.seq_lens.tolist()

            @dataclass
            class TreeMeta:
                query_start_loc: torch.Tensor

                @property
                def decode_metadata(self):
                    lens = torch.diff(self.query_start_loc)
                    return int(lens.max().item())

            class TreeAttention(torch.nn.Module):
                def forward(self, x, attn_metadata: TreeMeta):
                    if n := attn_metadata.decode_metadata:
                        return x[:n]
                    return x
        """,
        "b/runner.py": """
            import torch
            import vllm
            from b.meta import CommonMeta

            class ModelRunner:
                def execute_model(self, meta: CommonMeta):
                    return meta.seq_lens_cpu
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("b/meta.py", 12, "RB103"),
                                         ("b/meta.py", 25, "RB102")]


def test_a_receiver_named_by_one_word_reaches_the_few_classes_ending_in_it(tmp_path, run_cli):
    # `for penalizer in self.penalizers.values(): penalizer.apply(logits)`: the penalizers
    # are `_BatchedPenalizer`s (the one class ending in "Penalizer" that defines `apply`),
    # whose `apply` calls each subclass's `_apply`. A word that ends the names of several
    # classes defining the method (`state.update()`) reaches none.
    root = write_project(tmp_path, {
        "p/__init__.py": "",
        "p/penalties.py": """
            import torch

            class _BatchedPenalizer:
                def apply(self, logits: torch.Tensor):
                    self._apply(logits)

                def _apply(self, logits):
                    raise NotImplementedError

            class MinTokensPenalizer(_BatchedPenalizer):
                def _apply(self, logits: torch.Tensor):
                    mask = logits > 0
                    logits[mask] += 1.0

            class AState:
                def update(self, x: torch.Tensor):
                    return x.tolist()

            class BState:
                def update(self, x: torch.Tensor):
                    return x.tolist()

        """,
        "p/orchestrator.py": """
            import sglang

            class Scheduler:
                def run_batch(self, logits, penalizers, states):
                    for penalizer in penalizers:
                        penalizer.apply(logits)
                    for state in states:
                        state.update(logits)
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("p/penalties.py", 14, "RB104")]


def test_a_method_called_only_on_host_copies_reads_host_fields(tmp_path, run_cli):
    # `self.experts_cpu.tolists()`: every hot call of `ExpertsTensors.tolists` is on an
    # object named as a host copy, so its declared tensor fields are host tensors there.
    # `LogprobsTensors.tolists`, also called on a device object, keeps them on the GPU.
    root = write_project(tmp_path, {
        "o/__init__.py": "",
        "o/outputs.py": """
            from dataclasses import dataclass

            import torch

            @dataclass
            class ExpertsTensors:
                routing: torch.Tensor

                def tolists(self):
                    return self.routing.cpu().tolist()

            @dataclass
            class LogprobsTensors:
                ranks: torch.Tensor

                def tolists(self):
                    return self.ranks.cpu().tolist()
        """,
        "o/runner.py": """
            import vllm
            from o.outputs import ExpertsTensors, LogprobsTensors

            class ModelRunner:
                def __init__(self, experts_cpu: ExpertsTensors, logprobs: LogprobsTensors,
                             logprobs_cpu: LogprobsTensors):
                    self.experts_cpu = experts_cpu
                    self.logprobs = logprobs
                    self.logprobs_cpu = logprobs_cpu

                def execute_model(self):
                    return (self.experts_cpu.tolists(), self.logprobs.tolists(),
                            self.logprobs_cpu.tolists())
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("o/outputs.py", 18, "RB103")]


def test_a_method_called_on_an_attribute_set_from_host_copies_reads_host_fields(tmp_path,
                                                                                run_cli):
    # `self.masks = out.masks.to_cpu_nonblocking()`, later `self.masks.tolists()`: the
    # object is a host copy, so `MaskTensors.tolists` reads host fields there. An attribute
    # also set from a device object keeps them on the GPU.
    root = write_project(tmp_path, {
        "o/__init__.py": "",
        "o/outputs.py": """
            from dataclasses import dataclass

            import torch

            @dataclass
            class MaskTensors:
                counts: torch.Tensor

                def to_cpu_nonblocking(self) -> "MaskTensors":
                    return MaskTensors(self.counts.to("cpu", non_blocking=True))

                def tolists(self):
                    return self.counts.cpu().tolist()

            @dataclass
            class RankTensors:
                ranks: torch.Tensor

                def to_cpu_nonblocking(self) -> "RankTensors":
                    return RankTensors(self.ranks.to("cpu", non_blocking=True))

                def tolists(self):
                    return self.ranks.cpu().tolist()
        """,
        "o/async_output.py": """
            import vllm
            from o.outputs import MaskTensors, RankTensors

            class AsyncOutput:
                def __init__(self, masks: MaskTensors, ranks: RankTensors, fresh: bool):
                    self.masks: MaskTensors | None = None
                    if masks is not None:
                        self.masks = masks.to_cpu_nonblocking()
                    self.ranks = ranks.to_cpu_nonblocking()
                    if fresh:
                        self.ranks = ranks

                def get_output(self):
                    return self.masks.tolists(), self.ranks.tolists()
        """,
        "mine.yml": "name: mine\nhot-paths:\n  entry-points: [AsyncOutput.get_output]\n",
    }, config='rule-packs = ["pytorch", "inference-engines", "mine.yml"]\n'
              'devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("o/outputs.py", 24, "RB103")]


def test_methods_of_a_class_named_for_another_accelerator_are_not_hot(tmp_path, run_cli):
    # The runner dispatches to an attention backend it holds; the XPU and Aiter (ROCm)
    # backends' syncs run off CUDA. `CpuGpuBuffer` names the CPU, which a CUDA engine's
    # paired buffers do too: its method stays hot.
    root = write_project(tmp_path, {
        "q/__init__.py": "",
        "q/attn.py": """
            import torch

            class VisionIntelXPUAttention:
                def forward(self, lens: torch.Tensor):
                    return lens.max().item()

            class AiterAttnBackend:
                def forward(self, lens: torch.Tensor):
                    return lens.max().item()

            class CpuGpuBuffer:
                def forward(self, lens: torch.Tensor):
                    return lens.max().item()
        """,
        "q/runner.py": """
            import vllm
            from q.attn import AiterAttnBackend, CpuGpuBuffer, VisionIntelXPUAttention

            class ModelRunner:
                def __init__(self, a: VisionIntelXPUAttention, b: AiterAttnBackend,
                             c: CpuGpuBuffer):
                    self.a = a
                    self.b = b
                    self.c = c

                def execute_model(self, lens):
                    return self.a.forward(lens), self.b.forward(lens), self.c.forward(lens)
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("q/attn.py", 14, "RB102")]


def test_methods_named_for_another_platform_are_not_hot(tmp_path, run_cli):
    # A sampler whose every method is an entry point dispatches by platform: its CPU and
    # NPU methods (and what only they call) run off CUDA; its CUDA and native ones, and a
    # method that copies to the CPU, stay hot.
    root = write_project(tmp_path, {
        "s/__init__.py": "",
        "s/ops.py": """
            import torch

            def host_top_k(logits: torch.Tensor, k: torch.Tensor):
                return logits.topk(int(k.max()))

            def any_top_k(logits: torch.Tensor, k: torch.Tensor):
                return logits.topk(int(k.max()))
        """,
        "s/sampler.py": """
            import torch
            import vllm
            from s.ops import any_top_k, host_top_k

            class TopKSampler:
                def forward_cuda(self, logits: torch.Tensor, k: torch.Tensor):
                    return any_top_k(logits, k)

                def forward_native(self, logits: torch.Tensor, k: torch.Tensor):
                    return k.max().item()

                def forward_cpu(self, logits: torch.Tensor, k: torch.Tensor):
                    return host_top_k(logits, k), k.max().item()

                def forward_npu(self, logits: torch.Tensor, k: torch.Tensor):
                    return k.max().item()

                def copy_to_cpu(self, k: torch.Tensor):
                    return k.max().item()
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("s/ops.py", 8, "RB104"), ("s/sampler.py", 11, "RB102"),
                                         ("s/sampler.py", 20, "RB102")]


def test_a_module_class_named_for_another_platform_is_not_hot_in_its_own_module(tmp_path, run_cli):
    # `VisionIntelXPUAttention.forward` is an nn.Module's forward, but the class is XPU's:
    # neither it nor the helper only it calls is on the CUDA path. The CUDA class beside it
    # keeps its finding.
    root = write_project(tmp_path, {
        "v/__init__.py": "",
        "v/vision.py": """
            import torch
            from torch import nn

            def resolve_max_seqlen(seq_lens: torch.Tensor) -> int:
                return seq_lens.max().item()

            class VisionIntelXPUAttention(nn.Module):
                def forward(self, q: torch.Tensor, seq_lens: torch.Tensor):
                    return resolve_max_seqlen(seq_lens.to(q.device))

            class VisionFlashAttention(nn.Module):
                def forward(self, q: torch.Tensor, seq_lens: torch.Tensor):
                    return int(seq_lens.max().item())
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("v/vision.py", 14, "RB102")]


def test_a_call_of_a_predicate_from_another_module_guards_its_block(tmp_path, run_cli):
    # `use_reference(device)` returns a test for another platform; `checks_on()` an
    # environment switch: what runs behind them is not per step on CUDA. `wants_sum(x)`
    # tests nothing a reader knows: its block's callee stays hot, and so does the `else`
    # of the platform test.
    root = write_project(tmp_path, {
        "k/__init__.py": "",
        "k/dispatch.py": """
            import os
            import torch

            def use_reference(device: torch.device) -> bool:
                \"\"\"Whether to fall back to the torch reference.\"\"\"
                return device.type != "cuda"

            def checks_on() -> bool:
                return os.environ.get("K_CHECKS") == "1"

            def wants_sum(x: torch.Tensor) -> bool:
                return x.dim() > 1
        """,
        "k/ref.py": """
            import torch

            def reference_check(buf: torch.Tensor):
                return buf.sum().item()

            def dump(buf: torch.Tensor):
                return buf.tolist()

            def summed(buf: torch.Tensor):
                return buf.max().item()

            def fast_check(buf: torch.Tensor):
                return buf.min().item()
        """,
        "k/runner.py": """
            import torch
            from torch import nn
            from k.dispatch import checks_on, use_reference, wants_sum
            from k.ref import dump, fast_check, reference_check, summed

            class Runner(nn.Module):
                def forward(self, buf: torch.Tensor):
                    if use_reference(buf.device):
                        reference_check(buf)
                        return buf
                    if not use_reference(buf.device):
                        fast_check(buf)
                    if checks_on():
                        dump(buf)
                    if wants_sum(buf):
                        summed(buf)
                    return buf
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("k/ref.py", 11, "RB102"), ("k/ref.py", 14, "RB102")]


def test_a_module_helper_given_host_tensors_only_returns_host_tensors(tmp_path, run_cli):
    # `self.tower._lengths(mask.sum(-1))` of a mask moved to the CPU computes on the host;
    # the same helper given a CUDA tensor, and the tower's own forward, run on the GPU.
    root = write_project(tmp_path, {
        "m/__init__.py": "",
        "m/model.py": """
            import torch
            from torch import nn

            class Tower(nn.Module):
                def _lengths(self, lens: torch.Tensor):
                    return lens - 1, (lens - 2) // 2

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.tower = Tower()

                def forward(self, x: torch.Tensor):
                    mask = x.cpu()
                    _, host = self.tower._lengths(mask.sum(-1))
                    _, dev = self.tower._lengths(x.sum(-1))
                    out = self.tower(mask)
                    a = host.tolist()
                    b = dev.tolist()
                    c = out.tolist()
                    return a, b, c
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("m/model.py", 15, "RB103"), ("m/model.py", 20, "RB101"),
                                         ("m/model.py", 21, "RB101")]


def test_a_flag_every_hot_caller_sets_from_a_debug_switch_is_off(tmp_path, run_cli):
    # `check = size > 1 and self.debug_mode` passed as `check=check`, or `self.debug_mode`
    # passed directly: the checks behind `if check:` run only when debugging. A flag a
    # caller sets from anything else keeps its block on the hot path.
    root = write_project(tmp_path, {
        "a/__init__.py": "",
        "a/ops.py": """
            import torch

            def clear_pages(pages: torch.Tensor, check: bool = False):
                if check:
                    assert torch.all(pages >= 0)
                return pages * 0

            def free_pages(pages: torch.Tensor, verify: bool = False):
                if verify:
                    assert torch.all(pages >= 0)
                return pages * 0
        """,
        "a/allocator.py": """
            import os
            import torch
            from a.ops import clear_pages, free_pages

            class Allocator:
                def __init__(self, size: int):
                    self.size = size
                    self.debug_mode = os.environ.get("A_DEBUG") == "1"
                    self.strict = size > 4

                def free(self, pages: torch.Tensor):
                    check = self.size > 1 and self.debug_mode
                    clear_pages(
                        pages,
                        check=check,
                    )
                    clear_pages(pages, check=self.debug_mode)
                    free_pages(pages, verify=self.strict)
        """,
        "mine.yml": "name: mine\nhot-paths:\n  entry-points: [Allocator.free]\n",
    }, config='rule-packs = ["pytorch", "inference-engines", "mine.yml"]\n'
              'devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("a/ops.py", 11, "RB104")]


def test_a_lazy_build_that_returns_once_filled_runs_once(tmp_path, run_cli):
    # `if self._inner is not None: return` before the code that sets `self._inner`: the
    # rest runs on the first call only. A guard on something the function never fills
    # says nothing of the kind.
    root = write_project(tmp_path, {
        "d/__init__.py": "",
        "d/vae.py": """
            import torch
            from torch import nn

            class Decoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self._inner = None
                    self._ready = None

                def _ensure_inner(self, x: torch.Tensor):
                    if self._inner is not None:
                        return
                    scale = x.abs().max().item()
                    self._inner = nn.Linear(4, 4).to(x.device) if scale else None

                def _check(self, x: torch.Tensor):
                    if self._ready is not None:
                        return
                    return x.abs().max().item()

                def forward(self, x: torch.Tensor):
                    self._ensure_inner(x)
                    self._check(x)
                    return x
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("d/vae.py", 20, "RB102")]


def test_names_set_from_a_switch_guard_their_blocks(tmp_path, run_cli):
    # A module-level `_VERIFY = envs.VERIFY.get()` and a local `verify = _VERIFY and ...`:
    # `if verify:` runs when the environment asks for it, as `if envs.VERIFY.get():` would.
    # A local name set from anything else guards nothing; nor does a parameter that
    # shadows the module's switch. `if not requires_sync: return` of a switch on ROCm
    # leaves the rest to ROCm.
    root = write_project(tmp_path, {
        "g/__init__.py": "",
        "g/envs.py": """
            import os

            class Flag:
                def __init__(self, name: str):
                    self.name = name

                def get(self) -> bool:
                    return os.environ.get(self.name) == "1"

            VERIFY = Flag("G_VERIFY")

            def is_rocm() -> bool:
                return False
        """,
        "g/backend.py": """
            import torch
            from torch import nn
            from g import envs
            from g.envs import is_rocm

            _VERIFY = envs.VERIFY.get()
            _seen: set[int] = set()

            class Backend(nn.Module):
                def forward(self, idx: torch.Tensor, layer_id: int):
                    verify = _VERIFY and layer_id not in _seen
                    if verify:
                        assert not bool(torch.any(idx < 0).item())
                    if _VERIFY:
                        assert not bool(torch.any(idx > 9).item())
                    wanted = layer_id > 2
                    if wanted:
                        return idx.max().item()
                    return idx

                def other(self, idx: torch.Tensor, _VERIFY: bool):
                    if _VERIFY:
                        return idx.min().item()
                    return idx

                def after_recv(self, idx: torch.Tensor, done: set):
                    requires_sync = is_rocm() and self.training
                    if not done or not requires_sync:
                        return
                    torch.cuda.synchronize()
        """,
        "mine.yml": "name: mine\nhot-paths:\n  entry-points: [Backend.other, Backend.after_recv]\n",
    }, config='rule-packs = ["pytorch", "inference-engines", "mine.yml"]\n'
              'devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("g/backend.py", 19, "RB102"),
                                         ("g/backend.py", 24, "RB102")]


def test_what_follows_a_return_unless_a_switch_is_set_is_not_hot(tmp_path, run_cli):
    # `if not envs.DEBUG_METRICS.get(): return` first: the metrics' own module never sees
    # the switch, yet its `format_table` runs only behind it. A return on anything else
    # (`if not rows: return`) leaves the rest hot.
    root = write_project(tmp_path, {
        "s/__init__.py": "",
        "s/metrics.py": """
            import torch

            def format_table(rows: torch.Tensor) -> str:
                return str(rows.sum(0).tolist())

            def summarise(rows: torch.Tensor) -> float:
                return rows.mean().item()
        """,
        "s/probe.py": """
            import torch
            from torch import nn
            from s import envs
            from s.metrics import format_table, summarise

            class Probe(nn.Module):
                def forward(self, rows: torch.Tensor, ready: bool):
                    self.record(rows)
                    self.report(rows, ready)
                    return rows

                def record(self, rows: torch.Tensor):
                    if not envs.DEBUG_METRICS.get():
                        return
                    format_table(rows)

                def report(self, rows: torch.Tensor, ready: bool):
                    if not ready:
                        return
                    summarise(rows)
        """,
        "s/envs.py": """
            import os

            class _Flag:
                def get(self) -> bool:
                    return os.environ.get("S_DEBUG_METRICS") == "1"

            DEBUG_METRICS = _Flag()
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("s/metrics.py", 8, "RB102")]


def test_isinstance_in_a_condition_gives_the_rest_of_it_the_class(tmp_path, run_cli):
    # `isinstance(r, Adapter) and r.meta.lens...`: `r` is an Adapter in the rest of the
    # test, so `lens` is its Meta's CUDA tensor, though another class keeps a list under
    # that name. A property's return annotation declares a field: `end_ids` is a set of
    # ints in one class and a tensor in another, so a name alone says nothing.
    root = write_project(tmp_path, {
        "p/__init__.py": "",
        "p/adapters.py": """
            from dataclasses import dataclass
            import torch

            @dataclass
            class Meta:
                lens: torch.Tensor

            class Adapter:
                meta: Meta

                def __init__(self, ids):
                    self._ids = frozenset(ids)

                @property
                def end_ids(self) -> frozenset[int]:
                    return self._ids
        """,
        "p/other.py": """
            from dataclasses import dataclass
            import torch

            @dataclass
            class Host:
                lens: list[int]

            @dataclass
            class Budget:
                end_ids: torch.Tensor
        """,
        "p/manager.py": """
            import vllm
            from p.adapters import Adapter

            class Scheduler:
                def schedule(self, r, other):
                    if isinstance(r, Adapter) and r.meta.lens.sum().item() > 0:
                        return 1
                    if other.end_ids or other.lens.sum().item() > 0:
                        return 2
                    return 0
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("p/manager.py", 7, "RB102")]


def test_a_dataclass_fills_its_cache_once_per_object(tmp_path, run_cli):
    # The step builds its metadata (a dataclass) every time: a copy cached on the object
    # is made every step. The runner's own cache is filled once.
    root = write_project(tmp_path, {
        "m/__init__.py": "",
        "m/meta.py": """
            from dataclasses import dataclass
            import torch

            @dataclass
            class Metadata:
                seq_lens: torch.Tensor
                _seq_lens_cpu: torch.Tensor | None = None

                @property
                def seq_lens_cpu(self) -> torch.Tensor:
                    if self._seq_lens_cpu is None:
                        self._seq_lens_cpu = self.seq_lens.to("cpu")
                    return self._seq_lens_cpu
        """,
        "m/runner.py": """
            import torch
            import vllm
            from m.meta import Metadata

            class ModelRunner:
                def __init__(self):
                    self.lens = torch.zeros(8, device="cuda")
                    self._lens_cpu = None

                def execute_model(self, n):
                    meta = Metadata(seq_lens=self.lens[:n])
                    if self._lens_cpu is None:
                        self._lens_cpu = self.lens.to("cpu")
                    return meta.seq_lens_cpu
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("m/meta.py", 13, "RB103")]


def test_a_fallback_in_a_conditional_expression_runs_when_a_hot_caller_leaves_it_out(
        tmp_path, run_cli):
    # `host if host is not None else lens.tolist()`: off the usual path when every hot
    # caller passes `host`, as in an if statement; on it when one leaves it out. A field of
    # another object may be None on any step.
    runner = """
        import torch
        import vllm

        class ModelRunner:
            def __init__(self):
                self.lens = torch.zeros(8, device="cuda")
                self.host = torch.zeros(8)

            def execute_model(self, batch):
                a = self._bounds(self.lens, host=self.host.clone())
                return a, self._draft(), self._field(batch)

            def _draft(self):
                return self._bounds(self.lens, host=self.host.clone())

            def _bounds(self, lens: torch.Tensor, host=None):
                return host if host is not None else lens.tolist()

            def _field(self, batch):
                return batch.host if batch.host is not None else self.lens.tolist()
    """
    cfg = 'devices = {default = "cuda"}\n'
    root = write_project(tmp_path / "passed", {"r/__init__.py": "", "r/runner.py": runner},
                         config=cfg)
    assert sync_sites(run_cli, root) == [("r/runner.py", 21, "RB101")]
    left_out = runner.replace("return self._bounds(self.lens, host=self.host.clone())",
                              "return self._bounds(self.lens)")
    root = write_project(tmp_path / "left", {"r/__init__.py": "", "r/runner.py": left_out},
                         config=cfg)
    assert sync_sites(run_cli, root) == [("r/runner.py", 18, "RB101"),
                                         ("r/runner.py", 21, "RB101")]
    # The same caller leaving it out in one of its two calls.
    twice = runner.replace("return a, self._draft(), self._field(batch)",
                           "return a, self._bounds(self.lens), self._field(batch)")
    root = write_project(tmp_path / "twice", {"r/__init__.py": "", "r/runner.py": twice},
                         config=cfg)
    assert ("r/runner.py", 18, "RB101") in sync_sites(run_cli, root)


def test_a_returned_tuple_and_a_list_filled_in_a_loop_keep_their_elements(tmp_path, run_cli):
    # `emb, mask = get_mask(...)` unpacks what the module's function returns element by
    # element; masks gathered with `append` or `+= [...]` are what iterating the list (or
    # zipping it) gives. A list extended with something not followed is unknown.
    root = write_project(tmp_path, {
        "q/__init__.py": "",
        "q/mm.py": """
            import torch
            import vllm

            def get_mask(input_ids: torch.Tensor, pad: torch.Tensor):
                mask = torch.isin(input_ids, pad).unsqueeze(-1)
                return input_ids.float(), mask

            def embed(input_ids: torch.Tensor, pads, more):
                embeddings, masks, kept, mixed = [], [], [], []
                for pad in pads:
                    emb, mask = get_mask(input_ids, pad)
                    embeddings += [emb]
                    masks += [mask]
                    kept.append(mask)
                    mixed.append(mask)
                mixed.extend(more)
                out = []
                for emb, mask in zip(embeddings, masks):
                    out.append(torch.where(mask.squeeze(-1))[0])
                for mask in kept:
                    out.append(mask.nonzero())
                for mask in mixed:
                    out.append(mask.nonzero())
                return out

            class ModelRunner:
                def execute_model(self, ids: torch.Tensor, pads, more):
                    return embed(ids, pads, more)
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("q/mm.py", 20, "RB104"), ("q/mm.py", 22, "RB104")]


def test_a_device_a_helper_returns_in_a_tuple_is_not_followed(tmp_path, run_cli):
    # The helper picks the host only under a setting; what it returns beside the group is
    # not taken for the host, so the all-reduced tensor's reads are still reported.
    root = write_project(tmp_path, {
        "d/__init__.py": "",
        "d/dp.py": """
            import torch
            import vllm

            def _device_and_group(config):
                device = config.group.device
                if config.cpu_sync:
                    device = "cpu"
                return device, config.group

            def sync_ranks(config, n: int):
                device, group = _device_and_group(config)
                host = torch.zeros(4, dtype=torch.int32)
                host[0] = n
                tensor = host.to(device, non_blocking=True)
                return int(tensor.max().item())

            class ModelRunner:
                def execute_model(self, config, n: int):
                    return sync_ranks(config, n)
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("d/dp.py", 16, "RB102")]


def test_a_helper_returns_for_each_device_it_is_given(tmp_path, run_cli):
    # The same helper computes the chunk lengths on the GPU and on the host: each call's
    # results keep the device of its own argument, whichever call comes first.
    root = write_project(tmp_path, {
        "c/__init__.py": "",
        "c/batch.py": """
            import torch
            import vllm

            class ModelRunner:
                def __init__(self):
                    self.prefix_lens = torch.zeros(8, device="cuda")
                    self.prefix_lens_host = [0] * 8

                def chunk_lens(self, lens: torch.Tensor, n: int):
                    starts = torch.arange(n, device=lens.device)
                    return starts, (lens - starts).clamp(min=0)

                def execute_model(self, n: int):
                    starts, lens = self.chunk_lens(self.prefix_lens, n)
                    starts_host, lens_host = self.chunk_lens(torch.tensor(self.prefix_lens_host), n)
                    on_host = lens_host.sum().tolist()
                    return on_host, lens.sum().tolist()
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("c/batch.py", 18, "RB101")]


def test_code_copied_in_from_another_project_is_not_reported(tmp_path, run_cli):
    # `third_party/` and `_vendor/` hold code another project wrote: the runner's call into
    # it, and a module's forward there, make no finding; the same helper in the project does.
    helper = """
        import torch
        from torch import nn

        def lengths(x: torch.Tensor):
            return x.tolist()

        class Block(nn.Module):
            def forward(self, x: torch.Tensor):
                return x.sum().item()
    """
    root = write_project(tmp_path, {
        "e/__init__.py": "",
        "e/third_party/__init__.py": "",
        "e/third_party/lib.py": helper,
        "e/_vendor/__init__.py": "",
        "e/_vendor/lib.py": helper,
        "e/ThirdParty/__init__.py": "",
        "e/ThirdParty/lib.py": helper,
        "e/own.py": helper,
        "e/runner.py": """
            import vllm
            from e.third_party.lib import lengths as a
            from e._vendor.lib import lengths as b
            from e.own import lengths as c
            from e.ThirdParty.lib import lengths as d

            class ModelRunner:
                def execute_model(self, x):
                    return a(x), b(x), c(x), d(x)
        """,
    }, config='devices = {default = "cuda"}\n')
    assert sync_sites(run_cli, root) == [("e/own.py", 6, "RB101"), ("e/own.py", 10, "RB102")]


def test_fields_built_without_keep_on_cpu_are_on_the_device(tmp_path, run_cli):
    # A factory that takes `keep_on_cpu` builds the fields an engine moves to the device
    # unless told to keep them on the CPU: read by their key, those are CUDA tensors. A
    # name another module keeps on the CPU stays a host value, except in a module that
    # builds its own field of that name without it.
    root = write_project(tmp_path, {
        "r/__init__.py": "",
        "r/fields.py": """
            class FieldConfig:
                @staticmethod
                def batched(modality, *, keep_on_cpu=False):
                    return (modality, keep_on_cpu)
        """,
        "r/model.py": """
            from r.fields import FieldConfig

            def fields_config():
                return dict(
                    sizes=FieldConfig.batched("image", keep_on_cpu=True),
                    num_patches=FieldConfig.batched("image"),
                    num_crops=FieldConfig.batched("image"),
                )

            class Model:
                def step(self, image_input):  # hot in the generic pack
                    return image_input["num_crops"].tolist()
        """,
        "r/other.py": """
            from r.fields import FieldConfig

            def fields_config():
                return {"num_crops": FieldConfig.batched("image", keep_on_cpu=True)}
        """,
        # Kept on the CPU through `dict[str, T](...)` and `fields.update(...)`: its own
        # reads are host reads.
        "r/kept.py": """
            from r.fields import FieldConfig

            def fields_config(fields):
                fields.update(frames=FieldConfig.batched(
                    "video", keep_on_cpu=True))
                return dict[str, FieldConfig](
                    tiles=FieldConfig.batched("image", keep_on_cpu=True))

            class Model:
                def step(self, image_input):  # hot in the generic pack
                    return image_input["tiles"].tolist(), image_input["frames"].tolist()
        """,
        "r/runner.py": """
            class ModelRunner:
                def step(self, kwargs, other):  # hot in the generic pack
                    a = kwargs["num_patches"].tolist()
                    b = kwargs["sizes"].tolist()
                    c = kwargs.pop("num_patches").tolist()
                    d = other["count"].tolist()
                    e = kwargs["num_crops"].tolist()
                    return a, b, c, d, e
        """})
    found = sync_findings(run_cli, root)
    assert [(f["path"], f["line"]) for f in found] == [
        ("r/model.py", 13), ("r/runner.py", 4), ("r/runner.py", 6)]
    assert "moves to the GPU" in found[1]["message"]