"""What the inserted helper's per-thread state costs, on a CUDA machine.

Times one readback of a ``(256, 1)`` int64 tensor through the helper `reviewbot fix` inserts
now (per-thread state made on first use, the copy on the tensor's stream) and through the
one it inserted before (one event and buffer on the instance, not safe across threads),
single-threaded; then runs two threads on one object with each and counts wrong results.

    python benchmarks/event_sync_overhead.py [--calls N] [--output FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# The helper as `reviewbot fix` inserted it before (its state was set in __init__).
PREVIOUS = '''
def _to_list(self, tensor):
    if not tensor.is_cuda or self.transfer_event is None:
        return tensor.tolist()
    count = tensor.numel()
    flat = self.to_list_pinned_cpu.view(-1)
    if flat.dtype != tensor.dtype or flat.numel() < count:
        flat = torch.empty(max(count, flat.numel()), dtype=tensor.dtype, pin_memory=True)
        self.to_list_pinned_cpu = flat
    host = flat[:count].view(tensor.shape)
    host.copy_(tensor, non_blocking=True)
    self.transfer_event.record(torch.cuda.current_stream(tensor.device))
    self.transfer_event.synchronize()
    return host.tolist()
'''


def _helpers(torch):
    from reviewbot.verify.helpers import build, find_helpers

    (current,) = find_helpers([REPO / "fixtures" / "fix" / "after" / "seed_runner.py"], str)
    namespace = {"torch": torch}
    exec(PREVIOUS, namespace)
    owner = types.SimpleNamespace(
        transfer_event=torch.cuda.Event(),
        to_list_pinned_cpu=torch.empty(256, dtype=torch.int64, pin_memory=True))
    return {"per-thread (now)": build(current, torch),
            "one per instance (before)": lambda t: namespace["_to_list"](owner, t)}


def _time(torch, helper, calls: int) -> dict:
    ids = torch.arange(256, device="cuda").reshape(256, 1)
    for _ in range(50):
        helper(ids)
    samples = []
    for _ in range(calls):
        torch.cuda.synchronize()
        start = time.perf_counter_ns()
        helper(ids)
        samples.append((time.perf_counter_ns() - start) / 1000)
    samples.sort()
    return {"median_us": round(statistics.median(samples), 2),
            "p90_us": round(samples[int(len(samples) * 0.9)], 2), "calls": calls}


def _wrong_with_threads(torch, helper, calls: int) -> int:
    wrong = [0]

    def work(seed: int) -> None:
        generator = torch.Generator(device="cuda").manual_seed(seed)
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            for _ in range(calls):
                ids = torch.randint(0, 1 << 30, (256, 1), device="cuda", generator=generator)
                if helper(ids) != ids.cpu().tolist():
                    wrong[0] += 1

    threads = [threading.Thread(target=work, args=(seed,)) for seed in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return wrong[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.stderr.write("event_sync_overhead: needs a CUDA device\n")
        return 2
    report = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "helpers": {}}
    for name, helper in _helpers(torch).items():
        report["helpers"][name] = {
            "single_thread": _time(torch, helper, args.calls),
            "wrong_of_two_threads": _wrong_with_threads(torch, helper, args.calls),
            "calls_per_thread": args.calls}
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
