"""Fully connected layers of small batches: one dot product per output and item, the weights read once; and
linear layers over many rows (a transformer's token projections and MLPs): the rows shared out over the cores, one
BLAS product per core."""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from numba import njit, prange

from engine.backends.cpu import runtime as rt
from engine.backends.cpu.dot_tile import DOT_ROWS, dot_rows
from engine.backends.cpu.epilogue import activate, activate_row, kernel_alpha
from engine.backends.cpu.jobs import job_caller

#: most items of a batch :func:`dense` takes (larger batches are products worth BLAS's blocking)
DENSE_MAX_ITEMS = 8
#: fewest weights (values) worth sharing over the cores: the weights come from memory (a squeeze-excitation block's
#: 240 -> 960 layer, 0.9 MB, 10 us on one Zen 5 core from L2 but 26-32 us from beyond it, as in a network's run),
#: and two cores fetch them about twice as fast; below this the launch costs more than it saves. Shared from 16k
#: weights instead of 256k, mobilenet_v3_large in turns in one process (``bench_cpu_setting``, 2 Zen 5 cores):
#: 0.90, 0.96 and 0.98 of the time, efficientnet_b0 1.00. (On a Zen 3 VM whose idle threads slept, before the
#: kernels kept them spinning between layers, the 960 -> 240 layer had taken 0.027 ms alone against 0.05-0.14 ms
#: shared.)
DENSE_SPLIT_MIN = 1 << 14
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
    dense_plan(x, w, bias, out, act, alpha)()


def dense_plan(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, out: np.ndarray, act: int = 0,
               alpha: float | tuple[float, float] = 0.0) -> Callable[[], None]:
    """:func:`dense` as a call ready to run (again) on these arrays."""
    b = np.zeros(w.shape[0], np.float32) if bias is None else bias
    if w.size < DENSE_SPLIT_MIN:
        return functools.partial(_dense_range, x, w, b, out, 0, w.shape[0], act, kernel_alpha(alpha))
    return rt.Launch(_dense_par, x, w, b, out, act, kernel_alpha(alpha), per_threads=lambda t: (t,))


@njit(cache=True, nogil=True)
def _dense_range(x, w, b, y, o0, o1, act, alpha):  # pragma: no cover - compiled
    """Outputs o0..o1 of every item: DOT_ROWS of them at a time (:func:`dot_tile.dot_rows`), each item's row
    against the same weight rows while they are in L1, then the bias and the activation. ``x`` (N, K) and ``w``
    (O, K) C-contiguous."""
    n, k = x.shape
    sums = np.empty(DOT_ROWS, np.float32)
    xa, wa, sa, row = x.ctypes.data, w.ctypes.data, sums.ctypes.data, 4 * k
    o = o0
    while o < o1:
        rows = DOT_ROWS if o1 - o >= DOT_ROWS else 1
        for i in range(n):
            dot_rows(rows, xa + i * row, wa + o * row, row, k, sa)
            for r in range(rows):
                y[i, o + r] = activate(sums[r] + b[o + r], act, alpha)
        o += rows


_call_dense_range = job_caller(_dense_range)


@njit(cache=True, nogil=True, parallel=True)
def _dense_par(x, w, b, y, act, alpha, parts):  # pragma: no cover - compiled
    o = w.shape[0]
    for q in prange(parts):
        _call_dense_range((x, w, b, y, o * q // parts, o * (q + 1) // parts, act, alpha))


def linear(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, out: np.ndarray, act: int = 0,
           alpha: float | tuple[float, float] = 0.0) -> None:
    """``out`` (M, O) = act(``x`` (M, K) @ ``w`` (K, O) + ``bias``), float32 C-contiguous: the rows in one share per
    core, each share one BLAS product (BLAS held to one thread during an inference) followed by its bias and
    activation while the rows are in cache."""
    b = np.zeros(w.shape[1], np.float32) if bias is None else bias
    rt.launch(_linear_par, rt.blas_sgemm(), x, w, out, b, bias is not None, act, kernel_alpha(alpha), rt.threads())


@njit(cache=True, nogil=True, parallel=True)
def _linear_par(sgemm, x, w, y, b, has_bias, act, alpha, parts):  # pragma: no cover - compiled
    m = x.shape[0]
    for q in prange(parts):
        _call_linear_rows((sgemm, x, w, y, b, has_bias, act, alpha, m * q // parts, m * (q + 1) // parts))


@njit(cache=True, nogil=True)
def _linear_rows(sgemm, x, w, y, b, has_bias, act, alpha, r0, r1):  # pragma: no cover - compiled
    """Rows r0..r1 of :func:`_linear_par`: one BLAS product, then their bias and activation."""
    m, k = x.shape
    o = w.shape[1]
    if r1 > r0:
        sgemm(101, 111, 111, r1 - r0, o, k, np.float32(1), x.ctypes.data + 4 * r0 * k, k, w.ctypes.data, o,
              np.float32(0), y.ctypes.data + 4 * r0 * o, o)
        for r in range(r0, r1):
            row = y[r]
            if has_bias:
                for e in range(o):
                    row[e] += b[e]
            activate_row(row, act, alpha)


_call_linear_rows = job_caller(_linear_rows)


#: fewest multiply-adds of a product of stacked matrices worth this kernel (a smaller one: NumPy's matmul)
MATMUL_MIN = 1 << 16
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def _matrix(x: np.ndarray) -> tuple[np.ndarray, int, int] | None:
    """(array, BLAS op, leading dimension) of the last two axes of float32 ``x`` as a row-major product reads them:
    row by row (no transpose), or as the transpose of a row-major matrix; None where neither fits."""
    rows, cols = x.shape[-2:]
    if any(s % 4 for s in x.strides[-2:]):
        return None
    s0, s1 = x.strides[-2] // 4, x.strides[-1] // 4
    if (s1 == 1 or cols == 1) and s0 >= max(cols, 1):
        return x, _NO_TRANS, max(s0, cols, 1)
    if (s0 == 1 or rows == 1) and s1 >= max(rows, 1):
        return x, _TRANS, max(s1, rows, 1)
    return None


def _offsets(x: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    """Element offsets of the matrices of ``x`` (its leading axes broadcast to ``batch``), in C order of ``batch``."""
    lead = x.ndim - 2
    shape = (1,) * (len(batch) - lead) + x.shape[:lead]
    strides = (0,) * (len(batch) - lead) + tuple(s // 4 for s in x.strides[:lead])
    off = np.zeros(batch, np.int64)
    for axis, (n, s) in enumerate(zip(shape, strides, strict=True)):
        if n != 1 and s:
            off += (np.arange(n, dtype=np.int64) * s).reshape([-1 if i == axis else 1 for i in range(len(batch))])
    return off.reshape(-1)


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray, alpha: float = 1.0) -> bool:
    """``out[...] = alpha * a @ b`` over the last two axes, the leading axes broadcast into ``out``'s (NumPy's
    rules): float32 ``a`` and ``b`` read in place (any strides with one unit step per matrix: a transposed view is
    BLAS's transpose, no copy), ``out`` C-contiguous float32. The matrices (or, for fewer matrices than cores, blocks
    of their rows) shared out over the cores, one BLAS product each (BLAS held to one thread during an inference):
    attention's stacks of small products, which NumPy's matmul runs one after another on one core. False (nothing
    written) for other arrays, for sizes too small to share, or where there is no BLAS."""
    sgemm = rt.blas_sgemm()
    if sgemm is None or a.ndim < 2 or b.ndim < 2 or not (a.dtype == b.dtype == out.dtype == np.float32):
        return False
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if b.shape[-2] != k or out.shape[-2:] != (m, n) or not out.flags.c_contiguous or min(m, n, k) < 1:
        return False
    batch = tuple(out.shape[:-2])
    try:
        if tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2], batch)) != batch:
            return False
    except ValueError:
        return False
    count = out.size // (m * n)
    if count * m * n * k < MATMUL_MIN:
        return False
    ma, mb = _matrix(a), _matrix(b)
    if ma is None or mb is None:
        return False
    (_, op_a, lda), (_, op_b, ldb) = ma, mb
    parts = rt.threads()
    splits = 1 if count >= parts else min(parts, m)  # few matrices: blocks of rows of each
    rt.launch(_matmul_par, sgemm, op_a, op_b, m, n, k, np.float32(alpha), a.ctypes.data, lda, _offsets(a, batch),
              b.ctypes.data, ldb, _offsets(b, batch), out.ctypes.data, splits, parts)
    return True


@njit(cache=True, nogil=True, parallel=True)
def _matmul_par(sgemm, op_a, op_b, m, n, k, alpha, a, lda, a_off, b, ldb, b_off, c, splits,
                parts):  # pragma: no cover - compiled
    jobs = a_off.size * splits
    for q in prange(parts):
        for j in range(jobs * q // parts, jobs * (q + 1) // parts):
            i, s = j // splits, j % splits
            r0, r1 = m * s // splits, m * (s + 1) // splits
            if r1 > r0:
                row = r0 * lda if op_a == 111 else r0  # a's row r0: a row step, or a column of its transpose
                sgemm(101, op_a, op_b, r1 - r0, n, k, alpha, a + 4 * (a_off[i] + row), lda, b + 4 * b_off[i], ldb,
                      np.float32(0), c + 4 * (i * m * n + r0 * n), n)
