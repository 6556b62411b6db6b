"""Extend-step metadata of SGLang 0.5.23's short-conv backend, reproduced (after the fix).

ShortConvAttnBackend serves the short-conv hybrids (LFM2, LFM2-MoE, LFM2-VL, ZAYA1).
On every extend (prefill) forward it builds the per-step conv-state handle; this
file follows that path, written for this benchmark in the same shape as the
release, plus the LFM2 prefill conv that consumes the handle. Line references are
to the unpacked 0.5.23 wheel.

Configuration (see README): LFM2-1.2B conv layers (hidden_size=2048,
conv_L_cache=3), max_running_requests=256, decode CUDA graphs on (so the
cache-indices buffer exists).
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class ExtendBatch:
    """The ForwardBatch fields the short-conv extend metadata reads."""

    req_pool_indices: torch.Tensor  # device, int64 [bs]
    extend_prefix_lens: torch.Tensor  # device, int32 [bs]
    extend_seq_lens: torch.Tensor  # device, int32 [bs]
    extend_start_loc: torch.Tensor  # device, int32 [bs]
    extend_prefix_lens_cpu: list
    extend_seq_lens_cpu: list


def make_batch(req_pool_indices, prefix_lens, seq_lens, device) -> ExtendBatch:
    device = torch.device(device)
    pin = device.type == "cuda"

    def h2d(values, dtype):
        # sglang/srt/model_executor/forward_batch_info.py:1234-1239: pinned host
        # tensor, non_blocking copy
        return torch.tensor(values, dtype=dtype, pin_memory=pin).to(device, non_blocking=True)

    seq_t = h2d(seq_lens, torch.int32)
    # sglang/srt/model_executor/forward_batch_info.py:2409-2410
    start = torch.zeros_like(seq_t)
    start[1:] = torch.cumsum(seq_t[:-1], dim=0)
    return ExtendBatch(
        req_pool_indices=h2d(req_pool_indices, torch.int64),
        extend_prefix_lens=h2d(prefix_lens, torch.int32),
        extend_seq_lens=seq_t,
        extend_start_loc=start,
        extend_prefix_lens_cpu=list(prefix_lens),  # forward_batch_info.py:1240
        extend_seq_lens_cpu=list(seq_lens),  # forward_batch_info.py:1241
    )


class ShortConvBackend:
    # sglang/srt/layers/attention/linear/short_conv_backend.py:90,93
    cache_indices_dtype = torch.int64
    needs_extend_host_mirrors = True

    def __init__(self, model_type: str, req_to_mamba_slot: torch.Tensor, max_bs: int):
        # model_type: "lfm2" or "zaya"; the release's constructor sees
        # model_runner.model_config.hf_config (short_conv_backend.py:95-99)
        self.model_type = model_type
        # The fix: only ZAYA1's CCA extend loop reads the host mirrors
        # (sglang/srt/models/zaya.py:842-851 -> cca_extend); LFM2 reads the device
        # tensors only (lfm2.py:356-367), so it no longer asks for them
        self.needs_extend_host_mirrors = self.needs_extend_host_mirrors and (
            model_type == "zaya"
        )
        # sglang/srt/mem_cache/memory_pool.py:1520-1522: request row -> mamba slot,
        # int32 on the device
        self.req_to_mamba_slot = req_to_mamba_slot
        # short_conv_backend.py:116-129: graph buffer, sized once at capture
        self.cache_indices_buf = torch.empty(
            max_bs, dtype=self.cache_indices_dtype, device=req_to_mamba_slot.device
        )

    def init_forward_metadata(self, batch: ExtendBatch) -> dict:
        bs = batch.req_pool_indices.shape[0]
        device = batch.req_pool_indices.device
        # sglang/srt/layers/attention/hybrid_linear_attn_backend.py:189-192 and
        # sglang/srt/mem_cache/memory_pool.py:1634-1635: slot ids gathered on the device
        mamba_cache_indices = self.req_to_mamba_slot[batch.req_pool_indices]
        # hybrid_linear_attn_backend.py:306-313
        qsl = torch.empty((bs + 1,), dtype=torch.int32, device=device)
        qsl[:bs] = batch.extend_start_loc
        qsl[bs] = batch.extend_start_loc[-1] + batch.extend_seq_lens[-1]
        # short_conv_backend.py:131-143 (_refresh_cache_indices): refill the buffer
        # in place and hand out a view
        if bs <= self.cache_indices_buf.shape[0]:
            self.cache_indices_buf[:bs].copy_(mamba_cache_indices)
            cache_indices = self.cache_indices_buf[:bs]
        else:
            cache_indices = mamba_cache_indices.to(self.cache_indices_dtype)
        # short_conv_backend.py:167
        has_initial_state = batch.extend_prefix_lens > 0
        slot_ids_cpu = has_prefix_cpu = None
        # short_conv_backend.py:168-172: host mirrors; the .tolist() waits for the
        # device to finish everything queued before it
        if self.needs_extend_host_mirrors and cache_indices is not None:
            slot_ids_cpu = cache_indices.tolist()
            has_prefix_cpu = [int(p) > 0 for p in batch.extend_prefix_lens_cpu]
        # short_conv_backend.py:192-215 (conv_state_metadata): the per-layer handle
        return {
            "cache_indices": cache_indices,
            "query_start_loc": qsl,
            "has_initial_state": has_initial_state,
            "slot_ids_cpu": slot_ids_cpu,
            "has_prefix_cpu": has_prefix_cpu,
        }


def lfm2_prefill_conv(bx, weight, conv_state, handle, seq_lens_cpu):
    """What an LFM2 conv layer does with the handle on prefill
    (sglang/srt/models/lfm2.py:356-367: causal_conv1d_fn with query_start_loc,
    cache_indices, has_initial_state). One device-side conv per request here,
    with no host read of device values; the release runs one kernel for all."""
    width = weight.shape[-1] - 1
    out = torch.empty_like(bx)
    starts = [0]
    for n in seq_lens_cpu:
        starts.append(starts[-1] + n)
    for i, n in enumerate(seq_lens_cpu):
        slot = handle["cache_indices"][i : i + 1]
        prior = conv_state.index_select(0, slot)[0]  # [C, width]
        prior = prior * handle["has_initial_state"][i].to(prior.dtype)
        x = bx[starts[i] : starts[i] + n].transpose(0, 1)  # [C, n]
        padded = torch.cat([prior, x], dim=-1)
        y = F.conv1d(padded.unsqueeze(0), weight, groups=weight.shape[0])[0]
        out[starts[i] : starts[i] + n] = y.transpose(0, 1)
        conv_state.index_copy_(0, slot, padded[:, -width:].unsqueeze(0))
    return out
