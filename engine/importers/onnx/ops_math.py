"""Arithmetic: Add, Sub, Mul, Div of two tensors (element_wise, broadcasting N x C x 1 x 1 and 1 x 1 x 1 x 1) or of
a tensor and a constant (affine, when the constant is one value or one per channel); Sum, Mean, Max, Min."""
from __future__ import annotations

import numpy as np

from engine.importers.onnx._common import per_channel, tensor_inputs
from engine.importers.onnx.context import Context, Unsupported
from engine.importers.onnx.mapping import maps
from engine.layer_xml import number_text

_OPERATION = {"Add": "sum", "Sum": "sum", "Sub": "sub", "Mul": "product", "Div": "div", "Max": "max", "Min": "min",
              "Mean": "mean"}


def _element_wise(ctx: Context, inputs: list[str]) -> None:
    op = _OPERATION[ctx.node.op_type]
    ctx.require_param("element_wise", "operation", op, why=f"{ctx.node.op_type} of tensors")
    out_shape = ctx.shape(ctx.node.output[0])
    for t in inputs:
        s = ctx.shape(t)
        if len(s) != len(out_shape):
            raise Unsupported(f"inputs of ranks {[ctx.rank(i) for i in inputs]}: broadcasting needs equal ranks")
    ctx.add("element_wise", {"operation": op}, [ctx.tensor(t) for t in inputs], ctx.node.output[0])


def _affine_values(scale: np.ndarray | float, shift: np.ndarray | float, c: int) -> tuple[dict, dict | None]:
    """Parameters and weights of an affine layer computing ``scale * x + shift`` on C channels."""
    if isinstance(scale, float) and isinstance(shift, float):
        return {"mode": "per_tensor", "scale": scale, "shift": shift}, None
    ws = {k: np.broadcast_to(np.asarray(v, np.float64), (c,)).astype(np.float32) for k, v in
          (("scale", scale), ("shift", shift))}
    return {"mode": "per_channel"}, ws


def _merged(ctx: Context, x: str, scale: np.ndarray | float, shift: np.ndarray | float) -> bool:
    """Fold ``scale * x + shift`` into the affine layer computing ``x`` when nothing else reads it and it has
    no activation (so ``(x - mean) / std`` is one layer)."""
    src = ctx.sources.get(x)
    if src is None or src.flat:
        return False
    spec = ctx.layers[src.layer]
    if spec.type != "affine" or spec.activation != "none" or any(spec.inputs[1:]) or \
            not ctx.single_use(src.layer, x, {id(ctx.node)}):
        return False
    if spec.params.get("mode") == "per_channel":
        s0, b0 = (ctx.weights[src.layer][k].astype(np.float64) for k in ("scale", "shift"))
    else:
        s0, b0 = float(spec.params.get("scale", "1")), float(spec.params.get("shift", "0"))
    params, weights = _affine_values(_mul(scale, s0), _add(_mul(scale, b0), shift), ctx.dims(x).c)
    ctx.update(src.layer, params, weights)
    ctx.bind(ctx.node.output[0], src.layer)
    ctx.folded.append(f"{ctx.node.op_type} {ctx.node_name} -> merged into affine {src.layer}")
    return True


def _mul(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray | float:
    return a * b if isinstance(a, float) and isinstance(b, float) else np.asarray(a, np.float64) * b


def _add(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray | float:
    return a + b if isinstance(a, float) and isinstance(b, float) else np.asarray(a, np.float64) + b


def _affine(ctx: Context, x: str, scale: np.ndarray | float, shift: np.ndarray | float) -> None:
    """``scale * x + shift`` as an affine layer (per tensor or per channel), or merged into the one before."""
    if _merged(ctx, x, scale, shift):
        return
    params, weights = _affine_values(scale, shift, ctx.dims(x).c)
    ctx.add("affine", params, [ctx.tensor(x)], ctx.node.output[0], weights)


def _binary(ctx: Context) -> None:
    a, b = ctx.node.input[0], ctx.node.input[1]
    op = ctx.node.op_type
    if not ctx.is_const(a) and not ctx.is_const(b):
        _element_wise(ctx, [a, b])
        return
    const_first = ctx.is_const(a)
    x, k = (b, a) if const_first else (a, b)
    if ctx.shape(ctx.node.output[0]) != ctx.shape(x):
        raise Unsupported(f"the constant of shape {ctx.shape(k)} enlarges the tensor ({ctx.shape(x)} -> "
                          f"{ctx.shape(ctx.node.output[0])})")
    c = per_channel(ctx, ctx.consts[k], x, "constant")
    if op == "Add":
        _affine(ctx, x, 1.0, c)
    elif op == "Mul":
        _affine(ctx, x, c, 0.0)
    elif op == "Sub":
        _affine(ctx, x, -1.0, c) if const_first else _affine(ctx, x, 1.0, -c)
    elif const_first:  # Div: constant / tensor
        raise Unsupported("a constant divided by a tensor (reciprocal) has no LayerLab layer")
    else:
        if np.any(np.asarray(c) == 0):
            raise Unsupported("division by a constant holding zero")
        _affine(ctx, x, 1.0 / np.asarray(c, np.float64) if not isinstance(c, float) else 1.0 / c, 0.0)


for _op, _text in (("Add", "sum"), ("Sub", "sub"), ("Mul", "product"), ("Div", "div")):
    maps(_op, f"element_wise ({_text}) or affine", "two tensors (broadcasting N x C x 1 x 1 and 1 x 1 x 1 x 1), or a "
         "tensor and a constant of one value or one per channel (folded into affine)"
         + ("; constant / tensor refused" if _op == "Div" else ""))(_binary)


FLOAT_MAX = float(np.finfo(np.float32).max)


def _clamp(ctx: Context, x: str, lo: float, hi: float) -> None:
    """``Max(x, lo)`` / ``Min(x, hi)``: a clamp activation, merged with a clamp the producing layer already has."""
    src = ctx.sources.get(x)
    spec = ctx.layers.get(src.layer) if src is not None else None
    if spec is not None and spec.activation == "clamp" and not src.flat and ctx.single_use(src.layer, x, {id(ctx.node)}):
        lo0, hi0 = float(spec.act_coefs.get("min", "0")), float(spec.act_coefs.get("max", "6"))
        lo, hi = max(lo, lo0), min(hi, hi0)
        if lo <= hi:
            spec.act_coefs = {"min": number_text(lo), "max": number_text(hi)}
            ctx.bind(ctx.node.output[0], src.layer)
            ctx.folded.append(f"{ctx.node.op_type} {ctx.node_name} -> clamp of layer {src.layer}")
            return
    ctx.set_activation(x, ctx.node.output[0], "clamp", {"min": lo, "max": hi})


def _variadic(ctx: Context) -> None:
    inputs = [t for t in ctx.node.input if t]
    tensors = tensor_inputs(ctx)
    op = ctx.node.op_type
    if op in ("Max", "Min") and len(tensors) == 1 and len(inputs) == 2:  # with one constant value: a clamp
        k = ctx.consts[next(t for t in inputs if t not in tensors)]
        if k.size == 1 and ctx.shape(ctx.node.output[0]) == ctx.shape(tensors[0]):
            v = float(np.asarray(k).reshape(()))
            _clamp(ctx, tensors[0], v, FLOAT_MAX) if op == "Max" else _clamp(ctx, tensors[0], -FLOAT_MAX, v)
            return
    if len(tensors) != len(inputs):
        raise Unsupported(f"{ctx.node.op_type} with a constant input is not supported (except Max or Min of a "
                          "tensor and one value: a clamp)")
    if len(inputs) == 1:
        ctx.alias(ctx.node.output[0], inputs[0])
        ctx.folded.append(f"{ctx.node.op_type} {ctx.node_name} of one input (identity)")
        return
    _element_wise(ctx, inputs)


for _op, _text in (("Sum", "sum"), ("Mean", "mean"), ("Max", "max"), ("Min", "min")):
    maps(_op, f"element_wise ({_text})" + (" or activation clamp" if _op in ("Max", "Min") else ""),
         "any number of tensors (broadcasting N x C x 1 x 1)" + ("; a tensor and one constant value is a clamp "
         "(Min(Max(x, 0), 6) is one ReLU6)" if _op in ("Max", "Min") else ""))(_variadic)


@maps("Neg", "affine", "scale -1")
def neg(ctx: Context) -> None:
    _affine(ctx, ctx.node.input[0], -1.0, 0.0)
