"""The inserted event-sync helpers return exactly what `.tolist()` returns.

CI has no GPU, so the helpers run on CPU tensors that claim to be on CUDA (a Tensor
subclass whose `is_cuda` is true) with a stand-in for `torch.cuda` (events that count
their calls) and for `pin_memory` (ignored). That drives the helper's real path: the flat
buffer, its growth, the view in the source's shape, the copy and the read. The same
checks run on a real GPU in `reviewbot verify`.
"""

from __future__ import annotations

import ast
import contextlib
import textwrap
import threading
import types

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from conftest import FIXTURES  # noqa: E402
from reviewbot.verify.cases import same  # noqa: E402

DTYPES = [torch.bool, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32]


class FakeCuda(torch.Tensor):
    """A CPU tensor that says it is on CUDA."""

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True


class FakeEvent:
    """Counts what the helper asks of its event (every event made is in ``made``)."""

    made: list["FakeEvent"] = []
    pause = 0.0  # seconds synchronize() waits, to let other threads run meanwhile

    def __init__(self) -> None:
        self.records = 0
        self.syncs = 0
        self.streams: list = []
        FakeEvent.made.append(self)

    def record(self, stream=None) -> None:
        self.records += 1
        self.streams.append(stream)

    def synchronize(self) -> None:
        self.syncs += 1
        if FakeEvent.pause:
            import time

            time.sleep(FakeEvent.pause)


class Events:
    """All events the helpers made since this stand-in was built, summed."""

    def __init__(self) -> None:
        FakeEvent.made = []

    @property
    def records(self) -> int:
        return sum(e.records for e in FakeEvent.made)

    @property
    def syncs(self) -> int:
        return sum(e.syncs for e in FakeEvent.made)


def _shim() -> types.SimpleNamespace:
    allocations = []

    def empty(*args, pin_memory=False, **kwargs):
        allocations.append(pin_memory)
        shim.devices.append(kwargs.get("device"))
        return torch.empty(*args, **kwargs)

    shim = types.SimpleNamespace(**{name: getattr(torch, name) for name in
                                    ("Tensor", "int64", "int32", "float32")})
    shim.empty = empty
    shim.allocations = allocations
    shim.devices = []
    shim.entered = []  # the streams the helper made current

    @contextlib.contextmanager
    def stream(value):
        shim.entered.append(value)
        yield

    shim.cuda = types.SimpleNamespace(Event=FakeEvent, is_available=lambda: True,
                                      current_stream=lambda device=None: ("stream", device),
                                      stream=stream)
    return shim


def _helper_source(path, cls: str | None) -> str:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    body = tree.body
    if cls is not None:
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    func = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == "_to_list")
    return textwrap.dedent(ast.get_source_segment(text, func))


def method_helper(owner=None):
    """The class helper the fixer inserted into the seed runner, bound to a stand-in
    whose class holds the helper's per-thread state, as the fixed class does."""
    shim = _shim()
    namespace = {"torch": shim, "threading": threading}
    exec(_helper_source(FIXTURES / "fix" / "after" / "seed_runner.py", "GPUModelRunner"),
         namespace)
    if owner is None:
        owner = types.SimpleNamespace(_to_list_local=threading.local(), max_num_reqs=4)
    events = Events()
    return (lambda t: namespace["_to_list"](owner, t)), events, shim


def function_helper():
    """The module-level helper the fixer inserted for free functions."""
    shim = _shim()
    namespace = {"torch": shim, "threading": threading}
    exec("_TO_LIST_LOCAL = threading.local()\n" + _helper_source(
        FIXTURES / "fix" / "after" / "free_functions.py", None), namespace)
    return namespace["_to_list"], namespace["_TO_LIST_LOCAL"], shim


@st.composite
def tensors(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=3)))
    seed = draw(st.integers(0, 2**31 - 1))
    generator = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        t = torch.randint(0, 2, shape, generator=generator).bool()
    elif dtype in (torch.int32, torch.int64):
        t = torch.randint(-2**31, 2**31 - 1, shape, generator=generator, dtype=torch.int64)
        t = t.to(dtype)
    else:
        t = (torch.randn(shape, generator=generator) * 1000).to(dtype)
    if t.dim() >= 2 and draw(st.booleans()):
        t = t.transpose(0, 1)  # not contiguous
    elif t.dim() >= 1 and t.shape[0] > 1 and draw(st.booleans()):
        t = t[::2]  # strided
    return t


@settings(max_examples=300, deadline=None)
@given(st.lists(tensors(), min_size=1, max_size=4))
def test_the_method_helper_matches_tolist(batch):
    helper, event, _ = method_helper()
    for tensor in batch:
        assert same(helper(tensor.as_subclass(FakeCuda)), tensor.tolist())
    assert event.records == event.syncs == len(batch)  # the copy path ran every time


@settings(max_examples=150, deadline=None)
@given(st.lists(tensors(), min_size=1, max_size=4))
def test_the_function_helper_matches_tolist(batch):
    helper, state, _ = function_helper()
    for tensor in batch:
        assert same(helper(tensor.as_subclass(FakeCuda)), tensor.tolist())


def test_more_rows_than_the_buffer_grows_it_once():
    helper, event, shim = method_helper()
    big = torch.arange(40).reshape(20, 2)
    assert helper(big.as_subclass(FakeCuda)) == big.tolist()
    assert helper(big[:5].as_subclass(FakeCuda)) == big[:5].tolist()
    assert shim.allocations == [True]  # grown once, pinned; the smaller call reused it


def test_cpu_tensors_take_the_plain_path():
    helper, event, shim = method_helper()
    t = torch.tensor([[1], [2]])
    assert helper(t) == [[1], [2]]
    assert event.records == 0 and shim.allocations == []


def test_zero_d_and_empty():
    helper, _, _ = method_helper()
    for t in (torch.tensor(7), torch.tensor(2.5), torch.tensor(True), torch.empty(0, 3),
              torch.empty(0, dtype=torch.int64)):
        assert same(helper(t.as_subclass(FakeCuda)), t.tolist())


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_the_fixed_runner_builds_without_cuda():
    # Constructing the class must not fail on a machine without CUDA.
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(
        "fixed_seed_runner", FIXTURES / "fix" / "after" / "seed_runner.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    runner = module.GPUModelRunner(vocab_size=32, hidden_size=8, max_num_reqs=4,
                                         max_model_len=16, max_num_batched_tokens=16,
                                         device=torch.device("cpu"))
    ids = torch.tensor([[3], [1]])
    assert runner._to_list(ids) == [[3], [1]]
