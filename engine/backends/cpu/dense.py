"""Fully connected layers of small batches: one dot product per output and item, the weights read once; and
linear layers over many rows (a transformer's token projections and MLPs): the rows shared out over the cores, one
BLAS product per core."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from engine.backends.cpu import runtime as rt
from engine.backends.cpu.epilogue import activate, activate_row, kernel_alpha
from engine.backends.cpu.runtime import REORDERED_SUMS

#: most items of a batch :func:`dense` takes (larger batches are products worth BLAS's blocking)
DENSE_MAX_ITEMS = 8
#: fewest weights (values) worth waking the other cores for: a squeeze-excitation block's 960 -> 240 layer (230k
#: weights, 0.9 MB from L2) took 0.027 ms on this thread against 0.05-0.14 ms shared over 2 cores (the wake-up of a
#: sleeping OpenMP thread on a VM costs more than the product); resnet18's 512 -> 1000 layer is still shared
DENSE_SPLIT_MIN = 1 << 18
#: fewest multiply-adds of a linear layer worth sharing its rows out over the cores (a smaller one is one BLAS call on
#: this thread): Swin's 3136 x 96 @ 96 x 384 took 2.1 ms shared over 2 cores against 4.6 as one single-threaded
#: product and a separate bias pass
LINEAR_SPLIT_MIN = 1 << 20


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



def linear(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, out: np.ndarray, act: int = 0,
           alpha: float | tuple[float, float] = 0.0) -> None:
    """``out`` (M, O) = act(``x`` (M, K) @ ``w`` (K, O) + ``bias``), float32 C-contiguous: the rows in one share per
    core, each share one BLAS product (BLAS held to one thread during an inference) followed by its bias and
    activation while the rows are in cache."""
    b = np.zeros(w.shape[1], np.float32) if bias is None else bias
    rt.launch(_linear_par, rt.blas_sgemm(), x, w, out, b, bias is not None, act, kernel_alpha(alpha), rt.threads())


@njit(cache=True, nogil=True, parallel=True)
def _linear_par(sgemm, x, w, y, b, has_bias, act, alpha, parts):  # pragma: no cover - compiled
    m, k = x.shape
    o = w.shape[1]
    for q in prange(parts):
        r0, r1 = m * q // parts, m * (q + 1) // parts
        if r1 > r0:
            sgemm(101, 111, 111, r1 - r0, o, k, np.float32(1), x.ctypes.data + 4 * r0 * k, k, w.ctypes.data, o,
                  np.float32(0), y.ctypes.data + 4 * r0 * o, o)
            for r in range(r0, r1):
                row = y[r]
                if has_bias:
                    for e in range(o):
                        row[e] += b[e]
                activate_row(row, act, alpha)
