"""RB104 implicit-sync."""

from __future__ import annotations

import ast
from typing import Any, Sequence

from reviewbot.lazy import libcst as cst

from reviewbot.analysis.gpu import mask_named
from reviewbot.providers import DeviceFact
from reviewbot.rule import Invalid, Valid
from reviewbot.rules._sync import (CPU, CUDA, UNKNOWN, VALUE, SyncRule, ast_condition_leaves,
                                   ast_positional, bool_operands,
                                   child_nodes, condition_leaves)

# torch functions and tensor methods whose output size depends on the data.
DATA_DEPENDENT = frozenset({"nonzero", "unique", "unique_consecutive", "masked_select",
                            "argwhere"})
# torch functions that return before a data-dependent op is looked for (allocations).
_FACTORIES = frozenset({
    "zeros", "ones", "empty", "full", "arange", "range", "rand", "randn", "randint",
    "randperm", "tensor", "as_tensor", "linspace", "logspace", "eye", "empty_strided",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "randint_like", "tril_indices", "triu_indices", "asarray"})
_CASTS = ("bool", "int", "float")
# Factories whose positional arguments are sizes (or, for arange, bounds): Python ints, so
# a CUDA tensor there is read back to the host (`torch.empty(cum_lens[-1])`).
_SIZED = frozenset({"empty", "zeros", "ones", "rand", "randn", "arange", "full"})
# Every call visit_Call looks into.
_CALLED = frozenset({*_CASTS, *_SIZED, "topk", *DATA_DEPENDENT, "where", "equal",
                     "repeat_interleave"})


# Reductions that leave one element on the device.
_REDUCTIONS = frozenset({"sum", "max", "min", "amax", "amin", "prod", "mean"})


def _element_of_tensor(expr: cst.BaseExpression) -> bool:
    """An expression that reads an element of a tensor as written: an index
    (`lens[-1]`), a reduction (`t.sum()`), or arithmetic on one (`lens[-1] + 1`)."""
    if isinstance(expr, cst.Subscript):
        return True
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        return expr.func.attr.value in _REDUCTIONS
    if isinstance(expr, cst.BinaryOperation):
        return _element_of_tensor(expr.left) or _element_of_tensor(expr.right)
    return False


def _bindings(func: cst.FunctionDef) -> dict[str, list[cst.BaseExpression | None]]:
    """Each name a function binds, with the values assigned to it (``None`` for a binding
    with no single value: a loop target, an augmented or tuple assignment, a parameter)."""
    values: dict[str, list[cst.BaseExpression | None]] = {}

    def bind(target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if isinstance(target, cst.Name):
            values.setdefault(target.value, []).append(value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                bind(element.value, None)

    stack: list[cst.CSTNode] = [func]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Assign):
            for target in node.targets:
                bind(target.target, node.value if len(node.targets) == 1 else None)
        elif isinstance(node, (cst.AnnAssign, cst.NamedExpr)):
            bind(node.target, node.value)
        elif isinstance(node, (cst.AugAssign, cst.For)):
            bind(node.target, None)
        elif isinstance(node, cst.Param):
            bind(node.name, None)
        stack.extend(child_nodes(node))
    return values


def _holds_subscript(target: cst.BaseExpression) -> bool:
    """``x[i] = ...`` or ``a, x[i] = ...``."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_holds_subscript(e.value) for e in target.elements)
    return isinstance(target, cst.Subscript)


def _mask(index: DeviceFact, node: cst.BaseExpression | None) -> bool:
    """A boolean index: by how it was made, or by its name (``keep_mask``, ``self.mask``:
    what the analysis lost on the way, through a container's values or an op that keeps
    the dtype)."""
    if index.boolean:
        return True
    name = node.value if isinstance(node, cst.Name) else \
        node.attr.value if isinstance(node, cst.Attribute) else ""
    return mask_named(name)


_HEAD = "import torch\nclass R:\n    def execute_model(self, n):\n" \
        "        t = torch.zeros(n, device='cuda')\n"


class ImplicitSync(SyncRule):
    """A CUDA tensor used where Python needs its value, or an op whose size depends on data.

    ## What it does
    In a function that runs every step, finds a CUDA tensor used as a condition (`if t:`,
    `while t`, `assert t`, `t > 0` as a test, `t and x`), passed to `bool()`, `int()` or
    `float()` (`bool(m is not None and m.any())` passes the last operand), used to index a
    Python list, or read as an element (`lens[-1]`, `t.sum()`, or a name the function binds
    once to one: `max_k = k.max()`) for a size of a torch factory (`torch.empty(lens[-1])`)
    or the `k` of `topk`;
    and ops whose output size depends on the data: `torch.nonzero` /
    `t.nonzero()`, boolean-mask indexing `t[mask]` (a mask by how it was made, or a CUDA
    index named `*mask`; a tensor of unknown device indexed by a CUDA mask is on the GPU,
    as torch refuses a CUDA index into host data), `torch.unique`,
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
    # Tests, boolean operators, casts, subscripts and the data-dependent ops.
    CANDIDATES = ("if", "while", "assert", "and", "or", "[", "bool", "int", "float", "equal",
                  "nonzero", "unique", "masked_select", "argwhere", "where", "repeat_interleave",
                  "empty", "zeros", "ones", "rand", "arange", "full", "topk")
    NEEDS_CUDA = True
    QUIET_IN_ALLOWED_BLOCKS = False
    VALID = [
        Valid(_HEAD + "        if n > 0:\n            return t\n"),
        Valid(_HEAD + "        mask = torch.ones(n, dtype=torch.bool)\n"
                      "        return torch.nonzero(mask)\n"),
        Valid(_HEAD + "        if t is None:\n            return 0\n"),
        Valid(_HEAD + "        return torch.repeat_interleave(t, t, output_size=8)\n"),
        Valid(_HEAD + "        picks = t.clone()\n        return t[picks]\n"),
        # A Python scalar put where the mask is true is a masked_fill: no count is needed.
        Valid(_HEAD + "        t[t > 0] = float(n)\n        return t\n"),
        # An opt-in check (`--enable-nan-detection`).
        Valid(_HEAD + "        if self.enable_nan_detection and torch.isnan(t).any():\n"
                      "            raise ValueError('NaN')\n"),
        # Sizes the host knows: a shape, a Python int.
        Valid(_HEAD + "        return torch.empty(t.shape[0], n, device='cuda')\n"),
        # A name bound more than once, or to something else than an element, and a `k`
        # that is a Python int.
        Valid(_HEAD + "        total = t.sum()\n        if n:\n            total = t.max()\n"
                      "        return torch.arange(total, device='cuda')\n"),
        Valid(_HEAD + "        k = min(n, 8)\n        return t.topk(k, dim=0)\n"),
    ]
    INVALID = [
        Invalid(_HEAD + "        if t.sum() > 0:\n            return t\n", line=5,
                message_contains="comparison of a CUDA tensor used as a condition"),
        Invalid(_HEAD + "        return int(t.max())\n", line=5),
        Invalid(_HEAD + "        return t[t > 0]\n", line=5, message_contains="boolean-mask"),
        # What a CUDA mask indexes is on the GPU: torch refuses it for host data.
        Invalid(_HEAD + "        out = encode(t)\n        return out[t > 0]\n", line=6,
                message_contains="the CUDA mask puts the tensor on the GPU"),
        Invalid(_HEAD + "        keep_mask = t.clone()\n        return t[keep_mask]\n", line=6,
                message_contains="boolean-mask"),
        Invalid(_HEAD + "        return bool(n > 0 and t.any())\n", line=5,
                message_contains="`bool()` of the CUDA tensor `t.any()`"),
        # What an unknown function makes of CUDA tensors is a tensor: scattered by the mask.
        Invalid(_HEAD + "        keep_mask = t > 0\n        t[keep_mask] = scale(t[keep_mask], n)\n"
                "        return t\n", line=6, message_contains="boolean-mask assignment"),
        Invalid(_HEAD + "        return t.nonzero()\n", line=5),
        Invalid(_HEAD + "        return torch.unique(t)\n", line=5),
        Invalid(_HEAD + "        while t.any():\n            t = t - 1\n", line=5),
        Invalid(_HEAD + "        lens = t.cumsum(0)\n"
                "        return torch.empty(lens[-1], dtype=torch.int32, device='cuda')\n",
                line=6, message_contains="as a size of `torch.empty`"),
        Invalid(_HEAD + "        return torch.arange(t.sum(), device='cuda')\n", line=5),
        # A name bound once to an element of a CUDA tensor.
        Invalid(_HEAD + "        total = n + (t > 0).sum()\n"
                "        return torch.arange(total, device='cuda')\n", line=6,
                message_contains="as a size of `torch.arange`"),
        Invalid(_HEAD + "        max_k = t.max()\n        return t.topk(max_k, dim=0)\n", line=6,
                message_contains="as `k` of `topk`"),
    ]

    @staticmethod
    def cuda_sites(node: ast.AST) -> Sequence[ast.AST]:
        """The operands of a test, the operands of a boolean operator but its last, an
        index; of the calls visit_Call looks into, the receiver, the arguments (and the
        elements of a tuple or list among them), and the last operands of a cast's
        boolean argument."""
        kind = type(node)
        if kind in (ast.If, ast.While, ast.Assert, ast.IfExp):
            return list(ast_condition_leaves(node.test))  # type: ignore[attr-defined]
        if kind is ast.comprehension:
            return [leaf for test in node.ifs  # type: ignore[attr-defined]
                    for leaf in ast_condition_leaves(test)]
        if kind is ast.BoolOp:
            return node.values[:-1]  # type: ignore[attr-defined]
        if kind is ast.Subscript:
            return (node.slice,)  # type: ignore[attr-defined]
        if kind is not ast.Call:
            return ()
        func = node.func  # type: ignore[attr-defined]
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else None
        if name not in _CALLED:
            return ()
        sites: list[ast.AST] = [func.value] if isinstance(func, ast.Attribute) else []
        for value in [*ast_positional(node), *(k.value for k in node.keywords)]:  # type: ignore
            sites.append(value)
            if isinstance(value, (ast.Tuple, ast.List)):
                sites.extend(value.elts)
            while isinstance(value, ast.BoolOp):  # `bool(a and t.any())`
                value = value.values[-1]
                sites.append(value)
        return sites

    def __init__(self, settings: Any, ctx: Any = None) -> None:
        super().__init__(settings, ctx)
        # function -> the names it binds and their values (found once per function)
        self._bindings: dict[int, dict[str, list[cst.BaseExpression | None]]] = {}

    # Tests -------------------------------------------------------------------------------
    def visit_If(self, node: cst.If) -> None:
        self._condition(node.test)

    def visit_While(self, node: cst.While) -> None:
        self._condition(node.test)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._condition(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._condition(node.test)

    def visit_CompIf(self, node: cst.CompIf) -> None:
        self._condition(node.test)

    def _condition(self, test: cst.BaseExpression) -> None:
        """A CUDA tensor that Python must turn into a bool (a test the analysis skips,
        such as a debug flag's, has no label)."""
        chain = self.reporting_here()
        if chain is False:
            return
        for leaf in condition_leaves(test):
            fact = self.device(leaf)
            if fact is None or fact.kind != CUDA or self.allowed(leaf):
                continue
            kind = "a comparison of a CUDA tensor" if isinstance(leaf, cst.Comparison) \
                else f"the CUDA tensor `{self.short(leaf)}`"
            self.report_sync(leaf, f"{kind} used as a condition", fact.kind, fact.evidence,
                             chain)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        """``a and t`` as a value: each operand but the last is tested. (A condition's
        operators are the tests above; they have no label of their own.)"""
        chain = self.reporting_here()
        if chain is False or self.device(node) is None:
            return  # a test's operator, or an inner part of a chain (`a and b` of `a and b and c`)
        if self.allowed(node):
            return
        for value in bool_operands(node)[:-1]:
            fact = self.device(value)
            if fact is not None and fact.kind == CUDA:
                self.report_sync(node, f"`{self.short(value)}` (a CUDA tensor) in a boolean "
                                 "operator", fact.kind, fact.evidence, chain)

    # Subscripts --------------------------------------------------------------------------
    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._aug_target = node.target  # `x[i] += 1` stores: no __index__ of a container

    def visit_Subscript(self, node: cst.Subscript) -> None:
        chain = self.reporting_here()
        if chain is False or self.device(node) is None:
            return  # an assignment's target has no label of its own: see visit_Assign
        if self.allowed(node):
            return
        index_node = self.index_of(node)
        base = self.device(node.value)
        index = self.device(index_node) if index_node is not None else None
        if base is None or index is None or index.kind != CUDA:
            return
        if base.kind == CUDA and _mask(index, index_node):
            self.report_sync(node, f"boolean-mask indexing `{self.short(node)}` (the result's "
                             "size depends on the data)", base.kind, base.evidence, chain)
        elif base.kind == UNKNOWN and index.boolean:
            # torch refuses a CUDA index into a host tensor, numpy array or list: what a
            # CUDA mask indexes is on the GPU too.
            self.report_sync(node, f"boolean-mask indexing `{self.short(node)}` (the result's "
                             "size depends on the data; the CUDA mask puts the tensor on the "
                             "GPU)", index.kind, index.evidence, chain)
        if base.kind == VALUE and node is not self._aug_target:
            assert index_node is not None
            self.report_sync(node, "indexing a Python container with the CUDA tensor "
                             f"`{self.short(index_node)}` (calls `__index__`)", index.kind,
                             index.evidence, chain)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if _holds_subscript(target.target):
                self._assigned(target.target, node.value, self.device(node.value))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and isinstance(node.target, cst.Subscript):
            self._assigned(node.target, node.value, self.device(node.value))

    def _assigned(self, target: cst.BaseExpression, value: cst.BaseExpression | None,
                  fact: DeviceFact | None) -> None:
        """``x[mask] = tensor``: the values are scattered where the mask is true, a count
        the host needs (a Python scalar is a masked_fill, which does not)."""
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elements):
                for part, part_value in zip(elements, value.elements):
                    self._assigned(part, part_value.value, self.device(part_value.value))
            else:  # unpacking: the parts of a tensor are on its device
                part_fact = fact if fact is not None and fact.kind in (CUDA, CPU) else None
                for part in elements:
                    self._assigned(part, None, part_fact)
            return
        if not isinstance(target, cst.Subscript):
            return
        if (fact is None or fact.kind not in (CUDA, CPU)) and (
                (fact is not None and fact.kind == VALUE) or not self._computed_from_cuda(value)):
            return  # a Python scalar (`t.max().item()`) is a masked_fill
        chain = self.reporting_here()
        if chain is False or self.allowed(target.value):
            return
        index_node = self.index_of(target)
        base = self.device(target.value)
        index = self.device(index_node) if index_node is not None else None
        if base is not None and base.kind == CUDA and index is not None and \
                index.kind == CUDA and _mask(index, index_node):
            self.report_sync(target, f"boolean-mask assignment `{self.short(target)} = ...` "
                             "with a tensor value (its size depends on the data)", base.kind,
                             base.evidence, chain)

    def _computed_from_cuda(self, value: cst.BaseExpression | None) -> bool:
        """A value of unknown device computed from a CUDA tensor (``processor(logits[m])``,
        a call or operator over one): a tensor, not a Python scalar."""
        if not isinstance(value, (cst.Call, cst.BinaryOperation, cst.UnaryOperation)):
            return False
        stack: list[cst.CSTNode] = [value]
        while stack:
            node = stack.pop()
            if isinstance(node, (cst.Lambda, cst.BaseComp)):
                continue
            if node is not value and isinstance(node, (cst.Name, cst.Attribute,
                                                       cst.Subscript, cst.Call)):
                fact = self.device(node)
                if fact is not None and fact.kind == CUDA:
                    return True
            stack.extend(child_nodes(node))
        return False

    # Calls -------------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        name = self.callee_name(node)
        if name is None:
            return
        if name in _CASTS:
            self._cast(node)
        elif name in _SIZED:
            chain = self.reporting_here()
            if chain is False or self.allowed(node):
                return
            qual = self.torch_function(node)
            if qual is not None and qual.count(".") == 1:  # torch.empty, not torch.cuda.x
                self._sizes(node, qual, chain)
        elif name == "topk":
            chain = self.reporting_here()
            if chain is not False and not self.allowed(node):
                self._top_k(node, chain)
        elif name in DATA_DEPENDENT or name in ("where", "equal", "repeat_interleave"):
            chain = self.reporting_here()
            if chain is False or self.allowed(node):
                return
            qual = self.torch_function(node)
            if qual is not None:
                self._torch_function(node, qual, chain)
            elif name in DATA_DEPENDENT or name == "repeat_interleave":
                self._tensor_method(node, name, chain)

    def _cast(self, node: cst.Call) -> None:
        """``int(t)``, ``float(t)``, ``bool(t)`` of a CUDA tensor."""
        qual = self.qualify(node.func)
        args = self.positional(node)
        if qual not in _CASTS or len(args) != 1:
            return
        chain = self.reporting_here()
        if chain is False or self.allowed(node):
            return
        arg = args[0]
        while isinstance(arg, cst.BooleanOperation):
            # `bool(m is not None and m.any())`: the last operand is what the cast gets (the
            # others are tested as operands: see visit_BooleanOperation).
            arg = bool_operands(arg)[-1]
        fact = self.device(arg)
        if fact is not None and fact.kind == CUDA:
            self.report_sync(node, f"`{qual}()` of the CUDA tensor `{self.short(arg)}`",
                             fact.kind, fact.evidence, chain)

    def _sizes(self, node: cst.Call, qual: str, chain: tuple[str, ...] | None) -> None:
        """``torch.empty(t[-1], 4)``, ``torch.arange(t.sum())`` with an element of a CUDA
        tensor for a size or a bound: the factory needs a Python int, so the host reads the
        tensor first. Only an element read as written (an index, a reduction) counts: a
        plain name may hold a Python int that the analysis took for a tensor."""
        args = self.positional(node)
        if qual == "torch.full":
            args = args[:1]  # the size; the fill value is not a size
        size = self.keyword(node, "size")
        if size is not None:
            args = [*args, size]
        dims: list[cst.BaseExpression] = []
        for arg in args:
            if isinstance(arg, (cst.Tuple, cst.List)):
                dims.extend(e.value for e in arg.elements if isinstance(e, cst.Element))
            else:
                dims.append(arg)
        for dim in dims:
            if not self._element(dim):
                continue  # a name may hold a Python int the analysis took for a tensor
            fact = self.device(dim)
            if fact is not None and fact.kind == CUDA:
                self.report_sync(node, f"the CUDA tensor `{self.short(dim)}` as a size of "
                                 f"`{qual}` (a Python int)", CUDA, fact.evidence, chain)
                return

    def _element(self, expr: cst.BaseExpression) -> bool:
        """An element of a tensor as written (`lens[-1]`, `t.max()`), or a name the
        function binds once, to one (`max_k = k.max()`)."""
        if _element_of_tensor(expr):
            return True
        if not isinstance(expr, cst.Name) or not self._functions:
            return False
        func = self._functions[-1]
        bindings = self._bindings.get(id(func))
        if bindings is None:
            bindings = self._bindings[id(func)] = _bindings(func)
        values = bindings.get(expr.value)
        return values is not None and len(values) == 1 and values[0] is not None and \
            _element_of_tensor(values[0])

    def _top_k(self, node: cst.Call, chain: tuple[str, ...] | None) -> None:
        """``logits.topk(max_k)``, ``torch.topk(x, k)`` with an element of a CUDA tensor for
        ``k``: topk needs a Python int, so the host reads the tensor first."""
        is_method = isinstance(node.func, cst.Attribute) and \
            self.torch_function(node) is None
        args = self.positional(node)
        k = self.keyword(node, "k") or (args[0] if is_method and args else
                                        args[1] if not is_method and len(args) > 1 else None)
        if k is None or not self._element(k):
            return
        fact = self.device(k)
        if fact is not None and fact.kind == CUDA:
            self.report_sync(node, f"the CUDA tensor `{self.short(k)}` as `k` of `topk` (a "
                             "Python int)", CUDA, fact.evidence, chain)

    def _torch_function(self, node: cst.Call, qual: str, chain: tuple[str, ...] | None) -> None:
        name = qual.rsplit(".", 1)[-1]
        if qual.startswith(("torch.cuda.", "torch.accelerator.")) or name in _FACTORIES:
            return
        args = [self.device(a) for a in self.positional(node)]
        if name == "equal":
            cuda = [a for a in args[:2] if a is not None and a.kind == CUDA]
            if len(args) < 2 or not cuda:
                return
            # One op's tensors share a device: a host tensor beside a CUDA one only by
            # devices.default says the default was wrong.
            strong = next((a for a in cuda if not a.weak), None)
            host = next((a for a in args[:2] if a is not None and a.kind == CPU), None)
            tensor = strong or (None if host is not None else cuda[0])
            if tensor is not None:
                self.report_sync(node, f"`{qual}` of CUDA tensors (returns a Python bool)",
                                 tensor.kind, tensor.evidence, chain)
        elif name in DATA_DEPENDENT or (name == "where" and len(args) == 1):
            if args and args[0] is not None and args[0].kind == CUDA:
                self.report_sync(node, f"`{qual}` on a CUDA tensor (its output size depends "
                                 "on the data)", CUDA, args[0].evidence, chain)
        elif name == "repeat_interleave" and len(args) >= 2 and args[1] is not None and \
                args[1].kind == CUDA and self.keyword(node, "output_size") is None:
            self.report_sync(node, "`torch.repeat_interleave` with tensor repeats and no "
                             "`output_size`", CUDA, args[1].evidence, chain)

    def _tensor_method(self, node: cst.Call, method: str, chain: tuple[str, ...] | None) -> None:
        receiver = self.receiver(node)
        if receiver is None or receiver.kind != CUDA or not isinstance(node.func, cst.Attribute):
            return
        if method in DATA_DEPENDENT:
            self.report_sync(node, f"`.{method}()` on `{self.short(node.func.value)}` (its "
                             "output size depends on the data)", CUDA, receiver.evidence, chain)
            return
        args = self.positional(node)
        repeats = self.device(args[0]) if args else None
        if repeats is not None and repeats.kind == CUDA and \
                self.keyword(node, "output_size") is None:
            self.report_sync(node, "`.repeat_interleave()` with tensor repeats and no "
                             "`output_size`", CUDA, receiver.evidence, chain)
