"""Scenario for `reviewbot verify`: three encoder batches of Qwen3-Omni audio items.

Configuration (see README): audio encoder with num_mel_bins=128, d_model=1280,
20 heads, ffn 5120, n_window=50 (100-frame chunks), n_window_infer=400,
downsample_hidden_size=480, max_source_positions=1500, output_dim=2048, and 2 encoder
layers instead of the checkpoint's count (the readback sits after the last layer, so
the count changes how long it waits, not whether it waits). Mel features at 100 frames
per second of 16 kHz audio; lengths stay on the host, as keep_on_cpu puts them.
bfloat16 on CUDA, float32 on CPU.
"""

TARGET = "qwen3_omni_audio.py"
BATCHES = [[250, 130], [380], [96, 205, 150]]      # mel frames per audio item


def _build(module, device):
    import torch

    torch.manual_seed(7)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    dev = torch.device(device)
    tower = module.AudioTower(num_mel_bins=128, d_model=1280, heads=20, ffn=5120, layers=2,
                              n_window=50, n_window_infer=400, conv_channels=480,
                              output_dim=2048, max_source_positions=1500)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    tower = tower.to(device=dev, dtype=dtype).eval()
    return tower, dev


def _inputs(frames, dev):
    import torch

    gen = torch.Generator().manual_seed(sum(frames))
    features = torch.randn(128, sum(frames), generator=gen).to(dev)  # (mels, all frames)
    lengths = torch.tensor(frames, dtype=torch.int64)                # host, keep_on_cpu
    return features, lengths


def run(module, device):
    """Each batch's per-item audio embeddings."""
    import torch

    tower, dev = _build(module, device)
    results = []
    with torch.inference_mode():
        for frames in BATCHES:
            features, lengths = _inputs(frames, dev)
            results.append(module.process_audio_input(tower, features, lengths))
    return results


def step(module, device):
    """One encoder batch (two items) on inputs already placed, ready to call repeatedly."""
    import torch

    tower, dev = _build(module, device)
    features, lengths = _inputs(BATCHES[0], dev)

    def one_step():
        with torch.inference_mode():
            return module.process_audio_input(tower, features, lengths)

    return one_step
