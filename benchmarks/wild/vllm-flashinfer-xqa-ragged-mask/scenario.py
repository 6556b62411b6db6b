"""Scenario for `reviewbot verify`: FlashInfer's XQA draft masks over a few decode steps.

Configuration: speculative decoding with num_speculative_tokens=3 (a decode request has
up to 4 query rows), max_num_seqs=256, causal attention. Each step's decode batch is
described the way the builder sees it: the host copy of query_start_loc and the number
of decode tokens. Some steps are uniform (every request verifies 3 drafts: the cached
mask), most are ragged (requests with fewer drafts, and zero-length padding rows).
"""

TARGET = "xqa_ragged_mask.py"
MAX_NUM_SEQS = 256
NUM_SPEC = 3
STEPS = 8


def _batches():
    """Seeded per-step query lengths for the decode part of the batch."""
    import random

    rng = random.Random(20260)
    batches = []
    for step in range(STEPS):
        num_decodes = rng.choice([16, 64, 128, 256])
        if step % 4 == 0:
            lens = [NUM_SPEC + 1] * num_decodes                   # uniform: cached mask
        else:
            lens = [rng.choice([1, 2, 3, 4, 4, 4]) for _ in range(num_decodes)]
            if step % 3 == 2:
                lens[-3:] = [0, 0, 0]                             # CUDA-graph padding rows
        batches.append(lens)
    return batches


def _indptr(lens):
    import torch

    out = [0]
    for n in lens:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32)


def run(module, device):
    """Every step's widest query, ragged lengths and packed mask."""
    import torch

    dev = torch.device(device)
    masks = module.DraftMasks(MAX_NUM_SEQS, dev)
    results = []
    for lens in _batches():
        qo_indptr_cpu = _indptr(lens)
        widest, ragged, mask = module.build_step(masks, qo_indptr_cpu, len(lens), sum(lens))
        results.append((widest, ragged, mask))
    return results


def step(module, device):
    """One build of a ragged step's mask (64 requests), ready to call repeatedly."""
    import torch

    dev = torch.device(device)
    masks = module.DraftMasks(MAX_NUM_SEQS, dev)
    lens = _batches()[1][:64]
    qo_indptr_cpu = _indptr(lens)
    num_tokens = sum(lens)

    def one_step():
        return module.build_step(masks, qo_indptr_cpu, len(lens), num_tokens)[2]

    return one_step
