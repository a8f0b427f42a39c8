"""Comparisons, logic and selection of float tensors of any rank (Less, Equal, And, Not, Where...: their boolean
results held as masks of 0 and 1, the compare and where layers), and Sum, Mean, Max, Min of tensors of any rank where
the N x C x H x W mapping refuses."""
from __future__ import annotations

from engine.importers.onnx.context import Context, Unsupported
from engine.importers.onnx.mapping import maps
from engine.importers.onnx.ops_rank import _or_any_rank

#: ONNX operator -> the compare layer's operation
COMPARE = {"Less": "less", "LessOrEqual": "less_equal", "Greater": "greater", "GreaterOrEqual": "greater_equal",
           "Equal": "equal", "And": "and", "Or": "or", "Xor": "xor"}


def _tensors(ctx: Context) -> list[str]:
    """The layers computing the node's inputs with their own ranks (a constant input is refused here; the import then
    folds the node when every input is a constant, or reads the constants as constant layers)."""
    for t in ctx.node.input:
        if t and ctx.is_const(t):
            raise Unsupported(f"input {t!r} is a constant (only tensors computed by layers here)")
    return [ctx.ranked(t) for t in ctx.node.input if t]


def compare(ctx: Context) -> None:
    y = ctx.node.output[0]
    ctx.require_param("compare", "operation", COMPARE[ctx.node.op_type], why=ctx.node.op_type)
    ctx.add("compare", {"operation": COMPARE[ctx.node.op_type]}, _tensors(ctx), y, dims=ctx.full_dims(y))


for _op, _operation in COMPARE.items():
    maps(_op, f"compare ({_operation})", "float tensors of any rank, broadcast as ONNX; the boolean result as 1 and 0; "
         "constant inputs folded")(compare)


@maps("Not", "unary (not)", "a mask of any rank (1 where the value is 0); a constant folded")
def not_(ctx: Context) -> None:
    y = ctx.node.output[0]
    ctx.require_param("unary", "operation", "not", why="Not")
    ctx.add("unary", {"operation": "not"}, _tensors(ctx), y, dims=ctx.full_dims(y))


@maps("Where", "where", "condition (a mask or a constant), x and y of any rank, broadcast as ONNX")
def where(ctx: Context) -> None:
    y = ctx.node.output[0]
    ctx.require_layer("where")
    ctx.add("where", {}, _tensors(ctx), y, dims=ctx.full_dims(y))


def _variadic(ctx: Context) -> None:
    y = ctx.node.output[0]
    operation = {"Sum": "sum", "Mean": "mean", "Max": "max", "Min": "min"}[ctx.node.op_type]
    ctx.add("element_wise", {"operation": operation}, _tensors(ctx), y, dims=ctx.full_dims(y))


for _op in ("Sum", "Mean", "Max", "Min"):
    _or_any_rank(_op, "element_wise", "tensors of any rank, broadcast as ONNX")(_variadic)
