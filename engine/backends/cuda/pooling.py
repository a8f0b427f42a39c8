"""One-pass CUDA pooling (``kernels/pool2d.cuh``): max or average, padding, either layout; every output reads its
window directly instead of one pass per kernel tap."""
from __future__ import annotations

from typing import Any

from engine.backends.cuda import runtime
from engine.backends.selection import Launched


def pool_kernel() -> Any:
    """The pooling kernel (compiled on first use)."""
    return runtime.element_wise(
        "raw T x, int32 nhwc, int32 C, int32 H, int32 W, int32 Ho, int32 Wo, int32 kh, int32 kw, int32 sh, int32 sw, "
        "int32 ph, int32 pw, int32 is_max, int32 include_pad", "T y", "pool2d.cuh", "layerlab_pool")


def pool2d(x: Any, out: Any, is_max: bool, kernel: tuple[int, int], stride: tuple[int, int],
           padding: tuple[int, int], count_include_pad: bool, nhwc: bool) -> Launched | None:
    """Max or average pooling of physical ``x`` into ``out`` (one dtype, C-contiguous ``x``); None otherwise."""
    if not (x.dtype == out.dtype and x.flags.c_contiguous and x.size < 2**31):
        return None
    (c, h, w), (ho, wo) = ((x.shape[3], x.shape[1], x.shape[2]), out.shape[1:3]) if nhwc else (x.shape[1:], out.shape[2:])
    pool_kernel()(x, int(nhwc), c, h, w, ho, wo, kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1],
                  int(is_max), int(count_include_pad), out)
    return Launched("pool")
