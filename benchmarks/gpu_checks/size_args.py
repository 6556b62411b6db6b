"""Which ops synchronise when given a CUDA 0-d tensor as a size, value or bound."""
import json, sys, torch
from _probe import probe
torch.cuda.init()
d = torch.device("cuda")
n = torch.tensor(4, device=d)        # a CUDA scalar
x = torch.arange(16, device=d, dtype=torch.float32)
mask = x > 3
cases = {
    "torch.empty(n)": lambda: torch.empty(n, device=d),
    "torch.zeros(n, 2)": lambda: torch.zeros(n, 2, device=d),
    "torch.arange(n)": lambda: torch.arange(n, device=d),
    "torch.full((4,), n)": lambda: torch.full((4,), n, device=d),
    "torch.full((n,), 1)": lambda: torch.full((n,), 1, device=d),
    "x.new_zeros(n)": lambda: x.new_zeros(n),
    "x.masked_fill(mask, n)": lambda: x.masked_fill(mask, n),
    "x[:n]": lambda: x[:n],
    "x.view(n, -1)": lambda: x.view(n, -1),
    "x.narrow(0, 0, n)": lambda: x.narrow(0, 0, n),
    "range(n)": lambda: list(range(n)),
    "x.split(n)": lambda: x.split(n),
    "torch.where(mask, x, n)": lambda: torch.where(mask, x, n),
    "x.clamp(max=n)": lambda: x.clamp(max=n),
    "x[mask] = 1.0": lambda: x.__setitem__(mask, 1.0),
    "x[mask] = n": lambda: x.__setitem__(mask, n),
    "x[mask] = x[mask]*2": lambda: x.__setitem__(mask, x[mask] * 2),
}
out = probe(cases, 120)
out["torch"] = torch.__version__
out["device"] = torch.cuda.get_device_name()
print(json.dumps(out, indent=1))
