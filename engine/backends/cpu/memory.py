"""Arrays whose first byte starts a cache line, for the CPU kernels and the NumPy backend's tensors.

NumPy's allocator gives 16-byte alignment: a tensor or a weight array then starts 16, 32 or 48 bytes into a
64-byte cache line, and every vector of a pixel's channels or of a weight panel that the kernels load or store
straddles two lines. Aligned, mobilenet_v2 ran in 0.90-0.92 of the time on two Zen 3 cores, efficientnet_b0 in
0.83-0.88, resnet50 and convnext_tiny in about 0.95 (``tests/bench/bench_cpu_alignment.py``: the same network twice
in one process, in turns). Imports only NumPy."""
from __future__ import annotations

from typing import Any

import numpy as np

#: bytes of a cache line (x86-64, Arm's Neoverse and Apple's cores: 64 or a multiple of it)
CACHE_LINE = 64


def aligned_empty(shape: int | tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` whose data starts a cache line."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(count * dtype.itemsize + CACHE_LINE, np.uint8)
    start = -raw.ctypes.data % CACHE_LINE
    return raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape)


def aligned_zeros(shape: int | tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """As :func:`aligned_empty`, filled with zeros."""
    out = aligned_empty(shape, dtype)
    out.fill(0)
    return out


def aligned_copy(a: Any, dtype: Any = np.float32) -> np.ndarray:
    """A C-contiguous copy of ``a`` (as ``dtype``) whose data starts a cache line."""
    a = np.asarray(a)
    out = aligned_empty(a.shape, dtype)
    out[...] = a
    return out
