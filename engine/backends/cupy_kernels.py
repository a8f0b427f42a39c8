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


#: space-to-depth convolutions apply to fp16 NHWC convolutions of stride s >= 2 whose input has at most this many
#: channels once s x s pixels are folded into channels (an RGB stem at stride 2: 12, padded to 16)
S2D_MAX_CHANNELS = 16
#: patch convolutions (every kernel tap gathered into channels, then a 1x1 convolution) apply to fp16 NHWC
#: convolutions of an input of fewer than 8 channels whose C x R x S taps are at most this many (a 3x3 RGB input: 27)
PATCH_MAX_CHANNELS = 64

_GATHER_SOURCE = r"""
int t = (int)i;
int q = t % Cz; t /= Cz;
int j = t % Wz; t /= Wz;
int r0 = t % Hz; int n = t / Hz;
T v = (T)0.0f;
if (q < C * bh * bw) {
    int c = q / (bh * bw), r = (q / bw) % bh, u = q % bw;
    int h = sh * r0 + r - ph, w = sw * j + u - pw;
    if (h >= 0 && h < H && w >= 0 && w < W) v = x[((long long)(n * H + h) * W + w) * C + c];
}
z = v;
"""


@functools.cache
def _gather_kernel() -> Any:
    """z[n, i, j, (c, r, u)] = x[n, sh*i + r - ph, sw*j + u - pw, c] for the bh x bw block of taps (r, u), zero
    outside the image and in the channels past C*bh*bw: the space-to-depth input (block = stride = s) or the
    patches of a convolution (block = kernel, step = stride), from NHWC x."""
    return cupy.ElementwiseKernel(
        "raw T x, int32 C, int32 H, int32 W, int32 bh, int32 bw, int32 sh, int32 sw, int32 ph, int32 pw, int32 Hz, "
        "int32 Wz, int32 Cz", "T z", _GATHER_SOURCE, "layerlab_gather_taps")


def _few_channel_fp16(x: Any, w: Any, out: Any, dilation: tuple[int, int], groups: int) -> bool:
    return (groups == 1 and dilation == (1, 1) and x.dtype == w.dtype == out.dtype == cupy.float16
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


def _gathered(x: Any, shape: tuple[int, int, int, int], block: tuple[int, int], step: tuple[int, int],
              padding: tuple[int, int], buffers: dict[str, Any] | None) -> Any:
    """The gathered input (``_gather_kernel``) of NHWC shape ``shape``, in a buffer kept in ``buffers``."""
    kept = buffers.get("gathered_input") if buffers is not None else None
    z = kept[1] if kept is not None and kept[0] == (shape, x.dtype) else None
    if z is None:
        z = cupy.empty(shape, x.dtype)
        if buffers is not None:
            buffers["gathered_input"] = ((shape, x.dtype), z)
    n, c, h, wd = x.shape
    i32 = cupy.int32
    _gather_kernel()(x.transpose(0, 2, 3, 1), i32(c), i32(h), i32(wd), i32(block[0]), i32(block[1]), i32(step[0]),
                     i32(step[1]), i32(padding[0]), i32(padding[1]), i32(shape[1]), i32(shape[2]), i32(shape[3]), z)
    return z.transpose(0, 3, 1, 2)


def conv_space_to_depth(cudnn: Any, x: Any, w2: Any, b: Any | None, out: Any, stride: int, padding: tuple[int, int],
                        epilogue: str | None, coefs: dict[str, float], buffers: dict[str, Any] | None = None) -> bool:
    """A stride-``stride`` convolution of an input with few channels (an RGB stem) computed as a stride-1
    convolution over its space-to-depth form: each ``stride`` x ``stride`` block of pixels becomes one pixel of
    C*stride^2 channels (zero-padded to a multiple of 8), so cuDNN runs it on tensor cores without padding the
    channels of the whole input (resnet18's 7x7 stem at batch 64 on an H100: 0.20 ms instead of 0.37). ``w2``:
    :func:`s2d_weights`; ``buffers``: where the transformed input is kept between calls (None: a new one).
    False when cuDNN declines."""
    if cudnn is None:
        return False
    k, cz, r2, t2 = w2.shape
    ho, wo = out.shape[2:]
    z = _gathered(x, (x.shape[0], ho + r2 - 1, wo + t2 - 1, cz), (stride, stride), (stride, stride), padding, buffers)
    return bool(cudnn.conv(z, w2, b, out, (1, 1), (0, 0), (1, 1), epilogue, coefs))


def conv_patches(cudnn: Any, x: Any, wp: Any, b: Any | None, out: Any, kernel: tuple[int, int],
                 stride: tuple[int, int], padding: tuple[int, int], epilogue: str | None, coefs: dict[str, float],
                 buffers: dict[str, Any] | None = None) -> bool:
    """A convolution of an input with fewer than 8 channels computed as a 1x1 convolution over its patches: every
    output pixel's C x R x S input taps gathered into channels (zero-padded to a multiple of 8), so cuDNN runs a
    plain product on tensor cores instead of a convolution over channels padded from C to 8 (dncnn's 3 -> 64
    3x3 input layer at 1080p). ``wp``: :func:`patch_weights`. False when cuDNN declines."""
    if cudnn is None:
        return False
    ho, wo = out.shape[2:]
    z = _gathered(x, (x.shape[0], ho, wo, wp.shape[1]), kernel, stride, padding, buffers)
    return bool(cudnn.conv(z, wp, b, out, (1, 1), (0, 0), (1, 1), epilogue, coefs))


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

        # candidates besides cuDNN as it is: our kernels, and the space-to-depth form of a strided few-channel stem
        others: dict[str, Callable[[], bool]] = {}
        if gpu_kernels.direct_applies(x, w, out, groups, epilogue) and is_nhwc_memory(x) and is_nhwc_memory(out):
            wd = derived(cache, "direct", w, lambda: gpu_kernels.direct_weights(w))
            others["own"] = lambda: gpu_kernels.conv_direct(
                x.transpose(0, 2, 3, 1), wd, b, out.transpose(0, 2, 3, 1), w.shape[2:], stride, padding, dilation,
                epilogue, float(coefs.get("alpha", 0.0)))
        elif (gpu_kernels.pointwise_applies(x, w, out, stride, padding, dilation, groups, epilogue) and is_nhwc_memory(x)
                and is_nhwc_memory(out)):
            wp = derived(cache, "pointwise", w, lambda: gpu_kernels.pointwise_weights(w))
            others["own"] = lambda: gpu_kernels.conv_pointwise(
                x.transpose(0, 2, 3, 1), wp, b, out.transpose(0, 2, 3, 1), epilogue, float(coefs.get("alpha", 0.0)))
        if (gpu_kernels.conv64_applies(x, w, out, stride, padding, dilation, groups, epilogue) and is_nhwc_memory(x)
                and is_nhwc_memory(out)):
            w64 = derived(cache, "conv64", w, lambda: gpu_kernels.conv64_weights(w))
            others["conv64"] = lambda: gpu_kernels.conv3x3_c64(
                x.transpose(0, 2, 3, 1), w64, b, out.transpose(0, 2, 3, 1), epilogue, float(coefs.get("alpha", 0.0)))
        if (gpu_kernels.patch64_applies(x, w, out, stride, padding, dilation, groups, epilogue) and is_nhwc_memory(x)
                and is_nhwc_memory(out)):
            wq = derived(cache, "patch64", w, lambda: gpu_kernels.patch64_weights(w))
            others["patch64"] = lambda: gpu_kernels.conv3x3_patch64(
                x.transpose(0, 2, 3, 1), wq, b, out.transpose(0, 2, 3, 1), epilogue, float(coefs.get("alpha", 0.0)))
        if (gpu_kernels.out64_applies(x, w, out, stride, padding, dilation, groups, epilogue) and is_nhwc_memory(x)
                and is_nhwc_memory(out)):
            wo = derived(cache, "out64", w, lambda: gpu_kernels.out64_weights(w))
            others["out64"] = lambda: gpu_kernels.conv3x3_out64(
                x.transpose(0, 2, 3, 1), wo, b, out.transpose(0, 2, 3, 1), epilogue, float(coefs.get("alpha", 0.0)))
        if cudnn is not None and s2d_applies(x, w, out, stride, dilation, groups):
            w2 = derived(cache, "s2d", w, lambda: s2d_weights(w, stride[0]))
            others["s2d"] = lambda: conv_space_to_depth(cudnn, x, w2, b, out, stride[0], padding, epilogue, coefs, cache)
        if cudnn is not None and patch_applies(x, w, out, dilation, groups):
            w1 = derived(cache, "patches", w, lambda: patch_weights(w))
            others["patches"] = lambda: conv_patches(cudnn, x, w1, b, out, w.shape[2:], stride, padding, epilogue, coefs,
                                                     cache)
        if not others:
            return with_cudnn()
        # the fastest of the candidates and cuDNN for this configuration (ours win on small batches, cuDNN or the
        # space-to-depth form on large ones): timed once per process on the real buffers, outside CUDA-graph capture;
        # with autotuning off or for a small convolution (cudnn_conv.worth_tuning), ours, else cuDNN
        key = (x.shape, x.strides, str(x.dtype), w.shape, out.shape, out.strides, stride, padding, dilation, epilogue,
               b is None)
        choice = _CHOICES.get(key)
        if choice is None and cudnn is not None and cudnn_conv.worth_tuning(w, out) and not _capturing():
            with _CHOOSING:
                choice = _CHOICES.get(key)
                if choice is None:
                    times = {name: _elapsed_ms(fn) for name, fn in (*others.items(), ("cudnn", with_cudnn))}
                    done = {name: t for name, t in times.items() if t is not None}
                    choice = _CHOICES[key] = min(done, key=done.__getitem__) if done else "cudnn"
        chosen = others.get(choice or "own")
        if chosen is not None and chosen():
            return True
        return with_cudnn()
    return run


_ELEMENT_OPS = {"sum": "fa + fb", "product": "fa * fb", "sub": "fa - fb",
                "max": "(fa > fb || fa != fa) ? fa : fb", "min": "(fa < fb || fa != fa) ? fa : fb"}
#: fused epilogues of the element-wise kernel (NaN passes through, as in the unfused activations)
_EW_EPILOGUES = {None: "", "relu": "if (v < 0.0f) v = 0.0f;", "leaky_relu": "if (v < 0.0f) v *= alpha;",
                 "sigmoid": "v = 1.0f / (1.0f + expf(-v));", "tanh": "v = tanhf(v);"}


@functools.cache
def _element_wise_kernel(op: str, epilogue: str | None) -> Any:
    code = f"float fa = (float)a, fb = (float)b; float v = {_ELEMENT_OPS[op]}; {_EW_EPILOGUES[epilogue]} y = (T)v;"
    return cupy.ElementwiseKernel("T a, T b, float32 alpha", "T y", code, f"layerlab_ew_{op}_{epilogue or 'none'}")


def element_wise(backend: Backend) -> Kernel:
    """``out = act(a op b)`` in one pass (computed in float32, rounded once), for arrays of one shape, precision
    and C-contiguous layout (a residual add + ReLU: one kernel instead of an add and an in-place ReLU)."""
    def run(op: str, a: Any, b: Any, out: Any, epilogue: str | None, coefs: dict[str, float]) -> bool:
        if op not in _ELEMENT_OPS or epilogue not in _EW_EPILOGUES:
            return False
        if not (a.dtype == b.dtype == out.dtype and a.dtype in (cupy.float16, cupy.float32)
                and a.shape == b.shape == out.shape):
            return False
        if not (a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous):
            return False
        _element_wise_kernel(op, epilogue)(a, b, cupy.float32(coefs.get("alpha", 0.0)), out)
        return True
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
