"""The NumPy backend: always available, runs on the CPU.

fp16 tensors are stored as float16; layers compute in float32 and round their output to float16
(NumPy has no fast float16 arithmetic), so fp16 results match a GPU's fp16-storage/fp32-accumulate
path within fp16 rounding.

With Numba installed (and ``LAYERLAB_CPU_KERNELS`` not ``off``), fp32 layers use the kernels of
:mod:`engine.backends.cpu_kernels`: 3x3 convolutions of stride 1 (one group, 16 or more input
channels, a large enough output) as Winograd F(4x4, 3x3), other NHWC convolutions as a blocked im2col
straight into BLAS products, upsampling in one pass. fp16 convolutions run the same kernels on a float32
copy of their input and round their output once. Everything else uses NumPy with im2col + BLAS."""
from __future__ import annotations

import contextlib
import importlib
import os
import platform
from typing import Any

import numpy as np

from engine.backends.base import Backend, derived
from engine.tensor import is_nhwc_memory

#: smallest input channel count and tile count (4x4 output pixels each) worth a Winograd convolution
WINOGRAD_MIN_CHANNELS = 16
WINOGRAD_MIN_TILES = 12


def cpu_kernels() -> Any:
    """The Numba kernel module, or None when Numba is missing or ``LAYERLAB_CPU_KERNELS=off``."""
    if os.environ.get("LAYERLAB_CPU_KERNELS", "on").lower() in ("off", "0", "no", "false"):
        return None
    try:
        return importlib.import_module("engine.backends.cpu_kernels")  # numba is imported on first use
    except ImportError:
        return None


class NumpyBackend(Backend):
    name = "numpy"
    xp = np
    has_conv_kernels = True

    @property
    def device_name(self) -> str:
        return f"CPU ({platform.processor() or platform.machine()})"

    def running(self) -> contextlib.AbstractContextManager[Any]:
        kernels = cpu_kernels()
        return kernels.single_threaded_blas() if kernels is not None else contextlib.nullcontext()

    def pool2d(self, x: Any, out: Any, is_max: bool, kernel: tuple[int, int], stride: tuple[int, int],
               padding: tuple[int, int], count_include_pad: bool, nhwc: bool) -> bool:
        kernels = cpu_kernels()
        if kernels is None or not nhwc or not (x.dtype == out.dtype == np.float32 and x.flags.c_contiguous
                                               and out.flags.c_contiguous):
            return False
        kernels.pool_nhwc(x, out, is_max, kernel, stride, padding, count_include_pad)
        return True

    def element_wise(self, op: str, a: Any, b: Any, out: Any, act: str | None, coefs: dict[str, float]) -> bool:
        kernels = cpu_kernels()
        if kernels is None or op not in kernels.ELEMENT_WISE_OPS or act not in kernels.FUSED_ACTIVATIONS:
            return False
        if not (a.dtype == b.dtype == out.dtype == np.float32 and a.shape == b.shape == out.shape):
            return False
        if not (a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous):
            return False
        kernels.element_wise(a, b, out, kernels.ELEMENT_WISE_OPS[op], kernels.FUSED_ACTIVATIONS[act],
                             float(coefs.get("alpha", 0.0)))
        return True

    def upsample(self, x: Any, out: Any, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> bool:
        kernels = cpu_kernels()
        if kernels is None or not (x.dtype == out.dtype == np.float32 and x.flags.c_contiguous and out.flags.c_contiguous):
            return False
        kernels.upsample(x, out, factor, bilinear, nhwc)
        return True

    def conv2d(self, x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int], padding: tuple[int, int],
               dilation: tuple[int, int], groups: int, act: str | None, coefs: dict[str, float],
               cache: dict[str, Any] | None = None) -> bool:
        kernels = cpu_kernels()
        if kernels is None or act not in kernels.FUSED_ACTIVATIONS or groups != 1 or kernels.blas_sgemm() is None:
            return False
        if x.dtype == out.dtype == np.float16 and w.dtype == np.float32:  # fp16 storage: float32 kernels, one rounding
            out32 = np.empty_like(out, dtype=np.float32)  # same memory layout
            if not self.conv2d(x.astype(np.float32), w, b, out32, stride, padding, dilation, groups, act, coefs, cache):
                return False
            out[...] = out32
            return True
        if not x.dtype == out.dtype == np.float32 or w.dtype != np.float32:
            return False
        code, alpha = kernels.FUSED_ACTIVATIONS[act], float(coefs.get("alpha", 0.0))
        nhwc = is_nhwc_memory(out)
        ho, wo = out.shape[2:]
        if (w.shape[2:] == (3, 3) and stride == dilation == (1, 1) and w.shape[1] >= WINOGRAD_MIN_CHANNELS
                and -(-ho // 4) * -(-wo // 4) >= WINOGRAD_MIN_TILES):
            u = derived(cache, "winograd_nhwc" if nhwc else "winograd_nchw", w, lambda: kernels.transform_weights(w, nhwc))
            kernels.winograd_conv3x3(x, u, b, out, padding, code, alpha)
            return True
        if not nhwc or not out.transpose(0, 2, 3, 1).flags.c_contiguous:  # the products write rows of (pixels, K)
            return False
        wm = derived(cache, "gemm_nhwc", w, lambda: kernels.gemm_weights(w))
        kernels.conv_nhwc(x, wm, w.shape[2:], b, out, stride, padding, dilation, code, alpha)
        return True

    def upscale_concat(self, x: Any, skip: Any, out: Any, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> bool:
        kernels = cpu_kernels()
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
