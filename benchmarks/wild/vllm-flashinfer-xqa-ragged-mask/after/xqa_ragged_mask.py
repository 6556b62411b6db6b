"""The packed XQA draft mask of FlashInfer's metadata builder, with the proposed fix.

A standalone reproduction (not vLLM's code): the same steps, in the same order, on the
same kinds of tensors, each citing the line of ``vllm/v1/attention/backends/flashinfer.py``
it stands for. With speculative decoding and decode through the TRT-LLM API on the XQA
kernel, ``FlashInferMetadataBuilder.build`` asks for a draft mask every step; when the
requests' query lengths differ ("ragged"), the mask is built anew from a host list.
"""

from __future__ import annotations

import torch


def pack_mask_rows(allowed: torch.Tensor, words: int) -> torch.Tensor:
    """Bit-pack each row of a bool mask: 32 columns per uint32, stored as uint16 pairs.

    flashinfer.py:176-187 (``_pack_draft_block_bool_mask``).
    """
    rows = allowed.shape[0]
    bit_values = 1 << torch.arange(32, device=allowed.device, dtype=torch.int64)
    as_words = (allowed.view(rows, words, 32).to(torch.int64) * bit_values).sum(dim=-1)
    return as_words.to(torch.uint32).view(torch.uint16).reshape(rows, words * 2)


def uniform_draft_mask(q_len: int, causal: bool, device: torch.device) -> torch.Tensor:
    """One request's mask when every request has ``q_len`` rows (flashinfer.py:190-199)."""
    words = (q_len + 31) // 32
    row = torch.arange(q_len, device=device).unsqueeze(1)
    col = torch.arange(words * 32, device=device).unsqueeze(0)
    allowed = col <= row if causal else (col < q_len).expand(q_len, words * 32)
    return pack_mask_rows(allowed, words)


def ragged_draft_mask(q_lens: list[int], widest: int, causal: bool,
                      device: torch.device) -> torch.Tensor:
    """The mask for a batch whose requests have different query lengths.

    flashinfer.py:202-217 (``_make_xqa_ragged_draft_block_mask``).
    """
    words = (widest + 31) // 32                                   # :206
    width = words * 32                                            # :207
    total = sum(q_lens)            # the row count is host data (:212 computes it too)
    # :208, fixed: stage the list in pinned memory and copy without blocking
    # (what vllm.utils.torch_utils.async_tensor_h2d does)
    staged = torch.tensor(q_lens, dtype=torch.int64, device="cpu",
                          pin_memory=device.type == "cuda")
    lens = staged.to(device, non_blocking=True)
    # :209, fixed: the output size is known on the host
    row_len = torch.repeat_interleave(lens, lens, output_size=total)
    first_row = torch.cumsum(lens, dim=0) - lens                  # :210
    # :211, fixed: the same
    row_first = torch.repeat_interleave(first_row, lens, output_size=total)
    row_pos = torch.arange(total, device=device) - row_first      # :212
    col = torch.arange(width, device=device).unsqueeze(0)          # :213
    allowed = col < row_len.unsqueeze(1)                           # :214
    if causal:                                                     # :215
        allowed &= col <= row_pos.unsqueeze(1)                     # :216
    return pack_mask_rows(allowed, words)                          # :217


def decode_query_lens(qo_indptr_cpu: torch.Tensor, num_decodes: int,
                      num_decode_tokens: int) -> tuple[int, list[int] | None]:
    """The widest query and, for a ragged batch, every request's query length.

    flashinfer.py:1310-1353 (``_compute_decode_query_lens``, XQA branch); host tensors only.
    """
    if num_decodes == 0 or num_decode_tokens == 0:               # :1318-1319
        return 1, None
    lens = qo_indptr_cpu[1:num_decodes + 1] - qo_indptr_cpu[:num_decodes]  # :1339
    present = lens[lens > 0]                                      # :1340
    widest = int(present.max().item()) if present.numel() > 0 else 1  # :1341
    same = present.numel() <= 1 or bool((present == present[0]).all().item())  # :1342
    if same and num_decode_tokens == num_decodes * widest:        # :1343-1344
        return widest, None
    if widest <= 1:                                               # :1346-1347
        return 1, None
    return widest, lens.tolist()                                  # :1349-1353


class DraftMasks:
    """The builder's part that hands out draft masks (flashinfer.py:1356-1380)."""

    def __init__(self, max_num_reqs: int, device: torch.device):
        self.max_num_reqs = max_num_reqs
        self.device = device
        self.cache: dict[tuple[int, bool], torch.Tensor] = {}

    def get(self, widest: int, ragged: list[int] | None, num_decodes: int,
            causal: bool) -> torch.Tensor | None:
        if widest <= 1:                                           # :1364-1365
            return None
        if ragged is None:                                        # :1367-1376
            key = (widest, causal)
            masks = self.cache.get(key)
            if masks is None:
                one = uniform_draft_mask(widest, causal, self.device)
                masks = one.unsqueeze(0).expand(self.max_num_reqs, -1, -1).contiguous()
                self.cache[key] = masks
            return masks[:num_decodes]
        return ragged_draft_mask(ragged, widest, causal, self.device)  # :1378-1380


def build_step(masks: DraftMasks, qo_indptr_cpu: torch.Tensor, num_decodes: int,
               num_decode_tokens: int, causal: bool = True):
    """One metadata build's decode-mask work (flashinfer.py:1902-1914)."""
    widest, ragged = decode_query_lens(qo_indptr_cpu, num_decodes, num_decode_tokens)
    return widest, ragged, masks.get(widest, ragged, num_decodes, causal)
