"""Fully connected layers of small batches: one dot product per output and item, the weights read once."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from engine.backends.cpu import runtime as rt
from engine.backends.cpu.epilogue import activate, kernel_alpha
from engine.backends.cpu.runtime import REORDERED_SUMS

#: most items of a batch :func:`dense` takes (larger batches are products worth BLAS's blocking)
DENSE_MAX_ITEMS = 8
#: fewest weights (values) worth waking the other cores for: a squeeze-excitation block's 960 -> 240 layer (230k
#: weights, 0.9 MB from L2) took 0.027 ms on this thread against 0.05-0.14 ms shared over 2 cores (the wake-up of a
#: sleeping OpenMP thread on a VM costs more than the product); resnet18's 512 -> 1000 layer is still shared
DENSE_SPLIT_MIN = 1 << 18


def dense(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, out: np.ndarray, act: int = 0,
          alpha: float | tuple[float, float] = 0.0) -> None:
    """``out`` (N, O) = act(``x`` (N, K) @ ``w`` (O, K) transposed + ``bias``), float32 C-contiguous, N at most
    DENSE_MAX_ITEMS: blocks of outputs over the cores, each output one dot product along K for every item
    (the weights, read once, are the traffic: resnet18's 512 -> 1000 layer took 0.3 ms as one BLAS
    matrix-vector product on one core)."""
    b = np.zeros(w.shape[0], np.float32) if bias is None else bias
    threads = rt.threads()
    if w.size < DENSE_SPLIT_MIN:
        _dense_range(x, w, b, out, 0, w.shape[0], act, kernel_alpha(alpha))
        return
    rt.launch(_dense_par, x, w, b, out, act, kernel_alpha(alpha), threads)


@njit(cache=True, nogil=True, fastmath=REORDERED_SUMS)
def _dense_range(x, w, b, y, o0, o1, act, alpha):  # pragma: no cover - compiled
    n, k = x.shape
    for o in range(o0, o1):
        wo = w[o]
        for i in range(n):
            xi = x[i]
            s = np.float32(0)
            for e in range(k):
                s += xi[e] * wo[e]
            y[i, o] = activate(s + b[o], act, alpha)


@njit(cache=True, nogil=True, parallel=True)
def _dense_par(x, w, b, y, act, alpha, parts):  # pragma: no cover - compiled
    o = w.shape[0]
    for q in prange(parts):
        _dense_range(x, w, b, y, o * q // parts, o * (q + 1) // parts, act, alpha)

