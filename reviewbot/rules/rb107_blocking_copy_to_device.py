"""RB107 blocking-copy-to-device."""

from __future__ import annotations

from typing import Any

from reviewbot.lazy import libcst as cst

from reviewbot.rule import Invalid, Valid
from reviewbot.rules._sync import CPU, CUDA, DEV_CUDA, UNKNOWN, VALUE, SyncRule


class BlockingCopyToDevice(SyncRule):
    """A blocking copy of host data to the GPU in a hot path (off by default).

    ## What it does
    Finds `torch.tensor(data, device=<CUDA device>)` and `torch.as_tensor(...)` of host
    data onto the GPU, and `.cuda()` / `.to(<CUDA device>)` of a tensor known to be on the
    host, without `non_blocking=True`, inside a function that runs every step. Also a CUDA
    tensor indexed, read or written, by a host index tensor or a list
    (`logits[req_indices_cpu]`, `x[[0, 2]]`): torch copies the index to the GPU and waits
    for the stream, even from pinned memory. A host boolean mask read (`x[mask_cpu]`) and a
    host scalar (`x[torch.tensor(3)]`) are not reported: measured, they do not wait; a
    Python number written through a host mask (`x[mask_cpu] = 0.0`) does.

    ## Why is this bad?
    A blocking host-to-device copy from pageable memory waits for the stream before it
    returns: measured with torch 2.11 on an H200, `torch.tensor(python_list,
    device="cuda")` and `cpu_tensor.cuda()` are caught by
    `torch.cuda.set_sync_debug_mode("error")` and show a stream synchronisation in the
    profiler. So are `cuda_tensor[cpu_index]`, `cuda_tensor[pinned_index]` and
    `cuda_tensor[[1, 3, 5]]` (torch 2.11 on an H100,
    `benchmarks/gpu_checks/mixed_device_index.py`). It is off by default because engines
    do this on purpose for small inputs every step; the wait is for work already queued,
    and often short.

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
    CANDIDATES = ("cuda", "tensor", ".to(", "[")
    VALID = [
        Valid("import torch\nclass R:\n    def execute_model(self, ids):\n"
              "        host = torch.tensor(ids).pin_memory()\n"
              "        return host.to('cuda', non_blocking=True)\n"),
        Valid("import torch\nclass R:\n    def load_model(self, ids):\n"
              "        return torch.tensor(ids, device='cuda')\n"),
        Valid("import torch\nclass R:\n    def execute_model(self, n):\n"
              "        return torch.zeros(n, device='cuda')\n"),
        # A host mask read is a nonzero on the host and a copy that does not wait; a CUDA
        # index needs no copy.
        Valid("import torch\nclass R:\n    def execute_model(self, n):\n"
              "        logits = torch.zeros(n, device='cuda')\n"
              "        keep = torch.zeros(n, dtype=torch.bool)\n"
              "        idx = torch.arange(n, device='cuda')\n"
              "        return logits[keep], logits[idx]\n"),
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
        Invalid("import torch\nclass R:\n    def execute_model(self, n, idx_cpu: torch.Tensor):\n"
                "        logits = torch.zeros(n, device='cuda')\n"
                "        return logits[idx_cpu]\n", line=5, message_contains="host index"),
        Invalid("import torch\nclass R:\n    def execute_model(self, n):\n"
                "        logits = torch.zeros(n, device='cuda')\n"
                "        logits[[0, 2]] = 0.0\n", line=5, message_contains="host index"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        method = self.callee_name(node)
        if method not in ("tensor", "as_tensor", "cuda", "to"):
            return
        chain = self.reporting_here()
        if chain is False or self.allowed(node):
            return
        torch_function = self.torch_function(node)
        if torch_function is not None:
            self._host_data_copy(node, torch_function, chain)
            return
        receiver = self.receiver(node)
        if receiver is None or receiver.kind != CPU or not isinstance(node.func, cst.Attribute):
            return
        held = self.short(node.func.value)
        if method == "cuda":
            if not self.is_true(self.keyword(node, "non_blocking")):
                self.report_sync(node, f"`.cuda()` of the host tensor `{held}`", receiver.kind,
                                 receiver.evidence, chain)
        elif method == "to":
            target = self.device_argument(node, 0)
            if target is not None and target.kind in (DEV_CUDA, CUDA) and \
                    not self.non_blocking(node):
                self.report_sync(node, f"`.to(...)` of the host tensor `{held}` to the GPU "
                                 "without `non_blocking=True`", receiver.kind,
                                 receiver.evidence, chain)

    def __init__(self, settings: Any, ctx: Any = None) -> None:
        super().__init__(settings, ctx)
        # Subscripts an assignment writes, with the value written.
        self._targets: dict[cst.CSTNode, cst.BaseExpression] = {}

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """``cuda[host_index]``: the index is copied to the GPU, and the copy waits."""
        index_node = self.index_of(node)
        if index_node is None:
            return
        chain = self.reporting_here()
        if chain is False or self.allowed(node):
            return
        base = self.device(node.value)
        if base is None or base.kind != CUDA or base.weak:
            return  # a tensor taken to be on the GPU only by default: the host index wins
        if isinstance(index_node, (cst.List, cst.ListComp)):
            what = "a list"
        else:
            index = self.device(index_node)
            if index is None or index.kind != CPU or (index.boolean and not self._written(node)):
                return  # a host mask read, or a tensor written through one, does not wait
            what = f"the host tensor `{self.short(index_node)}`"
        self.report_sync(node, f"`{self.short(node)}` indexes a CUDA tensor with {what}: the "
                         "host index is copied to the GPU", CUDA, base.evidence, chain)

    def _written(self, node: cst.Subscript) -> bool:
        """Whether ``node`` is assigned a value that is not a tensor (``x[mask] = 1.0``):
        measured, that write through a host mask waits; a tensor's does not."""
        value = self._targets.get(node)
        if value is None:
            return False
        fact = self.device(value)
        return fact is None or fact.kind not in (CUDA, CPU)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._targets[target.target] = node.value

    def _host_data_copy(self, node: cst.Call, qual: str, chain: tuple[str, ...] | None) -> None:
        """``torch.tensor(host_data, device=cuda)``: a blocking copy from pageable memory."""
        if qual.rsplit(".", 1)[-1] not in ("tensor", "as_tensor") or qual.startswith(
                ("torch.cuda.", "torch.accelerator.")):
            return
        if self.is_true(self.keyword(node, "pin_memory")) or \
                self.is_true(self.keyword(node, "non_blocking")):
            return
        device_node = self.keyword(node, "device")
        device = self.device(device_node) if device_node is not None else None
        if device is None:
            return
        packs = self.ctx.packs
        if device.kind == DEV_CUDA:
            where = device.evidence or "a CUDA device"
        elif device.kind == UNKNOWN and packs is not None and packs.default_device == "cuda":
            assert device_node is not None
            where = (f"`{self.short(device_node)}`, taken to be the GPU (devices.default: "
                     "cuda)")
        else:
            return
        args = self.positional(node)
        data = self.device(args[0]) if args else None
        if data is None or data.kind == CUDA:
            return
        kind, why = (CPU, data.evidence) if data.kind == CPU else (VALUE, "host data")
        self.report_sync(node, f"`{qual}(...)` copies host data onto {where}", kind, why, chain)
