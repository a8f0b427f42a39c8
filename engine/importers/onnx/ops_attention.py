"""Einsum of two operands as the matrix products PyTorch exports (window attention: ``BGHID,BGHJD->BGHIJ``), mapped to
transpose, reshape and matmul layers; and the scaled dot-product attention pattern, MatMul(q, k^T) [x or / scale]
[+ bias] -> Softmax(last axis) -> MatMul(., v) (MatMul or such an Einsum), recognised as one attention layer."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.importers.onnx._common import operand
from engine.importers.onnx.context import Context, Unsupported
from engine.importers.onnx.mapping import maps
from engine.model import LayerSpec
from engine.tensor import Dims


@dataclass(frozen=True)
class EinsumPlan:
    """A two-operand Einsum as a matrix product: the letters of each axis class, each operand's letters and the
    output's."""

    a: str
    b: str
    out: str
    batch: str  # in a, b and the output (in the output's order)
    left: str  # in a and the output only
    right: str  # in b and the output only
    contract: str  # in a and b, summed over (in a's order)

    def kind(self) -> str | None:
        """``"q_kt"`` for ``...IDs,...JD->...IJ`` (q times k transposed), ``"p_v"`` for ``...IJ,...JD->...ID``
        (a plain matrix product), None for any other form."""
        single = len(self.left) == len(self.right) == len(self.contract) == 1
        if not single or self.out != self.batch + self.left + self.right or self.a != self.batch + self.left + \
                self.contract:
            return None
        if self.b == self.batch + self.right + self.contract:
            return "q_kt"
        if self.b == self.batch + self.contract + self.right:
            return "p_v"
        return None


def einsum_plan(equation: str) -> EinsumPlan:
    """The plan of ``equation`` (spaces allowed); Unsupported naming the equation for what is not a matrix product
    of two operands (ellipsis, one or three operands, a repeated letter, a letter summed within one operand)."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    ops = lhs.split(",")
    if "." in eq or len(ops) != 2 or not all(o.isalpha() for o in ops) or (out and not out.isalpha()):
        raise Unsupported(f"equation {equation!r}: only two operands written with letters (no ellipsis)")
    a, b = ops
    if not arrow:
        out = "".join(sorted(c for c in set(a + b) if (a + b).count(c) == 1))
    if any(len(set(s)) != len(s) for s in (a, b, out)):
        raise Unsupported(f"equation {equation!r}: a letter repeated within one operand (a diagonal)")
    if set(out) - set(a + b):
        raise Unsupported(f"equation {equation!r}: an output letter that no operand has")
    lonely = [c for c in a + b if c not in out and not (c in a and c in b)]
    if lonely:
        raise Unsupported(f"equation {equation!r}: letter {lonely[0]} is summed within one operand")
    return EinsumPlan(a, b, out, batch="".join(c for c in out if c in a and c in b),
                      left="".join(c for c in out if c in a and c not in b),
                      right="".join(c for c in out if c in b and c not in a),
                      contract="".join(c for c in a if c in b and c not in out))


def _ints(values: Any) -> str:
    return ",".join(str(int(v)) for v in values)


def _arranged(ctx: Context, layer: str, dims: tuple[int, ...], perm: list[int], shape: tuple[int, ...],
              suffix: str) -> str:
    """``layer`` (of ``dims``) transposed by ``perm`` and reshaped to ``shape``, each step only where it changes
    something."""
    if not 1 <= len(shape) <= 6:
        raise Unsupported(f"an intermediate tensor of rank {len(shape)} (LayerLab tensors have rank 1 to 6)")
    if perm != sorted(perm):
        dims = tuple(dims[p] for p in perm)
        layer = ctx.add("transpose", {"perm": _ints(perm)}, [layer], dims=Dims(*dims), suffix=f"{suffix}_t")
    if tuple(shape) != tuple(dims):
        layer = ctx.add("reshape", {"shape": _ints(shape)}, [layer], dims=Dims(*shape), suffix=f"{suffix}_r")
    return layer


@maps("Einsum", "matmul (with transpose and reshape)", "two operands written with letters: batch letters, letters of "
      "one operand and the output, letters summed over (window attention's BGHID,BGHJD->BGHIJ and "
      "BGHIJ,BGHJD->BGHID); ellipsis, diagonals, one or three operands refused")
def einsum(ctx: Context) -> None:
    equation = str(ctx.attrs().get("equation", ""))
    plan = einsum_plan(equation)
    if len(ctx.node.input) != 2:
        raise Unsupported(f"equation {equation!r} with {len(ctx.node.input)} inputs")
    xa, xb = ctx.node.input
    ctx.full_dims(ctx.node.output[0])  # an output of rank 1 to 6
    if ctx.is_const(xa) and ctx.is_const(xb):
        raise Unsupported(f"equation {equation!r} of two constants (a constant result, which the graph clean-up folds)")
    sa, sb = ctx.shape(xa), ctx.shape(xb)
    if len(sa) != len(plan.a) or len(sb) != len(plan.b):
        raise Unsupported(f"equation {equation!r} for operands of shapes {sa} and {sb}")
    size = {c: max(sa[plan.a.index(c)] if c in plan.a else 1, sb[plan.b.index(c)] if c in plan.b else 1)
            for c in plan.a + plan.b}

    def side(letters: str, shape: tuple[int, ...], order: str, x: str, suffix: str, rows: str, cols: str) -> str:
        perm = [letters.index(c) for c in order]
        batch = tuple(shape[letters.index(c)] for c in plan.batch)
        target = batch + (math.prod(size[c] for c in rows), math.prod(size[c] for c in cols))
        return _arranged(ctx, operand(ctx, x), shape, perm, target, suffix)

    a = side(plan.a, sa, plan.batch + plan.left + plan.contract, xa, "a", plan.left, plan.contract)
    b = side(plan.b, sb, plan.batch + plan.contract + plan.right, xb, "b", plan.contract, plan.right)
    batch = tuple(size[c] for c in plan.batch)
    mm_dims = batch + (math.prod(size[c] for c in plan.left), math.prod(size[c] for c in plan.right))
    out = ctx.node.output[0]
    natural = plan.batch + plan.left + plan.right
    if natural == plan.out and mm_dims == ctx.shape(out):
        ctx.add("matmul", {}, [a, b], out, dims=ctx.full_dims(out))
        return
    y = ctx.add("matmul", {}, [a, b], dims=Dims(*mm_dims), suffix="mm")
    y = _arranged(ctx, y, mm_dims, list(range(len(mm_dims))), tuple(size[c] for c in natural), "out")
    perm = [natural.index(c) for c in plan.out]
    final = _arranged(ctx, y, tuple(size[c] for c in natural), perm, ctx.shape(out), "out")
    if final == y:  # nothing left to do: a copy bound to the output
        final = ctx.add("reshape", {"shape": _ints(ctx.shape(out))}, [y], dims=ctx.full_dims(out), suffix="out")
    ctx.bind(out, final)


# ---- the attention pattern -------------------------------------------------------------------------------------
def _scalar(ctx: Context, tensor: str) -> float | None:
    if not ctx.is_const(tensor) or ctx.consts[tensor].size != 1:
        return None
    return float(np.asarray(ctx.consts[tensor], dtype=np.float64).reshape(()))


def _product_kind(ctx: Context, node: Any) -> str | None:
    """``"q_kt"``/``"p_v"`` for a MatMul or a two-operand Einsum of that form (a MatMul is ``"mm"``: either)."""
    if node is None or node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "MatMul":
        return "mm"
    if node.op_type == "Einsum" and len(node.input) == 2:
        try:
            return einsum_plan(str(ctx.attrs(node).get("equation", ""))).kind()
        except Unsupported:
            return None
    return None


def attention(ctx: Context) -> bool:
    """MatMul(q, k^T) [Mul/Div by a scalar] [+ bias ...] -> Softmax(last axis) -> MatMul(., v) from the current
    node (the first product: a MatMul of q and k^T, or an Einsum of q and k): one attention layer. The
    additions of constants, with reshapes between them, fold into one constant bias; one addition of a computed
    tensor is the bias input."""
    first = ctx.node
    kind = _product_kind(ctx, first)
    if kind not in ("mm", "q_kt") or ctx.opset < 13 or not ctx.has_layer("attention"):
        return False
    q, k = first.input[0], first.input[1]
    try:
        scores_shape = ctx.shape(first.output[0])
    except Unsupported:
        return False
    if len(scores_shape) < 2:
        return False
    taken: list[Any] = []
    scale, chain, tensor_bias = 1.0, [], None  # chain: (op, constant) applied to the scores, in order
    node, t = ctx.only_reader(first.output[0]), first.output[0]
    while node is not None and node.op_type in ("Mul", "Div", "Add", "Reshape"):
        other = [i for i in node.input if i != t]
        if len(other) != 1 or len(node.input) != 2:
            return False
        o = other[0]
        if node.op_type == "Reshape":
            if not ctx.is_const(o) or node.input[0] != t:
                return False
            chain.append(("reshape", ctx.shape(node.output[0])))
        elif node.op_type in ("Mul", "Div"):
            v = _scalar(ctx, o)
            if v is None or (node.op_type == "Div" and node.input[0] != t) or v == 0.0:
                return False
            factor = v if node.op_type == "Mul" else 1.0 / v
            scale *= factor
            chain.append(("scale", factor))
        elif ctx.is_const(o):
            chain.append(("add", np.asarray(ctx.consts[o], dtype=np.float64)))
        else:
            if tensor_bias is not None or o not in ctx.sources:
                return False
            tensor_bias = o
            chain.append(("tensor", None))
        taken.append(node)
        t = node.output[0]
        node = ctx.only_reader(t)
    if node is None or node.op_type != "Softmax" or ctx.shape(t) != scores_shape:
        return False
    rank = len(scores_shape)
    if int(ctx.attrs(node).get("axis", -1)) % rank != rank - 1:
        return False
    softmax = node
    last = ctx.only_reader(softmax.output[0])
    if _product_kind(ctx, last) not in ("mm", "p_v") or last.input[0] != softmax.output[0] or \
            last.input[1] == softmax.output[0]:
        return False
    ops = [op for op, _ in chain]
    if tensor_bias is not None and ("reshape" in ops or "add" in ops or "scale" in ops[ops.index("tensor"):]):
        return False  # a computed bias among reshapes, constants or later scales: the pieces import separately
    v = last.input[1]
    if any(t not in ctx.sources or ctx.rank(t) < 2 for t in (q, k, v)):
        return False
    mark = ctx.mark()
    try:
        inputs = [ctx.ranked(q), ctx.ranked(k), ctx.ranked(v)]
        bias_layer = None
        if tensor_bias is not None:
            bias_layer = ctx.ranked(tensor_bias)
        elif any(op == "add" for op, _ in chain):
            value = np.zeros(scores_shape)
            for op, arg in chain:  # the chain applied to zero scores: its constant part
                value = value.reshape(arg) if op == "reshape" else value * arg if op == "scale" else value + arg
            value = value.reshape(scores_shape).astype(np.float32)
            for axis in range(value.ndim):  # the smallest shape that broadcasts to the same values
                if value.shape[axis] > 1 and np.array_equal(value, np.broadcast_to(value.take([0], axis), value.shape)):
                    value = value.take([0], axis)
            if not np.isfinite(value).all():  # (an infinite mask: the pieces import, and refuse it by name)
                raise Unsupported("the attention's constant scores hold infinities or NaN")
            bias_layer = ctx.add("constant", {"dimensions": Dims(*value.shape)}, [], weights={"value": value},
                                 dims=Dims(*value.shape), suffix="bias")
        out = last.output[0]
        ctx.add("attention", {"scale": scale, "k_transposed": kind == "mm"},
                inputs + ([bias_layer] if bias_layer else []), out, dims=ctx.full_dims(out))
    except Unsupported:
        ctx.rollback(mark)
        return False
    nodes = taken + [softmax, last]
    ctx.consumed.update(id(n) for n in nodes)
    ctx.folded.append(f"{'+'.join(n.op_type for n in [first, *nodes])} {ctx.node_name} -> attention")
    return True


# ---- what the exporters compute on q and k before the first product ----------------------------------------------
def _scalar_factor(spec: LayerSpec, layers: dict[str, LayerSpec], dims: dict[str, Dims],
                   weights: dict[str, dict[str, np.ndarray]]) -> tuple[float, str, list[str]] | None:
    """(factor, the tensor scaled, the layers that compute the scaling) when ``spec`` only multiplies or divides its
    input by one constant value; None otherwise."""
    if spec.activation != "none" or spec.format:
        return None
    if spec.type == "affine" and spec.params.get("mode", "per_tensor") == "per_tensor" and \
            float(spec.params.get("shift", "0")) == 0.0 and len(spec.inputs) == 1 and spec.inputs[0]:
        return float(spec.params.get("scale", "1")), spec.inputs[0], [spec.name]
    if spec.type != "element_wise" or len(spec.inputs) != 2 or None in spec.inputs:
        return None
    op = spec.params.get("operation", "sum")
    for i in ((0, 1) if op == "product" else (1,) if op == "div" else ()):
        c = layers.get(spec.inputs[i])
        if c is None or c.type != "constant" or math.prod(dims.get(c.name, (0,))) != 1:
            continue
        value = weights.get(c.name, {}).get("value")
        if value is None or value.size != 1 or not np.isfinite(value).all() or float(value.reshape(())) == 0.0:
            continue
        v = float(np.asarray(value, np.float64).reshape(()))
        other = spec.inputs[1 - i]
        if tuple(dims.get(other, ())) != tuple(dims.get(spec.name, ())):
            continue  # the constant broadcasts the tensor to more values
        return (v if op == "product" else 1.0 / v), other, [spec.name, c.name]
    return None


def _swaps_last_two(spec: LayerSpec) -> bool:
    perm = [int(p) for p in spec.params.get("perm", "").split(",") if p.strip()]
    rank = len(perm)
    return (spec.type == "transpose" and spec.activation == "none" and not spec.format and rank >= 2
            and not spec.params.get("input_shape") and not spec.params.get("shape")
            and perm == list(range(rank - 2)) + [rank - 1, rank - 2])


def absorb_attention_inputs(layers: dict[str, LayerSpec], dims: dict[str, Dims],
                            weights: dict[str, dict[str, np.ndarray]]) -> list[tuple[str, list[str]]]:
    """Fold into each attention layer what is computed on its q and k for it alone: a product or quotient by one
    constant value (PyTorch scales q, or k in MaxViT, before the product) becomes part of ``scale``, a transpose of k's
    last two axes flips ``k_transposed``. Changes ``layers`` in place; returns (attention layer, layers removed)."""
    readers: dict[str, int] = {}
    for spec in layers.values():
        for i in spec.inputs:
            if i is not None:
                readers[i] = readers.get(i, 0) + 1
    done: list[tuple[str, list[str]]] = []
    for spec in [s for s in layers.values() if s.type == "attention"]:
        removed: list[str] = []
        changed = True
        while changed:
            changed = False
            for slot in (0, 1):
                src = layers.get(spec.inputs[slot] or "")
                if src is None or readers.get(src.name, 0) != 1:
                    continue
                found = _scalar_factor(src, layers, dims, weights)
                if found is not None and all(readers.get(n, 0) == 1 for n in found[2]):
                    factor, x, gone = found
                    spec.params["scale"] = repr(float(spec.params.get("scale", "1")) * factor)
                elif slot == 1 and _swaps_last_two(src):
                    flipped = spec.params.get("k_transposed", "false").lower() not in ("true", "1")
                    spec.params["k_transposed"] = "true" if flipped else "false"
                    x, gone = src.inputs[0], [src.name]
                else:
                    continue
                spec.inputs[slot] = x
                for name in gone:
                    del layers[name]
                    weights.pop(name, None)
                removed += gone
                changed = True
        if removed:
            done.append((spec.name, removed))
    return done
