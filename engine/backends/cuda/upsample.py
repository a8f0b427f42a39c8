"""Upsampling by integer factors (nearest, or bilinear with half-pixel centres), optionally followed by the channels
of a skip tensor (the U-Net decoder step), in one pass over memory: in NHWC with channel counts that are multiples of
8 (fp16) or 4 (fp32), every thread moves 16 bytes (``upsample_nhwc.cu``); in NCHW one thread per output value, a
block on a row of one channel plane, without divisions (``upsample_nchw.cu``: unet 512's three fp32 steps took
0.39 ms as the element-wise kernel, 12% of the run); otherwise one value per thread with its indices divided out,
in either layout (``upsample_scalar.cuh``)."""
from __future__ import annotations

from typing import Any

import cupy

from engine.backends.cuda import runtime
from engine.backends.selection import Launched


def scalar_kernel() -> Any:
    """The element-wise kernel (any layout and channel count; the slowest of the three)."""
    return runtime.element_wise(
        "raw T x, raw T skip, int32 nhwc, int32 c0, int32 c1, int32 H, int32 W, int32 Ho, int32 Wo, int32 fh, "
        "int32 fw, int32 bilinear", "T y", "upsample_scalar.cuh", "layerlab_upcat", ("upsample.cuh",))


def upscale_concat(x: Any, skip: Any | None, out: Any, factor: tuple[int, int], bilinear: bool,
                   nhwc: bool) -> Launched | None:
    """``out`` = ``x`` upsampled, then the channels of ``skip`` (None: upsampling alone); physical C-contiguous
    arrays of one dtype and layout, the skip (and ``out``) of the upsampled size or within a factor of it
    (edge values repeat, extra rows and columns are cropped). None for a case it does not cover."""
    arrays = [a for a in (x, skip, out) if a is not None]
    if not all(a.flags.c_contiguous and a.dtype == out.dtype for a in arrays) or out.size >= 2**31:
        return None
    if out.dtype not in (cupy.float16, cupy.float32):
        return None
    if nhwc:
        n, h, w, c0 = x.shape
        ho, wo, ct = out.shape[1:]
    else:
        n, c0, h, w = x.shape
        ct, ho, wo = out.shape[1:]
    c1 = ct - c0
    if c1 != (0 if skip is None else (skip.shape[3] if nhwc else skip.shape[1])):
        return None
    fh, fw = factor
    skip_arr = skip if skip is not None else out  # never read when c1 == 0
    i32 = cupy.int32
    lanes = {cupy.float16: (8, "uint4"), cupy.float32: (4, "float4")}[out.dtype.type]
    if nhwc and c0 % lanes[0] == 0 and c1 % lanes[0] == 0 and runtime.aligned(*arrays):
        total = out.size // lanes[0]
        runtime.function("upsample_nhwc.cu", f"upcat_nhwc_vec<{lanes[1]}>")(
            (runtime.blocks(total),), (runtime.THREADS,),
            (x, skip_arr, out, i32(h), i32(w), i32(c0 // lanes[0]), i32(c1 // lanes[0]), i32(ho), i32(wo), i32(fh),
             i32(fw), i32(int(bilinear)), cupy.uint32(total)))
        return Launched("upsample_nhwc")
    if not nhwc and n * ct <= 65535 and ho <= 65535:  # (the grid's y and z limits)
        threads = min(runtime.THREADS, 32 * -(-wo // 32))
        kernel = f"upcat_nchw<{'float' if out.dtype == cupy.float32 else '__half'}>"
        runtime.function("upsample_nchw.cu", kernel)(
            ((wo + threads - 1) // threads, ho, n * ct), (threads,),
            (x, skip_arr, out, i32(h), i32(w), i32(c0), i32(c1), i32(ho), i32(wo), i32(fh), i32(fw), i32(int(bilinear))))
        return Launched("upsample_nchw")
    scalar_kernel()(x, skip_arr, int(nhwc), c0, c1, h, w, ho, wo, fh, fw, int(bilinear), out)
    return Launched("upsample_scalar")
