"""The cross-thread stall, measured as in the H200 readback measurements.

The main thread queues ``pending_ms`` of matrix multiplications on the default stream,
then reads back an int64 ``(n, 1)`` tensor computed at their end, the way a model runner
reads its sampled token ids. A worker thread (a KV-cache transfer thread), 2 ms after the
work is queued, enqueues a 64 MiB pinned host-to-device copy on its own stream. What is
measured is how long that enqueue call takes: a pageable readback (``.tolist()``) holds
it until the default stream drains; the event-synced helper does not.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

WORKER_DELAY_S = 0.002
COPY_BYTES = 64 << 20


@dataclass
class Latency:
    """The worker's enqueue latency over the iterations, in microseconds."""

    median_us: float
    p90_us: float
    samples: int


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


class StallBench:
    """The main-thread work and the worker thread's copy, set up once per device."""

    def __init__(self, torch: Any, rows: int = 256) -> None:
        self.torch = torch
        self.rows = rows
        self.a = torch.randn(4096, 4096, device="cuda", dtype=torch.float32)
        self.b = torch.randn(4096, 4096, device="cuda", dtype=torch.float32)
        self.src = torch.empty(COPY_BYTES // 4, dtype=torch.float32, pin_memory=True)
        self.dst = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device="cuda")
        self.stream = torch.cuda.Stream()  # PyTorch's streams are non-blocking
        self.per_matmul_ms = self._calibrate()

    def _calibrate(self) -> float:
        torch = self.torch
        for _ in range(3):
            self.a @ self.b
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            self.a @ self.b
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 20

    def pending(self, ms: float) -> Any:
        """Queue about ``ms`` of work; return the (rows, 1) int64 tensor it ends with."""
        out = self.a
        for _ in range(max(1, round(ms / self.per_matmul_ms))):
            out = self.a @ self.b
        return out[:self.rows].argmax(dim=-1, keepdim=True)

    def once(self, readback: Callable[[Any], Any], pending_ms: float) -> tuple[float, Any]:
        """One iteration: the worker's enqueue latency (us) and what the readback gave."""
        torch = self.torch
        torch.cuda.synchronize()
        go = threading.Event()
        latency: list[float] = []

        def worker() -> None:
            go.wait()
            time.sleep(WORKER_DELAY_S)
            with torch.cuda.stream(self.stream):
                start = time.perf_counter()
                self.dst.copy_(self.src, non_blocking=True)
                latency.append((time.perf_counter() - start) * 1e6)
            self.stream.synchronize()

        thread = threading.Thread(target=worker)
        thread.start()
        ids = self.pending(pending_ms)
        go.set()
        result = readback(ids)
        thread.join()
        torch.cuda.synchronize()
        return latency[0], result

    def measure(self, readback: Callable[[Any], Any], pending_ms: float,
                iterations: int) -> tuple[Latency, list[Any]]:
        """Latencies over ``iterations`` (after one warm-up), and the readbacks' results."""
        self.once(readback, pending_ms)
        samples, results = [], []
        for _ in range(iterations):
            micros, result = self.once(readback, pending_ms)
            samples.append(micros)
            results.append(result)
        return Latency(round(statistics.median(samples), 1), round(_p90(samples), 1),
                       len(samples)), results
