"""`reviewbot verify` scenario: short-conv extend metadata over a run of prefill batches.

Configuration (README): LFM2-1.2B conv layers (hidden_size=2048, conv_L_cache=3),
max_running_requests=256 (req pool of 257 rows), decode CUDA graphs captured up
to bs=256. The LFM2 backend feeds one conv layer per step; a ZAYA1 backend runs
the same steps to show its host mirrors are unchanged.
"""

TARGET = "short_conv_backend.py"
HIDDEN = 2048
KERNEL = 3  # conv_L_cache
MAX_RUNNING = 256


def _plain(value):
    import torch

    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype), "shape": list(value.shape),
                "values": value.cpu().tolist()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _setup(module, model_type, device):
    import torch

    gen = torch.Generator().manual_seed(77)
    # request row -> mamba slot (slot 0 is the padding slot)
    table = torch.randperm(MAX_RUNNING, generator=gen).to(torch.int32) + 1
    table = torch.cat([torch.zeros(1, dtype=torch.int32), table]).to(device)
    return module.ShortConvBackend(model_type, table, max_bs=MAX_RUNNING)


def _schedule():
    import random

    rng = random.Random(4111)
    steps = []
    for step in range(6):
        bs = rng.randint(1, 4)
        rows = rng.sample(range(1, MAX_RUNNING + 1), bs)
        seq = [rng.randint(1, 8) for _ in range(bs)]
        prefix = [0 if step % 2 == 0 else rng.choice([0, rng.randint(1, 4000)])
                  for _ in range(bs)]
        steps.append((rows, prefix, seq))
    return steps


def run(module, device):
    import torch

    gen = torch.Generator().manual_seed(1234)
    weight = torch.randn(HIDDEN, 1, KERNEL, generator=gen).to(device)
    conv_state = torch.randn(MAX_RUNNING + 1, HIDDEN, KERNEL - 1, generator=gen).to(device)
    lfm2 = _setup(module, "lfm2", device)
    zaya = _setup(module, "zaya", device)
    outputs = []
    for rows, prefix, seq in _schedule():
        batch = module.make_batch(rows, prefix, seq, device)
        handle = lfm2.init_forward_metadata(batch)
        bx = torch.randn(sum(seq), HIDDEN, generator=gen).to(device)
        y = module.lfm2_prefill_conv(bx, weight, conv_state, handle, batch.extend_seq_lens_cpu)
        zaya_handle = zaya.init_forward_metadata(batch)
        outputs.append({
            # what LFM2's conv layer reads (lfm2.py:356-367), and what it produces
            "lfm2_cache_indices": _plain(handle["cache_indices"]),
            "lfm2_query_start_loc": _plain(handle["query_start_loc"]),
            "lfm2_has_initial_state": _plain(handle["has_initial_state"]),
            "lfm2_conv_out": _plain(y),
            "conv_state_rows": _plain(conv_state.index_select(0, handle["cache_indices"])),
            # what ZAYA1's cca_extend reads (zaya.py:842-851)
            "zaya": _plain(zaya_handle),
        })
    return outputs


def step(module, device):
    """One LFM2 extend step: 8 requests, inputs already on device."""
    import torch

    backend = _setup(module, "lfm2", device)
    batch = module.make_batch(list(range(1, 9)), [0] * 8, [1024] * 8, device)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    return lambda: backend.init_forward_metadata(batch)
