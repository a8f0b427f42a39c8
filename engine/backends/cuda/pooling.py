"""CUDA pooling: windowed pooling in one pass (``kernels/pool2d.cuh``: max or average, padding, either layout; every
output reads its window directly instead of one pass per kernel tap), and global pooling as a reduction over many
blocks per image (``kernels/global_pool.cu``): one thread per output reading the whole image took 47 us per
squeeze-excitation pool of efficientnet_b0 at batch 1 (H200)."""
from __future__ import annotations

from typing import Any

import cupy

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


_TYPES = {cupy.dtype(cupy.float16): "__half", cupy.dtype(cupy.float32): "float"}

#: the float32 partial results of split reductions, per device and size; kept for the process (a captured CUDA
#: graph holds their addresses)
_PARTIALS: dict[tuple[int, int], Any] = {}


def _partials(size: int) -> Any:
    key = (cupy.cuda.Device().id, size)
    buf = _PARTIALS.get(key)
    if buf is None:
        buf = _PARTIALS[key] = cupy.empty(size, cupy.float32)
    return buf


def global_pool(x: Any, out: Any, is_max: bool, nhwc: bool) -> Launched | None:
    """Max or average over every pixel of each channel of each image: physical C-contiguous ``x`` (N, H, W, C when
    ``nhwc``, else N, C, H, W) into ``out`` of N x C values (physical N, 1, 1, C or N, C, 1, 1), fp16 or fp32,
    float32 accumulation. None for anything else."""
    if x.ndim != 4 or not (x.dtype == out.dtype and x.dtype in _TYPES and x.flags.c_contiguous
                           and out.flags.c_contiguous) or x.size >= 2**31:
        return None
    n, c = x.shape[0], x.shape[3] if nhwc else x.shape[1]
    hw = x.size // max(n * c, 1)
    if out.size != n * c or hw == 0 or n * c == 0:
        return None
    t, mx, scale = _TYPES[x.dtype], int(is_max), cupy.float32(1.0 / hw)
    i32 = cupy.int32
    sms = runtime.sm_count()
    if nhwc:
        tiles = -(-c // 32)
        splits = max(1, min(-(-2 * sms // (tiles * n)), -(-hw // 64)))
    else:
        splits = max(1, min(-(-32 * sms // (n * c)), -(-hw // 256)))
    chunk = -(-hw // splits)
    splits = -(-hw // chunk)
    part = _partials(n * c * splits) if splits > 1 else out
    if nhwc:
        runtime.function("global_pool.cu", f"gpool_nhwc<{t},{mx}>")(
            (tiles, n, splits), (32, 8), (x, part, out, i32(hw), i32(c), i32(splits), i32(chunk), scale))
    else:
        warps = n * c * splits
        runtime.function("global_pool.cu", f"gpool_nchw<{t},{mx}>")(
            (runtime.blocks(warps * 32),), (runtime.THREADS,),
            (x, part, out, i32(n * c), i32(hw), i32(splits), i32(chunk), scale))
    if splits > 1:
        runtime.function("global_pool.cu", f"gpool_finish<{t},{mx}>")(
            (runtime.blocks(n * c),), (runtime.THREADS,),
            (part, out, i32(n * c), i32(c), i32(splits), i32(nhwc), scale))
    return Launched("global_pool")
