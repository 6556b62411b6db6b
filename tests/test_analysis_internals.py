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

from reviewbot.rules.rb101_tolist_on_cuda_tensor import TolistOnCudaTensor
from reviewbot.rules.rb104_implicit_sync import ImplicitSync

from conftest import FIXTURES, check_source


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


# The text tests as first written: clear, but slow to scan (a leading \b or alternation).
REFERENCE_CANDIDATE = (
    r"\b(?:if|while|assert|and|or)\b",
    r"==|!=|<|(?<!-)>|~|logical_|isnan|isinf|non_blocking",
    r"\.(?:tolist|item|cpu|numpy|to|copy_|synchronize|nonzero|unique|unique_consecutive|"
    r"masked_select|argwhere|repeat_interleave|bool|any|all|eq|ne|gt|lt|ge|le|isin)\s*\(",
    r"\b(?:bool|int|float|where|nonzero|unique|masked_select|argwhere|repeat_interleave|"
    r"synchronize)\s*\(",
)
REFERENCE_SELF_CALL = r"(?:self|cls|\))\.(\w+)\s*\("
REFERENCE_RETURNS_VALUE = r"\breturn[ \t(\[{]*[^\s#;)]"

# Source-like text built from the pieces those tests look for, and their near misses.
source_text = st.lists(st.sampled_from([
    "if", "elif", "diff", "while", "assert", "and", "or", "for", "tensor", "band", "x", " ",
    "\n", ".", "(", ")", "=", "==", "!=", "<", ">", "->", "-", "~", "int", "print", "bool",
    "where", "self", "cls", "myself", "tolist", "item", "sync", "synchronize", "return",
    "returns", "_", "[", "#", ";", "non_blocking", "isnan", "float", "u", "nique"]),
    max_size=12).map("".join)


@settings(max_examples=1500, deadline=None)
@given(source_text)
def test_fast_text_tests_agree_with_the_plain_regexes(text):
    import re

    reference = any(re.search(pattern, text) for pattern in REFERENCE_CANDIDATE)
    assert any(test(text) is not None for test in gpu._CANDIDATE_TESTS) == reference
    assert gpu._SELF_CALL.findall(text) == re.findall(REFERENCE_SELF_CALL, text)
    assert bool(gpu._RETURNS_VALUE.search(text)) == bool(re.search(REFERENCE_RETURNS_VALUE, text))


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


def test_a_hot_callee_walked_for_its_return_is_not_walked_again(monkeypatch, tmp_path):
    walked: list[tuple[str, bool]] = []
    run = gpu.FunctionWalker.run

    def counting_run(self):
        walked.append((self.func.qualname, self.report))
        run(self)

    monkeypatch.setattr(gpu.FunctionWalker, "run", counting_run)
    source = textwrap.dedent(TWO_LEVELS)
    packs = load_packs(("pytorch", "inference-engines"), Path("."), None)
    analysis = gpu.analyze(ast.parse(source), packs, source, record_labels=True)
    # One walk each: _sample's walk for its return value also recorded its labels.
    assert sorted(q for q, _ in walked if q != "ModelRunner.__init__") == [
        "ModelRunner._sample", "ModelRunner.execute_model"]
    test = next(n for n in ast.walk(analysis.functions["ModelRunner._sample"].node)
                if isinstance(n, ast.Compare))
    span = (test.lineno, test.col_offset, test.end_lineno, test.end_col_offset)
    assert analysis.labels["ModelRunner._sample"][span][0].kind == gpu.CUDA
    walked.clear()
    # And the rules read those labels: both findings, with no walk of _sample of their own.
    found = [(f.code, f.line) for rule in (TolistOnCudaTensor, ImplicitSync)
             for f in check_source(tmp_path, source, rule) if f.code == rule.code]
    assert sorted(found) == [("RB101", 11), ("RB104", 14)]
    assert sorted(q for q, _ in walked if q == "ModelRunner._sample") == [
        "ModelRunner._sample"] * 2  # once per check, not again for the rule


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


SELF_WRITES = """
class Runner:
    def __init__(self, cfg):
        self.a = 1
        self.b, (self.c, *self.d) = cfg
        self.e: int = 2
        self.f += 1
        other.g = 3
        self.h.i = 4
        for self.j in range(3):
            pass
        with open(cfg) as self.k:
            pass
        try:
            self.l = 5
        except OSError:
            self.m = 6
        finally:
            self.n = 7
        match cfg:
            case 1:
                self.o = 8

    def step(self):
        def inner():
            self.p = 9
        print(self.q)
        self.r[0] = 1
"""


def test_self_writes_of_a_class_are_every_assigned_attribute():
    from reviewbot.fixes.event_sync import _self_writes

    cls = ast.parse(SELF_WRITES).body[0]
    reference = {node.attr for node in ast.walk(cls)
                 if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                 and isinstance(node.value, ast.Name) and node.value.id == "self"}
    before = ast.dump(cls)
    assert _self_writes(cls) == reference == set("abcdefjklmnop")
    assert ast.dump(cls) == before  # the tree is read, never changed


loop_patterns = st.lists(st.text(alphabet="ab_.*", min_size=1, max_size=6), min_size=1,
                         max_size=4).map(tuple)
callee_names = st.text(alphabet="ab_", min_size=1, max_size=6)


@settings(max_examples=800, deadline=None)
@given(loop_patterns, callee_names)
def test_every_call_of_a_loop_callee_spells_one_of_its_words(pats, name):
    words = gpu._loop_words(pats)
    if any(fnmatch.fnmatchcase(name, p.rsplit(".", 1)[-1]) for p in pats):
        # () means "no fixed text": every function must then be walked.
        assert words == () or any(word in f"x.{name}(y)" for word in words)
    assert all(o == w or o not in w for w in words for o in words)  # none holds another


def test_loop_words_keep_only_the_shortest_spelling():
    assert gpu._loop_words(("model", "self.model", "*.model", "self.*_model")) == ("model(",)
    assert gpu._loop_words(("*.draft_*", "*.model")) == ("draft_", "model(")
    assert gpu._loop_words(("*.model", "*")) == ()  # a bare star calls anything


ENGINE_PACKS = load_packs(("pytorch", "inference-engines"), Path("."), None)
WORDS = gpu.trigger_words(ENGINE_PACKS)
file_texts = st.lists(st.sampled_from([*WORDS, "torch", "import torch\n", "cuda", "x", " ",
                                        "execute", "_model", "for", "(", "forwar"]),
                      max_size=8).map("".join)


@settings(max_examples=600, deadline=None)
@given(st.lists(file_texts, min_size=1, max_size=6))
def test_the_file_gate_answers_each_text_alone(texts):
    """The word that opened the last file is tried first; the answer must still be the
    plain one for every file of a run, whatever came before."""
    from reviewbot.rules import _sync

    for text in texts:
        assert _sync._file_words(text, ENGINE_PACKS) == any(word in text for word in WORDS)


def test_paths_that_name_another_platform():
    from reviewbot.analysis.project import other_platform_path

    assert other_platform_path("vllm/models/minimax/amd/ops/sparse_attn.py")
    assert other_platform_path("sglang/srt/hardware_backend/npu/attention.py")
    assert other_platform_path("vllm/v1/worker/tpu_model_runner.py")
    assert other_platform_path("vllm/attention/ops/cpu/paged.py")
    assert not other_platform_path("vllm/models/minimax/nvidia/ops/sparse_attn.py")
    assert not other_platform_path("vllm/attention/backends/hipflash.py")
    assert other_platform_path("vllm/v1/attention/backends/cpu_attn.py")
    assert other_platform_path("vllm/v1/attention/backends/mla/prefill/zen_cpu_sdpa.py")
    assert other_platform_path("sglang/srt/layers/quantization/awq_cpu.py")
    assert other_platform_path("sglang/srt/layers/attention/intel_amx_backend.py")
    assert other_platform_path("sglang/srt/layers/attention/deepseek_v4_backend_hip_radix.py")
    assert not other_platform_path("vllm/kv_transfer/simple_cpu_offload_connector.py")
    assert not other_platform_path("vllm/v1/worker/gpu_model_runner.py")
    assert not other_platform_path("vllm/v1/sample/ops/cpus_per_worker.py")
    assert not other_platform_path("vllm/model_executor/layers/camd_utils.py")


def test_field_calls_read_their_values_and_bound_their_scans(monkeypatch):
    from reviewbot.analysis import gpu

    text = ('d = dict(a=F.batched("image", keep_on_cpu=True),\n'
            '         b=F.flat("image", sizes),\n)\n'
            'y = foo(field=F.batched("video").field)\n'
            'e = {"c": F.batched("i")}\n')
    assert gpu.field_calls(text) == {("F.flat", "b"), ("F.batched", "c")}
    # A file of calls that never close: each match may scan up to 2,000 characters, but
    # all of them together no more than the budget.
    scanned = []
    real = gpu._call_end

    def counting(text, start, limit=2000):
        scanned.append(limit)
        return real(text, start, limit)

    monkeypatch.setattr(gpu, "_call_end", counting)
    monkeypatch.setattr(gpu, "FIELD_SCAN_BUDGET", 50_000)
    assert gpu.field_calls("a=B.c(" * 100_000) == set()
    assert sum(scanned) <= 50_000 + 2000


@given(st.sampled_from([
    "class R:\n    def execute_model(self, x):\n        return x.tolist()\n",
    "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
    "def serve(engine):\n    while True:\n        engine.step()\n",
    "def make():\n    class Runner(Base):\n        def forward(self, x):\n            return x\n"
    "    return Runner\n",
    "if True:\n    class S:\n        def sample_tokens(self):\n            pass\n",
    "def helper(x):\n    return x.item()\n",
    "class Config:\n    def forward(self):\n        pass\n",
    "def loop(xs):\n    for x in xs:\n        print(x)\n",
]))
@settings(max_examples=20, deadline=None)
def test_a_module_whose_analysis_finds_a_root_may_start_a_hot_path(text):
    """The phase-1 test is a superset of the analysis's own hot paths: wherever the
    analysis (with no linked facts) finds a hot function, it says the module may start one."""
    tree = ast.parse(text)
    hot = gpu.ModuleAnalyzer(tree, ENGINE_PACKS, (), text).hot_paths()
    may = gpu.may_start_a_hot_path(tree, ENGINE_PACKS, text)
    assert may or not hot
    if "helper" in text or "Config" in text or "print" in text:
        assert not may  # no entry point, no module class, no loop calling a model


def test_rb103_host_sites_ask_what_its_visitors_ask():
    """`.to(x)` can report only where `x` is labelled the host; `host[i] = v` only where a
    target's tensor is a host tensor; other copies are left to the CUDA sites alone."""
    from reviewbot.rules.rb103_blocking_copy_to_host import BlockingCopyToHost as Rule

    def node(code):
        return ast.parse(code).body[0].value if "=" not in code.split("(")[0] else \
            ast.parse(code).body[0]

    kinds = {"cpu_dev": gpu.DEV_CPU, "dev": gpu.DEV_CUDA, "host": gpu.CPU, "gpu": gpu.CUDA}

    def kind_of(site):
        return kinds.get(site.id) if isinstance(site, ast.Name) else None

    assert Rule.host_sites(node("x.to(cpu_dev)"), kind_of)
    assert Rule.host_sites(node("x.to(host)"), kind_of)
    assert Rule.host_sites(node("x.to(torch.float16, device=cpu_dev)"), kind_of)
    assert not Rule.host_sites(node("x.to(dev)"), kind_of)
    assert not Rule.host_sites(node("x.to(torch.float16)"), kind_of)
    assert not Rule.host_sites(node("x.to()"), kind_of)
    assert Rule.host_sites(node("host[0] = gpu"), kind_of)
    assert not Rule.host_sites(node("gpu[0] = gpu"), kind_of)
    assert Rule.host_sites(node("x.cpu()"), kind_of)
