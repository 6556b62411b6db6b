"""Extend-batch metadata of SGLang 0.5.23's Mamba2 backend, reproduced (before the fix).

The per-extend path that builds `Mamba2Metadata` for a prefill batch of a Mamba2
hybrid model (Nemotron-H, Falcon-H1, Mamba2), written for this benchmark in the same
shape as the release. Line references are to the unpacked 0.5.23 wheel.

Configuration (see README): mamba_chunk_size=256, prefill batches of fresh and
continued prompts, int32 length tensors as ForwardBatch.init_new makes them.
"""

import math
from dataclasses import dataclass

import torch


@dataclass
class ExtendBatch:
    """The ForwardBatch fields the Mamba2 extend metadata reads."""

    extend_prefix_lens: torch.Tensor  # device, int32 [bs]
    extend_seq_lens: torch.Tensor  # device, int32 [bs]
    extend_start_loc: torch.Tensor  # device, int32 [bs]
    extend_prefix_lens_cpu: list[int] | None
    extend_seq_lens_cpu: list[int] | None
    extend_num_tokens: int


def make_batch(prefix_lens: list[int], seq_lens: list[int], device) -> ExtendBatch:
    """Host lists to device tensors, as the scheduler hands them to the runner."""
    device = torch.device(device)
    pin = device.type == "cuda"
    # sglang/srt/model_executor/forward_batch_info.py:1234-1241: pinned host tensors
    # copied with non_blocking=True, host lists kept as *_cpu mirrors.
    seq_t = torch.tensor(seq_lens, dtype=torch.int32, pin_memory=pin).to(
        device, non_blocking=True
    )
    prefix_t = torch.tensor(prefix_lens, dtype=torch.int32, pin_memory=pin).to(
        device, non_blocking=True
    )
    # sglang/srt/model_executor/forward_batch_info.py:2409-2410: extend_start_loc is
    # the exclusive prefix sum of extend_seq_lens, computed on the device.
    start = torch.zeros_like(seq_t)
    start[1:] = torch.cumsum(seq_t[:-1], dim=0)
    return ExtendBatch(
        extend_prefix_lens=prefix_t,
        extend_seq_lens=seq_t,
        extend_start_loc=start,
        extend_prefix_lens_cpu=list(prefix_lens),
        extend_seq_lens_cpu=list(seq_lens),
        extend_num_tokens=sum(seq_lens),
    )


def build_query_start_loc(batch: ExtendBatch) -> torch.Tensor:
    """MambaAttnBackendBase._forward_metadata, extend branch."""
    bs = batch.extend_seq_lens.shape[0]
    device = batch.extend_seq_lens.device
    # sglang/srt/layers/attention/hybrid_linear_attn_backend.py:306-313
    qsl = torch.empty((bs + 1,), dtype=torch.int32, device=device)
    qsl[:bs] = batch.extend_start_loc
    qsl[bs] = batch.extend_start_loc[-1] + batch.extend_seq_lens[-1]
    return qsl


def logical_chunks(query_start_loc: torch.Tensor, chunk_size: int, total: int):
    """Physical-chunk index and offset of every logical chunk.

    Same results, and the same per-element reads of device values, as
    Mamba2Metadata._query_start_loc_to_chunk_indices_offsets
    (sglang/srt/layers/attention/mamba/mamba2_metadata.py:112-191). It only runs
    when some request resumes from a prefix; it is not part of the fix.
    """
    ends = query_start_loc[1:]
    # mamba2_metadata.py:169-172: one extra logical chunk per sequence boundary
    # that falls inside a physical chunk
    n = math.ceil(total / chunk_size) + (ends[:-1] % chunk_size > 0).sum()
    device = query_start_loc.device
    indices = torch.arange(n, dtype=torch.int, device=device)
    offsets = torch.zeros((n,), dtype=torch.int, device=device)
    shift = 0
    # mamba2_metadata.py:179-191: walk the boundaries on the host
    for begin, end in zip(ends[:-1], ends[1:]):
        shift += begin % chunk_size > 0
        lo = begin // chunk_size + shift
        hi = end // chunk_size + shift + (end % chunk_size > 0)
        indices[lo:hi] -= shift
        offsets[lo] = begin % chunk_size
    return indices, offsets


def prepare_mixed(batch: ExtendBatch, query_start_loc: torch.Tensor, chunk_size: int):
    """Mamba2Metadata.prepare_mixed, extend branch; returns what it computes."""
    # sglang/srt/layers/attention/mamba/mamba2_metadata.py:248-258
    lens_cpu = batch.extend_seq_lens_cpu
    num_prefills = len(lens_cpu) if lens_cpu is not None else len(batch.extend_seq_lens)
    num_prefill_tokens = (
        int(sum(lens_cpu)) if lens_cpu is not None else int(batch.extend_num_tokens)
    )
    # mamba2_metadata.py:259-261
    has_initial_states = batch.extend_prefix_lens > 0
    # mamba2_metadata.py:262: the host waits for the device to answer "any prefix?"
    prep_initial_states = torch.any(has_initial_states[:num_prefills]).item()

    # mamba2_metadata.py:264-275: output_size from the host lengths, no sync
    qsl = query_start_loc[: num_prefills + 1]
    seq_idx = torch.repeat_interleave(
        torch.arange(num_prefills, dtype=torch.int32, device=qsl.device),
        qsl.diff(),
        output_size=num_prefill_tokens if lens_cpu is not None else None,
    )
    seq_idx.unsqueeze_(0)

    # mamba2_metadata.py:280-286
    chunk_indices = chunk_offsets = None
    if prep_initial_states:
        chunk_indices, chunk_offsets = logical_chunks(qsl, chunk_size, num_prefill_tokens)
    return {
        "num_prefills": num_prefills,
        "num_prefill_tokens": num_prefill_tokens,
        "query_start_loc": qsl,
        "has_initial_states": has_initial_states,
        "prep_initial_states": prep_initial_states,
        "seq_idx": seq_idx,
        "chunk_indices": chunk_indices,
        "chunk_offsets": chunk_offsets,
    }


def init_forward_metadata(batch: ExtendBatch, chunk_size: int):
    """Mamba2AttnBackend.init_forward_metadata
    (sglang/srt/layers/attention/hybrid_linear_attn_backend.py:1115-1121)."""
    return prepare_mixed(batch, build_query_start_loc(batch), chunk_size)
