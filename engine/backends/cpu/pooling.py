"""Max and average pooling of NHWC tensors in one pass, by blocks of output rows over the cores."""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from numba import njit, prange

from engine.backends.cpu import runtime as rt
from engine.backends.cpu.blocks import row_block, row_blocks
from engine.backends.cpu.jobs import job_caller


@njit(cache=True, nogil=True)
def _max3_rows(x, y, r0, r1, sh, sw, ph, pw):  # pragma: no cover - compiled
    """:func:`_pool_rows` for a 3x3 max pooling: a window inside the image as nine rows of channels read at once
    (one pass over the channels, the maximum kept in registers: resnet18's stem pooling 0.14 instead of 0.26 ms
    on the 2-core Zen 3, where the pass per window cell loaded and stored the output row nine times); windows
    crossing the border cell by cell. NaN wins, as there."""
    h, w, c = x.shape
    wo = y.shape[1]
    for oh in range(r0, r1):
        yr = y[oh]
        ra = oh * sh - ph
        for ow in range(wo):
            ca = ow * sw - pw
            dst = yr[ow]
            if ra >= 0 and ca >= 0 and ra + 3 <= h and ca + 3 <= w:
                a0, a1, a2 = x[ra, ca], x[ra, ca + 1], x[ra, ca + 2]
                b0, b1, b2 = x[ra + 1, ca], x[ra + 1, ca + 1], x[ra + 1, ca + 2]
                e0, e1, e2 = x[ra + 2, ca], x[ra + 2, ca + 1], x[ra + 2, ca + 2]
                for k in range(c):
                    m0 = np.maximum(np.maximum(a0[k], a1[k]), a2[k])
                    m1 = np.maximum(np.maximum(b0[k], b1[k]), b2[k])
                    m2 = np.maximum(np.maximum(e0[k], e1[k]), e2[k])
                    dst[k] = np.maximum(np.maximum(m0, m1), m2)
                continue
            for k in range(c):
                dst[k] = -np.inf
            for i in range(3):
                r = ra + i
                if r < 0 or r >= h:
                    continue
                for j in range(3):
                    q = ca + j
                    if q < 0 or q >= w:
                        continue
                    src = x[r, q]
                    for k in range(c):
                        dst[k] = np.maximum(src[k], dst[k])


@njit(cache=True, nogil=True)
def _pool_rows(x, y, r0, r1, kh, kw, sh, sw, ph, pw, is_max, include_pad):  # pragma: no cover - compiled
    """Output rows r0..r1 of a max or average pooling of ``x`` (H, W, C) into ``y`` (Ho, Wo, C); NaN wins a max.

    Window cell by window cell over a whole output row (the row stays in L1, channels vectorised). Taking each
    pixel's cells one after the other made every update wait on the previous one: resnet18's 3x3 stem pooling
    took 0.127 ms on 2 cores that way, 0.071 ms this way (AVX-512). A 3x3 max pooling takes :func:`_max3_rows`."""
    if is_max and kh == 3 and kw == 3:
        _max3_rows(x, y, r0, r1, sh, sw, ph, pw)
        return
    h, w, c = x.shape
    wo = y.shape[1]
    start = -np.inf if is_max else 0.0
    for oh in range(r0, r1):
        yr = y[oh]
        for ow in range(wo):
            dst = yr[ow]
            for k in range(c):
                dst[k] = start
        rows = 0
        for i in range(kh):
            r = oh * sh - ph + i
            if r < 0 or r >= h:
                continue
            rows += 1
            xr = x[r]
            for j in range(kw):
                lo = max(0, (pw - j + sw - 1) // sw)  # output columns whose cell j lies inside the row
                hi = min(wo, (w - 1 + pw - j) // sw + 1)
                for ow in range(lo, hi):
                    src = xr[ow * sw - pw + j]
                    dst = yr[ow]
                    if is_max:
                        for k in range(c):  # NaN wins; a select here was a masked store (see epilogue.activate)
                            dst[k] = np.maximum(src[k], dst[k])
                    else:
                        for k in range(c):
                            dst[k] += src[k]
        if not is_max:
            for ow in range(wo):
                cols = 0
                for j in range(kw):
                    q = ow * sw - pw + j
                    if 0 <= q < w:
                        cols += 1
                scale = np.float32(1.0 / (kh * kw if include_pad else max(rows * cols, 1)))
                dst = yr[ow]
                for k in range(c):
                    dst[k] *= scale


_call_pool_rows = job_caller(_pool_rows)


def pool_nhwc(x: np.ndarray, out: np.ndarray, is_max: bool, kernel: tuple[int, int], stride: tuple[int, int],
              padding: tuple[int, int], count_include_pad: bool) -> None:
    """Max or average pooling of float32 NHWC ``x`` (N, H, W, C) into ``out`` (N, Ho, Wo, C), one pass,
    by blocks of output rows over the cores. Averages divide by the real cells of each window unless
    ``count_include_pad``."""
    pool_nhwc_plan(x, out, is_max, kernel, stride, padding, count_include_pad)()


def pool_nhwc_plan(x: np.ndarray, out: np.ndarray, is_max: bool, kernel: tuple[int, int], stride: tuple[int, int],
                   padding: tuple[int, int], count_include_pad: bool) -> Callable[[], None]:
    """:func:`pool_nhwc` as a call ready to run (again) on these arrays."""
    n, ho = out.shape[:2]
    big = out.size >= rt.SPLIT_MIN_PIXELS * 16
    rows = rt.share(ho * n, ho, n) if big else ho
    geometry = (*kernel, *stride, *padding, is_max, count_include_pad)
    if n == 1 and rows >= ho:  # one job (resnet18's global average: 7x7x512): on this thread, no parallel region
        return functools.partial(_pool_rows, x[0], out[0], 0, ho, *geometry)
    return rt.Launch(_pool, x, out, per_threads=lambda t: (rt.share(ho * n, ho, n) if big else ho, *geometry))


@njit(cache=True, nogil=True, parallel=True)
def _pool(x, y, rows, kh, kw, sh, sw, ph, pw, is_max, include_pad):  # pragma: no cover - compiled
    n, ho = y.shape[:2]
    for j in prange(row_blocks(n, ho, rows)):
        i, r0, r1 = row_block(j, ho, rows)
        _call_pool_rows((x[i], y[i], r0, r1, kh, kw, sh, sw, ph, pw, is_max, include_pad))

