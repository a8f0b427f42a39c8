"""Kernels of the CuPy backend, by operation name (``Backend.kernel``): the CUDA kernels of
:mod:`engine.backends.gpu_kernels`, cuDNN convolutions (:mod:`engine.backends.cudnn_conv`) and the one-pass
pooling kernel below, each compiled on first use. Imported only by the CuPy backend's kernel lookup."""
from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import cupy

from engine.backends import cudnn_conv, gpu_kernels
from engine.backends.base import Backend, derived
from engine.tensor import is_nhwc_memory

Kernel = Callable[..., bool]


def _elapsed_ms(fn: Callable[[], bool], repeat: int = 3) -> float | None:
    """GPU time of ``fn`` (after one warm-up call) on the current stream; None when it declined (returned False)."""
    if not fn():
        return None
    stream = cupy.cuda.get_current_stream()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    for _ in range(repeat):
        fn()
    end.record(stream)
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / repeat


#: our kernel or cuDNN, per convolution configuration, for the whole process (see ``cudnn_conv._TUNED``)
_CHOICES: dict[tuple[Any, ...], str] = {}
_CHOOSING = threading.Lock()


def _capturing() -> bool:
    try:
        return bool(cupy.cuda.get_current_stream().is_capturing())
    except Exception:  # an old CuPy without the query: assume the worst, do not time
        return True


def conv2d(backend: Backend) -> Kernel:
    def run(x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int], padding: tuple[int, int],
            dilation: tuple[int, int], groups: int, epilogue: str | None, coefs: dict[str, float],
            cache: dict[str, Any] | None = None) -> bool:
        if x.dtype not in (cupy.float16, cupy.float32) or not x.dtype == w.dtype == out.dtype:
            return False  # one precision throughout (mixed: the layer's generic path, which casts)
        cudnn = backend.cudnn  # type: ignore[attr-defined]
        if x.dtype == cupy.float32:  # our own kernels are fp16; fp32 goes to cuDNN (strict unless TF32 is allowed)
            return cudnn is not None and cudnn.conv(x, w, b, out, stride, padding, dilation, epilogue, coefs,
                                                    tf32=backend.allow_tf32)

        def with_cudnn() -> bool:
            return cudnn is not None and cudnn.conv(x, w, b, out, stride, padding, dilation, epilogue, coefs)

        own: Callable[[], bool] | None = None
        if gpu_kernels.direct_applies(x, w, out, groups, epilogue) and is_nhwc_memory(x) and is_nhwc_memory(out):
            wd = derived(cache, "direct", w, lambda: gpu_kernels.direct_weights(w))

            def own() -> bool:
                return gpu_kernels.conv_direct(x.transpose(0, 2, 3, 1), wd, b, out.transpose(0, 2, 3, 1), w.shape[2:],
                                               stride, padding, dilation, epilogue, float(coefs.get("alpha", 0.0)))
        elif (gpu_kernels.pointwise_applies(x, w, out, stride, padding, dilation, groups, epilogue) and is_nhwc_memory(x)
                and is_nhwc_memory(out)):
            wp = derived(cache, "pointwise", w, lambda: gpu_kernels.pointwise_weights(w))

            def own() -> bool:
                return gpu_kernels.conv_pointwise(x.transpose(0, 2, 3, 1), wp, b, out.transpose(0, 2, 3, 1), epilogue,
                                                  float(coefs.get("alpha", 0.0)))
        if own is None:
            return with_cudnn()
        # our kernel or cuDNN, whichever is faster for this configuration (ours win on small batches, cuDNN on large
        # ones): timed once per process on the real buffers, outside CUDA-graph capture; with autotuning off or for a small
        # convolution (cudnn_conv.worth_tuning), ours
        key = (x.shape, x.strides, str(x.dtype), w.shape, out.shape, out.strides, stride, padding, dilation, epilogue,
               b is None)
        choice = _CHOICES.get(key)
        if choice is None and cudnn is not None and cudnn_conv.worth_tuning(w, out) and not _capturing():
            with _CHOOSING:
                choice = _CHOICES.get(key)
                if choice is None:
                    mine, theirs = _elapsed_ms(own), _elapsed_ms(with_cudnn)
                    choice = _CHOICES[key] = "cudnn" if theirs is not None and (mine is None or theirs < mine) else "own"
        if choice != "cudnn" and own():
            return True
        return with_cudnn()
    return run


def upsample(backend: Backend) -> Kernel:
    def run(x: Any, out: Any, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> bool:
        return gpu_kernels.upscale_concat(x, None, out, factor, bilinear, nhwc)
    return run


def upsample_concat(backend: Backend) -> Kernel:
    return gpu_kernels.upscale_concat


_POOL_SOURCE = r"""
int t = (int)i, n, c, oh, ow;
if (nhwc) { c = t % C; t /= C; ow = t % Wo; t /= Wo; oh = t % Ho; n = t / Ho; }
else { ow = t % Wo; t /= Wo; oh = t % Ho; t /= Ho; c = t % C; n = t / C; }
float acc = is_max ? __int_as_float(0xff800000) : 0.0f;  // -inf
int count = 0;
for (int a = 0; a < kh; ++a) {
    int h = oh * sh - ph + a;
    if (h < 0 || h >= H) continue;
    for (int b = 0; b < kw; ++b) {
        int w = ow * sw - pw + b;
        if (w < 0 || w >= W) continue;
        float v = (float)x[nhwc ? (((n * H + h) * W + w) * C + c) : (((n * C + c) * H + h) * W + w)];
        acc = is_max ? ((v > acc || v != v) ? v : acc) : acc + v;  // NaN propagates like numpy.maximum
        ++count;
    }
}
if (!is_max) acc /= (float)(include_pad ? kh * kw : count);
y = (T)acc;
"""


@functools.cache
def pool_kernel() -> Any:
    """One-pass CUDA pooling (max or average, padding, either layout), compiled on first use: every output
    reads its window directly instead of one pass per kernel tap."""
    return cupy.ElementwiseKernel(
        "raw T x, int32 nhwc, int32 C, int32 H, int32 W, int32 Ho, int32 Wo, int32 kh, int32 kw, int32 sh, int32 sw, "
        "int32 ph, int32 pw, int32 is_max, int32 include_pad", "T y", _POOL_SOURCE, "layerlab_pool")


def pool2d(backend: Backend) -> Kernel:
    def run(x: Any, out: Any, is_max: bool, kernel: tuple[int, int], stride: tuple[int, int],
            padding: tuple[int, int], count_include_pad: bool, nhwc: bool) -> bool:
        if not (x.dtype == out.dtype and x.flags.c_contiguous and x.size < 2**31):
            return False
        (c, h, w), (ho, wo) = ((x.shape[3], x.shape[1], x.shape[2]), out.shape[1:3]) if nhwc else (x.shape[1:], out.shape[2:])
        pool_kernel()(x, int(nhwc), c, h, w, ho, wo, kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1],
                      int(is_max), int(count_include_pad), out)
        return True
    return run
