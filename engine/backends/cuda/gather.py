"""Convolutions of inputs with few channels rewritten for cuDNN's tensor cores by gathering taps into channels
(``kernels/gather_taps.cuh``): the space-to-depth form of a strided stem, and the patches of a 3x3 input layer as
a 1x1 convolution."""
from __future__ import annotations

from typing import Any

import cupy

from engine.backends.cuda import runtime
from engine.backends.selection import Launched
from engine.tensor import is_nhwc_memory

#: space-to-depth convolutions apply to fp16 NHWC convolutions of stride s >= 2 whose input has at most this many
#: channels once s x s pixels are folded into channels (an RGB stem at stride 2: 12, padded to 16)
S2D_MAX_CHANNELS = 16
#: patch convolutions (every kernel tap gathered into channels, then a 1x1 convolution) apply to fp16 NHWC
#: convolutions of an input of fewer than 8 channels whose C x R x S taps are at most this many (a 3x3 RGB input: 27)
PATCH_MAX_CHANNELS = 64


def _gather_kernel() -> Any:
    """z[n, i, j, (c, r, u)] = x[n, sh*i + r - ph, sw*j + u - pw, c]: the space-to-depth input (block = stride = s)
    or the patches of a convolution (block = kernel, step = stride), from NHWC x."""
    return runtime.element_wise(
        "raw T x, int32 C, int32 H, int32 W, int32 bh, int32 bw, int32 sh, int32 sw, int32 ph, int32 pw, int32 Hz, "
        "int32 Wz, int32 Cz", "T z", "gather_taps.cuh", "layerlab_gather_taps")


def _few_channel_fp16(x: Any, w: Any, out: Any, dilation: tuple[int, int], groups: int) -> bool:
    return (groups == 1 and tuple(dilation) == (1, 1) and x.dtype == w.dtype == out.dtype == cupy.float16
            and is_nhwc_memory(x) and is_nhwc_memory(out) and x.transpose(0, 2, 3, 1).flags.c_contiguous)


def s2d_applies(x: Any, w: Any, out: Any, stride: tuple[int, int], dilation: tuple[int, int], groups: int) -> bool:
    """Whether the convolution may run as a space-to-depth convolution (see :func:`conv_space_to_depth`)."""
    s = stride[0]
    return (stride[0] == stride[1] >= 2 and x.shape[1] * s * s <= S2D_MAX_CHANNELS and max(w.shape[2:]) > s
            and _few_channel_fp16(x, w, out, dilation, groups))


def patch_applies(x: Any, w: Any, out: Any, dilation: tuple[int, int], groups: int) -> bool:
    """Whether the convolution may run as a patch convolution (see :func:`conv_patches`)."""
    c, r, t = w.shape[1:]
    return (x.shape[1] < 8 and r * t > 1 and c * r * t <= PATCH_MAX_CHANNELS
            and _few_channel_fp16(x, w, out, dilation, groups))


def _padded_channels(n: int) -> int:
    return -(-n // 8) * 8


def s2d_weights(w: Any, s: int) -> Any:
    """Weights (K, C, R, S) of a stride-``s`` convolution as those of the stride-1 convolution over the
    space-to-depth input (K, Cz, ceil(R/s), ceil(S/s)), channel q = (c * s + r) * s + u holding tap (s*p + r, s*q' + u),
    Cz = C*s*s rounded up to 8 (zero channels), in NHWC memory, seen as logical K, C, R, S."""
    k, c, r, t = w.shape
    r2, t2 = -(-r // s), -(-t // s)
    cz = _padded_channels(c * s * s)
    wp = cupy.zeros((k, c, r2 * s, t2 * s), w.dtype)
    wp[:, :, :r, :t] = w
    w2 = wp.reshape(k, c, r2, s, t2, s).transpose(0, 1, 3, 5, 2, 4).reshape(k, c * s * s, r2, t2)
    wz = cupy.zeros((k, r2, t2, cz), w.dtype)
    wz[..., :c * s * s] = w2.transpose(0, 2, 3, 1)
    return wz.transpose(0, 3, 1, 2)


def patch_weights(w: Any) -> Any:
    """Weights (K, C, R, S) as those of a 1x1 convolution over the patches (K, Cz, 1, 1), channel
    q = (c * R + r) * S + u holding tap (r, u) of channel c, Cz = C*R*S rounded up to 8, seen as logical K, C, R, S."""
    k, c, r, t = w.shape
    wz = cupy.zeros((k, _padded_channels(c * r * t)), w.dtype)
    wz[:, :c * r * t] = w.reshape(k, c * r * t)
    return wz.reshape(k, 1, 1, -1).transpose(0, 3, 1, 2)


def gathered(x: Any, shape: tuple[int, int, int, int], block: tuple[int, int], step: tuple[int, int],
             padding: tuple[int, int], buffers: dict[str, Any] | None, key: str = "gathered_input") -> Any:
    """The input ``x`` (logical NCHW) gathered into NHWC shape ``shape``: every ``block`` of pixels, ``step`` apart,
    as the channels of one pixel (channel ``(c * block_h + r) * block_w + u`` holds tap ``(r, u)`` of channel ``c``;
    zeros past the input and in the padding channels), in a buffer kept in ``buffers[key]``; a logical NCHW view."""
    kept = buffers.get(key) if buffers is not None else None
    z = kept[1] if kept is not None and kept[0] == (shape, x.dtype) else None
    if z is None:
        z = cupy.empty(shape, x.dtype)
        if buffers is not None:
            buffers[key] = ((shape, x.dtype), z)
    n, c, h, wd = x.shape
    i32 = cupy.int32
    _gather_kernel()(x.transpose(0, 2, 3, 1), i32(c), i32(h), i32(wd), i32(block[0]), i32(block[1]), i32(step[0]),
                     i32(step[1]), i32(padding[0]), i32(padding[1]), i32(shape[1]), i32(shape[2]), i32(shape[3]), z)
    return z.transpose(0, 3, 1, 2)


def conv_space_to_depth(cudnn: Any, x: Any, w2: Any, b: Any | None, out: Any, stride: int, padding: tuple[int, int],
                        epilogue: str | None, coefs: dict[str, float],
                        buffers: dict[str, Any] | None = None) -> Launched | None:
    """A stride-``stride`` convolution of an input with few channels (an RGB stem) computed as a stride-1
    convolution over its space-to-depth form: each ``stride`` x ``stride`` block of pixels becomes one pixel of
    C*stride^2 channels (zero-padded to a multiple of 8), so cuDNN runs it on tensor cores without padding the
    channels of the whole input (resnet18's 7x7 stem at batch 64 on an H100: 0.20 ms instead of 0.37). ``cudnn``:
    the backend's :class:`~engine.backends.cuda.cudnn.CudnnConvolutions`; ``w2``: :func:`s2d_weights`; ``buffers``:
    where the transformed input is kept between calls (None: a new one). None when cuDNN declines."""
    if cudnn is None:
        return None
    k, cz, r2, t2 = w2.shape
    ho, wo = out.shape[2:]
    z = gathered(x, (x.shape[0], ho + r2 - 1, wo + t2 - 1, cz), (stride, stride), (stride, stride), padding, buffers)
    done = cudnn.conv(z, w2, b, out, (1, 1), (0, 0), (1, 1), epilogue, coefs)
    return Launched("s2d") if done else None


def conv_patches(cudnn: Any, x: Any, wp: Any, b: Any | None, out: Any, kernel: tuple[int, int],
                 stride: tuple[int, int], padding: tuple[int, int], epilogue: str | None, coefs: dict[str, float],
                 buffers: dict[str, Any] | None = None) -> Launched | None:
    """A convolution of an input with fewer than 8 channels computed as a 1x1 convolution over its patches: every
    output pixel's C x R x S input taps gathered into channels (zero-padded to a multiple of 8), so cuDNN runs a
    plain product on tensor cores instead of a convolution over channels padded from C to 8 (dncnn's 3 -> 64
    3x3 input layer at 1080p). ``wp``: :func:`patch_weights`. None when cuDNN declines."""
    if cudnn is None:
        return None
    ho, wo = out.shape[2:]
    z = gathered(x, (x.shape[0], ho, wo, wp.shape[1]), kernel, stride, padding, buffers)
    done = cudnn.conv(z, wp, b, out, (1, 1), (0, 0), (1, 1), epilogue, coefs)
    return Launched("patches") if done else None
