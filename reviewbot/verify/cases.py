"""Test tensors for the helpers, and exact comparison of results (values and types)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator

DTYPE_NAMES = ("bool", "int32", "int64", "float16", "bfloat16", "float32")
SHAPES = ((), (0,), (1,), (7,), (3, 1), (8, 1), (5, 3), (0, 4), (2, 3, 4))


@dataclass
class Case:
    """One input: a name for the report and the tensor."""

    name: str
    tensor: Any


def same(a: Any, b: Any) -> bool:
    """Equal values of the same types (``1 == 1.0 == True`` is not enough), NaN == NaN,
    containers element by element; tensors by dtype, shape, device and values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if type(a).__name__ == "Tensor" and hasattr(a, "dtype"):
        import torch

        return a.dtype == b.dtype and a.shape == b.shape and a.device == b.device and bool(
            torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                                  and torch.equal(a.nan_to_num(), b.nan_to_num())))
    if hasattr(a, "__dict__") and not isinstance(a, type):
        return same(vars(a), vars(b))
    return bool(a == b)


def difference(a: Any, b: Any, where: str = "result") -> str | None:
    """Where two results first differ, in words (None when they are the same)."""
    if type(a) is not type(b):
        return f"{where}: {type(a).__name__} {_short(a)} vs {type(b).__name__} {_short(b)}"
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: length {len(a)} vs {len(b)}"
        for index, (x, y) in enumerate(zip(a, b)):
            found = difference(x, y, f"{where}[{index}]")
            if found:
                return found
        return None
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{where}: keys {sorted(map(str, a))} vs {sorted(map(str, b))}"
        for key in a:
            found = difference(a[key], b[key], f"{where}[{key!r}]")
            if found:
                return found
        return None
    if hasattr(a, "__dict__") and not isinstance(a, type) and type(a).__name__ != "Tensor":
        return difference(vars(a), vars(b), where)
    return None if same(a, b) else f"{where}: {_short(a)} vs {_short(b)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def cases(torch: Any, device: str, seed: int, rows_over: int = 40) -> Iterator[Case]:
    """Every dtype over every shape with seeded random values, plus non-contiguous views
    and a tensor with more rows than a per-request buffer holds."""
    generator = torch.Generator(device="cpu").manual_seed(seed)

    def values(shape: tuple[int, ...], dtype: Any) -> Any:
        if dtype == torch.bool:
            t = torch.randint(0, 2, shape, generator=generator).bool()
        elif dtype in (torch.int32, torch.int64):
            high = 2**31 - 1 if dtype == torch.int32 else 2**40
            t = torch.randint(-high, high, shape, generator=generator, dtype=torch.int64)
        else:
            t = torch.randn(shape, generator=generator) * 1000
        return t.to(dtype).to(device)

    for name in DTYPE_NAMES:
        dtype = getattr(torch, name)
        for shape in SHAPES:
            label = "x".join(map(str, shape)) or "0-d"
            yield Case(f"{name} {label}", values(shape, dtype))
        base = values((6, 4), dtype)
        yield Case(f"{name} 4x6 transposed (non-contiguous)", base.t())
        yield Case(f"{name} 3x4 every other row (strided)", base[::2])
        yield Case(f"{name} {rows_over}x1 (more rows than the buffer)",
                   values((rows_over, 1), dtype))
