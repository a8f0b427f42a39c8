"""Convolutions and dense layers: Conv, ConvTranspose, Gemm, MatMul."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.importers.onnx._common import padding_params, pair, spatial_pads
from engine.importers.onnx.context import Context, Unsupported
from engine.importers.onnx.mapping import maps
from engine.importers.onnx.validate import MalformedModel
from engine.tensor import Dims


def _conv_operands(ctx: Context, what: str) -> tuple[str, Any, Any, dict[str, Any]]:
    """The input name, constant weights (4-D), optional constant bias and attributes of a Conv-like node."""
    w = ctx.const(ctx.node.input[1], "weights")
    if w.ndim != 4:
        raise Unsupported(f"weights of rank {w.ndim}: only 2-D {what} are supported")
    return ctx.node.input[0], w, ctx.optional_const(2), ctx.attrs()


@maps("Conv", "convolution", "groups, dilations, strides, `auto_pad` (SAME_UPPER, SAME_LOWER, VALID), symmetric and "
      "asymmetric pads (`padding_end`), bias; 2-D only, weights must be constants")
def conv(ctx: Context) -> None:
    x, w, b, a = _conv_operands(ctx, "convolutions")
    group, channels = int(a.get("group", 1)), ctx.shape(x)[1] if ctx.rank(x) > 1 else 0
    if group < 1 or w.shape[0] % group or w.shape[1] * group != channels:
        raise MalformedModel(f"{ctx.where}: Conv node {ctx.node_name!r}: group {group} does not fit its {channels} "
                             f"input channels and weights of shape {'x'.join(map(str, w.shape))} (the input channels "
                             "must be the weights' second dim times group, the output channels a multiple of group)")
    kernel = pair(a.get("kernel_shape"), 0, "kernel_shape") if "kernel_shape" in a else (w.shape[2], w.shape[3])
    stride, dilation = pair(a.get("strides"), 1, "strides"), pair(a.get("dilations"), 1, "dilations")
    pads = spatial_pads(ctx, x, kernel, stride, dilation, a)
    params = {"num_output_channels": w.shape[0], "kernel_size": kernel, "stride": stride, "dilation": dilation,
              "groups": int(a.get("group", 1)), "bias": b is not None, **padding_params(ctx, "convolution", pads)}
    weights = {"weights": w} | ({"bias": b} if b is not None else {})
    ctx.add("convolution", params, [ctx.tensor(x)], ctx.node.output[0], weights)


@maps("ConvTranspose", "deconvolution", "groups, dilations, strides, pads (asymmetric with `padding_end`), "
      "`output_padding`, `output_shape`, `auto_pad`, bias")
def conv_transpose(ctx: Context) -> None:
    x, w, b, a = _conv_operands(ctx, "transposed convolutions")
    group = int(a.get("group", 1))
    if group < 1 or w.shape[0] % group or (ctx.rank(x) > 1 and ctx.shape(x)[1] != w.shape[0]):
        raise MalformedModel(f"{ctx.where}: ConvTranspose node {ctx.node_name!r}: group {group} and weights of shape "
                             f"{'x'.join(map(str, w.shape))} do not fit its input of shape "
                             f"{'x'.join(map(str, ctx.shape(x)))}")
    kernel = (w.shape[2], w.shape[3])
    stride, dilation = pair(a.get("strides"), 1, "strides"), pair(a.get("dilations"), 1, "dilations")
    out_pad = pair(a.get("output_padding"), 0, "output_padding")
    auto = a.get("auto_pad", "NOTSET")
    if "output_shape" in a or auto in ("SAME_UPPER", "SAME_LOWER"):
        size = ctx.shape(x)[2:]
        target = [int(v) for v in a["output_shape"]][-2:] if "output_shape" in a else [n * s for n, s in zip(size, stride)]
        begin, end, extra = [], [], []
        for n, k, s, d, op, t in zip(size, kernel, stride, dilation, out_pad, target):
            total = s * (n - 1) + op + ((k - 1) * d + 1) - t
            if total < 0:  # a larger output: the extra rows/columns are output padding at the bottom/right
                extra.append(-total)
                total = 0
            else:
                extra.append(0)
            upper = auto == "SAME_UPPER"
            begin.append(total // 2 if upper else total - total // 2)
            end.append(total - total // 2 if upper else total // 2)
        pads = (begin[0], begin[1], end[0], end[1])
        out_pad = (out_pad[0] + extra[0], out_pad[1] + extra[1])
    elif auto == "VALID":
        pads = (0, 0, 0, 0)
    else:
        pads = tuple(int(p) for p in a.get("pads", [0, 0, 0, 0]))  # type: ignore[assignment]
    params = {"num_output_channels": w.shape[1] * group, "kernel_size": kernel, "stride": stride, "dilation": dilation,
              "output_padding": out_pad, "groups": group, "bias": b is not None}
    weights = {"weights": w} | ({"bias": b} if b is not None else {})
    t, l, bo, r = pads  # type: ignore[misc]
    if (t, l) == (bo, r) or ctx.has_param("deconvolution", "padding_end"):
        params.update(padding_params(ctx, "deconvolution", pads))  # type: ignore[arg-type]
        ctx.add("deconvolution", params, [ctx.tensor(x)], ctx.node.output[0], weights)
        return
    # asymmetric: the smaller padding on both sides, then a slice crops the rest (the same values)
    params["padding"] = (min(t, bo), min(l, r))
    y = ctx.node.output[0]
    n, c, h, w_ = ctx.shape(y)
    full = Dims(n, c, h + abs(t - bo), w_ + abs(l - r))
    inner = ctx.add("deconvolution", params, [ctx.tensor(x)], None, weights, dims=full)
    rows = f"{t - min(t, bo)}:{t - min(t, bo) + h}"
    cols = f"{l - min(l, r)}:{l - min(l, r) + w_}"
    ctx.add("slice", {"height": rows, "width": cols}, [inner], y, suffix="crop")


def _dense(ctx: Context, x: str, weights: np.ndarray, bias: np.ndarray | None, output: str) -> None:
    """A fully_connected layer reading ``x`` (N x K, K = C*H*W of the layer computing it)."""
    if ctx.rank(x) != 2:
        raise Unsupported(f"input of shape {ctx.shape(x)}: only N x K inputs (after Flatten) map to fully_connected")
    src = ctx.source(x)
    params = {"num_outputs": weights.shape[0], "bias": bias is not None}
    ws = {"weights": weights} | ({"bias": bias} if bias is not None else {})
    layer = src.layer if len(ctx.layer_dims(src.layer)) == 4 else ctx.tensor(x)  # a rank-2 layer: as N x K x 1 x 1
    ctx.add("fully_connected", params, [layer], output, ws)


def _bias(value: np.ndarray | None, n: int) -> np.ndarray | None:
    if value is None:
        return None
    v = np.asarray(value, dtype=np.float32)
    if v.size == 1:
        return np.full(n, float(v.reshape(())), np.float32)
    if v.size != n or (v.ndim == 2 and v.shape[0] != 1):
        raise Unsupported(f"bias of shape {v.shape} is not one value per output ({n})")
    return v.reshape(n)


@maps("Gemm", "fully_connected", "`alpha`, `beta`, `transB` folded into the weights; input from Flatten/Reshape "
      "of an N x C x H x W tensor or N x K; `transA` refused")
def gemm(ctx: Context) -> None:
    a = ctx.attrs()
    if int(a.get("transA", 0)):
        raise Unsupported("transA=1 (the batch would be transposed)")
    w = ctx.const(ctx.node.input[1], "B")
    w = (w if int(a.get("transB", 0)) else w.T) * float(a.get("alpha", 1.0))
    c = ctx.optional_const(2)
    bias = _bias(None if c is None else c * float(a.get("beta", 1.0)), w.shape[0])
    _dense(ctx, ctx.node.input[0], w, bias, ctx.node.output[0])


@maps("MatMul", "fully_connected", "N x K input times a constant K x M matrix; a following Add of a constant "
      "M-vector becomes the bias")
def matmul(ctx: Context) -> None:
    w = ctx.const(ctx.node.input[1], "B")
    if w.ndim != 2:
        raise Unsupported(f"B of shape {w.shape}: only a K x M matrix maps to fully_connected")
    out = ctx.node.output[0]
    bias, add = None, ctx.only_reader(out)
    if add is not None and add.op_type == "Add":
        other = [t for t in add.input if t != out]
        if len(other) == 1 and ctx.is_const(other[0]):
            try:
                bias = _bias(ctx.consts[other[0]], w.shape[1])
            except Unsupported:
                bias = None
    if bias is not None:
        ctx.consumed.add(id(add))
        ctx.folded.append(f"Add {add.name or add.output[0]} -> bias of fully_connected (MatMul {ctx.node_name})")
        out = add.output[0]
    _dense(ctx, ctx.node.input[0], np.ascontiguousarray(w.T), bias, out)
