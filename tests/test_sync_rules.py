"""RB1xx: device inference, hot paths and the sync sites, rule by rule and end to end."""

from __future__ import annotations

import json
import textwrap

import pytest

from reviewbot import registry

from conftest import REPO, check_source

RB101 = registry.get_rule("RB101")
RB102 = registry.get_rule("RB102")
RB103 = registry.get_rule("RB103")
RB104 = registry.get_rule("RB104")
RB105 = registry.get_rule("RB105")
RB106 = registry.get_rule("RB106")
RB109 = registry.get_rule("RB109")


def findings(tmp_path, source: str, rule, **options):
    return [f for f in check_source(tmp_path, textwrap.dedent(source), rule, options)
            if f.code == rule.code]


def lines(tmp_path, source: str, rule, **options) -> list[int]:
    return [f.line for f in findings(tmp_path, source, rule, **options)]


RUNNER = """
import torch as t

class ModelRunner:
    def __init__(self, device):
        self.buf = t.zeros(8, device="cuda")
        self.host = t.zeros(8)
        self.later = None

    def load_model(self):
        self.later = t.ones(8, device="cuda")

    def execute_model(self, n):
        {body}
"""


def runner(body: str) -> str:
    return RUNNER.format(body=textwrap.indent(textwrap.dedent(body), " " * 8).strip())


@pytest.mark.parametrize("body,expected", [
    ("return self.buf.tolist()", [14]),  # an attribute assigned in __init__
    ("x = self.buf\ny = x\nreturn y.tolist()", [16]),  # aliasing
    ("a, b = self.buf, self.host\nreturn a.tolist() + b.tolist()", [15]),  # tuple unpacking
    ("return self.host.tolist()", []),  # a CPU tensor
    ("return self.buf.cpu().tolist()", []),  # RB103's, not RB101's
    ("return self.later.tolist()", [14]),  # None first, a CUDA tensor later
    ("import numpy as np\nreturn np.zeros(3).tolist()", []),  # numpy
    ("return [1, 2].copy()", []),
    ("return self.buf[:n].tolist()  # reviewbot: ignore[RB101]", []),
])
def test_tolist_device_inference(tmp_path, body, expected):
    assert lines(tmp_path, runner(body), RB101) == expected


def test_branches_merge_what_is_known(tmp_path):
    body = """
    if n > 2:
        x = self.buf
    else:
        x = self.make(n)
    return x.tolist()
    """
    assert lines(tmp_path, runner(body), RB101) == [18]


def test_helper_returns_and_arguments_carry_the_label(tmp_path):
    source = """
    import torch

    class Runner:
        def execute_model(self, n):
            ids = self._sample(n)
            return self._read(ids)

        def _sample(self, n):
            return torch.randint(0, 10, (n,), device="cuda")

        def _read(self, ids):
            return ids.tolist()
    """
    (finding,) = findings(tmp_path, source, RB101)
    assert finding.line == 13
    assert "hot path execute_model -> _read" in finding.message
    assert "passed by a caller" in finding.message and "returned by Runner._sample" in \
        finding.message


def test_a_tensor_handed_down_several_calls_says_passed_by_a_caller_once(tmp_path):
    """Each hand-off to a parameter does not prefix the reason again: the reason says where
    the tensor came from, not how many calls it went through (the chain says that)."""
    source = """
    import torch
    from torch import nn


    def _penalty(logits):
        return logits + 1


    def _get_ranks(x, indices):
        vals = x[torch.arange(0, len(x), device=x.device), indices]
        return (x > vals[:, None]).sum(1)


    def _read(ranks):
        return ranks.tolist()


    def get_logprobs(logprobs, ids):
        ranks = _get_ranks(logprobs, ids)
        return ranks.to("cpu"), _read(ranks), _forward_again(logprobs)


    def _forward_again(values):
        return _last(values)


    def _last(values):
        return values.item()


    class Sampler(nn.Module):
        def forward(self, logits: torch.Tensor, ids: torch.Tensor):
            logits = _penalty(logits)
            logprobs = torch.log_softmax(logits, dim=-1)
            return get_logprobs(logprobs, ids)
    """
    reported = [f for rule in (RB101, RB102, RB103) for f in findings(tmp_path, source, rule)]
    assert {f.code for f in reported} == {"RB101", "RB102", "RB103"}
    for finding in reported:
        assert "passed by a caller: passed by a caller" not in finding.message
    (last,) = [f for f in reported if f.code == "RB102"]  # three calls down from forward
    assert "hot path forward -> get_logprobs -> _forward_again -> _last" in last.message
    assert last.message.endswith("[passed by a caller: computed by torch.log_softmax from "
                                 "returned by _penalty() (passed by a caller: an input of "
                                 "Sampler.forward, an nn.Module whose outputs are taken to be "
                                 "on the GPU)]")


def test_start_up_code_is_never_hot(tmp_path):
    source = """
    import torch

    class Runner:
        def execute_model(self):
            self.profile_run()
            self.load_model()

        def profile_run(self):
            torch.cuda.synchronize()

        def load_model(self):
            return torch.zeros(1, device="cuda").item()
    """
    assert findings(tmp_path, source, RB105) == []
    assert findings(tmp_path, source, RB102) == []


def test_cold_functions_are_not_reported(tmp_path):
    source = """
    import torch

    def report_stats(x):
        return torch.zeros(4, device="cuda").sum().item()
    """
    assert findings(tmp_path, source, RB102) == []


def test_import_aliases_resolve(tmp_path):
    source = """
    from torch import cuda
    import torch as th

    class Runner:
        def execute_model(self):
            cuda.synchronize()
            th.cuda.current_stream().synchronize()
            th.accelerator.synchronize()
    """
    assert lines(tmp_path, source, RB105) == [7, 8, 9]


def test_syncs_in_configured_blocks_are_reported_with_a_note(tmp_path):
    # The block says the wait is expected; the host waits all the same, as for readbacks.
    source = """
    import torch

    class Runner:
        def __init__(self):
            self.events = [torch.cuda.Event() for _ in range(2)]

        def execute_model(self, i: int):
            with gpu_sync_allowed():
                torch.cuda.synchronize()
                self.events[i].synchronize()
            torch.cuda.synchronize()
    """
    found = {(f.line, f.code): f.message for f in findings(tmp_path, source, RB105)
             + findings(tmp_path, source, RB109)}
    assert sorted(found) == [(10, "RB105"), (11, "RB109"), (12, "RB105")]
    assert "inside a sync-allowed block" in found[(10, "RB105")]
    assert "inside a sync-allowed block" in found[(11, "RB109")]
    assert "sync-allowed" not in found[(12, "RB105")]


def test_readbacks_in_sync_allowed_blocks_are_reported_with_a_note(tmp_path):
    source = """
    import torch

    class Runner:
        def execute_model(self, x: torch.Tensor):
            lens = torch.ones(4, device="cuda")
            with gpu_sync_allowed():
                first = lens.tolist()
                n = lens.sum().item()
            return first, n, lens.tolist()
    """
    found = {(f.line, f.code): f.message for f in findings(tmp_path, source, RB101)
             + findings(tmp_path, source, RB102)}
    assert sorted(found) == [(8, "RB101"), (9, "RB102"), (10, "RB101")]
    assert "inside a sync-allowed block" in found[(8, "RB101")]
    assert "inside a sync-allowed block" in found[(9, "RB102")]
    assert "sync-allowed" not in found[(10, "RB101")]


def test_unknown_devices_only_with_include_unknown(tmp_path):
    source = """
    import torch

    class Runner:
        def execute_model(self, batch):
            return batch.ids.tolist()
    """
    assert findings(tmp_path, source, RB101) == []
    (finding,) = findings(tmp_path, source, RB101, **{"include-unknown": True})
    assert finding.severity == "warning" and "device unknown" in finding.message


def test_module_outputs_and_forward_inputs_are_on_the_gpu(tmp_path):
    source = """
    import torch
    from torch import nn

    class Head(nn.Module):
        def forward(self, hidden: torch.Tensor) -> torch.Tensor:
            keep = hidden > 0
            return hidden[keep]

    class Runner:
        def __init__(self):
            self.head = Head()

        def execute_model(self, hidden):
            out = self.head(hidden)
            return out.max().item()
    """
    assert lines(tmp_path, source, RB104) == [8]
    (finding,) = findings(tmp_path, source, RB102)
    assert "output of self.head" in finding.message


@pytest.mark.parametrize("body,expected", [
    ("x = self.buf.nonzero()", [14]),
    ("x = self.buf[self.buf > 0]", [14]),
    ("x = t.masked_select(self.buf, self.buf > 0)", [14]),
    ("x = t.repeat_interleave(self.buf, self.buf)", [14]),
    ("x = t.repeat_interleave(self.buf, self.buf, output_size=16)", []),
    ("x = bool(self.buf.any())", [14]),
    ("assert self.buf.all()", [14]),
    ("x = self.buf.sum() > 0 and n", [14]),
    ("x = self.host[self.host > 0]", []),
    ("if n:\n    x = [1, 2][self.buf[0]]", [15]),
])
def test_implicit_syncs(tmp_path, body, expected):
    assert lines(tmp_path, runner(body), RB104) == expected


@pytest.mark.parametrize("body,expected", [
    ("return self.buf.cpu()", [14]),
    ("return self.buf.numpy(force=True)", [14]),
    ("return self.buf.numpy()", []),  # torch raises for a CUDA tensor: a host one
    ("return self.buf.to('cpu')", [14]),
    ("return self.buf.to(t.device('cpu'))", [14]),
    ("return self.buf.to(self.host)", [14]),
    ("self.host.copy_(self.buf)", [14]),
    ("self.host.copy_(self.buf, non_blocking=True)", []),
    ("return self.host.cpu()", []),
])
def test_blocking_copies(tmp_path, body, expected):
    assert lines(tmp_path, runner(body), RB103) == expected


def test_async_copy_race_is_reported_everywhere(tmp_path):
    source = """
    import torch

    def read_back(ids, pinned, event):
        pinned[:4].copy_(ids.cuda(), non_blocking=True)
        first = pinned[0]
        event.record()
        event.synchronize()
        return first, pinned.tolist()
    """
    (finding,) = findings(tmp_path, source, RB106)
    assert finding.line == 6 and "line 5" in finding.message
    assert "hot path" not in finding.message


def test_user_rule_pack_adds_an_entry_point(tmp_path, run_cli):
    (tmp_path / "engine.py").write_text(textwrap.dedent("""
        import torch

        class Engine:
            def decode_once(self):
                return torch.ones(2, device="cuda").tolist()
    """))
    assert run_cli(["check", ".", "--no-cache", "--select", "RB101"], cwd=tmp_path).code == 0
    (tmp_path / "pack.yml").write_text("name: mine\nhot-paths:\n  entry-points: ['*.decode_once']\n")
    (tmp_path / ".reviewbot.yml").write_text(
        "rule-packs: [pytorch, inference-engines, pack.yml]\n")
    result = run_cli(["check", ".", "--no-cache", "--select", "RB101"], cwd=tmp_path)
    assert result.code == 1 and "hot path decode_once" in result.out


def test_explain_hot_paths(run_cli):
    result = run_cli(["check", "fixtures/sync", "--explain-hot-paths"], cwd=REPO)
    assert result.code == 0
    assert "fixtures/sync/runner_hazards.py: GPUModelRunner._update_states  " \
           "(execute_model -> _update_states)" in result.out
    assert "profile_run" not in result.out  # start-up code
    assert result.out.splitlines()[-1] == "7 hot functions in 2 files"


def test_sync_fixtures_flag_every_hazard_line_and_nothing_else(run_cli):
    result = run_cli(["check", "fixtures/sync", "--no-cache", "--output-format", "json"],
                     cwd=REPO)
    found = {(f["path"].rsplit("/", 1)[-1], f["line"], f["code"]) for f in json.loads(result.out)}
    hazards = set()
    for name in ("runner_hazards.py", "runner_clean.py"):
        text = (REPO / "fixtures" / "sync" / name).read_text()
        for number, line in enumerate(text.splitlines(), start=1):
            if "# HAZARD " in line:
                hazards.add((name, number, line.split("# HAZARD ")[1].split(":")[0]))
    assert len(hazards) == 7
    assert found == hazards


def test_code_for_another_accelerator_is_not_cuda(tmp_path):
    source = """
    import torch
    import torch_xla.core.xla_model as xm

    class Runner:
        def execute_model(self):
            return torch.zeros(4, device=xm.xla_device()).cuda().tolist()
    """
    assert findings(tmp_path, source, RB101) == []
    assert len(findings(tmp_path, source.replace("import torch_xla.core.xla_model as xm", ""),
                        RB101)) == 1
    # Imported only on that platform (`if is_xla():`, `try:`): the module is CUDA code too.
    for guarded in ("if is_xla():\n        import torch_xla.core.xla_model as xm",
                    "try:\n        import torch_xla.core.xla_model as xm\n"
                    "    except ImportError:\n        xm = None"):
        both = source.replace("import torch_xla.core.xla_model as xm", guarded).replace(
            "xm.xla_device()", '"cpu"')
        assert len(findings(tmp_path, both, RB101)) == 1, guarded
    # A function that uses the platform's stack is that platform's code.
    npu = '''
    import torch

    if is_npu():
        import torch_npu

    class Runner:
        def execute_model(self, x):
            self.sample_npu(x)
            if is_npu():
                torch_npu.warm(x)
            return torch.zeros(4, device="cuda").tolist()

        def sample_npu(self, x):
            y = torch_npu.top_k(x)
            return torch.zeros(4, device="cuda").tolist()
    '''
    assert lines(tmp_path, npu, RB101) == [12]


def test_work_behind_a_flag_it_clears_runs_once(tmp_path):
    source = """
    import torch
    from torch import nn

    class Attention(nn.Module):
        def forward(self, q: torch.Tensor) -> torch.Tensor:
            if self.calculate_scales:
                self.calc_scales(q)
            if self.first_step:
                self.peak = q.max().item()
                self.first_step = False
            return q * 2

        def calc_scales(self, q):
            self.scale = q.abs().max().item()
            self.calculate_scales = False
    """
    assert findings(tmp_path, source, RB102) == []
    # Without the flag being cleared, both are per-step syncs.
    every_step = source.replace("self.calculate_scales = False", "pass").replace(
        "self.first_step = False", "pass")
    assert lines(tmp_path, every_step, RB102) == [10, 15]


def test_factories_in_a_module_constructor_follow_the_default_device(tmp_path):
    source = """
    import torch
    from torch import nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.tensor(1.0)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.scale.copy_(x.max())
            return x
    """
    # The layer may be built under torch.device("cuda"): not a known host tensor.
    assert findings(tmp_path, source, RB103) == []


def test_loops_and_comprehensions_carry_the_label(tmp_path):
    source = """
    import torch

    class Runner:
        def __init__(self):
            self.logits = torch.zeros((4, 8), device="cuda")

        def execute_model(self, names):
            rows = [row.argmax().tolist() for row in self.logits]
            for name, row in zip(names, self.logits):
                print(name, row.max().item())
            for i, row in enumerate(self.logits):
                row.cpu()
            return rows
    """
    assert lines(tmp_path, source, RB101) == [9]
    assert lines(tmp_path, source, RB102) == [11]
    assert lines(tmp_path, source, RB103) == [13]


def test_include_unknown_flag_reaches_the_rules(tmp_path, run_cli):
    (tmp_path / "runner.py").write_text(textwrap.dedent("""
        import torch

        class Runner:
            def execute_model(self, batch):
                return batch.ids.tolist(), batch.n.item(), batch.x.cpu()
    """))
    assert run_cli(["check", "runner.py", "--no-cache", "--select", "RB1"], cwd=tmp_path).code == 0
    result = run_cli(["check", "runner.py", "--no-cache", "--select", "RB1", "--include-unknown",
                      "--output-format", "json"], cwd=tmp_path)
    assert sorted(f["code"] for f in json.loads(result.out)) == ["RB101", "RB102", "RB103"]
    assert {f["severity"] for f in json.loads(result.out)} == {"warning"}


def test_a_loop_that_calls_a_model_is_hot(tmp_path):
    source = """
    import torch

    def generate(model, input_ids, steps):
        tokens = []
        for _ in range(steps):
            logits = model(input_ids)
            next_id = logits[:, -1].argmax(-1)
            tokens.append(next_id.item())
        return tokens

    def summarise(values):
        return torch.zeros(3, device="cuda").sum().item()
    """
    (finding,) = findings(tmp_path, source, RB102)
    assert finding.line == 9
    assert "hot path generate (a loop calling model)" in finding.message


def test_a_start_up_loop_that_calls_a_model_is_not_hot(tmp_path):
    source = """
    import torch

    class Runner:
        def __init__(self):
            self.model = torch.nn.Linear(4, 4)

        def _dummy_run(self, input_ids, steps):
            for _ in range(steps):
                logits = self.model(input_ids)
                print(logits.argmax(-1).item())

        def decode_loop(self, input_ids, steps):
            for _ in range(steps):
                logits = self.model(input_ids)
                print(logits.argmax(-1).item())
    """
    (finding,) = findings(tmp_path, source, RB102)  # the same loop, outside start-up code
    assert finding.line == 16 and "decode_loop (a loop calling self.model)" in finding.message


@pytest.mark.parametrize("body,expected", [
    # The CPU path of code that takes tensors on either device: a helper called only there
    # runs on host tensors, and a test that holds only on the host guards what follows it.
    ("if self.buf.device.type == 'cpu':\n    return self._host_mask(self.buf)\n"
     "return self.buf", []),
    ("if str(self.buf.device) == 'cpu':\n    return self._host_mask(self.buf)\n"
     "return self.buf", []),
    ("if self.buf.device == t.device('cuda'):\n    return self.buf\n"
     "return self._host_mask(self.buf)", []),
    ("if self.buf.device.type != 'cpu':\n    return self.buf\n"
     "return self._host_mask(self.buf)", []),  # only host tensors get past the return
    ("if self.buf.device.type != 'cpu':\n    n = 1\n"
     "return self._host_mask(self.buf)", [19]),  # every tensor gets here
    ("if self.buf.device.type == 'cuda':\n    return self._host_mask(self.buf)\n"
     "return self.buf", [19]),
    ("if n and self.buf.device.type == 'cpu':\n    return self._host_mask(self.buf)\n"
     "return self.buf", []),
])
def test_code_behind_a_host_device_test_is_not_hot(tmp_path, body, expected):
    source = runner(body) + (
        "\n    def _host_mask(self, x):\n        return x.tolist()\n")
    assert lines(tmp_path, source, RB101) == expected


def test_a_host_check_guards_the_rest_of_an_and(tmp_path):
    body = """
    if not self.buf.is_cuda and not t.equal(self.buf, self.buf):
        raise RuntimeError("differ")
    if n > 2 and not t.equal(self.buf, self.buf):
        raise RuntimeError("differ")
    """
    assert lines(tmp_path, runner(body), RB104) == [16]


def test_a_factory_given_keyword_arguments_by_unpacking_may_be_on_the_gpu(tmp_path):
    body = """
    options = {"device": self.buf.device}
    lens = t.zeros(8, dtype=t.int32, **options)
    lens.copy_(self.buf)
    host = t.zeros(8, dtype=t.int32)
    host.copy_(self.buf)
    """
    assert lines(tmp_path, runner(body), RB103) == [18]


def test_a_sync_in_a_loop_body_is_reported_once(tmp_path):
    body = """
    for height, width in self.buf.view(4, 2):
        height, width = int(height), int(width)
    """
    found = findings(tmp_path, runner(body), RB104)
    assert [(f.line, f.column) for f in found] == [(15, 29), (15, 42)]


def test_code_that_runs_only_when_something_failed_is_not_per_step(tmp_path):
    body = """
    if n < 0:
        rows = self.buf.tolist()
        raise ValueError(f"bad rows {rows}")
    try:
        n = n + 1
    except RuntimeError:
        print(self.buf.tolist())
    if self.buf.sum() > n:
        raise ValueError("too large")
    return self.buf.tolist()
    """
    assert lines(tmp_path, runner(body), RB101) == [23]
    assert lines(tmp_path, runner(body), RB104) == [21]


def test_a_buffer_allocated_for_callers_that_pass_none_is_on_the_usual_path(tmp_path):
    source = runner("return self._indices(self.buf), self._lens(self.buf)") + (
        "\n    def _indices(self, lens, out=None):\n"
        "        if out is None:\n"
        "            out = t.empty(int(lens.sum().item()), device=lens.device)\n"
        "        return out\n"
        "\n    def _lens(self, lens, lens_host=None):\n"
        "        if lens_host is None:\n"
        "            lens_host = int(lens.sum().item())\n"
        "        return lens_host\n")
    # The buffer is made whenever a caller passes none; a value is computed only when a
    # caller did not pass the one it had.
    assert lines(tmp_path, source, RB102) == [18]


def test_a_block_that_returns_hands_nothing_on_and_torch_joins_are_tensors(tmp_path):
    # After `if isinstance(x, list): return x[i]`, x is not the list; `torch.cat(parts)`
    # of tensors of unknown device is a tensor: indexing either with a CUDA tensor is a
    # gather on the GPU, not a Python container's `__index__`. The last line indexes a
    # real list.
    source = """
    import torch

    class Runner:
        def execute_model(self, x, rows):
            idx = torch.arange(4, device="cuda")
            if isinstance(x, (tuple, list)):
                return x[range(2)]
            a = x[idx]
            parts = [row for row in rows]
            b = torch.cat(parts)[idx]
            names = ["k", "v"]
            return a, b, names[idx[0]]
    """
    assert lines(tmp_path, source, RB104) == [13]


def test_an_isinstance_test_narrows_the_rest_of_an_and(tmp_path):
    # `isinstance(v, list) and v`: the second operand is a list's truth, not a tensor's.
    # The field and the local are CUDA tensors elsewhere; the last test is the control.
    source = """
    import torch

    class Runner:
        def __init__(self):
            self.embeds = torch.zeros(8, device="cuda")

        def execute_model(self, x):
            y = torch.ones(2, device="cuda")
            if isinstance(self.embeds, list) and self.embeds:
                pass
            if isinstance(y, (list, tuple)) and y:
                pass
            if x and y:
                pass
    """
    assert lines(tmp_path, source, RB104) == [14]


def test_a_switch_named_for_another_accelerator_guards_its_block(tmp_path):
    # `if _use_aiter_gfx95:` (ROCm's kernels), `if use_intel_amx_backend(layer):` (a CPU
    # backend's): their blocks run off CUDA, and so does the `else` of `if not ...:`. A
    # switch named for something else (`use_triton`), or for CPU offloading, guards nothing.
    body = """
    if self._use_aiter_gfx95:
        a = self.buf.tolist()
    if use_intel_amx_backend(n):
        a = self.buf.tolist()
    if not self.use_npu_graph:
        a = n
    else:
        a = self.buf.tolist()
    if self.use_triton:
        a = self.buf.tolist()
    if self.use_cpu_offload:
        a = self.buf.tolist()
    if _is_cpu_amx_available:
        a = self.buf.tolist()
    if self.skip_aiter_moe:
        a = self.buf.tolist()
    return a
    """
    # `_is_cpu_amx_available` names AMX; `skip_aiter_moe` says no to ROCm's kernels, so its
    # block is the CUDA path.
    assert lines(tmp_path, runner(body), RB101) == [23, 25, 29]


def test_a_cuda_mask_puts_what_it_indexes_on_the_gpu(tmp_path):
    # torch refuses a CUDA index into a host tensor, a numpy array or a list, so what a CUDA
    # boolean mask indexes is a CUDA tensor even when nothing else says so. A mask only
    # named so, of unknown device, says nothing.
    source = """
    import torch
    from helpers import encode, lengths_of

    class ModelRunner:
        def execute_model(self, x, n):
            out = encode(x)
            mask = torch.arange(n, device="cuda") < 4
            kept = out[mask]
            other_mask = lengths_of(x)
            return kept, out[other_mask]
    """
    found = findings(tmp_path, source, RB104)
    assert [f.line for f in found] == [9]
    assert "the CUDA mask puts the tensor on the GPU" in found[0].message


def test_a_transformers_model_runs_on_the_gpu(tmp_path):
    # A model built or loaded from Hugging Face's `transformers` is an nn.Module, as one of
    # torch.nn is: what calling it returns is on the model's device. Its configs and
    # processors are not models. An attribute that is such a model or None is optional.
    source = """
    import torch
    from transformers import AutoConfig, AutoModel, WhisperEncoder

    class ModelRunner:
        def __init__(self, config, with_audio):
            self.tower = AutoModel.from_config(config)
            self.encoder = WhisperEncoder(config) if with_audio else None
            self.cfg = AutoConfig.from_pretrained("x")

        def execute_model(self, x):
            a = self.tower(x).tolist()
            b = self.encoder(x).tolist()
            c = self.cfg(x).tolist()
            return a, b, c
    """
    assert lines(tmp_path, source, RB101) == [12, 13]


def test_zip_strict_pairs_up_rows(tmp_path):
    body = """
    out = []
    for row, flag in zip(self.buf, names, strict=True):
        out.append(row.tolist())
    return out
    """
    assert lines(tmp_path, runner(body), RB101) == [16]



def test_a_host_index_into_a_cuda_tensor_is_a_blocking_copy(tmp_path):
    # Measured (benchmarks/gpu_checks/mixed_device_index.py): a host index tensor, pinned
    # or not, or a list, is copied to the GPU and the copy waits for the stream; a host
    # boolean mask read does not wait, written through it does; a CUDA index is no copy.
    source = """
    import torch

    class ModelRunner:
        def execute_model(self, n, ids):
            logits = torch.zeros(n, device="cuda")
            idx_cpu = torch.arange(n)
            pinned = torch.arange(n, pin_memory=True)
            keep = torch.zeros(n, dtype=torch.bool)
            idx = torch.arange(n, device="cuda")
            a = logits[idx_cpu]
            b = logits[pinned]
            c = logits[[0, 2]]
            d = logits[keep]
            logits[keep] = 1.0
            e = logits[idx]
            return a, b, c, d, e
    """
    rule = registry.get_rule("RB107")
    found = findings(tmp_path, source, rule)
    assert [f.line for f in found] == [11, 12, 13, 15]
    assert "host index is copied to the GPU" in found[0].message


def test_event_waits_are_warnings(tmp_path):
    # RB109 is on by default, as a warning; it reports an event's wait (by type, or by a
    # name that says event), not a stream's (RB105's) and not the fix helper's own wait.
    source = """
    import torch

    class ModelRunner:
        def __init__(self):
            self.ev = torch.cuda.Event()
            self.stream = torch.cuda.Stream()

        def execute_model(self, result, t):
            self.ev.record()
            self.ev.synchronize()
            result.copy_done.synchronize()
            self._copy_events[0].synchronize()
            self.stream.synchronize()
            return self._to_list(t), self.read_back(t), self.read_pair(t, t)

        def _to_list(self, t):
            self.ev.synchronize()
            return t.tolist()

        def read_back(self, t):
            pinned = self.host[:t.shape[0]]
            pinned.copy_(t, non_blocking=True)
            self.ev.record()
            self.ev.synchronize()
            return pinned.tolist()

        def read_pair(self, t, u):
            pinned = self.host[:t.shape[0]]
            pinned.copy_(t, non_blocking=True)
            self.ev.record()
            self.ev.synchronize()
            return pinned.tolist()
    """
    rule = registry.get_rule("RB109")
    assert rule.default_enabled and rule.severity == "warning"
    # A helper of the fix's shape under another name is the fix's wait; with another
    # parameter it is not that shape.
    assert lines(tmp_path, source, rule) == [11, 12, 13, 32]


def test_a_string_key_reads_a_mapping_not_a_tensor(tmp_path):
    # `inputs["type"]` of something taken for a CUDA tensor is a mapping's value: a tensor
    # takes no string key. An element of the tensor compared in a condition still syncs.
    body = """
    if self.buf["type"] == "image":
        return 0
    if self.buf[0] == 1:
        return 1
    return 2
    """
    assert lines(tmp_path, runner(body), RB104) == [16]


def test_a_tensor_written_through_a_host_mask_is_no_blocking_copy(tmp_path):
    # Measured: `cuda[cpu_mask] = 1.0` waits, `cuda[cpu_mask] = cuda[cpu_mask] * 2` does not.
    source = """
    import torch

    class ModelRunner:
        def execute_model(self, n):
            logits = torch.zeros(n, device="cuda")
            keep = torch.zeros(n, dtype=torch.bool)
            logits[keep] = logits[keep] * 2
            logits[keep] = 0.0
            return logits
    """
    assert lines(tmp_path, source, registry.get_rule("RB107")) == [9]


def test_a_method_call_over_several_lines_is_reported_where_the_method_is_called(tmp_path):
    # The finding starts at the method's name (the line a reviewer's comment belongs on,
    # and the line Python runs the call at), not at the first line of its receiver.
    source = """
    import torch

    class ModelRunner:
        def __init__(self):
            self.mask = torch.zeros(8, dtype=torch.bool, device="cuda")

        def execute_model(self, n):
            idx = (
                self.mask[:n]
                .nonzero(as_tuple=False)
                .squeeze(1)
            )
            lens = self.mask.sum(
                dim=0).tolist()
            one = self.mask.sum().item()
            return idx, lens, one
    """
    found = sorted((f.line, f.column, f.end_line, f.code) for rule in (
        registry.get_rule("RB101"), registry.get_rule("RB102"), registry.get_rule("RB104"))
        for f in findings(tmp_path, source, rule))
    assert found == [(11, 14, 11, "RB104"), (15, 20, 15, "RB101"), (16, 15, 16, "RB102")]


def test_code_for_a_build_without_triton_is_another_platform_s(tmp_path):
    # A CUDA build has Triton: the block for its absence (`if not HAS_TRITON:`, `if not
    # caps.supports_triton:`) and the `else` of a test for it run elsewhere. A switch that
    # chooses a Triton kernel (`use_triton`) says nothing of the platform.
    body = """
    if not HAS_TRITON:
        return self.buf.tolist()
    if current_platform.capabilities.supports_triton:
        a = 1
    else:
        a = self.buf.tolist()
    if not self.use_triton:
        return self.buf.tolist()
    return a
    """
    assert lines(tmp_path, runner(body), RB101) == [21]
