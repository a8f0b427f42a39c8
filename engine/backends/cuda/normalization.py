"""Normalizations over rows in one kernel each: layer normalization (``kernels/layer_norm.cu``: one warp per row of
normalized values, mean and variance in float32, scale, bias and the activation in the same pass, instead of the
eight or so passes of the array code) and the softmax of attention scores (``kernels/softmax.cu``: max, sum and
quotient in one kernel, written in the type of the next product)."""
from __future__ import annotations

from typing import Any

import cupy

from engine import epilogues
from engine.backends.cuda import runtime
from engine.backends.selection import Launched

_TYPES = {cupy.dtype(cupy.float16): "__half", cupy.dtype(cupy.float32): "float"}
#: values per row beyond which one warp per row would be slow (the array code serves those)
MAX_ROW = 16384
_WARPS = 8


def layer_norm(x: Any, scale: Any, bias: Any, out: Any, n: int, inner: int, epsilon: float, epilogue: str | None,
               coefs: dict[str, float]) -> Launched | None:
    """``out = act((x - mean) / sqrt(var + epsilon) * scale + bias)`` with mean and variance over the ``n`` values
    of every row of ``x`` seen as (outer, n, inner) (``inner`` 1: contiguous rows); ``x`` and ``out`` C-contiguous of
    one shape and dtype (fp16 or fp32), ``scale`` and ``bias`` contiguous vectors of ``n`` values of that dtype.
    None for anything else (nothing written)."""
    code = epilogues.code(epilogue)
    if code is None or not (x.dtype == out.dtype == scale.dtype == bias.dtype and x.dtype in _TYPES):
        return None
    if not (x.shape == out.shape and x.flags.c_contiguous and out.flags.c_contiguous and scale.flags.c_contiguous
            and bias.flags.c_contiguous and scale.size == bias.size == n):
        return None
    if n < 1 or inner < 1 or n > MAX_ROW or x.size % (n * inner) or x.size >= 2**62:
        return None
    rows = x.size // n
    if not rows:
        return Launched("layer_norm")
    ca, cb = epilogues.coefficients(epilogue, coefs)
    tail = (cupy.float32(epsilon), cupy.int32(code), cupy.float32(ca), cupy.float32(cb))
    if rows * 32 < runtime.sm_count() * 2048 and n >= 256:  # few long rows: a block each
        runtime.function("layer_norm.cu", f"layer_norm_block<{_TYPES[x.dtype]},{_WARPS}>")(
            (rows,), (32 * _WARPS,), (x, scale, bias, out, cupy.int32(n), cupy.int64(inner), *tail))
    else:
        runtime.function("layer_norm.cu", f"layer_norm<{_TYPES[x.dtype]}>")(
            (runtime.blocks(rows, _WARPS),), (32 * _WARPS,),
            (x, scale, bias, out, cupy.int32(n), cupy.int64(inner), cupy.int64(rows), *tail))
    return Launched("layer_norm")


def softmax_rows(x: Any, out: Any, bias: Any | None = None) -> Launched | None:
    """``out = softmax(x + bias)`` along the last axis: ``x`` C-contiguous float32, ``out`` C-contiguous of its shape,
    fp16 or fp32; ``bias`` (optional) C-contiguous fp16 or fp32 whose shape, leading ones aside, is the trailing
    axes of ``x`` (it repeats over the leading ones, as broadcasting does). None for anything else (nothing
    written)."""
    if not (x.dtype == cupy.float32 and out.dtype in _TYPES and x.shape == out.shape and x.ndim >= 1
            and x.flags.c_contiguous and out.flags.c_contiguous):
        return None
    n = x.shape[-1]
    if n < 1 or n > MAX_ROW:
        return None
    bias_rows = 0
    if bias is not None:
        shape = tuple(bias.shape)
        while shape and shape[0] == 1 and len(shape) > 1:
            shape = shape[1:]
        if not (bias.dtype in _TYPES and bias.flags.c_contiguous and len(shape) <= x.ndim
                and shape == tuple(x.shape[x.ndim - len(shape):]) and shape[-1] == n):
            return None
        bias_rows = bias.size // n
    rows = x.size // n
    if rows:
        b = bias if bias is not None else out  # not read without a bias (bias_rows 0)
        runtime.function("softmax.cu", f"softmax_rows<{_TYPES[out.dtype]},{_TYPES[b.dtype]}>")(
            (runtime.blocks(rows, _WARPS),), (32 * _WARPS,),
            (x, out, cupy.int32(n), cupy.int64(rows), b, cupy.int64(bias_rows)))
    return Launched("softmax_rows")
