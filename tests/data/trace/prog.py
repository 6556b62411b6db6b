"""Recorded with `reviewbot trace --allow-no-cuda --events-dir events` on a CPU build of
torch: the synchronisation callbacks are fired by hand, as torch fires them on a GPU."""
import os
import subprocess
import sys

import torch
from torch.cuda import _gpu_trace as gpu_trace


def gpu_sync_allowed():
    import contextlib
    return contextlib.nullcontext()


class Runner:
    def step(self):
        gpu_trace.StreamSynchronizationCallbacks.fire_callbacks(0)  # .tolist() in real code

    def wait(self):
        gpu_trace.EventSynchronizationCallbacks.fire_callbacks(7)

    def allowed(self):
        with gpu_sync_allowed():
            gpu_trace.DeviceSynchronizationCallbacks.fire_callbacks()


runner = Runner()
if len(sys.argv) > 1:  # the worker: two steps, then killed
    runner.step()
    runner.step()
    os._exit(9)
for _ in range(5):
    runner.step()
runner.wait()
runner.allowed()
pid = os.fork()
if pid == 0:
    for _ in range(3):
        runner.step()
    os._exit(0)
os.waitpid(pid, 0)
subprocess.run([sys.executable, __file__, "worker"])
