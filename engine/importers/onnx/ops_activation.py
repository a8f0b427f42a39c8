"""Activations: each becomes the activation of the layer computing its input when nothing else reads that
layer's output, otherwise an identity affine layer carrying it. PRelu with per-channel slopes is a layer."""
from __future__ import annotations

import numpy as np

from engine.importers.onnx._common import per_channel
from engine.importers.onnx.context import Context, Unsupported
from engine.importers.onnx.mapping import maps

FLOAT_MAX = float(np.finfo(np.float32).max)


def _activate(ctx: Context, name: str, coefs: dict[str, float] | None = None) -> None:
    ctx.set_activation(ctx.node.input[0], ctx.node.output[0], name, coefs or {})


def _simple(op: str, name: str, coefs: dict[str, tuple[str, float]] | None = None, notes: str = "") -> None:
    """Register ``op`` as activation ``name``; ``coefs``: coefficient -> (ONNX attribute, ONNX default)."""
    table = coefs or {}

    def mapping(ctx: Context) -> None:
        a = ctx.attrs()
        _activate(ctx, name, {k: float(a.get(attr, default)) for k, (attr, default) in table.items()})
    mapping.__name__ = f"map_{op}"
    listed = ", ".join(f"`{attr}`" for attr, _ in table.values())
    maps(op, f"activation {name}", notes or (f"{listed}" if listed else ""))(mapping)


_simple("Relu", "relu")
_simple("Sigmoid", "sigmoid")
_simple("Tanh", "tanh")
_simple("Sin", "sine")
_simple("HardSwish", "hardswish")
_simple("Softplus", "softplus")
_simple("Mish", "mish")
_simple("LeakyRelu", "leaky_relu", {"alpha": ("alpha", 0.01)})
_simple("Elu", "elu", {"alpha": ("alpha", 1.0)})
_simple("Celu", "celu", {"alpha": ("alpha", 1.0)})
_simple("Selu", "selu", {"alpha": ("alpha", 1.67326319217681884765625), "gamma": ("gamma", 1.05070102214813232421875)})
_simple("HardSigmoid", "hard_sigmoid", {"alpha": ("alpha", 0.2), "beta": ("beta", 0.5)})


@maps("Gelu", "activation gelu / gelu_tanh", "`approximate` none or tanh")
def gelu(ctx: Context) -> None:
    approx = ctx.attrs().get("approximate", "none")
    _activate(ctx, "gelu_tanh" if approx == "tanh" else "gelu")


@maps("Clip", "activation clamp", "min and max as inputs (opset 11+) or attributes, either may be absent (ReLU6 is "
      "Clip 0..6)")
def clip(ctx: Context) -> None:
    a = ctx.attrs()
    lo, hi = a.get("min", -FLOAT_MAX), a.get("max", FLOAT_MAX)
    for i, name in ((1, "min"), (2, "max")):
        v = ctx.optional_const(i)
        if v is not None:
            if v.size != 1:
                raise Unsupported(f"{name} of shape {v.shape}: only a single value is supported")
            if name == "min":
                lo = float(v.reshape(()))
            else:
                hi = float(v.reshape(()))
    lo, hi = max(float(lo), -FLOAT_MAX), min(float(hi), FLOAT_MAX)
    if lo > hi:
        raise Unsupported(f"min {lo} is greater than max {hi}")
    _activate(ctx, "clamp", {"min": lo, "max": hi})


@maps("Softmax", "activation softmax", "over the channel axis only (axis 1 of N x C x H x W, or of N x K)")
def softmax(ctx: Context) -> None:
    x = ctx.node.input[0]
    axis = int(ctx.attrs().get("axis", -1 if ctx.opset >= 13 else 1))
    rank = ctx.rank(x)
    if not ctx.channel_axis(x, axis):
        raise Unsupported(f"axis {axis} of a rank-{rank} tensor: only softmax over the channels is supported")
    if ctx.opset < 13 and rank == 4 and ctx.shape(x)[2:] != (1, 1):
        raise Unsupported("before opset 13 Softmax on axis 1 normalises over C, H and W together")
    _activate(ctx, "softmax")


@maps("PRelu", "prelu (per-channel slopes) or activation leaky_relu (one slope)", "slope constant: one value or one "
      "per channel")
def prelu(ctx: Context) -> None:
    x = ctx.node.input[0]
    slope = per_channel(ctx, ctx.const(ctx.node.input[1], "slope"), x, "slope")
    if isinstance(slope, float):
        _activate(ctx, "leaky_relu", {"alpha": slope})
        return
    ctx.require_layer("prelu")
    ctx.add("prelu", {}, [ctx.tensor(x)], ctx.node.output[0], {"slope": slope})


def _alias(ctx: Context) -> None:
    ctx.alias(ctx.node.output[0], ctx.node.input[0])
    ctx.folded.append(f"{ctx.node.op_type} {ctx.node_name} (identity)")


@maps("Cast", "(none: folded)", "to float32 or float64 from a float tensor (exact); to float16 only right before a "
      "graph output (LayerLab's outputs are float32; run in fp16 for the rounding); other casts refused")
def cast(ctx: Context) -> None:
    import onnx  # noqa: PLC0415

    to = int(ctx.attrs()["to"])
    y = ctx.node.output[0]
    if to == onnx.TensorProto.FLOAT16 and y in ctx.graph_outputs and not ctx.readers(y):
        ctx.notices.append(f"output {y} is float16 in the ONNX model; the LayerLab output is float32 (run with "
                           "--format fp16 for float16 rounding)")
    elif to not in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE):
        raise Unsupported(f"cast to {onnx.helper.tensor_dtype_to_np_dtype(to).name}: LayerLab computes in float")
    _alias(ctx)


@maps("Identity", "(none: folded)")
def identity(ctx: Context) -> None:
    _alias(ctx)


@maps("Dropout", "(none: folded)", "identity at inference; the mask output refused")
def dropout(ctx: Context) -> None:
    if any(ctx.node.output[1:]) and any(ctx.readers(t) for t in ctx.node.output[1:]):
        raise Unsupported("the mask output is not supported")
    if ctx.attrs().get("training_mode") or (ctx.input(2) is not None and bool(ctx.const(ctx.node.input[2]).any())):
        raise Unsupported("training mode is not supported")
    _alias(ctx)

