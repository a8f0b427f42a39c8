"""Depthwise convolutions (``kernels/depthwise.cu``): one filter per channel (groups == input channels == output
channels), R x S up to 7 x 7, stride 1 or 2 on each axis, any padding, dilation 1; fp16 or fp32, NHWC or NCHW, bias
and the fused epilogue, float32 accumulation.

cuDNN's heuristics send these to a grouped direct kernel that spends most of a mobile network's time (H200,
mobilenet_v2 at batch 32: 3.6 ms of 8.0); here each thread computes a strip of neighbouring output pixels of one
row, reading every input value of their windows once per filter row, over 4 channels at a time in NHWC (8-byte
fp16, 16-byte fp32 accesses)."""
from __future__ import annotations

from typing import Any

import cupy

from engine import epilogues
from engine.backends.cuda import runtime
from engine.backends.selection import Launched
from engine.tensor import is_nhwc_memory

#: the largest filter (rows and columns)
MAX_KERNEL = 7

#: threads per block (small blocks: the last layers of a network at batch 1 have few outputs)
THREADS = 128

_TYPES = {cupy.dtype(cupy.float16): "__half", cupy.dtype(cupy.float32): "float"}


def _layout(x: Any, out: Any) -> str | None:
    """"nhwc" or "nchw" where both logical NCHW views are dense in that memory layout, else None."""
    if is_nhwc_memory(x) and is_nhwc_memory(out):
        return "nhwc" if x.transpose(0, 2, 3, 1).flags.c_contiguous and out.transpose(0, 2, 3, 1).flags.c_contiguous \
            else None
    return "nchw" if x.flags.c_contiguous and out.flags.c_contiguous else None


def applies(x: Any, w: Any, out: Any, stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int],
            groups: int, epilogue: str | None) -> bool:
    """Whether :func:`conv_depthwise` covers this convolution (logical NCHW views, weights (K, C/groups, R, S))."""
    k, per_group, r, s = w.shape
    return (groups == x.shape[1] == k and per_group == 1 and r <= MAX_KERNEL and s <= MAX_KERNEL
            and tuple(dilation) == (1, 1) and stride[0] in (1, 2) and stride[1] in (1, 2)
            and min(padding) >= 0 and epilogues.code(epilogue) is not None
            and x.dtype == w.dtype == out.dtype and x.dtype in _TYPES
            and x.size < 2**31 and out.size < 2**31 and _layout(x, out) is not None)


def weights(w: Any) -> Any:
    """Weights (logical K, 1, R, S) as the float32 (R, S, K) array the kernels read."""
    return cupy.ascontiguousarray(w[:, 0].transpose(1, 2, 0), dtype=cupy.float32)


def _vector(c: int, *arrays: Any) -> int:
    """Channels per thread in NHWC: 4, 2 or 1, as the channel count and the arrays' alignment allow."""
    for vec in (4, 2):
        if c % vec == 0 and all(a.data.ptr % (vec * a.dtype.itemsize) == 0 for a in arrays):
            return vec
    return 1


def _strip(threads_per_pixel: int, rows: int, wo: int) -> int:
    """Output pixels per thread: the largest of 4, 2, 1 that still gives every SM a few blocks."""
    want = runtime.sm_count() * 2 * THREADS
    for tw in (4, 2):
        if threads_per_pixel * rows * -(-wo // tw) >= want:
            return tw
    return 1


def conv_depthwise(x: Any, wd: Any, bias: Any | None, out: Any, kernel: tuple[int, int], stride: tuple[int, int],
                   padding: tuple[int, int], epilogue: str | None, coefs: dict[str, float]) -> Launched | None:
    """``act(depthwise_conv(x) + bias)`` into ``out`` (logical NCHW views of dense NHWC or NCHW arrays), ``wd``
    from :func:`weights`, ``bias`` of the arrays' precision or None. None where the kernel does not serve the case
    (nothing written)."""
    layout, code = _layout(x, out), epilogues.code(epilogue)
    if layout is None or code is None or (bias is not None and not (bias.dtype == x.dtype and bias.flags.c_contiguous)):
        return None
    n, c, h, w = x.shape
    ho, wo = out.shape[2:]
    (r, s), (sh, sw), (ph, pw) = kernel, stride, padding
    ca, cb = epilogues.coefficients(epilogue, coefs)
    t = _TYPES[x.dtype]
    i32 = cupy.int32
    if layout == "nhwc":
        xp, op = x.transpose(0, 2, 3, 1), out.transpose(0, 2, 3, 1)
        vec = _vector(c, xp, op)
        tw = _strip(c // vec, n * ho, wo)
        name = f"dw_nhwc<{t},{vec},{s},{sw},{tw}>"
        total = n * ho * -(-wo // tw) * (c // vec)
    else:
        xp, op = x, out
        tw = _strip(1, n * c * ho, wo)
        name = f"dw_nchw<{t},{s},{sw},{tw}>"
        total = n * c * ho * -(-wo // tw)
    runtime.function("depthwise.cu", name)(
        (runtime.blocks(total, THREADS),), (THREADS,),
        (xp, wd, xp if bias is None else bias, i32(bias is not None), op, i32(h), i32(w), i32(c), i32(ho), i32(wo),
         i32(r), i32(sh), i32(ph), i32(pw), i32(code), cupy.float32(ca), cupy.float32(cb), cupy.uint32(total)))
    return Launched("depthwise")
