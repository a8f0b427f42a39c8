"""Kernels of the NumPy backend, by operation name (``Backend.kernel``): adapters from the layers' calls to the
Numba kernels of :mod:`engine.backends.cpu_kernels`.

Each function named after an operation makes that operation's kernel for a backend. The kernels ask for the
Numba module on every call (``backend.cpu_kernels()``), so ``LAYERLAB_CPU_KERNELS=off`` takes effect at once, and
return False for what they do not serve (then the layer computes it with NumPy)."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.backends import numpy_backend
from engine.backends.base import Backend, derived
from engine.tensor import is_nhwc_memory

Kernel = Callable[..., bool]


def pool2d(backend: Backend) -> Kernel:
    def run(x: Any, out: Any, is_max: bool, kernel: tuple[int, int], stride: tuple[int, int],
            padding: tuple[int, int], count_include_pad: bool, nhwc: bool) -> bool:
        kernels = backend.cpu_kernels()  # type: ignore[attr-defined]
        if kernels is None or not nhwc or not (x.dtype == out.dtype == np.float32 and x.flags.c_contiguous
                                               and out.flags.c_contiguous):
            return False
        call = functools.partial(kernels.pool_nhwc, x, out, is_max, kernel, stride, padding, count_include_pad)
        call()
        return call  # ready to run again on the same arrays (``Layer.replay_call``)
    return run


def element_wise(backend: Backend) -> Kernel:
    def run(op: str, a: Any, b: Any, out: Any, epilogue: str | None, coefs: dict[str, float]) -> bool:
        kernels = backend.cpu_kernels()  # type: ignore[attr-defined]
        if kernels is None or op not in kernels.ELEMENT_WISE_OPS or epilogue not in kernels.FUSED_EPILOGUES:
            return False
        dtypes = {a.dtype, b.dtype, out.dtype}
        if np.float16 in dtypes and np.float32 in dtypes and dtypes <= {np.dtype(np.float16), np.dtype(np.float32)}:
            # a conversion fused into an fp32 layer: the float32 kernel on widened inputs, rounded once at the end
            f32 = [v if v.dtype == np.float32 else v.astype(np.float32) for v in (a, b)]
            out32 = out if out.dtype == np.float32 else np.empty_like(out, dtype=np.float32)
            if not run(op, f32[0], f32[1], out32, epilogue, coefs):
                return False
            if out32 is not out:
                out[...] = out32
            return True
        if not (a.dtype == b.dtype == out.dtype == np.float32 and a.shape == b.shape == out.shape):
            return False
        if not (a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous):
            return False
        kernels.element_wise(a, b, out, kernels.ELEMENT_WISE_OPS[op], kernels.FUSED_EPILOGUES[epilogue],
                             float(coefs.get("alpha", 0.0)))
        return True
    return run


def dense(backend: Backend) -> Kernel:
    def run(x: Any, w: Any, b: Any | None, out: Any, epilogue: str | None, coefs: dict[str, float]) -> bool:
        kernels = backend.cpu_kernels()  # type: ignore[attr-defined]
        if kernels is None or epilogue not in kernels.FUSED_EPILOGUES or x.shape[0] > kernels.DENSE_MAX_ITEMS:
            return False
        arrays = (x, w, out) if b is None else (x, w, b, out)
        if any(a.dtype != np.float32 or not a.flags.c_contiguous for a in arrays):
            return False
        call = functools.partial(kernels.dense, x, w, b, out, kernels.FUSED_EPILOGUES[epilogue],
                                 float(coefs.get("alpha", 0.0)))
        call()
        return call  # ready to run again on the same arrays (``Layer.replay_call``)
    return run


def upsample(backend: Backend) -> Kernel:
    def run(x: Any, out: Any, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> bool:
        kernels = backend.cpu_kernels()  # type: ignore[attr-defined]
        if kernels is None or not (x.dtype == out.dtype == np.float32 and x.flags.c_contiguous and out.flags.c_contiguous):
            return False
        kernels.upsample(x, out, factor, bilinear, nhwc)
        return True
    return run


def conv2d(backend: Backend) -> Kernel:
    """Returns the prepared call it ran (true) where the layer gave its kernel cache: the whole convolution, ready
    to run again on the same arrays; True where it ran without one; False where no kernel serves the case."""
    def run(x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int], padding: tuple[int, int],
            dilation: tuple[int, int], groups: int, epilogue: str | None, coefs: dict[str, float],
            cache: dict[str, Any] | None = None, *, memo: bool = True, residual: Any = None) -> bool:
        kernels = backend.cpu_kernels()  # type: ignore[attr-defined]
        if kernels is None or epilogue not in kernels.FUSED_EPILOGUES or groups != 1 or kernels.blas_sgemm() is None:
            return False
        if residual is not None and (residual.dtype != np.float32 or residual.shape != out.shape
                                     or residual.strides != out.strides):
            return False  # fp16 storage or another layout: the layer adds it in a pass of its own
        if np.float16 in (x.dtype, out.dtype) and w.dtype == np.float32:
            # fp16 storage (an fp16 layer, or a conversion fused into an fp32 one): float32 kernels, one rounding
            out32 = out if out.dtype == np.float32 else np.empty_like(out, dtype=np.float32)  # same memory layout
            x32 = x if x.dtype == np.float32 else x.astype(np.float32)
            if not run(x32, w, b, out32, stride, padding, dilation, groups, epilogue, coefs, cache, memo=False):
                return False
            if out32 is not out:
                out[...] = out32
            return True
        if not x.dtype == out.dtype == np.float32 or w.dtype != np.float32:
            return False
        code, alpha = kernels.FUSED_EPILOGUES[epilogue], float(coefs.get("alpha", 0.0))
        key = None
        if cache is not None and memo:  # the same arrays as last run (a network's buffers): the prepared call, no Python work
            key = (_address(x), x.shape, x.strides, _address(out), out.shape, out.strides, id(w), id(b), stride,
                   padding, dilation, code, alpha, kernels, None if residual is None else _address(residual))
            ready = cache.get("conv2d_call")
            if ready is not None and ready[0] == key:
                ready[1]()
                return ready[1]
        call = _conv2d_plan(kernels, x, w, b, out, stride, padding, dilation, code, alpha, cache, residual)
        if call is None:
            return False
        call()
        if key is None:
            return True
        cache["conv2d_call"] = (key, call, w, b)  # keeps w and b alive, so that their ids in the key stay theirs
        return call  # the whole convolution, ready to run again on these arrays (``Layer.replay_call``)
    return run


def _address(a: Any) -> int:
    return a.__array_interface__["data"][0]


def conv2d_sum(backend: Backend) -> Kernel:
    def run(x: Any, w: Any, b: Any | None, residual: Any, out: Any, stride: tuple[int, int], padding: tuple[int, int],
            dilation: tuple[int, int], groups: int, epilogue: str | None, coefs: dict[str, float],
            cache: dict[str, Any] | None = None) -> bool:
        return backend.kernel("conv2d")(x, w, b, out, stride, padding, dilation, groups,  # type: ignore[misc]
                                        epilogue, coefs, cache, residual=residual)
    return run


def _conv2d_plan(kernels: Any, x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int],
                 padding: tuple[int, int], dilation: tuple[int, int], code: int, alpha: float,
                 cache: dict[str, Any] | None, residual: Any = None) -> Callable[[], None] | None:
    """The Numba kernel's call ready to run for these float32 arrays, or None when no kernel serves the case
    (``residual``, of ``out``'s shape and strides, added before the activation)."""
    nhwc = is_nhwc_memory(out)
    ho, wo = out.shape[2:]
    pixel_rows = nhwc and out.transpose(0, 2, 3, 1).flags.c_contiguous  # the NHWC kernels write rows of (pixels, K)
    geometry = (stride, padding, dilation, code, alpha)
    if pixel_rows and w.shape[0] <= kernels.FEW_OUTPUTS_MAX and w.shape[1] >= kernels.FEW_OUTPUTS_MIN_CHANNELS:
        if residual is not None:
            return None
        wr = derived(cache, "few_outputs", w, lambda: kernels.few_output_weights(w))
        return kernels.conv_few_outputs_plan(x, wr, w.shape[2:], b, out, *geometry)
    tiles = -(-ho // 4) * -(-wo // 4)
    winograd = (w.shape[2:] == (3, 3) and stride == dilation == (1, 1)
                and w.shape[1] >= numpy_backend.WINOGRAD_MIN_CHANNELS and tiles >= numpy_backend.WINOGRAD_MIN_TILES)
    if pixel_rows and not (winograd and kernels.WINOGRAD_BEFORE_PANELS) and (
            kernels.panels_apply(ho * wo, w.shape[0]) or kernels.stem_panels_apply(w.shape, dilation, ho * wo)):
        wp = derived(cache, "gemm_panels", w, lambda: kernels.panel_weights(w))
        return kernels.conv_panels_plan(x, wp, w.shape[2:], b, out, *geometry, residual)
    if winograd:
        tile = 2 if nhwc and tiles <= numpy_backend.WINOGRAD2_MAX_TILES else 4  # a small image: F(2x2, 3x3)
        if nhwc and kernels.winograd_panels_apply(w.shape[0]):  # products on the micro-kernel, weights in panels
            u = derived(cache, f"winograd{tile}_panels", w,
                        lambda: kernels.winograd_panels(kernels.transform_weights(w, True, tile)))
        else:
            u = derived(cache, f"winograd{tile}_{'nhwc' if nhwc else 'nchw'}", w,
                        lambda: kernels.transform_weights(w, nhwc, tile))
        return kernels.winograd_plan(x, u, b, out, padding, code, alpha, residual)
    if not pixel_rows:
        return None
    wm = derived(cache, "gemm_nhwc", w, lambda: kernels.gemm_weights(w))
    return kernels.conv_nhwc_plan(x, wm, w.shape[2:], b, out, *geometry, residual)


def upsample_concat(backend: Backend) -> Kernel:
    def run(x: Any, skip: Any, out: Any, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> bool:
        kernels = backend.cpu_kernels()  # type: ignore[attr-defined]
        if kernels is None or x.ndim != 4 or not x.dtype == skip.dtype == out.dtype == np.float32:
            return False
        if not (x.flags.c_contiguous and skip.flags.c_contiguous and out.flags.c_contiguous):
            return False
        h_axis, c_axis = (1, 3) if nhwc else (2, 1)
        n, c0, h, w = x.shape[0], x.shape[c_axis], x.shape[h_axis], x.shape[h_axis + 1]
        expected = list(skip.shape)
        expected[c_axis] += c0
        if (skip.shape[0], skip.shape[h_axis], skip.shape[h_axis + 1]) != (n, h * factor[0], w * factor[1]):
            return False  # crop or edge extension to the skip size: the generic path
        if out.shape != tuple(expected):
            return False
        kernels.upscale_concat(x, skip, out, factor, bilinear, nhwc)
        return True
    return run
