"""RB107 blocking-copy-to-device."""

from reviewbot.rule import Invalid, Valid
from reviewbot.rules._sync import SyncRule


class BlockingCopyToDevice(SyncRule):
    """A blocking copy of host data to the GPU in a hot path (off by default).

    ## What it does
    Finds `torch.tensor(data, device=<CUDA device>)` and `torch.as_tensor(...)` of host
    data onto the GPU, and `.cuda()` / `.to(<CUDA device>)` of a tensor known to be on the
    host, without `non_blocking=True`, inside a function that runs every step.

    ## Why is this bad?
    A blocking host-to-device copy from pageable memory waits for the stream before it
    returns: measured with torch 2.11 on an H200, `torch.tensor(python_list,
    device="cuda")` and `cpu_tensor.cuda()` are caught by
    `torch.cuda.set_sync_debug_mode("error")` and show a stream synchronisation in the
    profiler. It is off by default because engines do this on purpose for small inputs
    every step; the wait is for work already queued, and often short.

    ## Example
    ```python
    def execute_model(self, batch):
        positions = torch.tensor(batch.positions, device="cuda")
        return self.model(positions)
    ```

    ## Use instead
    ```python
    def execute_model(self, batch):
        host = self.positions_pinned[: len(batch.positions)]
        host.copy_(torch.as_tensor(batch.positions))
        positions = host.to("cuda", non_blocking=True)
        return self.model(positions)
    ```

    ## Options
    None. Turn it on with `--select RB107` or `extend-select = ["RB107"]`.

    ## Fix safety
    No automatic fix: a non-blocking copy needs a pinned buffer that outlives the copy.
    """

    code = "RB107"
    name = "blocking-copy-to-device"
    summary = "A blocking copy of host data to the GPU in a hot path (off by default)"
    default_enabled = False
    consequence = ("the host waits for the stream before the copy returns; stage the data "
                   "in a pinned buffer and copy it with non_blocking=True")
    sync_words = ("cuda", "tensor", ".to(")
    VALID = [
        Valid("import torch\nclass R:\n    def execute_model(self, ids):\n"
              "        host = torch.tensor(ids).pin_memory()\n"
              "        return host.to('cuda', non_blocking=True)\n"),
        Valid("import torch\nclass R:\n    def load_model(self, ids):\n"
              "        return torch.tensor(ids, device='cuda')\n"),
        Valid("import torch\nclass R:\n    def execute_model(self, n):\n"
              "        return torch.zeros(n, device='cuda')\n"),
    ]
    INVALID = [
        Invalid("import torch\nclass R:\n    def execute_model(self, ids):\n"
                "        return torch.tensor(ids, device='cuda')\n", line=4,
                message_contains="torch.tensor"),
        Invalid("import torch\nclass R:\n    def execute_model(self, ids):\n"
                "        host = torch.tensor(ids)\n        return host.cuda()\n", line=5,
                message_contains=".cuda()"),
        Invalid("import torch\nclass R:\n    def execute_model(self, lens_cpu: torch.Tensor):\n"
                "        return lens_cpu.to('cuda')\n", line=4),
    ]
