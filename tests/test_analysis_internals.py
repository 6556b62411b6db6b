"""The GPU analysis's building blocks: pattern matching, walk reuse, freeing the tree."""

from __future__ import annotations

import ast
import fnmatch
import gc
import textwrap
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from reviewbot.analysis import gpu
from reviewbot.config import Overrides, build_config
from reviewbot.engine import Checker, FileJob
from reviewbot.packs import load_packs

from conftest import FIXTURES


def fnmatch_reference(qualname: str, patterns: tuple[str, ...]) -> bool:
    """What the pack patterns mean: fnmatch on the qualified name, or on its last part
    for a pattern without a dot."""
    if any(fnmatch.fnmatchcase(qualname, p) for p in patterns):
        return True
    last = qualname.rsplit(".", 1)[-1]
    return any(fnmatch.fnmatchcase(last, p) for p in patterns if "." not in p)


names = st.text(alphabet="ab._AG", max_size=8)
patterns = st.lists(st.text(alphabet="ab._AG*?", max_size=6), max_size=4).map(tuple)


@settings(max_examples=600, deadline=None)
@given(names, patterns)
def test_pattern_matching_agrees_with_fnmatch(qualname, pats):
    assert gpu._matches(qualname, pats) == fnmatch_reference(qualname, pats)


def test_pack_patterns_match_as_documented():
    pats = ("*.step", "test_*", "*Linear", "*GPU*", "__init__", "self.*_model")
    assert gpu._matches("Runner.step", pats)
    assert not gpu._matches("Runner.stepper", pats)
    assert gpu._matches("Suite.test_one", pats)  # a dotless pattern on the last part
    assert gpu._matches("RowParallelLinear", pats)
    assert gpu._matches("MyGPUWorker.run", pats)
    assert gpu._matches("Runner.__init__", pats)
    assert gpu._matches("self.draft_model", pats)
    assert not gpu._matches("draft_model", pats)


TWO_LEVELS = """
import torch

class ModelRunner:
    def __init__(self):
        self.model = torch.nn.Linear(4, 4)

    def execute_model(self, x):
        out = self.model(x)
        ids = self._sample(out)
        return ids.tolist()

    def _sample(self, logits):
        if logits.sum() > 0:
            pass
        return logits.argmax(-1)
"""


def test_a_hot_callee_walked_for_its_return_is_not_walked_again(monkeypatch):
    walked: list[tuple[str, bool]] = []
    run = gpu.FunctionWalker.run

    def counting_run(self):
        walked.append((self.func.qualname, self.report))
        run(self)

    monkeypatch.setattr(gpu.FunctionWalker, "run", counting_run)
    source = textwrap.dedent(TWO_LEVELS)
    packs = load_packs(("pytorch", "inference-engines"), Path("."), None)
    analysis = gpu.analyze(ast.parse(source), packs, source)
    # One walk each: _sample's walk for its return value also found its sites.
    assert sorted(q for q, _ in walked if q != "ModelRunner.__init__") == [
        "ModelRunner._sample", "ModelRunner.execute_model"]
    codes = sorted((site.code, site.function) for site in analysis.sites
                   if site.label.kind == gpu.CUDA)
    assert codes == [("RB101", "ModelRunner.execute_model"), ("RB104", "ModelRunner._sample")]


def test_a_checked_file_leaves_no_reference_cycles():
    """Checking a file frees its trees by reference counting: a cycle between a class and
    its methods would keep every node alive until the cyclic collector walks them all."""
    config = build_config({"select": ["ALL"]}, None, "", FIXTURES, Overrides())
    checker = Checker(config, load_packs(config.rule_packs, config.root, None))
    data = (FIXTURES / "runner" / "model_runner.py").read_bytes()
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        result = checker.check(FileJob("model_runner.py", "model_runner.py", data))
        assert {f.code for f in result.findings} & {"RB101", "RB201"}  # the analysis ran
        assert gc.collect() == 0
    finally:
        if was_enabled:
            gc.enable()
