"""Per-channel passes over whole images: the global average or maximum of every channel, and every channel scaled
by an activated gate (the end of a squeeze-excitation block: ``x * act(g)``), NHWC or NCHW, float32."""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from numba import njit, prange

from engine.backends.cpu import runtime as rt
from engine.backends.cpu.blocks import plain
from engine.backends.cpu.elementwise import ELEMENT_WISE_SPLIT_MIN
from engine.backends.cpu.epilogue import activate, kernel_alpha
from engine.backends.cpu.jobs import job_caller
from engine.backends.cpu.runtime import REORDERED_SUMS

#: values of a run (:func:`run_pixels`): a whole number of AVX-512's four-vector loop steps (64 values), and at
#: least this many
RUN_VALUES = 256


@njit(cache=True, nogil=True)
def run_pixels(c):  # pragma: no cover - compiled
    """Pixels of ``c`` channels whose values, taken as one run, make a loop LLVM vectorises whole: a multiple of 64
    values where ``c`` allows, at least RUN_VALUES. A loop over one pixel's channels is as short as its channel
    count, and LLVM's AVX-512 loops take 64 values a step: a 32-channel pixel went wholly to the scalar remainder
    (efficientnet's 32-channel squeeze-excitation product at 112x112, 0.11 ms against ONNX Runtime's 0.03)."""
    r = 64 // math.gcd(c, 64)
    while r * c < RUN_VALUES:
        r *= 2
    return r


@njit(inline="always")
def _fold(dst, src, is_max):  # pragma: no cover - compiled
    """``dst`` = the maximum (NaN wins) or the sum of ``dst`` and ``src``, value by value, in one loop."""
    if is_max:
        for j in range(dst.size):
            dst[j] = np.maximum(src[j], dst[j])
    else:
        for j in range(dst.size):
            dst[j] += src[j]


@njit(cache=True, nogil=True, fastmath=REORDERED_SUMS)
def _pool_pixels(x, acc, p0, p1, is_max):  # pragma: no cover - compiled
    """``acc`` (C,) = the sum (or maximum: NaN wins) of the rows of channels p0..p1 (p0 < p1) of ``x`` (pixels, C;
    C-contiguous): runs of :func:`run_pixels` pixels, each one long loop into a run's worth of partial results
    (in L1, vectorised whole), folded into ``acc`` at the end, the pixels after the last whole run one at a time.
    Pixel by pixel a loop over 32 channels never reached the vector loop on AVX-512."""
    c = x.shape[1]
    r = run_pixels(c)
    span = r * c
    xf = x.reshape(x.size)
    runs = (p1 - p0) // r
    if runs:
        part = xf[p0 * c:p0 * c + span].copy()
        for q in range(1, runs):
            _fold(part, xf[(p0 + q * r) * c:(p0 + q * r) * c + span], is_max)
        acc[:] = part[:c]
        for t in range(1, r):
            _fold(acc, part[t * c:(t + 1) * c], is_max)
        p = p0 + runs * r
    else:
        acc[:] = x[p0]
        p = p0 + 1
    for q in range(p, p1):
        _fold(acc, x[q], is_max)


_call_pool_pixels = job_caller(_pool_pixels)


@njit(cache=True, nogil=True, fastmath=REORDERED_SUMS)
def _pool_finish(partial, y, parts, pixels, is_max):  # pragma: no cover - compiled
    """``y`` (C,) from the ``parts`` rows of partial sums (or maxima) ``partial``: their sum over ``pixels`` (or
    maximum)."""
    c = y.size
    for k in range(c):
        y[k] = partial[0, k]
    for q in range(1, parts):
        _fold(y, partial[q], is_max)
    if not is_max:
        scale = np.float32(1.0 / pixels)
        for k in range(c):
            y[k] *= scale


@njit(cache=True, nogil=True)
def _pool_images(x, y, is_max):  # pragma: no cover - compiled
    """:func:`_pool_pixels` of every image of ``x`` (N, pixels, C) into ``y`` (N, C), on this thread."""
    n, m, _ = x.shape
    for i in range(n):
        _pool_pixels(x[i], y[i], plain(0), m, is_max)  # plain: a literal would compile them again
        _pool_finish(y[i:i + 1], y[i], plain(1), m, is_max)


@njit(cache=True, nogil=True, parallel=True)
def _pool_pixels_par(x, y, is_max, parts):  # pragma: no cover - compiled
    """:func:`_pool_pixels` of ``x`` (N, pixels, C) into ``y`` (N, C), each image's pixels cut in ``parts`` runs
    (at most one a pixel), their partial sums then added in order."""
    n, m, c = x.shape
    parts = min(parts, m)
    partial = np.empty((n * parts, c), np.float32)
    for j in prange(n * parts):
        i, q = j // parts, j % parts
        _call_pool_pixels((x[i], partial[j], m * q // parts, m * (q + 1) // parts, is_max))
    for i in range(n):
        _pool_finish(partial[i * parts:(i + 1) * parts], y[i], parts, m, is_max)


@njit(cache=True, nogil=True, fastmath=REORDERED_SUMS)
def _pool_rows(x, y, r0, r1, is_max):  # pragma: no cover - compiled
    """``y[r]`` = the mean (or maximum) of row ``x[r]`` for r in r0..r1 (NCHW: a row is one channel's image)."""
    m = x.shape[1]
    for r in range(r0, r1):
        src = x[r]
        if is_max:
            v = src[0]
            for p in range(1, m):
                v = np.maximum(src[p], v)
            y[r] = v
        else:
            s = np.float32(0)
            for p in range(m):
                s += src[p]
            y[r] = s * np.float32(1.0 / m)


_call_pool_rows = job_caller(_pool_rows)


@njit(cache=True, nogil=True, parallel=True)
def _pool_rows_par(x, y, is_max, parts):  # pragma: no cover - compiled
    rows = x.shape[0]
    for q in prange(parts):
        _call_pool_rows((x, y, rows * q // parts, rows * (q + 1) // parts, is_max))


def global_pool(x: np.ndarray, out: np.ndarray, is_max: bool, nhwc: bool) -> None:
    """The average (or maximum) of every channel of each image of float32 C-contiguous ``x`` (N, H, W, C when
    ``nhwc``, else N, C, H, W) into ``out`` (N, 1, 1, C or N, C, 1, 1), one pass; spread over the cores (by
    runs of pixels, or blocks of NCHW rows) when ``x`` is large. NaN wins a maximum and spoils its channel's mean."""
    global_pool_plan(x, out, is_max, nhwc)()


def global_pool_plan(x: np.ndarray, out: np.ndarray, is_max: bool, nhwc: bool) -> Callable[[], None]:
    """:func:`global_pool` as a call ready to run (again) on these arrays."""
    if nhwc:
        n, h, w, c = x.shape
        xs, ys = x.reshape(n, h * w, c), out.reshape(n, c)
        if x.size < ELEMENT_WISE_SPLIT_MIN:
            return functools.partial(_pool_images, xs, ys, is_max)
        return rt.Launch(_pool_pixels_par, xs, ys, is_max, per_threads=lambda t: (t,))
    n, c, h, w = x.shape
    xs, ys = x.reshape(n * c, h * w), out.reshape(n * c)
    if x.size < ELEMENT_WISE_SPLIT_MIN:
        return functools.partial(_pool_rows, xs, ys, 0, n * c, is_max)
    return rt.Launch(_pool_rows_par, xs, ys, is_max, per_threads=lambda t: (t,))


@njit(cache=True, nogil=True)
def _scale_pixels(x, gate, y, p0, p1):  # pragma: no cover - compiled
    """``y[p] = x[p] * gate`` for pixel rows p0..p1 of ``x`` and ``y`` (pixels, C; C-contiguous, ``y`` may be
    ``x``): runs of :func:`run_pixels` pixels, each one long loop against the gate repeated along a run (a loop per
    pixel over 32 channels never reached AVX-512's vector loop). In place, one array read and written: LLVM's check
    that two arrays do not overlap would send the same memory to the scalar loop."""
    c = gate.size
    r = run_pixels(c)
    run = np.empty(r * c, np.float32)
    for t in range(r):
        for k in range(c):
            run[t * c + k] = gate[k]
    xf, yf = x.reshape(x.size), y.reshape(y.size)
    same = x.ctypes.data == y.ctypes.data
    p = p0
    while p < p1:
        q = min(p1, p + r)
        a, b = p * c, q * c
        if same:
            dst = yf[a:b]
            for j in range(b - a):
                dst[j] *= run[j]
        else:
            src, dst = xf[a:b], yf[a:b]
            for j in range(b - a):
                dst[j] = src[j] * run[j]
        p = q


_call_scale_pixels = job_caller(_scale_pixels)


@njit(cache=True, nogil=True)
def _gate(g, act, alpha):  # pragma: no cover - compiled
    """act(``g``) of one image's gates, a new float32 array."""
    out = np.empty(g.size, np.float32)
    for k in range(g.size):
        out[k] = activate(g[k], act, alpha)
    return out


@njit(cache=True, nogil=True, parallel=True)
def _scale_nhwc(x, g, y, act, alpha, parts):  # pragma: no cover - compiled
    """``y[i, p, :] = x[i, p, :] * act(g[i, :])`` for ``x`` and ``y`` (N, pixels, C), ``g`` (N, C); each image's
    pixels cut in ``parts`` blocks."""
    n, m, _ = x.shape
    for i in range(n):
        gate = _gate(g[i], act, alpha)
        for q in prange(parts):
            _call_scale_pixels((x[i], gate, y[i], m * q // parts, m * (q + 1) // parts))


@njit(cache=True, nogil=True)
def _scale_rows(x, g, y, r0, r1, act, alpha):  # pragma: no cover - compiled
    """``y[r, :] = x[r, :] * act(g[r])`` for rows r0..r1 of ``x`` and ``y`` (N * C, pixels) (NCHW)."""
    m = x.shape[1]
    for r in range(r0, r1):
        s = activate(g[r], act, alpha)
        src, dst = x[r], y[r]
        for p in range(m):
            dst[p] = src[p] * s


_call_scale_rows = job_caller(_scale_rows)


@njit(cache=True, nogil=True, parallel=True)
def _scale_rows_par(x, g, y, act, alpha, parts):  # pragma: no cover - compiled
    rows = x.shape[0]
    for q in prange(parts):
        _call_scale_rows((x, g, y, rows * q // parts, rows * (q + 1) // parts, act, alpha))


def channel_scale(x: np.ndarray, g: np.ndarray, out: np.ndarray, nhwc: bool, act: int = 0,
                  alpha: float = 0.0) -> None:
    """``out = x * act(g)``, the gate ``g`` (N, C: one value per image and channel) broadcast over the pixels of
    float32 C-contiguous ``x`` and ``out`` (N, H, W, C when ``nhwc``, else N, C, H, W; ``out`` may be ``x``), one
    pass, spread over the cores when ``x`` is large."""
    channel_scale_plan(x, g, out, nhwc, act, alpha)()


def channel_scale_plan(x: np.ndarray, g: np.ndarray, out: np.ndarray, nhwc: bool, act: int = 0,
                       alpha: float = 0.0) -> Callable[[], None]:
    """:func:`channel_scale` as a call ready to run (again) on these arrays."""
    a = kernel_alpha(alpha)
    if nhwc:
        n, h, w, c = x.shape
        xs, ys, gs = x.reshape(n, h * w, c), out.reshape(n, h * w, c), g.reshape(n, c)
        if x.size < ELEMENT_WISE_SPLIT_MIN:
            def scale_images() -> None:
                for i in range(n):
                    _scale_pixels(xs[i], _gate(gs[i], act, a), ys[i], 0, h * w)
            return scale_images
        return rt.Launch(_scale_nhwc, xs, gs, ys, act, a, per_threads=lambda t: (t,))
    n, c, h, w = x.shape
    xs, ys, gs = x.reshape(n * c, h * w), out.reshape(n * c, h * w), g.reshape(n * c)
    if x.size < ELEMENT_WISE_SPLIT_MIN:
        return functools.partial(_scale_rows, xs, gs, ys, 0, n * c, act, a)
    return rt.Launch(_scale_rows_par, xs, gs, ys, act, a, per_threads=lambda t: (t,))
