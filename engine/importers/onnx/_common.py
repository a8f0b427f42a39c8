"""Helpers shared by the operator mappings (never one mapping importing another)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.importers.onnx.context import Context, Unsupported
from engine.tensor import Dims


def pair(values: Any, default: int, what: str) -> tuple[int, int]:
    """(h, w) of a 2-D attribute such as strides or dilations; Unsupported for 1-D or 3-D."""
    if values is None:
        return default, default
    v = [int(x) for x in values]
    if len(v) != 2:
        raise Unsupported(f"{what} {v}: only 2-D (H and W) operators are supported")
    return v[0], v[1]


def spatial_pads(ctx: Context, x: str, kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
                 attrs: dict[str, Any], ceil_mode: bool = False) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) padding of a convolution or pooling, from ``pads`` or ``auto_pad``
    (SAME_UPPER / SAME_LOWER computed from the input's static size, VALID = none)."""
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = [int(p) for p in attrs.get("pads", [0, 0, 0, 0])]
        if len(pads) != 4:
            raise Unsupported(f"pads {pads}: only 2-D operators are supported")
        return pads[0], pads[1], pads[2], pads[3]
    if auto == "VALID":
        return 0, 0, 0, 0
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"auto_pad {auto!r} is not an ONNX value")
    size = ctx.shape(x)[2:]
    begin, end = [], []
    for n, k, s, d in zip(size, kernel, stride, dilation):
        out = -(-n // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        small, big = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin[0], begin[1], end[0], end[1]


def padding_params(ctx: Context, layer_type: str, pads: tuple[int, int, int, int]) -> dict[str, Any]:
    """``padding`` (and ``padding_end`` when the two sides differ) of a convolution, deconvolution or pooling."""
    t, l, b, r = pads
    params: dict[str, Any] = {"padding": (t, l)}
    if (t, l) != (b, r):
        ctx.require_param(layer_type, "padding_end", why=f"asymmetric pads {list(pads)}")
        params["padding_end"] = (b, r)
    return params


def per_channel(ctx: Context, value: np.ndarray, x: str, what: str) -> np.ndarray | float:
    """A constant that broadcasts against tensor ``x`` as one value (returned as a float) or one value per
    channel (returned as a (C,) array); Unsupported for any other broadcast (per pixel, per batch...)."""
    v = np.asarray(value)
    if v.size == 1:
        return float(v.reshape(()))
    rank, c = ctx.rank(x), ctx.dims(x).c
    shape = tuple(int(s) for s in v.shape)
    while shape and shape[0] == 1 and len(shape) > (rank - 1):
        shape = shape[1:]
    channel_shape = (c,) if rank == 2 else (c, 1, 1)
    if shape == channel_shape or (rank == 4 and len(shape) == 3 and shape[0] == c and shape[1:] == (1, 1)):
        return v.reshape(c).astype(np.float32)
    raise Unsupported(f"{what} of shape {tuple(v.shape)} broadcasts over more than the channels of a "
                      f"{'x'.join(map(str, ctx.shape(x)))} tensor")


def tensor_inputs(ctx: Context) -> list[str]:
    """The node's inputs that are tensors computed by layers (constants left out)."""
    return [t for t in ctx.node.input if t and not ctx.is_const(t)]


def split_sizes(ctx: Context, x: str, axis: int) -> list[int]:
    """The sizes of a Split node's outputs along ``axis``: from shape inference, or with ``num_outputs`` by the
    operator's rule (ceil, the last one smaller; ONNX shape inference gives floor for each), the outputs' shapes
    corrected to it."""
    sizes = [ctx.shape(o)[axis] if o else 0 for o in ctx.node.output]
    k = int(ctx.attrs().get("num_outputs", 0))
    if k:
        dim = ctx.shape(x)[axis]
        chunk = -(-dim // k)
        sizes = [min(chunk, max(dim - chunk * i, 0)) for i in range(k)]
        for o, n in zip(ctx.node.output, sizes):
            if o:
                ctx.shapes[o] = tuple(n if j == axis % ctx.rank(x) else v for j, v in enumerate(ctx.shape(x)))
    return sizes


def operand(ctx: Context, tensor: str) -> str:
    """The layer computing an operand: a tensor's layer of its own rank, or a constant layer holding a constant
    (of rank 1 to 6 and finite: LayerLab weights are finite numbers)."""
    if not ctx.is_const(tensor):
        return ctx.ranked(tensor)
    value = np.asarray(ctx.consts[tensor], dtype=np.float32)
    if value.ndim > 6:
        raise Unsupported(f"a constant of shape {value.shape} (rank 1 to 6)")
    if not np.isfinite(value).all():
        raise Unsupported(f"constant {tensor!r} holds infinities or NaN (LayerLab weights are finite numbers)")
    value = value.reshape(value.shape or (1,))
    return ctx.add("constant", {"dimensions": Dims(*value.shape)}, [], weights={"value": value},
                   dims=Dims(*value.shape), name=f"{ctx.node.name or tensor}_const")
