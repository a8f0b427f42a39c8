"""Constants: nodes whose inputs are all constants are folded (computed once by onnx's reference evaluator: masks,
shapes, indices, casts of constants); a node that reads a float constant where its mapping needs a tensor gets that
constant as a constant layer; Shape and Size of a tensor of static size are constants; CastLike; Mod, Range,
ConstantOfShape, IsNaN and IsInf exist only as folded constants. Imported last: it wraps every
mapping of the table with the folding."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from engine.importers.onnx.context import Context, Unsupported
from engine.importers.onnx.mapping import OPS, OpMapping, maps
from engine.tensor import MAX_RANK, Dims

#: operators LayerLab has no layer for (integer results, or of integers), imported only when their inputs are constants
FOLDED_ONLY = ("Mod", "Range", "ConstantOfShape", "IsNaN", "IsInf")


class ConstantRefused(Unsupported):
    """A constant that cannot become a constant layer: the reason to show rather than the mapping's first one."""


def _onnx_dtype(ctx: Context, tensor: str) -> np.dtype:
    """The element type of ``tensor`` as the ONNX graph declares it (float32 where it does not say)."""
    import onnx  # noqa: PLC0415

    if ctx.is_const(tensor):
        return ctx.consts[tensor].dtype
    g = ctx.graph
    for vi in (*g.input, *g.value_info, *g.output):
        if vi.name == tensor and vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
    return np.dtype(np.float32)


def _constant_layer(ctx: Context, tensor: str, value: np.ndarray) -> str:
    """A constant layer holding ``value`` and bound to ``tensor`` (a scalar is held as one value of rank 1)."""
    if value.dtype.kind not in "fiub" or value.ndim > MAX_RANK or value.size == 0:
        raise ConstantRefused(f"constant {tensor!r} of type {value.dtype.name} and shape {value.shape} cannot be a "
                              "tensor")
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        raise ConstantRefused(f"constant {tensor!r} holds infinities or NaN (LayerLab weights are finite numbers)")
    dims = Dims(*(value.shape or (1,)))
    return ctx.add("constant", {"dimensions": dims}, [], tensor, {"value": value.astype(np.float32).reshape(dims)},
                   dims=dims, name=f"{tensor}_constant")


def _store(ctx: Context, outputs: list[tuple[str, np.ndarray]]) -> None:
    """Outputs computed at import: constants for the nodes after, a constant layer where a graph output is one."""
    if any(name in ctx.graph_outputs for name, _ in outputs):
        ctx.require_layer("constant")
    for name, value in outputs:
        ctx.consts[name] = value
        if name in ctx.graph_outputs:
            _constant_layer(ctx, name, value)
    ctx.folded.append(f"{ctx.node.op_type} {ctx.node_name} -> constant (computed at import)")


def fold(ctx: Context) -> None:
    """Compute the node now (every input is a constant) with onnx's reference evaluator."""
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    node = ctx.node
    feeds = {t: ctx.const(t) for t in node.input if t}
    try:
        values = ReferenceEvaluator(node, opsets={"": ctx.opset}).run(None, feeds)
    except Exception as exc:  # noqa: BLE001 - the evaluator raises many kinds for what it cannot compute
        raise Unsupported(f"its constant inputs could not be folded ({type(exc).__name__}: {exc})") from None
    _store(ctx, [(o, np.asarray(v)) for o, v in zip(node.output, values) if o])


def _with_constant_layers(ctx: Context, fn: Callable[[Context], None]) -> None:
    """Run ``fn`` with the node's float and boolean constant inputs made constant layers (what a mapping of tensors
    reads; a boolean mask as 1 and 0)."""
    consts = [t for t in dict.fromkeys(ctx.node.input) if t and ctx.is_const(t) and ctx.consts[t].dtype.kind in "fb"
              and t not in ctx.sources]
    if not consts or all(ctx.is_const(t) for t in ctx.node.input if t):
        raise Unsupported("no float constant to read as a tensor")
    ctx.require_layer("constant")
    saved = {t: ctx.consts.pop(t) for t in consts}
    shapes = {t: ctx.shapes.get(t) for t in consts}
    try:
        for t, value in saved.items():
            ctx.shapes[t] = tuple(value.shape) or (1,)
            _constant_layer(ctx, t, value)
        fn(ctx)
    except Unsupported:
        for t, value in saved.items():
            ctx.consts[t] = value
            if shapes[t] is None:
                ctx.shapes.pop(t, None)
            else:
                ctx.shapes[t] = shapes[t]
        raise


def _wrapped(before: OpMapping) -> Callable[[Context], None]:
    """``before``'s mapping, and where it refuses: the node folded when every input is a constant, else mapped again
    with its float constants as constant layers; the first refusal stands when neither works."""
    def mapping(ctx: Context) -> None:
        mark = ctx.mark()
        try:
            before.fn(ctx)
            return
        except Unsupported as first:
            refusal = first
        ctx.rollback(mark)
        inputs = [t for t in ctx.node.input if t]
        try:
            if inputs and all(ctx.is_const(t) for t in inputs):
                fold(ctx)
            else:
                _with_constant_layers(ctx, before.fn)
        except ConstantRefused:
            ctx.rollback(mark)
            raise
        except Unsupported:
            ctx.rollback(mark)
            raise refusal from None
    return mapping


@maps("CastLike", "(none: folded)", "to the float type of a tensor (exact; fp16 rounding as Cast); a constant "
      "input is cast at import; casts to other types refused")
def cast_like(ctx: Context) -> None:
    x, like = ctx.node.input[0], ctx.node.input[1]
    dtype = _onnx_dtype(ctx, like)
    if ctx.is_const(x):
        _store(ctx, [(ctx.node.output[0], ctx.consts[x].astype(dtype))])
        return
    if dtype.kind != "f":
        raise Unsupported(f"cast to {dtype.name}: LayerLab computes in float")
    ctx.alias(ctx.node.output[0], x)
    ctx.folded.append(f"CastLike {ctx.node_name} (identity)")


@maps("Shape", "(none: a constant)", "of a tensor of static size; `start`, `end`")
@maps("Size", "(none: a constant)", "of a tensor of static size")
def shape(ctx: Context) -> None:
    s = ctx.shape(ctx.node.input[0])
    if ctx.node.op_type == "Size":
        value = np.asarray(int(np.prod(s)), np.int64)
    else:
        a = ctx.attrs()
        value = np.asarray(s[int(a.get("start", 0)): a["end"] if "end" in a else None], np.int64)
    _store(ctx, [(ctx.node.output[0], value)])


def folded_only(ctx: Context) -> None:
    computed = [t for t in ctx.node.input if t and not ctx.is_const(t)]
    if computed:
        raise Unsupported(f"input {computed[0]!r} is computed at run time: {ctx.node.op_type} gives boolean or integer "
                          "tensors, which LayerLab computes only from constants (folded at import)")
    fold(ctx)


for _op in FOLDED_ONLY:
    maps(_op, "(none: folded)", "only with constant inputs (masks, indices, shapes)")(folded_only)

for _op, _mapping in list(OPS.items()):
    OPS[_op] = OpMapping(_op, _mapping.to, _mapping.notes, _wrapped(_mapping))
