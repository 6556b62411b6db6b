"""Qwen3-Omni thinker: one encoder batch of audio items, with the proposed fix.

A standalone reproduction (not vLLM's code): the steps of
``Qwen3OmniMoeConditionalGenerationMixin._process_audio_input`` and of the audio tower it
calls, in the same order and on the same devices, each citing its line in
``vllm/model_executor/models/qwen3_omni_moe_thinker.py``. The tower's transformer layers
are a stand-in (per-window attention and an MLP, fewer layers than the checkpoint); the
length arithmetic, the chunking, the masks and every host readback follow the release.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


def output_lengths(lengths: torch.Tensor) -> torch.Tensor:
    """Audio tokens per item from mel frames per item (:154-160)."""
    rest = lengths % 100
    after_first = (rest - 1) // 2 + 1
    return ((after_first - 1) // 2 + 1 - 1) // 2 + 1 + (lengths // 100) * 13


def conv_stack_lengths(lengths: torch.Tensor) -> torch.Tensor:
    """Frames left after the three stride-2 convolutions (:567-572)."""
    for _ in range(3):
        lengths = (lengths - 1) // 2 + 1
    return lengths


def sinusoids(length: int, channels: int) -> torch.Tensor:
    """The fixed position table (:169-190)."""
    step = math.log(10000) / (channels // 2 - 1)
    inv = torch.exp(-step * torch.arange(channels // 2).float())
    t = torch.arange(length)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class WindowLayer(nn.Module):
    """Stand-in for one encoder layer (:277-335): attention inside each window, then an MLP."""

    def __init__(self, d_model: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, ffn)
        self.fc2 = nn.Linear(ffn, d_model)

    def forward(self, x: torch.Tensor, windows: list[int]) -> torch.Tensor:
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        parts, start = [], 0
        for size in windows:                       # window bounds are host ints here
            end = start + size
            shape = (size, self.heads, -1)
            qs, ks, vs = (t[start:end].reshape(shape).transpose(0, 1) for t in (q, k, v))
            parts.append(F.scaled_dot_product_attention(qs, ks, vs).transpose(0, 1)
                         .reshape(size, -1))
            start = end
        x = x + self.out(torch.cat(parts))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class AudioTower(nn.Module):
    """The audio encoder's shape (:356-430) and its forward (:457-565)."""

    def __init__(self, num_mel_bins: int, d_model: int, heads: int, ffn: int, layers: int,
                 n_window: int, n_window_infer: int, conv_channels: int, output_dim: int,
                 max_source_positions: int, conv_chunksize: int = 500):
        super().__init__()
        self.n_window = n_window
        self.n_window_infer = n_window_infer
        self.conv_chunksize = conv_chunksize
        self.register_buffer("positions", sinusoids(max_source_positions, d_model),
                             persistent=False)
        self.conv1 = nn.Conv2d(1, conv_channels, 3, 2, padding=1)              # :376
        self.conv2 = nn.Conv2d(conv_channels, conv_channels, 3, 2, padding=1)  # :377-383
        self.conv3 = nn.Conv2d(conv_channels, conv_channels, 3, 2, padding=1)  # :384-390
        freq = (((num_mel_bins + 1) // 2 + 1) // 2 + 1) // 2                    # :392-394
        self.conv_out = nn.Linear(conv_channels * freq, d_model, bias=False)   # :395-401
        self.layers = nn.ModuleList(WindowLayer(d_model, heads, ffn)
                                    for _ in range(layers))                    # :404-412
        self.ln_post = nn.LayerNorm(d_model)                                   # :415
        self.proj1 = nn.Linear(d_model, d_model)                               # :416-422
        self.proj2 = nn.Linear(d_model, output_dim)                            # :424-430

    def forward(self, features: torch.Tensor, feature_lens: torch.Tensor,
                aftercnn_lens: torch.Tensor) -> torch.Tensor:
        chunk = self.n_window * 2
        chunk_num = torch.ceil(feature_lens / chunk).long()                   # :464
        total_chunks = int(chunk_num.sum())                  # :466-467 (allowed sync)
        staged = torch.tensor([chunk] * total_chunks, dtype=torch.long,
                              pin_memory=feature_lens.is_cuda)
        chunk_lengths = staged.to(feature_lens.device, non_blocking=True)     # :469-473
        tail = F.pad(chunk_num, (1, 0), value=-1).cumsum(0)[1:]              # :474
        chunk_lengths[tail] = feature_lens % chunk                            # :475
        chunk_lengths[chunk_lengths == 0] = chunk                             # :476
        chunk_sizes = chunk_lengths.tolist()                 # :479-480 (allowed sync)
        pieces = features.T.split(chunk_sizes, dim=0)                         # :481
        padded = nn.utils.rnn.pad_sequence(pieces, batch_first=True).transpose(1, 2)  # :482-484
        after_cnn = conv_stack_lengths(chunk_lengths)                         # :487
        longest = after_cnn.max().item()                     # :489-490 (allowed sync)
        cols = torch.arange(longest, device=padded.device)                    # :491
        keep = cols.unsqueeze(0) < after_cnn.unsqueeze(1)                     # :492-494
        x = padded.unsqueeze(1)                                               # :497
        x = F.gelu(self.conv1(x))                                             # :500-504
        x = F.gelu(self.conv2(x))
        x = F.gelu(self.conv3(x))
        b, c, f, t = x.size()                                                 # :516
        x = self.conv_out(x.permute(0, 3, 1, 2).contiguous().view(b, t, c * f))  # :517-519
        x = x + self.positions[: x.shape[1], :].unsqueeze(0).to(x.dtype)     # :522-527
        hidden = x[keep]                                     # :530 (allowed sync: mask)
        token_counts = aftercnn_lens.tolist()                # :532 (allowed sync)
        window = keep.shape[-1] * (self.n_window_infer // chunk)             # :536-538
        windows: list[int] = []                                              # :535-545
        for n in token_counts:
            windows.extend([window] * (n // window))
            if n % window:
                windows.append(n % window)
        for layer in self.layers:                                             # :552-557
            hidden = layer(hidden, windows)
        hidden = self.ln_post(hidden)                                         # :560
        return self.proj2(F.gelu(self.proj1(hidden)))                         # :561-563


def process_audio_input(tower: AudioTower, input_features: torch.Tensor,
                        audio_feature_lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``_process_audio_input`` (:1585-1603); the lengths arrive on the host (keep_on_cpu)."""
    device = input_features.device
    staged = audio_feature_lengths.pin_memory() if device.type == "cuda" else audio_feature_lengths
    lengths = staged.to(device, non_blocking=True)                            # :1592-1594
    out_lens = output_lengths(lengths)                                        # :1596
    audio_features = tower(input_features.to(tower.proj2.weight.dtype),
                           feature_lens=lengths, aftercnn_lens=out_lens)      # :1598-1602
    # :1603, fixed: the same arithmetic on the host copy of the lengths
    split_sizes = output_lengths(torch.as_tensor(audio_feature_lengths)).tolist()
    return audio_features.split(split_sizes)
