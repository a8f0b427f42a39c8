"""Our convolutions for the layers cuDNN serves badly, on CUDA cores (fp16 NHWC, ``conv_direct.cu`` and
``conv_pointwise.cu``):

- a direct convolution for inputs of few channels (an RGB image): one thread computes 8 output channels of one
  pixel from weights held in shared memory, reading the unpadded input. cuDNN needs the channels padded to 8 for its
  tensor-core kernels, and even then it spends ~10x the time on such a layer (H200: 0.16 ms for 3 -> 32 channels
  at 512x512);
- a 1x1 convolution to few output channels (a network's last layer, 32 -> 3 say): one thread computes every output
  channel of one pixel, reading its input channels 8 at a time, weights in shared memory. cuDNN pads the outputs to
  8 channels and copies the result back."""
from __future__ import annotations

from typing import Any

import cupy

from engine.backends.cuda import runtime
from engine.backends.selection import Launched
from engine.epilogues import code, single_coefficient

#: fused epilogues our convolutions apply themselves (``ActivationDesc.epilogue`` -> the kernels' ``act``): those of
#: at most one coefficient (the kernels take one, ``alpha``), numbered as in ``engine.epilogues``
EPILOGUES = {None: 0, **{name: code(name) for name in sorted(single_coefficient())}}

#: most input channels, and most weight values (shared memory, float32), of the direct convolution
DIRECT_MAX_CHANNELS = 4
DIRECT_MAX_WEIGHTS = 12288

#: most output channels, and most weight values (shared memory, float32), of the 1x1 few-output convolution
POINTWISE_MAX_OUTPUTS = 7
POINTWISE_MAX_WEIGHTS = 8192


def direct_applies(x: Any, w: Any, out: Any, groups: int, act: str | None) -> bool:
    """Whether :func:`conv_direct` covers this convolution (fp16, few input channels, a multiple of 8 outputs)."""
    k, c, kh, kw = w.shape
    return (groups == 1 and act in EPILOGUES and x.dtype == out.dtype == cupy.float16
            and c <= DIRECT_MAX_CHANNELS and k % 8 == 0 and k * c * kh * kw <= DIRECT_MAX_WEIGHTS and out.size < 2**31)


def direct_weights(w: Any) -> Any:
    """Weights (logical K, C, R, S) as the float32 (R, S, C, K) array of :func:`conv_direct`."""
    return cupy.ascontiguousarray(w.transpose(2, 3, 1, 0), dtype=cupy.float32)


def conv_direct(x: Any, wd: Any, bias: Any | None, out: Any, kernel: tuple[int, int], stride: tuple[int, int],
                padding: tuple[int, int], dilation: tuple[int, int], act: str | None, alpha: float) -> Launched | None:
    """``act(conv(x) + bias)`` into ``out``: physical fp16 NHWC ``x`` (N, H, W, C) and ``out`` (N, Ho, Wo, K),
    ``wd`` from :func:`direct_weights`, ``bias`` fp16 or None. None when the arrays are not contiguous and
    aligned."""
    if not (x.flags.c_contiguous and out.flags.c_contiguous and runtime.aligned(out) and runtime.fp16_bias(bias)):
        return None
    n, h, w, c = x.shape
    ho, wo, k = out.shape[1:]
    total = n * ho * wo * (k // 8)
    i32 = cupy.int32
    runtime.function("conv_direct.cu", "conv_direct_h8")(
        (runtime.blocks(total),), (runtime.THREADS,),
        (x, wd, x if bias is None else bias, i32(bias is not None), out, i32(h), i32(w), i32(c), i32(ho), i32(wo),
         i32(k), i32(kernel[0]), i32(kernel[1]), i32(stride[0]), i32(stride[1]), i32(padding[0]), i32(padding[1]),
         i32(dilation[0]), i32(dilation[1]), i32(EPILOGUES[act]), cupy.float32(alpha), cupy.uint32(total)),
        shared_mem=wd.size * 4)
    return Launched("direct")


def pointwise_applies(x: Any, w: Any, out: Any, stride: tuple[int, int], padding: tuple[int, int],
                      dilation: tuple[int, int], groups: int, act: str | None) -> bool:
    """Whether :func:`conv_pointwise` covers this convolution (fp16, 1x1 of stride 1 and no padding, at most
    7 output channels, input channels a multiple of 8)."""
    k, c, kh, kw = w.shape
    return (groups == 1 and (kh, kw) == (1, 1) and tuple(stride) == tuple(dilation) == (1, 1)
            and tuple(padding) == (0, 0) and act in EPILOGUES and x.dtype == out.dtype == cupy.float16
            and k <= POINTWISE_MAX_OUTPUTS and c % 8 == 0 and c * k <= POINTWISE_MAX_WEIGHTS and out.size < 2**31)


def pointwise_weights(w: Any) -> Any:
    """Weights (logical K, C, 1, 1) as the float32 (C, K) matrix of :func:`conv_pointwise`."""
    return cupy.ascontiguousarray(w[:, :, 0, 0].T, dtype=cupy.float32)


def conv_pointwise(x: Any, wp: Any, bias: Any | None, out: Any, act: str | None, alpha: float) -> Launched | None:
    """``act(x @ wp + bias)`` per pixel: physical fp16 NHWC ``x`` (N, H, W, C) and ``out`` (N, H, W, K), ``wp``
    from :func:`pointwise_weights`, ``bias`` fp16 or None. None when the arrays are not contiguous and aligned."""
    if not (x.flags.c_contiguous and out.flags.c_contiguous and runtime.aligned(x) and runtime.fp16_bias(bias)):
        return None
    c, k = wp.shape
    pixels = x.size // c
    i32 = cupy.int32
    runtime.function("conv_pointwise.cu", "conv1x1_few")(
        (runtime.blocks(pixels),), (runtime.THREADS,),
        (x, wp, x if bias is None else bias, i32(bias is not None), out, i32(c), i32(k), i32(EPILOGUES[act]),
         cupy.float32(alpha), cupy.uint32(pixels)),
        shared_mem=wp.size * 4)
    return Launched("pointwise")
