"""Tensor layout: Concat, Split, Slice, Pad, DepthToSpace, SpaceToDepth, and the views Flatten, Reshape,
Squeeze, Unsqueeze (which make no layer: N x C x H x W flattened to N x K is what fully_connected reads)."""
from __future__ import annotations

import math

from engine.importers.onnx._common import split_sizes
from engine.importers.onnx.context import Context, Unsupported
from engine.importers.onnx.mapping import maps

_AXIS_PARAM = {1: "channels", 2: "height", 3: "width"}


@maps("Concat", "concatenation", "on the channel axis only; of one input: folded")
def concat(ctx: Context) -> None:
    inputs = [t for t in ctx.node.input if t]
    if len(inputs) == 1:  # a copy (densenet's first layer of each block)
        ctx.alias(ctx.node.output[0], inputs[0])
        ctx.folded.append(f"Concat {ctx.node_name} (one input)")
        return
    axis = int(ctx.attrs()["axis"])
    if not ctx.channel_axis(inputs[0], axis):
        raise Unsupported(f"axis {axis}: only concatenation of channels is supported")
    ctx.add("concatenation", {}, [ctx.tensor(t) for t in inputs], ctx.node.output[0])


def _range_text(size: int, start: int, end: int, step: int) -> str:
    """``start:end:step`` text (slice layer syntax) selecting what ONNX Slice selects (bounds clamped as ONNX does)."""
    if step == 0:
        raise Unsupported("a step of 0")
    start, end = (start + size if start < 0 else start), (end + size if end < 0 else end)
    if step > 0:
        start, end = min(max(start, 0), size), min(max(end, 0), size)
    else:
        start, end = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
    idx = list(range(start, end, step))
    if not idx:
        raise Unsupported("the slice is empty")
    stop = idx[-1] + (1 if step > 0 else -1)
    stop_text = "" if stop < 0 else str(stop)
    return f"{idx[0]}:{stop_text}:{step}" if step != 1 else f"{idx[0]}:{stop_text}"


def _slice_layer(ctx: Context, x: str, ranges: dict[int, tuple[int, int, int]], output: str, suffix: str = "") -> None:
    shape = ctx.shape(x)
    rank = len(shape)
    params = {}
    for axis, (start, end, step) in ranges.items():
        axis %= rank
        if rank not in (2, 4) or axis == 0 or (rank == 2 and ctx.source(x).flat):
            if (start, end, step) == (0, shape[axis], 1) or (start == 0 and end >= shape[axis] and step == 1):
                continue
            raise Unsupported(f"slicing axis {axis} of a rank-{rank} tensor (only C, H and W)")
        params[_AXIS_PARAM[axis]] = _range_text(shape[axis], start, end, step)
    ctx.add("slice", params, [ctx.tensor(x)], output, suffix=suffix)


@maps("Slice", "slice", "constant starts, ends, axes, steps on C, H and W (negative steps too)")
def slice_(ctx: Context) -> None:
    x = ctx.node.input[0]
    a = ctx.attrs()
    if "starts" in a:  # opset < 10
        starts, ends = a["starts"], a["ends"]
        axes, steps = a.get("axes", list(range(len(starts)))), [1] * len(starts)
    else:
        starts = ctx.const(ctx.node.input[1], "starts").reshape(-1).tolist()
        ends = ctx.const(ctx.node.input[2], "ends").reshape(-1).tolist()
        axes_v, steps_v = ctx.optional_const(3), ctx.optional_const(4)
        axes = axes_v.reshape(-1).tolist() if axes_v is not None else list(range(len(starts)))
        steps = steps_v.reshape(-1).tolist() if steps_v is not None else [1] * len(starts)
    _slice_layer(ctx, x, {int(ax): (int(s), int(e), int(st)) for ax, s, e, st in zip(axes, starts, ends, steps)},
                 ctx.node.output[0])


@maps("Split", "slice (one per output)", "on the channel axis only; `split` as attribute or input, or `num_outputs`")
def split(ctx: Context) -> None:
    x = ctx.node.input[0]
    a = ctx.attrs()
    axis = int(a.get("axis", 0))
    if not ctx.channel_axis(x, axis):
        raise Unsupported(f"axis {axis}: only splitting channels is supported")
    sizes = split_sizes(ctx, x, axis)
    start = 0
    for i, (out, n) in enumerate(zip(ctx.node.output, sizes)):
        if out and ctx.readers(out) or out in ctx.graph_outputs:
            _slice_layer(ctx, x, {1: (start, start + n, 1)}, out, suffix=str(i))
        start += n


@maps("Pad", "padding", "modes constant (value 0), reflect, edge; pads on H and W (negative pads crop); "
      "`axes` input")
def pad(ctx: Context) -> None:
    x = ctx.node.input[0]
    a = ctx.attrs()
    mode = {"constant": "zero", "reflect": "reflect", "edge": "replicate"}.get(a.get("mode", "constant"))
    if mode is None:
        raise Unsupported(f"mode {a['mode']!r} (only constant, reflect and edge)")
    pads = a["pads"] if "pads" in a else ctx.const(ctx.node.input[1], "pads").reshape(-1).tolist()
    value = a.get("value", 0.0)
    if ctx.input(2) is not None:
        value = float(ctx.const(ctx.node.input[2], "constant_value").reshape(-1)[0])
    if mode == "zero" and float(value) != 0.0:
        raise Unsupported(f"constant value {value} (only zero padding)")
    rank = ctx.rank(x)
    axes = ctx.optional_const(3)
    axes_l = [int(v) % rank for v in axes.reshape(-1)] if axes is not None else list(range(rank))
    full = [0] * (2 * rank)
    for i, ax in enumerate(axes_l):
        full[ax], full[ax + rank] = int(pads[i]), int(pads[i + len(axes_l)])
    if rank != 4 or any(full[i] or full[i + 4] for i in (0, 1)):
        raise Unsupported(f"pads {list(pads)}: only H and W of N x C x H x W can be padded")
    params = {"mode": mode, "top": full[2], "bottom": full[6], "left": full[3], "right": full[7]}
    ctx.add("padding", params, [ctx.tensor(x)], ctx.node.output[0])


@maps("DepthToSpace", "depth_to_space", "`blocksize`, modes DCR and CRD")
def depth_to_space(ctx: Context) -> None:
    a = ctx.attrs()
    ctx.add("depth_to_space", {"block_size": int(a["blocksize"]), "mode": a.get("mode", "DCR")},
            [ctx.tensor(ctx.node.input[0])], ctx.node.output[0])


@maps("SpaceToDepth", "space_to_depth", "`blocksize`, modes DCR and CRD (opset 28)")
def space_to_depth(ctx: Context) -> None:
    a = ctx.attrs()
    ctx.add("space_to_depth", {"block_size": int(a["blocksize"]), "mode": a.get("mode", "DCR")},
            [ctx.tensor(ctx.node.input[0])], ctx.node.output[0])


def _view(ctx: Context) -> None:
    """A reshape that LayerLab's N x C x H x W layers see as no change: N x C x H x W -> N x (C*H*W), or
    between N x K and N x K x 1 x 1."""
    x, y = ctx.node.input[0], ctx.node.output[0]
    sx, sy = ctx.shape(x), ctx.shape(y)
    ok = (len(sx) in (2, 4) and len(sy) == 2 and sy[0] == sx[0] and sy[1] == math.prod(sx[1:])) or \
         (len(sy) == 4 and sy[2:] == (1, 1) and len(sx) in (2, 4) and sx[0] == sy[0] and math.prod(sx[1:]) == sy[1]
          and (len(sx) == 2 or sx[2:] == (1, 1))) or sx == sy
    if not ok:
        raise Unsupported(f"reshaping {'x'.join(map(str, sx))} to {'x'.join(map(str, sy))} (only flattening to N x K "
                          "and N x K <-> N x K x 1 x 1)")
    ctx.alias(y, x)
    ctx.folded.append(f"{ctx.node.op_type} {ctx.node_name} (a view: {'x'.join(map(str, sx))} -> "
                      f"{'x'.join(map(str, sy))})")


for _op in ("Flatten", "Reshape", "Squeeze", "Unsqueeze"):
    maps(_op, "(none: a view)", "N x C x H x W -> N x (C*H*W) before a fully connected layer, N x K <-> "
         "N x K x 1 x 1; other shapes refused (Reshape-Transpose-Reshape pixel shuffle is recognised)")(_view)


@maps("Transpose", "(none: folded at an input or output)", "N x H x W x C -> N x C x H x W right after a graph input "
      "(tf2onnx) and N x C x H x W -> N x H x W x C right before a graph output: the LayerLab input and output are "
      "N x C x H x W; any other transpose refused (pixel shuffle is recognised)")
def transpose(ctx: Context) -> None:
    x, y = ctx.node.input[0], ctx.node.output[0]
    perm = [int(p) for p in ctx.attrs().get("perm", [])]
    graph_inputs = {i.name for i in ctx.graph.input}
    if perm == [0, 3, 1, 2] and x in graph_inputs and ctx.layers[ctx.source(x).layer].type == "input":
        ctx.sources[y] = ctx.source(x)
        ctx.folded.append(f"Transpose {ctx.node_name} (N x H x W x C input to N x C x H x W)")
        return
    if perm == [0, 2, 3, 1] and y in ctx.graph_outputs and not ctx.readers(y) and ctx.rank(x) == 4:
        ctx.sources[y] = ctx.source(x)
        ctx.folded.append(f"Transpose {ctx.node_name} (N x C x H x W to N x H x W x C output)")
        ctx.notices.append(f"output {y} is N x H x W x C in the ONNX model; the LayerLab output is N x C x H x W "
                           "(the Transpose before it is folded)")
        return
    raise Unsupported(f"perm {perm}: LayerLab tensors stay N x C x H x W (only an N x H x W x C input or output is "
                      "folded)")


def pixel_shuffle_mode(shape6: tuple[int, ...], perm: list[int], shape_in: tuple[int, ...],
                       shape_out: tuple[int, ...]) -> tuple[str, int] | None:
    """(mode, block) when Reshape(N,C,H,W -> 6-D) -> Transpose(perm) -> Reshape(-> N,C/b²,H*b,W*b) is
    DepthToSpace (DCR: N,b,b,C',H,W with perm 0,3,4,1,5,2; CRD: N,C',b,b,H,W with perm 0,1,4,2,5,3). The last
    Reshape may also flatten the result to N x (C*H*W) (a simplifier merges the two reshapes)."""
    if len(shape6) != 6 or len(shape_in) != 4 or len(shape_out) not in (2, 4):
        return None
    n, c, h, w = shape_in
    if len(shape_out) == 2:
        shape_out = (n, -1, -1, -1) if tuple(shape_out) == (n, c * h * w) else ()
    for mode, expect_perm, b_axes, c_axis in (("DCR", [0, 3, 4, 1, 5, 2], (1, 2), 3),
                                              ("CRD", [0, 1, 4, 2, 5, 3], (2, 3), 1)):
        b = shape6[b_axes[0]]
        if list(perm) == expect_perm and shape6[b_axes[1]] == b and b > 1 and shape6[c_axis] * b * b == c \
                and tuple(shape6[4:]) == (h, w) and shape6[0] == n and \
                tuple(shape_out) in ((n, c // (b * b), h * b, w * b), (n, -1, -1, -1)):
            return mode, b
    return None
