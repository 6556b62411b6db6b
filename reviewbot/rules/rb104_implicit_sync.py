"""RB104 implicit-sync."""

from reviewbot.rule import Invalid, Valid
from reviewbot.rules._sync import SyncRule

_HEAD = "import torch\nclass R:\n    def execute_model(self, n):\n" \
        "        t = torch.zeros(n, device='cuda')\n"


class ImplicitSync(SyncRule):
    """A CUDA tensor used where Python needs its value, or an op whose size depends on data.

    ## What it does
    In a function that runs every step, finds a CUDA tensor used as a condition (`if t:`,
    `while t`, `assert t`, `t > 0` as a test, `t and x`), passed to `bool()`, `int()` or
    `float()`, used to index a Python list; and ops whose output size depends on the
    data: `torch.nonzero` / `t.nonzero()`, boolean-mask indexing `t[mask]`, `torch.unique`,
    `torch.masked_select`, one-argument `torch.where`, and `repeat_interleave` with tensor
    repeats and no `output_size`.

    ## Why is this bad?
    Each of these needs a number that only the GPU knows yet, so the host waits for every
    kernel queued before it. Nothing in the code says "sync" here, which is why they
    survive review.

    ## Known problems
    Only functions whose text holds a condition, a comparison or a sync-prone call are
    analysed (that keeps the check cheap), so a Python list indexed by a CUDA tensor in a
    function with none of those is missed.

    ## Example
    ```python
    def execute_model(self, batch):
        logits = self.model(batch)
        if (logits.isnan()).any():
            raise ValueError("NaN logits")
    ```

    ## Use instead
    ```python
    def execute_model(self, batch):
        logits = self.model(batch)
        torch._assert_async(~logits.isnan().any())  # checked on the GPU
    ```

    ## Options
    None.

    ## Fix safety
    No automatic fix.
    """

    code = "RB104"
    name = "implicit-sync"
    summary = "A CUDA tensor used where Python needs its value, or a data-dependent-size op"
    consequence = "Python needs a value only the GPU has yet, so the host waits for it"
    VALID = [
        Valid(_HEAD + "        if n > 0:\n            return t\n"),
        Valid(_HEAD + "        mask = torch.ones(n, dtype=torch.bool)\n"
                      "        return torch.nonzero(mask)\n"),
        Valid(_HEAD + "        if t is None:\n            return 0\n"),
        Valid(_HEAD + "        return torch.repeat_interleave(t, t, output_size=8)\n"),
    ]
    INVALID = [
        Invalid(_HEAD + "        if t.sum() > 0:\n            return t\n", line=5,
                message_contains="comparison of a CUDA tensor used as a condition"),
        Invalid(_HEAD + "        return int(t.max())\n", line=5),
        Invalid(_HEAD + "        return t[t > 0]\n", line=5, message_contains="boolean-mask"),
        Invalid(_HEAD + "        return t.nonzero()\n", line=5),
        Invalid(_HEAD + "        return torch.unique(t)\n", line=5),
        Invalid(_HEAD + "        while t.any():\n            t = t - 1\n", line=5),
    ]
