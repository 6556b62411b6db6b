"""Which indexing ops synchronise when the tensor and its index sit on different devices
(a CUDA tensor indexed by a host mask or host indices, and the reverse)."""
import json, sys, torch
from _probe import probe
torch.cuda.init()
d = torch.device("cuda")
x = torch.arange(16, device=d, dtype=torch.float32)
xc = torch.arange(16, dtype=torch.float32)
cpu_mask = torch.arange(16) > 3
cuda_mask = x > 3
pinned_mask = cpu_mask.pin_memory()
cpu_idx = torch.tensor([1, 3, 5])
pinned_idx = cpu_idx.pin_memory()
cuda_idx = torch.tensor([1, 3, 5], device=d)
np_mask = cpu_mask.numpy()
cases = {
    "cuda[cuda_mask]": lambda: x[cuda_mask],
    "cuda[cpu_mask]": lambda: x[cpu_mask],
    "cuda[pinned_mask]": lambda: x[pinned_mask],
    "cuda[numpy_mask]": lambda: x[np_mask],
    "cuda[cpu_mask] = 1.0": lambda: x.__setitem__(cpu_mask, 1.0),
    "cuda[cpu_mask] = cuda[cpu_mask] * 2": lambda: x.__setitem__(cpu_mask, x[cpu_mask] * 2),
    "cuda[cpu_idx]": lambda: x[cpu_idx],
    "cuda[pinned_idx]": lambda: x[pinned_idx],
    "cuda[cuda_idx]": lambda: x[cuda_idx],
    "cuda[[1, 3, 5]]": lambda: x[[1, 3, 5]],
    "cuda[cpu_scalar_idx]": lambda: x[torch.tensor(3)],
    "cuda[cpu_idx] = 1.0": lambda: x.__setitem__(cpu_idx, 1.0),
    "cuda[cpu_idx] = cuda[cuda_idx]": lambda: x.__setitem__(cpu_idx, x[cuda_idx]),
    "cuda[:, cpu_idx]": lambda: x.view(4, 4)[:, torch.tensor([0, 2])],
    "cuda[range_list]": lambda: x[list(range(4))],
    "cuda[tuple_of_ints]": lambda: x.view(4, 4)[(1, 2)],
    "cpu[cuda_mask]": lambda: xc[cuda_mask],
    "cpu[cuda_idx]": lambda: xc[cuda_idx],
    "cuda.index_select(0, cpu_idx)": lambda: x.index_select(0, cpu_idx),
    "torch.masked_select(cuda, cpu_mask)": lambda: torch.masked_select(x, cpu_mask),
}
out = probe(cases, 140)
# The profiler's runtime events, for what the debug mode may not see.
prof_out = {}
for name in ("cuda[cpu_mask]", "cuda[cpu_idx]", "cuda[pinned_idx]"):
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        cases[name]()
        torch.cuda.current_stream().wait_stream(torch.cuda.current_stream())
    names = sorted({e.name for e in prof.events() if "Synchronize" in e.name or "Memcpy" in e.name})
    prof_out[name] = names
out["profiler runtime events"] = prof_out
out["torch"] = torch.__version__
out["device"] = torch.cuda.get_device_name()
json.dump(out, sys.stdout, indent=1)
print()
