"""Reductions of a tensor of any rank that become the reduce layer (ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum,
ReduceLogSumExp, ReduceProd, ArgMax, ArgMin), and LogSoftmax and Hardmax along any axis (the softmax layer)."""
from __future__ import annotations

from engine.importers.onnx.context import Context, Unsupported
from engine.importers.onnx.mapping import maps
from engine.tensor import Dims

#: ONNX operator -> the reduce layer's operation
REDUCE = {"ReduceL1": "l1", "ReduceL2": "l2", "ReduceSumSquare": "sum_square", "ReduceLogSum": "log_sum",
          "ReduceLogSumExp": "log_sum_exp", "ReduceProd": "prod"}


def _out_dims(ctx: Context) -> Dims:
    """The output's dimensions; a scalar (every axis reduced away) is held as one value of rank 1."""
    y = ctx.node.output[0]
    return Dims(1) if ctx.rank(y) == 0 else ctx.full_dims(y)


def _add_reduce(ctx: Context, params: dict[str, object]) -> None:
    x = ctx.node.input[0]
    ctx.require_param("reduce", "operation", str(params["operation"]), why=ctx.node.op_type)
    ctx.add("reduce", params, [ctx.ranked(x)], ctx.node.output[0], dims=_out_dims(ctx))


def reduce(ctx: Context) -> None:
    """A Reduce* node: axes from the attribute (before opset 18) or the constant input; none means every axis."""
    a = ctx.attrs()
    axes = a.get("axes")
    if axes is None and ctx.input(1) is not None:
        axes = [int(v) for v in ctx.const(ctx.node.input[1], "axes").reshape(-1)]
    if not axes and int(a.get("noop_with_empty_axes", 0)):
        raise Unsupported("noop_with_empty_axes with no axes (an identity)")
    _add_reduce(ctx, {"operation": REDUCE[ctx.node.op_type], "axes": ",".join(str(int(v)) for v in axes or []),
                      "keepdims": bool(int(a.get("keepdims", 1)))})


for _op, _operation in REDUCE.items():
    maps(_op, f"reduce ({_operation})", "any axes (attribute or constant input), keepdims 0 or 1")(reduce)


@maps("ArgMax", "reduce (argmax)", "`axis`, `keepdims`, `select_last_index`; the int64 indices as floats")
@maps("ArgMin", "reduce (argmin)", "`axis`, `keepdims`, `select_last_index`; the int64 indices as floats")
def arg(ctx: Context) -> None:
    a = ctx.attrs()
    _add_reduce(ctx, {"operation": ctx.node.op_type.lower(), "axes": str(int(a.get("axis", 0))),
                      "keepdims": bool(int(a.get("keepdims", 1))), "last_index": bool(int(a.get("select_last_index", 0)))})


@maps("LogSoftmax", "softmax (log_softmax)", "any axis (opset 13 or later)")
@maps("Hardmax", "softmax (hardmax)", "any axis (opset 13 or later)")
def normalized(ctx: Context) -> None:
    if ctx.opset < 13:
        raise Unsupported(f"before opset 13 {ctx.node.op_type} works on every axis from `axis` on")
    operation = "log_softmax" if ctx.node.op_type == "LogSoftmax" else "hardmax"
    ctx.require_param("softmax", "operation", operation, why=ctx.node.op_type)
    y = ctx.node.output[0]
    ctx.add("softmax", {"axis": int(ctx.attrs().get("axis", -1)), "operation": operation},
            [ctx.ranked(ctx.node.input[0])], y, dims=ctx.full_dims(y))
