"""Operators on tensors of any rank (transformer and modern CNN blocks): Transpose, Reshape and its kin, Softmax over
any axis, LayerNormalization, the reductions, MatMul of any rank, element-wise unary maths, Gather with constant
indices, Concat, Slice and Split on any axis, and Add/Sub/Mul/Div of two tensors of any rank or of a tensor and a
constant. Where the N x C x H x W mapping of an operator applies it is kept (its layers are faster); where it refuses,
the layer of any rank computes the node."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from engine.importers.onnx._common import operand, split_sizes
from engine.importers.onnx.context import Context, Unsupported
from engine.importers.onnx.mapping import OPS, OpMapping, maps
from engine.tensor import Dims


def _ints(values: list[int] | tuple[int, ...]) -> str:
    return ",".join(str(int(v)) for v in values)


def _out(ctx: Context) -> str:
    return ctx.node.output[0]


def _or_any_rank(op: str, to: str, notes: str) -> Callable[[Callable[[Context], None]], Callable[[Context], None]]:
    """Register ``fn`` for ``op`` after the mapping already there: that one first, ``fn`` where it refuses."""
    def register(fn: Callable[[Context], None]) -> Callable[[Context], None]:
        before = OPS.get(op)
        if before is None:
            return maps(op, to, notes)(fn)

        def either(ctx: Context) -> None:
            mark = ctx.mark()
            try:
                before.fn(ctx)
            except Unsupported as first:
                ctx.rollback(mark)
                try:
                    fn(ctx)
                except Unsupported:
                    ctx.rollback(mark)
                    raise first from None  # the N x C x H x W mapping's reason says what is missing
        OPS[op] = OpMapping(op, f"{before.to}, else {to}", f"{before.notes}; otherwise {notes}", either)
        return fn
    return register


def _reshape(ctx: Context) -> None:
    x, y = ctx.node.input[0], _out(ctx)
    ctx.add("reshape", {"shape": _ints(ctx.shape(y))}, [ctx.ranked(x)], y, dims=ctx.full_dims(y))


for _op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze"):
    _or_any_rank(_op, "reshape", "any shape of rank 1 to 6 (the output's static sizes)")(_reshape)


@_or_any_rank("Transpose", "transpose", "any `perm` of a tensor of rank 1 to 6")
def transpose(ctx: Context) -> None:
    x = ctx.node.input[0]
    perm = [int(p) for p in ctx.attrs().get("perm", [])] or list(range(ctx.rank(x) - 1, -1, -1))
    ctx.add("transpose", {"perm": _ints(perm)}, [ctx.ranked(x)], _out(ctx), dims=ctx.full_dims(_out(ctx)))


@_or_any_rank("Softmax", "softmax", "any axis (opset 13 or later)")
def softmax(ctx: Context) -> None:
    if ctx.opset < 13:
        raise Unsupported("before opset 13 Softmax normalises over every axis from `axis` on")
    axis = int(ctx.attrs().get("axis", -1))
    ctx.add("softmax", {"axis": axis}, [ctx.ranked(ctx.node.input[0])], _out(ctx), dims=ctx.full_dims(_out(ctx)))


@maps("LayerNormalization", "layer_normalization", "`axis`, `epsilon`; constant scale and bias; `stash_type` 1; "
      "only the first output")
def layer_normalization(ctx: Context) -> None:
    a = ctx.attrs()
    x = ctx.node.input[0]
    if int(a.get("stash_type", 1)) != 1:
        raise Unsupported("stash_type other than 1 (float32 statistics)")
    if any(o and (ctx.readers(o) or o in ctx.graph_outputs) for o in ctx.node.output[1:]):
        raise Unsupported("the mean and inverse deviation outputs are read")
    rank = ctx.rank(x)
    axis = int(a.get("axis", -1)) % rank
    norm = ctx.shape(x)[axis:]
    scale = np.broadcast_to(ctx.const(ctx.node.input[1], "scale"), norm)
    b = ctx.optional_const(2)
    bias = np.broadcast_to(b if b is not None else np.zeros(1, np.float32), norm)
    ctx.add("layer_normalization", {"over": "trailing", "axis": axis - rank, "epsilon": float(a.get("epsilon", 1e-5))},
            [ctx.ranked(x)], _out(ctx), {"scale": scale, "bias": bias}, dims=ctx.full_dims(_out(ctx)))


def _reduce(ctx: Context) -> None:
    a = ctx.attrs()
    x = ctx.node.input[0]
    axes = a.get("axes")
    if axes is None and ctx.input(1) is not None:
        axes = ctx.const(ctx.node.input[1], "axes").reshape(-1).tolist()
    if not axes and int(a.get("noop_with_empty_axes", 0)):
        raise Unsupported("noop_with_empty_axes with no axes (an identity)")
    op = ctx.node.op_type[len("Reduce"):].lower()
    ctx.add("reduce", {"operation": op, "axes": _ints(axes or []), "keepdims": bool(int(a.get("keepdims", 1)))},
            [ctx.ranked(x)], _out(ctx), dims=ctx.full_dims(_out(ctx)))


for _op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"):
    _or_any_rank(_op, "reduce", "any axes (attribute or input), keepdims 0 or 1")(_reduce)


@_or_any_rank("MatMul", "matmul", "two tensors of any rank, or a tensor times a constant K x M matrix (a following "
              "Add of a constant M-vector is the bias)")
def matmul(ctx: Context) -> None:
    a, b = ctx.node.input[0], ctx.node.input[1]
    if not ctx.is_const(b):
        if ctx.is_const(a):
            raise Unsupported("a constant times a tensor (only a tensor times a constant matrix)")
        ctx.add("matmul", {}, [ctx.ranked(a), ctx.ranked(b)], _out(ctx), dims=ctx.full_dims(_out(ctx)))
        return
    w = ctx.consts[b]
    if w.ndim != 2:
        raise Unsupported(f"a constant B of shape {w.shape} (only a K x M matrix)")
    out, bias = _out(ctx), None
    add = ctx.only_reader(out)
    if add is not None and add.op_type == "Add":
        other = [t for t in add.input if t != out]
        if len(other) == 1 and ctx.is_const(other[0]) and ctx.consts[other[0]].size == w.shape[1] and \
                ctx.shape(add.output[0]) == ctx.shape(out):
            bias = ctx.consts[other[0]].reshape(-1)
            ctx.consumed.add(id(add))
            ctx.folded.append(f"Add {add.name or add.output[0]} -> bias of matmul (MatMul {ctx.node_name})")
            out = add.output[0]
    weights = {"weights": w} | ({"bias": bias} if bias is not None else {})
    ctx.add("matmul", {"num_outputs": int(w.shape[1]), "bias": bias is not None}, [ctx.ranked(a)], out, weights,
            dims=ctx.full_dims(out))


def _unary(ctx: Context) -> None:
    op = {"Erf": "erf", "Sqrt": "sqrt", "Reciprocal": "reciprocal", "Exp": "exp", "Log": "log", "Abs": "abs",
          "Neg": "neg", "Pow": "pow"}[ctx.node.op_type]
    params: dict[str, object] = {"operation": op}
    if op == "pow":
        e = ctx.const(ctx.node.input[1], "exponent")
        if e.size != 1:
            raise Unsupported(f"an exponent of shape {e.shape} (only one value)")
        params["exponent"] = float(e.reshape(()))
    ctx.add("unary", params, [ctx.ranked(ctx.node.input[0])], _out(ctx), dims=ctx.full_dims(_out(ctx)))


for _op in ("Erf", "Sqrt", "Reciprocal", "Exp", "Log", "Abs", "Neg", "Pow"):
    _or_any_rank(_op, "unary", "a tensor of any rank" + ("; a constant exponent of one value" if _op == "Pow" else ""))(
        _unary)


_OPERATION = {"Add": "sum", "Sub": "sub", "Mul": "product", "Div": "div"}


def _binary(ctx: Context) -> None:
    a, b = ctx.node.input[0], ctx.node.input[1]
    if ctx.is_const(a) and ctx.is_const(b):
        raise Unsupported("two constants (a constant result, which the graph clean-up folds)")
    ctx.add("element_wise", {"operation": _OPERATION[ctx.node.op_type]}, [operand(ctx, a), operand(ctx, b)],
            _out(ctx), dims=ctx.full_dims(_out(ctx)))


for _op in _OPERATION:
    _or_any_rank(_op, "element_wise", "two tensors of any rank, or a tensor and a constant (a constant "
                 "layer), broadcast as ONNX")(_binary)


@_or_any_rank("Gather", "gather", "constant integer indices of any shape (negative too) on any axis of a tensor of any "
              "rank; a scalar index removes the axis")
def gather(ctx: Context) -> None:
    x, out = ctx.node.input[0], _out(ctx)
    idx = ctx.const(ctx.node.input[1], "indices")
    if idx.dtype.kind not in "iu":
        raise Unsupported(f"indices of type {idx.dtype} (only integers)")
    if idx.size == 0:
        raise Unsupported("no index (an empty result)")
    axis = int(ctx.attrs().get("axis", 0))
    params = {"axis": axis, "indices": _ints(idx.reshape(-1).tolist()), "drop_axis": idx.ndim == 0}
    if idx.ndim <= 1:
        ctx.add("gather", params, [ctx.ranked(x)], out, dims=ctx.full_dims(out))
        return
    shape = ctx.shape(x)
    flat = Dims(*(shape[:axis % len(shape)] + (idx.size,) + shape[axis % len(shape) + 1:]))
    picked = ctx.add("gather", params, [ctx.ranked(x)], dims=flat, suffix="flat")
    ctx.add("reshape", {"shape": _ints(ctx.shape(out))}, [picked], out, dims=ctx.full_dims(out))


@_or_any_rank("Concat", "concatenation", "any axis of tensors of rank 1 to 6")
def concat(ctx: Context) -> None:
    inputs = [t for t in ctx.node.input if t]
    ctx.add("concatenation", {"axis": int(ctx.attrs()["axis"])}, [ctx.ranked(t) for t in inputs], _out(ctx),
            dims=ctx.full_dims(_out(ctx)))


def _slice_params(ranges: dict[int, tuple[int, int, int]], shape: tuple[int, ...]) -> dict[str, str] | None:
    """``axes`` and ``ranges`` of a slice layer of any rank cutting ``ranges`` (ONNX bounds clamped as ONNX does);
    None when nothing is cut."""
    axes, texts = [], []
    for axis, (start, end, step) in ranges.items():
        axis %= len(shape)
        if step == 0:
            raise Unsupported("a step of 0")
        r = range(*slice(start, end, step).indices(shape[axis]))
        if not r:
            raise Unsupported("the slice is empty")
        if step == 1 and len(r) == shape[axis]:
            continue
        stop = r[-1] + (1 if step > 0 else -1)
        axes.append(axis)
        texts.append(f"{r[0]}:{'' if stop < 0 else stop}:{step}")
    return {"axes": _ints(axes), "ranges": ",".join(texts)} if axes else None


def _slice(ctx: Context, x: str, ranges: dict[int, tuple[int, int, int]], out: str, suffix: str = "") -> None:
    params = _slice_params(ranges, ctx.shape(x))
    if params is None:  # the whole tensor: a copy (another tensor name for the same values)
        ctx.add("reshape", {"shape": _ints(ctx.shape(out))}, [ctx.ranked(x)], out, dims=ctx.full_dims(out),
                suffix=suffix)
        return
    ctx.add("slice", params, [ctx.ranked(x)], out, dims=ctx.full_dims(out), suffix=suffix)


@_or_any_rank("Slice", "slice", "constant starts, ends, axes, steps on any axis of a tensor of rank 1 to 6")
def slice_(ctx: Context) -> None:
    if ctx.opset < 10:
        raise Unsupported("Slice before opset 10")
    starts = ctx.const(ctx.node.input[1], "starts").reshape(-1).tolist()
    ends = ctx.const(ctx.node.input[2], "ends").reshape(-1).tolist()
    axes_v, steps_v = ctx.optional_const(3), ctx.optional_const(4)
    axes = axes_v.reshape(-1).tolist() if axes_v is not None else list(range(len(starts)))
    steps = steps_v.reshape(-1).tolist() if steps_v is not None else [1] * len(starts)
    _slice(ctx, ctx.node.input[0], {int(a): (int(s), int(e), int(st)) for a, s, e, st in zip(axes, starts, ends, steps)},
           _out(ctx))


@_or_any_rank("Split", "slice (one per output)", "any axis of a tensor of rank 1 to 6")
def split(ctx: Context) -> None:
    x = ctx.node.input[0]
    axis = int(ctx.attrs().get("axis", 0)) % ctx.rank(x)
    start = 0
    for i, (out, n) in enumerate(zip(ctx.node.output, split_sizes(ctx, x, axis))):
        if out and (ctx.readers(out) or out in ctx.graph_outputs):
            _slice(ctx, x, {axis: (start, start + n, 1)}, out, suffix=str(i))
        start += n
