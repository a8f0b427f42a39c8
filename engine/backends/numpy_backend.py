"""The NumPy backend: always available, runs on the CPU.

fp16 tensors are stored as float16; layers compute in float32 and round their output to float16
(NumPy has no fast float16 arithmetic), so fp16 results match a GPU's fp16-storage/fp32-accumulate
path within fp16 rounding.

With Numba installed (and ``LAYERLAB_CPU_KERNELS`` not ``off``), fp32 layers use the kernels of
:mod:`engine.backends.cpu_kernels` (offered by operation name through :mod:`engine.backends.numpy_kernels`):
3x3 convolutions of stride 1 (one group, 16 or more input
channels, a large enough output) as Winograd F(4x4, 3x3), other NHWC convolutions as a blocked im2col
straight into BLAS products, upsampling in one pass. fp16 convolutions run the same kernels on a float32
copy of their input and round their output once. Everything else uses NumPy with im2col + BLAS."""
from __future__ import annotations

import contextlib
import importlib
import os
import platform
import sys
from typing import Any

import numpy as np

from engine.backends.base import Backend

#: smallest input channel count and tile count (4x4 output pixels each) worth a Winograd convolution
WINOGRAD_MIN_CHANNELS = 16
WINOGRAD_MIN_TILES = 12
#: most F(4x4, 3x3) tiles of an NHWC image computed as F(2x2, 3x3) instead (fewer weight bytes, more products)
WINOGRAD2_MAX_TILES = 16


def cpu_kernels() -> Any:
    """The Numba kernel module, or None when Numba is missing or ``LAYERLAB_CPU_KERNELS=off``."""
    if os.environ.get("LAYERLAB_CPU_KERNELS", "on").lower() in ("off", "0", "no", "false"):
        return None
    loaded = sys.modules.get("engine.backends.cpu_kernels")  # asked by every layer of every run: no import machinery
    if loaded is not None:
        return loaded
    try:
        return importlib.import_module("engine.backends.cpu_kernels")  # numba is imported on first use
    except ImportError:
        return None


class NumpyBackend(Backend):
    name = "numpy"
    xp = np
    device_kind = "cpu"
    kernel_module = "engine.backends.numpy_kernels"
    #: False while the CPU kernels are being compiled in another process: layers take the plain NumPy path
    use_cpu_kernels = True

    def cpu_kernels(self) -> Any:
        """The Numba kernel module for this backend's layers, or None (plain NumPy path)."""
        return cpu_kernels() if self.use_cpu_kernels else None

    @property
    def device_name(self) -> str:
        return f"CPU ({platform.processor() or platform.machine()})"

    def running(self) -> contextlib.AbstractContextManager[Any]:
        kernels = self.cpu_kernels()
        return kernels.single_threaded_blas() if kernels is not None else contextlib.nullcontext()
