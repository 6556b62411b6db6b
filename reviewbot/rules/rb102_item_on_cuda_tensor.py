"""RB102 item-on-cuda-tensor."""

from reviewbot.rule import Invalid, Valid
from reviewbot.rules._sync import INCLUDE_UNKNOWN, SyncRule


class ItemOnCudaTensor(SyncRule):
    """`.item()` on a CUDA tensor in a hot path.

    ## What it does
    Finds `.item()` on a tensor known to be on the GPU inside a function that runs every
    step. The message names the hot path and why the tensor is on the GPU.

    ## Why is this bad?
    `.item()` waits until every kernel queued before it has run, so the host cannot queue
    the next step's work meanwhile and the GPU idles between steps. Unlike `.tolist()` it
    did not stall other threads' CUDA calls in our H200 measurement (0.19 ms), but the
    calling thread still waits for the whole queue.

    ## Example
    ```python
    def execute_model(self, batch):
        logits = self.model(batch)
        if logits.max().item() > 30.0:
            self.clip(logits)
    ```

    ## Use instead
    ```python
    def execute_model(self, batch):
        logits = self.model(batch)
        logits = torch.clamp(logits, max=30.0)  # stays on the GPU
    ```

    ## Options
    - `include-unknown` (bool, default false): also report tensors whose device is
      unknown, as warnings.

    ## Fix safety
    No automatic fix.
    """

    code = "RB102"
    name = "item-on-cuda-tensor"
    summary = "`.item()` on a CUDA tensor in a hot path"
    consequence = ("the host waits for all queued GPU work before the next step can be "
                   "queued; keep the value on the GPU or read it with an event-synced "
                   "pinned copy")
    sync_words = ("item",)
    options = (INCLUDE_UNKNOWN,)
    VALID = [
        Valid("import torch\nclass R:\n    def execute_model(self, n):\n"
              "        t = torch.tensor([n])\n        return t.item()\n"),
        Valid("import torch\nclass R:\n    def profile_run(self):\n"
              "        t = torch.zeros(1, device='cuda')\n        return t.item()\n"),
        Valid("import torch\nclass R:\n    def execute_model(self, d):\n"
              "        return d.item()  # a dict? unknown: not reported by default\n"),
    ]
    INVALID = [
        Invalid("import torch\nclass R:\n    def execute_model(self, n):\n"
                "        t = torch.zeros(n, device=torch.device('cuda'))\n"
                "        return t.sum().item()\n", line=5,
                message_contains="allocated on the device 'cuda'"),
        Invalid("import torch\nclass R:\n    def execute_model(self, d):\n"
                "        return d.item()\n", line=4, options={"include-unknown": True},
                message_contains="device unknown"),
    ]
