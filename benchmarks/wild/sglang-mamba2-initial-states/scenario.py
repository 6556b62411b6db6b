"""`reviewbot verify` scenario: Mamba2 extend metadata over a run of prefill batches.

Configuration (README): mamba_chunk_size=256 (NemotronHConfig default), prefill
batches of at most chunked_prefill_size=8192 tokens, max_running_requests=256.
"""

TARGET = "mamba2_metadata.py"
CHUNK_SIZE = 256
CHUNKED_PREFILL_SIZE = 8192


def _plain(value):
    import torch

    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype), "shape": list(value.shape),
                "values": value.cpu().tolist()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _schedule():
    """Prefill batches: (prefix_lens, seq_lens, host mirror present)."""
    import random

    rng = random.Random(2305)
    batches = []
    for step in range(10):
        bs = rng.randint(1, 12)
        seq = [rng.randint(1, CHUNKED_PREFILL_SIZE // bs) for _ in range(bs)]
        if step % 3 == 0:
            prefix = [0] * bs  # fresh prompts, no cache hit
        else:
            # continued chunks and radix-cache hits, mixed with fresh prompts
            prefix = [rng.choice([0, 0, rng.randint(1, 20000)]) for _ in range(bs)]
        batches.append((prefix, seq, step != 7))  # step 7: a batch without mirrors
    return batches


def run(module, device):
    outputs = []
    for prefix, seq, mirrors in _schedule():
        batch = module.make_batch(prefix, seq, device)
        if not mirrors:
            batch.extend_prefix_lens_cpu = None
            batch.extend_seq_lens_cpu = None
        outputs.append(_plain(module.init_forward_metadata(batch, CHUNK_SIZE)))
    return outputs


def step(module, device):
    """One prefill batch of 8 fresh prompts, 8192 tokens; inputs already on device."""
    import torch

    batch = module.make_batch([0] * 8, [1024] * 8, device)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    return lambda: module.init_forward_metadata(batch, CHUNK_SIZE)
