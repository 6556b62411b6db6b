"""RB201 buffer-bound-mismatch."""

from __future__ import annotations

import ast
from typing import Any, Mapping

from reviewbot.analysis.walk import walk as fast_walk
from reviewbot.lazy import libcst as cst

from reviewbot.analysis.buffers import Buffer, size_words
from reviewbot.finding import Edit, Fix
from reviewbot.providers import BufferProvider
from reviewbot.rule import CstRule, Invalid, Valid
from reviewbot.rules._alloc import code_of

# The allocators whose leading dimension sizes a buffer (torch's and numpy's).
_ALLOCATORS = ("empty", "zeros", "ones", "full", "rand")


def _bytes(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            value = count / size
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{count:,} bytes"


class BufferBoundMismatch(CstRule):
    """A buffer sized by one size bound while every use of it is bounded by another.

    ## What it does
    Finds a buffer a class allocates with a size bound as its leading dimension
    (`torch.empty((self.max_model_len, 1), ...)`) when every place the class uses it is
    bounded by a different bound: slices `buf[:num_reqs]` and `buf[:x.shape[0]]`, indices
    `buf[positions]`, and copies `buf[:n].copy_(src)`. Which names each bound limits comes
    from the rule pack's `size-bounds` (for engines: `max_num_reqs` bounds `num_reqs`,
    `batch_size` and the sampled token ids; `max_model_len` bounds positions in one
    sequence; `max_num_batched_tokens` bounds the tokens of one step). A buffer with any
    use whose bound is not clear, or one allocated twice, is not reported.

    ## Why is this bad?
    The buffer wastes memory when its bound is the larger one, and overflows where the
    other bound can be larger. vLLM's pinned readback buffer was sized by `max_model_len`
    (131,072: 1 MiB of pinned memory) though it holds one row per request (`max_num_reqs`,
    typically 256: 2 KiB); with more requests than positions, `buf[:num_reqs]` is shorter
    than the data and the copy fails at run time.

    ## Example
    ```python
    class Runner:
        def __init__(self, max_num_reqs, max_model_len):
            self.max_num_reqs = max_num_reqs
            self.max_model_len = max_model_len
            self.pinned = torch.empty((self.max_model_len, 1), dtype=torch.int64,
                                      pin_memory=True)

        def _to_list(self, sampled_token_ids):
            pinned = self.pinned[:sampled_token_ids.shape[0]]
            pinned.copy_(sampled_token_ids, non_blocking=True)
            return pinned.tolist()
    ```

    ## Use instead
    ```python
            self.pinned = torch.empty((self.max_num_reqs, 1), dtype=torch.int64,
                                      pin_memory=True)
    ```

    ## Options
    None. The bounds, their spellings (`aliases`), the names they limit and a typical
    value for the message are rule-pack data (`size-bounds`).

    ## Fix safety
    Unsafe: the fix changes an allocation's size. It replaces the bound with the one
    the uses show, when the class (or the allocating method) has it.
    """

    code = "RB201"
    name = "buffer-bound-mismatch"
    summary = "A buffer sized by one size bound while every use is bounded by another"
    severity = "error"
    fix_safety = "unsafe"
    VALID = [
        Valid("import torch\nclass R:\n    def __init__(self, max_num_reqs):\n"
              "        self.max_num_reqs = max_num_reqs\n"
              "        self.buf = torch.empty((self.max_num_reqs, 1), pin_memory=True)\n"
              "    def read(self, sampled_token_ids):\n"
              "        return self.buf[:sampled_token_ids.shape[0]]\n"),
        Valid("import torch\nclass R:\n    def __init__(self, max_model_len):\n"
              "        self.max_model_len = max_model_len\n"
              "        self.cos = torch.zeros(self.max_model_len, 64)\n"
              "    def rope(self, positions):\n        return self.cos[positions]\n"),
        Valid("import torch\nclass R:\n    def __init__(self, max_model_len):\n"
              "        self.max_model_len = max_model_len\n"
              "        self.buf = torch.zeros(self.max_model_len)\n"
              "    def a(self, num_reqs):\n        return self.buf[:num_reqs]\n"
              "    def b(self, k):\n        return self.buf[:k]\n"),
    ]
    INVALID = [
        Invalid("import torch\nclass R:\n    def __init__(self, max_num_reqs, max_model_len):\n"
                "        self.max_num_reqs = max_num_reqs\n"
                "        self.max_model_len = max_model_len\n"
                "        self.buf = torch.empty((self.max_model_len, 1), pin_memory=True)\n"
                "    def read(self, sampled_token_ids):\n"
                "        pinned = self.buf[:sampled_token_ids.shape[0]]\n"
                "        pinned.copy_(sampled_token_ids, non_blocking=True)\n"
                "        return pinned.tolist()\n", line=6, message_contains="max_num_reqs",
                expected_fix="import torch\nclass R:\n"
                "    def __init__(self, max_num_reqs, max_model_len):\n"
                "        self.max_num_reqs = max_num_reqs\n"
                "        self.max_model_len = max_model_len\n"
                "        self.buf = torch.empty((self.max_num_reqs, 1), pin_memory=True)\n"
                "    def read(self, sampled_token_ids):\n"
                "        pinned = self.buf[:sampled_token_ids.shape[0]]\n"
                "        pinned.copy_(sampled_token_ids, non_blocking=True)\n"
                "        return pinned.tolist()\n"),
        Invalid("import torch\nclass R:\n    def __init__(self, max_num_batched_tokens):\n"
                "        self.idx = torch.zeros(max_num_batched_tokens, dtype=torch.int32)\n"
                "    def step(self, num_reqs):\n        return self.idx[:num_reqs]\n", line=4),
    ]

    @classmethod
    def applies_to(cls, text: str, settings: Mapping[str, Any], packs: Any = None) -> bool:
        """A bound-sized buffer spells a bound."""
        if packs is None:
            return True
        words = size_words(packs)
        return bool(words) and any(word in text for word in words)

    METADATA_DEPENDENCIES = (BufferProvider,)
    CANDIDATES = _ALLOCATORS
    LOCAL_CANDIDATES = True  # reported at the allocation, in the method that makes it
    FUNCTION_LOCAL = True

    def visit_Assign(self, node: cst.Assign) -> None:
        """``self.buf = torch.empty((bound, ...))``: compare the bound with the uses'."""
        if len(node.targets) != 1 or not isinstance(node.value, cst.Call):
            return
        target = node.targets[0].target
        if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                and target.value.value == "self"):
            return
        buffer = self.get_metadata(BufferProvider, node.value)
        if buffer is None or buffer.attr != target.attr.value:
            return
        use_bound = _uses_bound(buffer)
        if use_bound is not None:
            self.report(node.value, self.message(buffer, use_bound),
                        self.fix(buffer, use_bound))

    def message(self, buffer: Buffer, use_bound: str) -> str:
        """What is wrong, where the uses show it, what it costs and when it breaks."""
        assert self.ctx is not None
        bounds = self.ctx.packs.size_bounds
        alloc, use = bounds[buffer.bound], bounds[use_bound]
        kind = "pinned buffer" if buffer.pinned else "buffer"
        sites = "; ".join(use.describe() for use in buffer.uses[:3])
        if len(buffer.uses) > 3:
            sites += f"; and {len(buffer.uses) - 3} more"
        text = (f"{kind} `self.{buffer.attr}` is sized by {buffer.bound} ({alloc.holds}) "
                f"but every use is bounded by {use_bound} ({use.holds}): {sites}")
        row = buffer.row_elements * buffer.itemsize if buffer.row_elements and \
            buffer.itemsize else None
        if row and alloc.typical and use.typical:
            held, needed = alloc.typical * row, use.typical * row
            if held > needed:
                text += (f"; at {buffer.bound}={alloc.typical:,} and {use_bound}="
                         f"{use.typical:,} it holds {_bytes(held)} where {_bytes(needed)} "
                         f"is used ({held - needed:,} bytes wasted)")
        text += (f"; where {use_bound} > {buffer.bound}, the buffer is shorter than the data "
                 f"and the copy fails at run time")
        return text

    def fix(self, buffer: Buffer, use_bound: str) -> Fix | None:
        """Replace the allocation's bound with the uses' bound, spelled as the class has it."""
        ctx = self.ctx
        assert ctx is not None
        spellings = (use_bound, *ctx.packs.size_bounds[use_bound].aliases)
        edits = []
        for node in buffer.bound_nodes:
            if isinstance(node, ast.Attribute):
                have = _class_writes(ctx.ast_tree, buffer.cls)
                if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                    return None
            elif isinstance(node, ast.Name):
                have = _local_names(buffer.method)
            else:
                return None
            spelling = next((s for s in spellings if s in have), None)
            if spelling is None:
                return None
            new: cst.BaseExpression = cst.Name(spelling)
            if isinstance(node, ast.Attribute):
                new = cst.Attribute(value=cst.Name("self"), attr=cst.Name(spelling))
            edits.append(Edit(*ctx.span(node), code_of(new)))
        if not edits:
            return None
        return Fix("unsafe", f"Size `self.{buffer.attr}` by {edits[0].content}", tuple(edits))


def _uses_bound(buffer: Buffer) -> str | None:
    """The one bound every use of the buffer shows, when it is not the allocation's (None
    when a use escapes, shows no bound or two, or the buffer is allocated twice)."""
    if buffer.reassigned or not buffer.uses:
        return None
    if not all(use.known and len(use.bounds) == 1 for use in buffer.uses):
        return None
    bounds = {bound for use in buffer.uses for bound in use.bounds}
    if len(bounds) == 1 and buffer.bound not in bounds:
        return bounds.pop()
    return None


def _class_writes(tree: ast.Module, name: str) -> set[str]:
    """Attributes the class ``name`` assigns as ``self.x = ...``."""
    found: set[str] = set()
    for cls in fast_walk(tree):
        if isinstance(cls, ast.ClassDef) and cls.name == name:
            for node in fast_walk(cls):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                        and isinstance(node.value, ast.Name) and node.value.id == "self":
                    found.add(node.attr)
    return found


def _local_names(func: ast.AST) -> set[str]:
    """Parameters and names assigned in a function."""
    names: set[str] = set()
    for node in fast_walk(func):
        if isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names

