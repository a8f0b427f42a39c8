"""Per-channel passes over whole images: the global average or maximum of every channel, and every channel scaled
by an activated gate (the end of a squeeze-excitation block: ``x * act(g)``), NHWC or NCHW, float32."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from engine.backends.cpu import runtime as rt
from engine.backends.cpu.elementwise import ELEMENT_WISE_SPLIT_MIN
from engine.backends.cpu.epilogue import activate, kernel_alpha
from engine.backends.cpu.runtime import REORDERED_SUMS


@njit(cache=True, nogil=True, fastmath=REORDERED_SUMS)
def _pool_pixels(x, y, c0, c1, is_max):  # pragma: no cover - compiled
    """``y[k]`` = the mean (or maximum: NaN wins) of ``x[:, k]`` for channels k in c0..c1 of ``x`` (pixels, C)
    and ``y`` (C,): the pixels' rows of channels added in turn into ``y`` (it stays in L1, channels vectorised)."""
    m = x.shape[0]
    acc = y[c0:c1]
    n = acc.size
    first = x[0, c0:c1]
    for k in range(n):
        acc[k] = first[k]
    for p in range(1, m):
        src = x[p, c0:c1]
        if is_max:
            for k in range(n):
                acc[k] = np.maximum(src[k], acc[k])
        else:
            for k in range(n):
                acc[k] += src[k]
    if not is_max:
        scale = np.float32(1.0 / m)
        for k in range(n):
            acc[k] *= scale


@njit(cache=True, nogil=True, parallel=True)
def _pool_pixels_par(x, y, is_max, parts):  # pragma: no cover - compiled
    """:func:`_pool_pixels` of ``x`` (N, pixels, C) into ``y`` (N, C), each image's channels cut in ``parts``
    blocks of whole cache lines."""
    n, _, c = x.shape
    step = ((c + parts - 1) // parts + 15) // 16 * 16
    blocks = (c + step - 1) // step
    for j in prange(n * blocks):
        i, q = j // blocks, j % blocks
        _pool_pixels(x[i], y[i], q * step, min(c, (q + 1) * step), is_max)


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


@njit(cache=True, nogil=True, parallel=True)
def _pool_rows_par(x, y, is_max, parts):  # pragma: no cover - compiled
    rows = x.shape[0]
    for q in prange(parts):
        _pool_rows(x, y, rows * q // parts, rows * (q + 1) // parts, is_max)


def global_pool(x: np.ndarray, out: np.ndarray, is_max: bool, nhwc: bool) -> None:
    """The average (or maximum) of every channel of each image of float32 C-contiguous ``x`` (N, H, W, C when
    ``nhwc``, else N, C, H, W) into ``out`` (N, 1, 1, C or N, C, 1, 1), one pass; spread over the cores (by
    blocks of channels, or of NCHW rows) when ``x`` is large. NaN wins a maximum and spoils its channel's mean."""
    if nhwc:
        n, h, w, c = x.shape
        xs, ys = x.reshape(n, h * w, c), out.reshape(n, c)
        if x.size < ELEMENT_WISE_SPLIT_MIN:
            for i in range(n):
                _pool_pixels(xs[i], ys[i], 0, c, is_max)
            return
        rt.launch(_pool_pixels_par, xs, ys, is_max, rt.threads())
        return
    n, c, h, w = x.shape
    xs, ys = x.reshape(n * c, h * w), out.reshape(n * c)
    if x.size < ELEMENT_WISE_SPLIT_MIN:
        _pool_rows(xs, ys, 0, n * c, is_max)
        return
    rt.launch(_pool_rows_par, xs, ys, is_max, rt.threads())


@njit(cache=True, nogil=True)
def _scale_pixels(x, gate, y, p0, p1):  # pragma: no cover - compiled
    """``y[p] = x[p] * gate`` for pixel rows p0..p1 of ``x`` and ``y`` (pixels, C)."""
    c = gate.size
    for p in range(p0, p1):
        src, dst = x[p], y[p]
        for k in range(c):
            dst[k] = src[k] * gate[k]


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
            _scale_pixels(x[i], gate, y[i], m * q // parts, m * (q + 1) // parts)


@njit(cache=True, nogil=True)
def _scale_rows(x, g, y, r0, r1, act, alpha):  # pragma: no cover - compiled
    """``y[r, :] = x[r, :] * act(g[r])`` for rows r0..r1 of ``x`` and ``y`` (N * C, pixels) (NCHW)."""
    m = x.shape[1]
    for r in range(r0, r1):
        s = activate(g[r], act, alpha)
        src, dst = x[r], y[r]
        for p in range(m):
            dst[p] = src[p] * s


@njit(cache=True, nogil=True, parallel=True)
def _scale_rows_par(x, g, y, act, alpha, parts):  # pragma: no cover - compiled
    rows = x.shape[0]
    for q in prange(parts):
        _scale_rows(x, g, y, rows * q // parts, rows * (q + 1) // parts, act, alpha)


def channel_scale(x: np.ndarray, g: np.ndarray, out: np.ndarray, nhwc: bool, act: int = 0,
                  alpha: float = 0.0) -> None:
    """``out = x * act(g)``, the gate ``g`` (N, C: one value per image and channel) broadcast over the pixels of
    float32 C-contiguous ``x`` and ``out`` (N, H, W, C when ``nhwc``, else N, C, H, W; ``out`` may be ``x``), one
    pass, spread over the cores when ``x`` is large."""
    a = kernel_alpha(alpha)
    if nhwc:
        n, h, w, c = x.shape
        xs, ys, gs = x.reshape(n, h * w, c), out.reshape(n, h * w, c), g.reshape(n, c)
        if x.size < ELEMENT_WISE_SPLIT_MIN:
            for i in range(n):
                _scale_pixels(xs[i], _gate(gs[i], act, a), ys[i], 0, h * w)
            return
        rt.launch(_scale_nhwc, xs, gs, ys, act, a, rt.threads())
        return
    n, c, h, w = x.shape
    xs, ys, gs = x.reshape(n * c, h * w), out.reshape(n * c, h * w), g.reshape(n * c)
    if x.size < ELEMENT_WISE_SPLIT_MIN:
        _scale_rows(xs, gs, ys, 0, n * c, act, a)
        return
    rt.launch(_scale_rows_par, xs, gs, ys, act, a, rt.threads())
