"""Pooling: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, ReduceMean and ReduceMax over H and W."""
from __future__ import annotations

from engine.importers.onnx._common import padding_params, pair, spatial_pads
from engine.importers.onnx.context import Context, Unsupported
from engine.importers.onnx.mapping import maps


def _pool(ctx: Context, pool_type: str) -> None:
    a = ctx.attrs()
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise Unsupported("the Indices output is not supported")
    x = ctx.node.input[0]
    kernel = pair(a.get("kernel_shape"), 1, "kernel_shape")
    stride = pair(a.get("strides"), 1, "strides")
    if pair(a.get("dilations"), 1, "dilations") != (1, 1):
        raise Unsupported(f"dilations {a['dilations']}: dilated pooling is not supported")
    pads = spatial_pads(ctx, x, kernel, stride, (1, 1), a)
    params = {"pool_type": pool_type, "kernel_size": kernel, "stride": stride,
              **padding_params(ctx, "pooling", pads)}
    if pool_type == "average":
        params["count_include_pad"] = bool(a.get("count_include_pad", 0))
    if int(a.get("ceil_mode", 0)):
        out_h, out_w = ctx.shape(ctx.node.output[0])[2:]
        n_h, n_w = ctx.shape(x)[2:]
        floor = [(n + p0 + p1 - k) // s + 1 for n, p0, p1, k, s in
                 ((n_h, pads[0], pads[2], kernel[0], stride[0]), (n_w, pads[1], pads[3], kernel[1], stride[1]))]
        if floor != [out_h, out_w]:  # ceil mode changes the size here: the layer must do it
            ctx.require_param("pooling", "ceil_mode", why="ceil_mode=1")
            params["ceil_mode"] = True
    ctx.add("pooling", params, [ctx.tensor(x)], ctx.node.output[0])


@maps("MaxPool", "pooling (max)", "kernel, strides, pads (asymmetric with `padding_end`), `auto_pad`, `ceil_mode`; "
      "dilations and the Indices output refused")
def max_pool(ctx: Context) -> None:
    _pool(ctx, "max")


@maps("AveragePool", "pooling (average)", "as MaxPool, plus `count_include_pad`")
def average_pool(ctx: Context) -> None:
    _pool(ctx, "average")


def _global(ctx: Context, pool_type: str, output: str) -> None:
    ctx.add("pooling", {"pool_type": pool_type, "global": True}, [ctx.tensor(ctx.node.input[0])], output)


@maps("GlobalAveragePool", "pooling (global average)")
def global_average_pool(ctx: Context) -> None:
    _global(ctx, "average", ctx.node.output[0])


@maps("GlobalMaxPool", "pooling (global max)")
def global_max_pool(ctx: Context) -> None:
    _global(ctx, "max", ctx.node.output[0])


def _reduce(ctx: Context, pool_type: str) -> None:
    a = ctx.attrs()
    x = ctx.node.input[0]
    axes = a.get("axes")
    if axes is None and ctx.input(1) is not None:
        axes = [int(v) for v in ctx.const(ctx.node.input[1], "axes").reshape(-1)]
    if axes is None or not ctx.spatial_axes(x, list(axes)):
        raise Unsupported(f"axes {axes}: only a reduction over H and W (axes 2 and 3 of N x C x H x W) maps to pooling")
    _global(ctx, pool_type, ctx.node.output[0])  # keepdims=0 gives N x C, the same values


@maps("ReduceMean", "pooling (global average)", "axes = H and W only (attribute or input), keepdims 0 or 1")
def reduce_mean(ctx: Context) -> None:
    _reduce(ctx, "average")


@maps("ReduceMax", "pooling (global max)", "axes = H and W only (attribute or input), keepdims 0 or 1")
def reduce_max(ctx: Context) -> None:
    _reduce(ctx, "max")
