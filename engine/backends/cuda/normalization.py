"""Layer normalization in one kernel (``kernels/layer_norm.cu``): one warp per row of normalized values, mean and
variance in float32, scale, bias and the activation applied in the same pass, instead of the eight or so passes of
the array code (convert, mean, subtract, square, mean, root, divide, scale, shift)."""
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
    if rows:
        ca, cb = epilogues.coefficients(epilogue, coefs)
        runtime.function("layer_norm.cu", f"layer_norm<{_TYPES[x.dtype]}>")(
            (runtime.blocks(rows, _WARPS),), (32 * _WARPS,),
            (x, scale, bias, out, cupy.int32(n), cupy.int64(inner), cupy.int64(rows), cupy.float32(epsilon),
             cupy.int32(code), cupy.float32(ca), cupy.float32(cb)))
    return Launched("layer_norm")
