"""The RB1xx rules as LibCST visitors: they match their own nodes, the analysis only labels,
and the hot functions are parsed alone with the module's own positions."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import libcst.metadata as meta
import pytest

from reviewbot import registry
from reviewbot.analysis import gpu
from reviewbot.context import FileContext
from reviewbot.packs import load_packs
from reviewbot.cst_parse import FactsWrapper, parse_functions
from reviewbot.rule import CstRule
from reviewbot.rules._sync import SyncRule
from reviewbot.rules.rb104_implicit_sync import ImplicitSync
from reviewbot.rules.rb106_unsynchronised_async_copy import UnsynchronisedAsyncCopy

from conftest import REPO, check_source

PACKS = load_packs(("pytorch", "inference-engines"), Path("."), None)


def test_the_analysis_spells_no_rule_code():
    # The sync APIs and the decision to report live with the rules, not in the analysis.
    text = (REPO / "reviewbot" / "analysis" / "gpu.py").read_text(encoding="utf-8")
    assert "RB1" not in text
    assert not hasattr(gpu, "Site")
    for code in ("RB101", "RB102", "RB103", "RB104", "RB105", "RB106", "RB107", "RB109"):
        rule = registry.BY_CODE[code]
        assert issubclass(rule, CstRule) and rule.kind == "cst"
        assert any(name.startswith("visit_") for name in vars(rule)), code


def _nodes(root: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    root.visit(type("Collect", (cst.CSTVisitor,), {
        "on_visit": lambda self, node: found.append(node) or True})())
    return found


SAMPLES = [
    (REPO / "reviewbot" / "analysis" / "gpu.py").read_text(encoding="utf-8"),
    "import torch\r\nclass R:\r\n\t@staticmethod\r\n\tdef f(x):  # é\r\n\t\ts = 'é'; y = x\r\n"
    "\r\n\t\treturn (\r\n\t\t\ty\r\n\t\t).tolist()\r\n\r\n\tasync def g(self):\r\n"
    "\t\tawait self.h(\r\n\t\t\t1)\r\n",
    # A string's lines left of its method (they are the string's: not dedented).
    'import torch\nclass R:\n    def execute_model(self, x):\n        doc = """\nflush left\n'
    '  """; y = x\n        return y.tolist()\n    def f(self): return 1\n',
]


def test_functions_parsed_alone_have_the_module_positions():
    for text in SAMPLES:
        ctx = FileContext("sample.py", text, packs=PACKS)
        module = cst.parse_module(text)
        whole = meta.MetadataWrapper(module, unsafe_skip_copy=True).resolve(
            meta.PositionProvider)
        theirs = [n for n in _nodes(module) if isinstance(n, cst.FunctionDef)]
        infos = list(ctx.gpu.functions.values())
        wrapper = parse_functions(ctx, infos)
        assert isinstance(wrapper, FactsWrapper) and len(wrapper.roots) == len(infos) > 1
        by_line = {whole[f.name].start.line: f for f in theirs}
        checked = 0
        for func in wrapper.roots:
            assert isinstance(func, cst.FunctionDef)
            info = wrapper.facts.function_info(func)
            assert info is not None and info.name == func.name.value
            original = by_line[info.node.lineno]
            wrapper.facts.walking[:] = [func]
            # The lines above a definition (blank, comments) are not cut out with it.
            above = [*original.leading_lines, *(original.decorators[0].leading_lines
                                                if original.decorators else ())]
            skipped = {id(n) for line in above for n in _nodes(line)}
            ours = _nodes(func)
            reference = [n for n in _nodes(original) if id(n) not in skipped]
            assert [type(n) for n in ours] == [type(n) for n in reference]
            for mine, theirs_node in zip(ours, reference):
                assert wrapper.facts.position(mine) == whole[theirs_node]
                checked += 1
        assert checked > 50


TWIN_SAMPLE = """import torch
from a import (b,
               c as d)

@torch.no_grad()
@dec(x=1)
def f(a: int, /, b: "T" = g(1), *args: list[int], k=h(), **kw: dict) -> Out[int]:
    global G
    y = a if b.c > 0 < d else -a
    z = {k: v for k, v in kw.items() if v}, {**kw, "x": (yield)}, [t async for t in a]
    w = f"{a!r:>{b.w}} {c=}" f"{d}" "plain"
    with m(a) as (p, q), n:
        pass
    try:
        p[1:2, ::q](*args, key=not q, **kw)
    except (E, F) as err:
        raise G(err) from None
    match z:
        case {"x": X(a=b), **rest} if rest:
            y = True
    lam = lambda s, *, t=u.v: s @ t
    class Inner(Base, metaclass=M):
        def m(self, o=None): return (o := self.o) or ~o
    assert (x := a), msg
    del y[0], z.w
    if a and b and c or (d and e) and not f and g:
        k = ("one" "two" f"{a:{b}.{c}}", b"x", 1j, 2.5, ..., x[(a, b)], x[a, b:c], x[a],
             x[(0, a), (b, c)], x[(a, b),], x[*a])
    return await_(x) if x is not None else print(*z, sep="")
"""


def test_expressions_meet_their_ast_twins_without_generated_code():
    # Each Name, Attribute, Call, Subscript, Comparison, BinaryOperation, UnaryOperation of
    # a function gets the ast node at the same place (its span is what labels are kept by).
    from reviewbot.providers import _cst_functions, _cst_twins, pair_twins

    checked = 0
    for text in [TWIN_SAMPLE, *SAMPLES]:
        module = cst.parse_module(text)
        positions = meta.MetadataWrapper(module, unsafe_skip_copy=True).resolve(
            meta.PositionProvider)
        ours: list[cst.FunctionDef] = []
        for stmt in module.body:
            if isinstance(stmt, cst.FunctionDef):
                ours.append(stmt)
            if isinstance(stmt, cst.BaseCompoundStatement):
                _cst_functions(stmt, ours)
        tree = ast.parse(text)
        theirs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                                 ast.AsyncFunctionDef))]
        lines = text.splitlines(True)
        for func in ours:
            start = positions[func.name].start.line
            target = next(n for n in theirs if n.lineno == start)
            paired = pair_twins(func, target)
            assert paired is not None, func.name.value
            twins, chained = paired
            nodes: list[cst.CSTNode] = []
            _cst_twins(func, nodes)
            assert len(nodes) == len(twins)
            # The inner links of a boolean chain have no ast node at their place.
            places = {(n.lineno, n.col_offset, n.end_lineno, n.end_col_offset)
                      for n in ast.walk(target) if hasattr(n, "lineno")}
            for node in _nodes(func):
                if id(node) in chained:
                    place = positions[node]
                    assert (place.start.line, place.start.column, place.end.line,
                            place.end.column) not in places
            for node in nodes:
                twin, place = twins[id(node)], positions[node]

                def column(line: int, offset: int) -> int:
                    return len(lines[line - 1].encode("utf-8")[:offset].decode("utf-8"))

                # A tuple's ast span holds its parentheses (the analysis's labels too).
                around = min(1, len(node.lpar)) if isinstance(node, cst.Tuple) else 0
                assert (twin.lineno, column(twin.lineno, twin.col_offset), twin.end_lineno,
                        column(twin.end_lineno, twin.end_col_offset)) == (
                    place.start.line, place.start.column - around, place.end.line,
                    place.end.column + around)
                checked += 1
    assert checked > 1000
    # Trees that do not line up give no twins (the spans are then computed).
    func = cst.parse_module("def f(x):\n    return x.y\n").body[0]
    other = ast.parse("def f(x):\n    return x.z\n").body[0]
    assert pair_twins(func, other) is None


RUNNER = """import torch

class ModelRunner:
    def __init__(self):
        self.ids = torch.zeros(4, device="cuda")

    def load_model(self):
        return self.ids.tolist()

    def execute_model(self):
        return self._read()

    def _read(self):
        return self.ids.tolist()
"""


# The event-synced helper, already in the class: the fix only calls it.
HELPER = """
    def _to_list(self, t):
        pinned = self.pinned[: t.numel()].view(t.shape)
        pinned.copy_(t, non_blocking=True)
        self.event.record()
        self.event.synchronize()
        return pinned.tolist()
"""


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts LibCST parses as modules from now on (the helper's own code left out)."""
    parsed: list[str] = []
    real = cst.parse_module

    def parse(text, *args, **kwargs):
        if "ModelRunner" in text or "def _read" in text:
            parsed.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(cst, "parse_module", parse)
    return parsed


def test_only_the_hot_functions_are_parsed(tmp_path, monkeypatch):
    parsed = _parses(monkeypatch)
    rule = registry.BY_CODE["RB101"]
    findings = check_source(tmp_path, RUNNER + HELPER, rule)
    assert [(f.line, len(f.fix.edits)) for f in findings if f.fix] == [(14, 1)]
    # execute_model (hot, no candidate) and the cold functions are not parsed at all.
    assert parsed == ["if 1:\n    def _read(self):\n        return self.ids.tolist()\n"]


def test_a_fix_that_adds_the_helper_parses_the_module_once(tmp_path, monkeypatch):
    parsed = _parses(monkeypatch)
    rule = registry.BY_CODE["RB101"]
    findings = check_source(tmp_path, RUNNER, rule)
    assert [(f.line, len(f.fix.edits)) for f in findings if f.fix] == [(14, 2)]
    # The helper joins the class in LibCST's tree of the whole file: parsed for the fix.
    assert parsed == ["if 1:\n    def _read(self):\n        return self.ids.tolist()\n", RUNNER]


def test_the_tests_a_debug_guard_skips_have_no_label(tmp_path):
    source = ("import torch\nclass R:\n    def execute_model(self, n):\n"
              "        t = torch.zeros(n, device='cuda')\n"
              "        if self.debug and t.any():\n            pass\n"
              "        if t.any() or n:\n            pass\n"
              "        x = t.any() and n\n")
    found = [(f.line, f.message.split(" in hot path")[0])
             for f in check_source(tmp_path, source, ImplicitSync)]
    assert found == [(7, "the CUDA tensor `t.any()` used as a condition"),
                     (9, "`t.any()` (a CUDA tensor) in a boolean operator")]


def test_a_boolean_chain_is_one_operator_as_in_ast(tmp_path):
    source = ("import torch\nclass R:\n    def execute_model(self, n):\n"
              "        t = torch.zeros(n, device='cuda')\n"
              "        x = t.any() and t.all() and n\n"
              "        y = n and (t.any() and n)\n")
    found = sorted((f.line, f.column, f.end_column, f.message.split(" (a CUDA")[0])
                   for f in check_source(tmp_path, source, ImplicitSync))
    assert found == [(5, 13, 38, "`t.all()`"), (5, 13, 38, "`t.any()`"),
                     (6, 20, 33, "`t.any()`")]


def test_an_unwaited_read_is_reported_once_at_the_read(tmp_path):
    source = ("import torch\ndef f(x, pinned):\n    y = x.cuda()\n"
              "    pinned.copy_(y, non_blocking=True)\n    a = pinned[0]\n"
              "    b = pinned[1]\n    for row in pinned:\n        pass\n")
    found = [(f.line, f.column) for f in check_source(tmp_path, source, UnsynchronisedAsyncCopy)]
    assert found == [(5, 9)]
    analysis = gpu.analyze(ast.parse(source), PACKS, source)
    assert list(analysis.unwaited["f"].values()) == [("pinned", 4)]


def test_a_sync_rule_is_one_module_of_matching(tmp_path):
    """A new sync rule needs no change in the analysis: it matches its node and reads
    the facts."""

    class NumpyOnCuda(SyncRule):
        """`.numpy()` of a CUDA tensor."""

        code = "RB199"
        name = "numpy-on-cuda"
        summary = "numpy"
        consequence = "it raises"
        CANDIDATES = ("numpy",)

        def visit_Call(self, node: cst.Call) -> None:
            chain = self.reporting_here()
            receiver = self.receiver(node)
            if chain is not False and self.method_name(node) == "numpy" and \
                    receiver is not None and receiver.kind == "cuda":
                self.report_sync(node, "`.numpy()`", receiver.kind, receiver.evidence, chain)

    source = RUNNER.replace("self.ids.tolist()", "self.ids.numpy()")
    found = [(f.line, f.message) for f in check_source(tmp_path, source, NumpyOnCuda)]
    assert found == [(14, "`.numpy()` in hot path execute_model -> _read: it raises "
                          "[allocated on the device 'cuda' at line 5]")]
