"""``out = x * act(g)`` with a per-image, per-channel gate ``g`` (``kernels/channel_scale.cu``): the multiply that
ends a squeeze-excitation block, with the gate's activation (hard-sigmoid, sigmoid) fused, in one pass instead of
an activation and a broadcasting multiply."""
from __future__ import annotations

from typing import Any

import cupy

from engine import epilogues
from engine.backends.cuda import runtime
from engine.backends.selection import Launched

_TYPES = {cupy.dtype(cupy.float16): "__half", cupy.dtype(cupy.float32): "float"}


def channel_scale(x: Any, g: Any, out: Any, nhwc: bool, epilogue: str | None,
                  coefs: dict[str, float]) -> Launched | None:
    """``out = x * act(g)``: physical ``x`` and ``out`` of one shape (N, H, W, C when ``nhwc``, else N, C, H, W),
    ``g`` the gate of N x C values (physical N, 1, 1, C or N, C, 1, 1), one precision (fp16 or fp32), C-contiguous.
    None for anything else (nothing written)."""
    code = epilogues.code(epilogue)
    if code is None or x.ndim != 4 or x.shape != out.shape or not (x.dtype == g.dtype == out.dtype in _TYPES):
        return None
    n, c = x.shape[0], x.shape[3] if nhwc else x.shape[1]
    hw = x.size // max(n * c, 1)
    if g.size != n * c or g.shape[0] != n or not (x.flags.c_contiguous and g.flags.c_contiguous
                                                   and out.flags.c_contiguous) or x.size >= 2**31:
        return None
    if x.size == 0:
        return Launched("channel_scale")
    inner = c if nhwc else hw
    vec = next((v for v in (4, 2) if inner % v == 0 and all(a.data.ptr % (v * a.dtype.itemsize) == 0
                                                            for a in (x, out))), 1)
    total = x.size // vec
    ca, cb = epilogues.coefficients(epilogue, coefs)
    i32 = cupy.int32
    runtime.function("channel_scale.cu", f"channel_scale<{_TYPES[x.dtype]},{vec},{int(nhwc)}>")(
        (runtime.blocks(total),), (runtime.THREADS,),
        (x, g, out, i32(c), i32(hw), i32(code), cupy.float32(ca), cupy.float32(cb), cupy.uint32(total)))
    return Launched("channel_scale")
