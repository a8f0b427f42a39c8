"""The NumPy backend: always available, runs on the CPU.

fp16 tensors are stored as float16; layers compute in float32 and round their output to float16
(NumPy has no fast float16 arithmetic), so fp16 results match a GPU's fp16-storage/fp32-accumulate
path within fp16 rounding.

fp32 3x3 convolutions (stride 1, one group, 16 or more input channels) run as Winograd F(4x4, 3x3)
with Numba-compiled transforms around BLAS products (:mod:`engine.backends.cpu_kernels`), when Numba
is installed and ``LAYERLAB_CPU_KERNELS`` is not ``off``; everything else uses im2col + BLAS."""
from __future__ import annotations

import os
import platform
from typing import Any

import numpy as np

from engine.backends.base import Backend

#: smallest input channel count and tile count (4x4 output pixels each) worth a Winograd convolution
WINOGRAD_MIN_CHANNELS = 16
WINOGRAD_MIN_TILES = 12


def cpu_kernels() -> Any:
    """The Numba kernel module, or None when Numba is missing or ``LAYERLAB_CPU_KERNELS=off``."""
    if os.environ.get("LAYERLAB_CPU_KERNELS", "on").lower() in ("off", "0", "no", "false"):
        return None
    try:
        from engine.backends import cpu_kernels as kernels  # noqa: PLC0415 - numba is imported on first use
    except ImportError:
        return None
    return kernels


class NumpyBackend(Backend):
    name = "numpy"
    xp = np
    has_conv_kernels = True

    @property
    def device_name(self) -> str:
        return f"CPU ({platform.processor() or platform.machine()})"

    def conv2d(self, x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int], padding: tuple[int, int],
               dilation: tuple[int, int], groups: int, act: str | None, coefs: dict[str, float],
               cache: dict[str, Any] | None = None) -> bool:
        if not (x.dtype == w.dtype == out.dtype == np.float32 and w.shape[2:] == (3, 3) and stride == (1, 1)
                and dilation == (1, 1) and groups == 1 and w.shape[1] >= WINOGRAD_MIN_CHANNELS):
            return False
        ho, wo = out.shape[2:]
        if -(-ho // 4) * -(-wo // 4) < WINOGRAD_MIN_TILES:
            return False
        kernels = cpu_kernels()
        if kernels is None or act not in kernels.FUSED_ACTIVATIONS:
            return False
        nhwc = kernels.is_nhwc(out)
        key = "winograd_nhwc" if nhwc else "winograd_nchw"
        cached = cache.get(key) if cache is not None else None
        if cached is not None and cached[0] is w:
            u = cached[1]
        else:
            u = kernels.transform_weights(w)
            if not nhwc:
                u = np.ascontiguousarray(u.transpose(0, 2, 1))
            if cache is not None:
                cache[key] = (w, u)
        kernels.winograd_conv3x3(x, u, b, out, padding, kernels.FUSED_ACTIVATIONS[act], float(coefs.get("alpha", 0.0)))
        return True
