"""Element-wise functions of a tensor of any rank that become the unary layer: trigonometric and hyperbolic functions,
rounding, sign and softsign (Erf, Sqrt, Exp, Log... are in ops_rank)."""
from __future__ import annotations

from engine.importers.onnx.context import Context, Unsupported
from engine.importers.onnx.mapping import maps

#: ONNX operator -> the unary layer's operation
UNARY = {"Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh",
         "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh", "Ceil": "ceil", "Floor": "floor", "Round": "round",
         "Sign": "sign", "Softsign": "softsign"}


def unary(ctx: Context) -> None:
    """The node as a unary layer reading its input with its own rank."""
    x, y = ctx.node.input[0], ctx.node.output[0]
    if ctx.is_const(x):
        raise Unsupported(f"input {x!r} is a constant (LayerLab computes tensors made by layers)")
    ctx.require_param("unary", "operation", UNARY[ctx.node.op_type], why=ctx.node.op_type)
    ctx.add("unary", {"operation": UNARY[ctx.node.op_type]}, [ctx.ranked(x)], y, dims=ctx.full_dims(y))


for _op, _operation in UNARY.items():
    maps(_op, f"unary ({_operation})", "a float tensor of any rank")(unary)
