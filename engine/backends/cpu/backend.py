"""The NumPy backend: always available, runs on the CPU.

fp16 tensors are stored as float16; layers compute in float32 and round their output to float16
(NumPy has no fast float16 arithmetic), so fp16 results match a GPU's fp16-storage/fp32-accumulate
path within fp16 rounding.

With Numba installed (and ``LAYERLAB_CPU_KERNELS`` not ``off``), fp32 layers use the Numba kernels of this package,
offered by operation name through :mod:`engine.backends.cpu.ops`: 3x3 convolutions of stride 1 (one group, 16 or
more input channels, a large enough output) as Winograd F(4x4, 3x3), other NHWC convolutions as a blocked im2col
straight into BLAS products, upsampling in one pass. fp16 convolutions run the same kernels on a float32 copy of
their input and round their output once. Everything else uses NumPy with im2col + BLAS."""
from __future__ import annotations

import contextlib
import importlib
import os
import platform
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.backends.base import KERNEL_OPERATIONS, Backend
from engine.backends.cpu.memory import aligned_empty

RUNTIME = "engine.backends.cpu.runtime"


def cpu_kernels() -> Any:
    """The Numba kernels' runtime module (:mod:`engine.backends.cpu.runtime`), or None when Numba is missing or
    ``LAYERLAB_CPU_KERNELS=off``: the plain NumPy path."""
    if os.environ.get("LAYERLAB_CPU_KERNELS", "on").lower() in ("off", "0", "no", "false"):
        return None
    loaded = sys.modules.get(RUNTIME)  # asked by every layer of every run: no import machinery
    if loaded is not None:
        return loaded
    try:
        return importlib.import_module(RUNTIME)  # numba is imported on first use
    except ImportError:
        return None


class NumpyBackend(Backend):
    name = "numpy"
    xp = np
    device_kind = "cpu"
    kernel_module = "engine.backends.cpu.ops"
    #: joins of the same leading inputs (DenseNet) share one buffer: batch normalization's kernel reads the leading
    #: channels as a view (``pointwise.leading_rows``); other readers of such a view copy it
    views_joins = True
    overwrites_inputs = True
    #: False while the CPU kernels are being compiled in another process: layers take the plain NumPy path
    use_cpu_kernels = True

    def cpu_kernels(self) -> Any:
        """The Numba kernels' runtime module for this backend's layers, or None (plain NumPy path)."""
        return cpu_kernels() if self.use_cpu_kernels else None

    def kernel(self, operation: str) -> Callable[..., Any] | None:
        """As ``Backend.kernel``; None while this backend's layers take the plain NumPy path (no Numba,
        ``LAYERLAB_CPU_KERNELS=off``, or the kernels being compiled in another process): the kernels' module,
        which imports Numba, is then not imported."""
        if operation in KERNEL_OPERATIONS and self.cpu_kernels() is None:
            return None
        return super().kernel(operation)

    @property
    def device_name(self) -> str:
        return f"CPU ({platform.processor() or platform.machine()})"

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """Tensors start a cache line (``engine.backends.cpu.memory``): the kernels' vectors of channels then never
        straddle two."""
        return aligned_empty(shape, dtype)

    def alloc_bytes(self, nbytes: int) -> Any:
        return aligned_empty(max(int(nbytes), 1), np.uint8)

    def running(self) -> contextlib.AbstractContextManager[Any]:
        runtime = self.cpu_kernels()
        return runtime.single_threaded_blas() if runtime is not None else contextlib.nullcontext()

    def call_sequence(self, calls: list[Callable[[], None]]) -> Callable[[], None]:
        runtime = self.cpu_kernels()
        return runtime.Sequence(calls) if runtime is not None else super().call_sequence(calls)
