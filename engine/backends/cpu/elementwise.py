"""Element-wise operations of two tensors with the activation fused, in one pass spread over the cores."""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from numba import njit, prange

from engine.backends.cpu import runtime as rt
from engine.backends.cpu.epilogue import activate, kernel_alpha
from engine.backends.cpu.jobs import job_caller

#: element-wise operations of two inputs (name -> code used by the kernel)
ELEMENT_WISE_OPS = {"sum": 0, "product": 1, "max": 2, "min": 3, "sub": 4}

#: smallest tensor (elements) whose element-wise pass is cut over the cores
ELEMENT_WISE_SPLIT_MIN = 1 << 16


@njit(cache=True, nogil=True)
def _element_wise_range(a, b, y, i0, i1, op, act, alpha):  # pragma: no cover - compiled
    """``y[i] = act(a[i] op b[i])`` for i in i0..i1 of flat arrays; NaN wins a max or a min, as in NumPy. One
    loop per operation and per activation (branch-free bodies vectorise), by chunks that stay in L1, each
    indexed from 0 (an index Numba cannot prove non-negative costs a wrap-around test: gathers, not loads)."""
    over_a, over_b = y.ctypes.data == a.ctypes.data, y.ctypes.data == b.ctypes.data
    for j0 in range(i0, i1, 2048):
        j1 = min(i1, j0 + 2048)
        u, v, z = a[j0:j1], b[j0:j1], y[j0:j1]
        n = z.size
        if over_a:  # written over an input: two arrays in the loop (the same memory twice sent LLVM's to its scalar loop)
            _in_place(z, v, op, act, alpha, False)
        elif over_b:
            _in_place(z, u, op, act, alpha, True)
        elif op == 0:
            for i in range(n):
                z[i] = activate(u[i] + v[i], act, alpha)
        elif op == 1:
            for i in range(n):
                z[i] = activate(u[i] * v[i], act, alpha)
        elif op == 2:
            for i in range(n):
                z[i] = activate(np.maximum(u[i], v[i]), act, alpha)  # NaN wins (see epilogue.activate for why not a select)
        elif op == 3:
            for i in range(n):
                z[i] = activate(np.minimum(u[i], v[i]), act, alpha)
        else:
            for i in range(n):
                z[i] = activate(u[i] - v[i], act, alpha)


_call_element_wise_range = job_caller(_element_wise_range)


@njit(inline="always")
def _in_place(z, v, op, act, alpha, swapped):  # pragma: no cover - compiled
    """``z[i] = act(z[i] op v[i])`` (``act(v[i] op z[i])`` when ``swapped``: only a difference cares)."""
    n = z.size
    if op == 0:
        for i in range(n):
            z[i] = activate(z[i] + v[i], act, alpha)
    elif op == 1:
        for i in range(n):
            z[i] = activate(z[i] * v[i], act, alpha)
    elif op == 2:
        for i in range(n):
            z[i] = activate(np.maximum(z[i], v[i]), act, alpha)
    elif op == 3:
        for i in range(n):
            z[i] = activate(np.minimum(z[i], v[i]), act, alpha)
    elif swapped:
        for i in range(n):
            z[i] = activate(v[i] - z[i], act, alpha)
    else:
        for i in range(n):
            z[i] = activate(z[i] - v[i], act, alpha)


def element_wise(a: np.ndarray, b: np.ndarray, out: np.ndarray, op: int, act: int = 0,
                 alpha: float | tuple[float, float] = 0.0) -> None:
    """``out = act(a op b)`` (codes of :data:`ELEMENT_WISE_OPS` and :data:`FUSED_EPILOGUES`) in one pass,
    spread over the cores; float32 C-contiguous arrays of one shape (``out`` may be ``a`` or ``b``)."""
    element_wise_plan(a, b, out, op, act, alpha)()


def element_wise_plan(a: np.ndarray, b: np.ndarray, out: np.ndarray, op: int, act: int = 0,
                      alpha: float | tuple[float, float] = 0.0) -> Callable[[], None]:
    """:func:`element_wise` as a call ready to run (again) on these arrays."""
    fy = out.reshape(-1)
    if fy.size < ELEMENT_WISE_SPLIT_MIN:  # on this thread: no parallel region to wake
        return functools.partial(_element_wise_range, a.reshape(-1), b.reshape(-1), fy, 0, fy.size, op, act,
                                 kernel_alpha(alpha))
    return rt.Launch(_element_wise, a.reshape(-1), b.reshape(-1), fy, op, act, kernel_alpha(alpha),
                     per_threads=lambda t: (t,))


@njit(cache=True, nogil=True, parallel=True)
def _element_wise(a, b, y, op, act, alpha, parts):  # pragma: no cover - compiled
    step = (y.size + parts - 1) // parts
    step = (step + 15) // 16 * 16  # a multiple of 16 floats: no cache line shared by two threads
    for q in prange(parts):
        _call_element_wise_range((a, b, y, min(y.size, q * step), min(y.size, (q + 1) * step), op, act, alpha))

