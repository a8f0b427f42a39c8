"""Merge kernels compiled by Numba for the NumPy backend: a U-Net decoder step in one pass.

``upscale_concat`` writes every value of ``concat(upsample(x), skip)`` once, straight into the output:
the upsampled channels computed from their 1 or 4 sources (the arithmetic of
:func:`engine.backends.cpu_kernels.upsample`, so fused and unfused networks agree exactly), then the skip
channels copied, row by row. The generic path makes three passes instead (resample, concatenate, store)
and allocates the upsampled and the joined tensors on the way.

float32 only, NCHW or NHWC C-contiguous arrays, the upsampled size equal to the skip size; the backend
checks this and leaves every other case (fp16, crop or edge extension, other strides) to the generic path.
Imported only by the NumPy backend, when its CPU kernels are on; compiled functions are cached on disk."""
from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu_kernels import _cores, _parallel


@njit(cache=True, nogil=True)
def _column_taps(w, wo, fw, bilinear):  # pragma: no cover - compiled
    """For each output column: the left and right source columns and the right one's weight (nearest:
    the source column, weight 0). Half-pixel centres, edge columns extended."""
    x0s = np.empty(wo, np.int64)
    x1s = np.empty(wo, np.int64)
    lxs = np.zeros(wo, np.float32)
    half, zero = np.float32(0.5), np.float32(0)
    for ow in range(wo):
        if not bilinear:
            x0s[ow] = x1s[ow] = min(ow // fw, w - 1)
            continue
        fx = max((ow + half) / np.float32(fw) - half, zero)
        x0 = int(fx)
        x0s[ow], x1s[ow] = x0, min(x0 + 1, w - 1)
        lxs[ow] = np.float32(fx - x0)
    return x0s, x1s, lxs


@njit(cache=True, nogil=True)
def _row_taps(oh, h, fh, bilinear):  # pragma: no cover - compiled
    """Top and bottom source rows of output row ``oh`` and the bottom one's weight (as ``_column_taps``)."""
    if not bilinear:
        sy = min(oh // fh, h - 1)
        return sy, sy, np.float32(0)
    half, zero = np.float32(0.5), np.float32(0)
    fy = max((oh + half) / np.float32(fh) - half, zero)
    y0 = int(fy)
    return y0, min(y0 + 1, h - 1), np.float32(fy - y0)


@njit(cache=True, nogil=True)
def _rows_nhwc(x, skip, y, r0, r1, fh, fw, bilinear):  # pragma: no cover - compiled
    """Rows r0..r1 (counted over all images) of ``y`` (N, Ho, Wo, C0 + C1): the channels of ``x``
    (N, H, W, C0) upsampled, then those of ``skip`` (N, Ho, Wo, C1). Vectorised along channels."""
    h, w, c0n = x.shape[1:]
    ho, wo, c1n = skip.shape[1:]
    one = np.float32(1)
    x0s, x1s, lxs = _column_taps(w, wo, fw, bilinear)
    for t in range(r0, r1):
        bi, oh = t // ho, t % ho
        y0, y1, ly = _row_taps(oh, h, fh, bilinear)
        for ow in range(wo):
            xa, xb, lx = x0s[ow], x1s[ow], lxs[ow]
            if bilinear:
                for c in range(c0n):
                    top = (one - lx) * x[bi, y0, xa, c] + lx * x[bi, y0, xb, c]
                    bottom = (one - lx) * x[bi, y1, xa, c] + lx * x[bi, y1, xb, c]
                    y[bi, oh, ow, c] = (one - ly) * top + ly * bottom
            else:
                for c in range(c0n):
                    y[bi, oh, ow, c] = x[bi, y0, xa, c]
            for c in range(c1n):
                y[bi, oh, ow, c0n + c] = skip[bi, oh, ow, c]


@njit(cache=True, nogil=True)
def _rows_nchw(x, skip, y, r0, r1, fh, fw, bilinear):  # pragma: no cover - compiled
    """Rows r0..r1 (counted over all images and channels) of ``y`` (N, C0 + C1, Ho, Wo): the channels of
    ``x`` (N, C0, H, W) upsampled, then those of ``skip`` (N, C1, Ho, Wo)."""
    c0n, h, w = x.shape[1:]
    c1n, ho, wo = skip.shape[1:]
    ct = c0n + c1n
    one = np.float32(1)
    x0s, x1s, lxs = _column_taps(w, wo, fw, bilinear)
    for t in range(r0, r1):
        oh, rest = t % ho, t // ho
        c, bi = rest % ct, rest // ct
        if c >= c0n:
            for ow in range(wo):
                y[bi, c, oh, ow] = skip[bi, c - c0n, oh, ow]
            continue
        y0, y1, ly = _row_taps(oh, h, fh, bilinear)
        if bilinear:
            for ow in range(wo):
                xa, xb, lx = x0s[ow], x1s[ow], lxs[ow]
                top = (one - lx) * x[bi, c, y0, xa] + lx * x[bi, c, y0, xb]
                bottom = (one - lx) * x[bi, c, y1, xa] + lx * x[bi, c, y1, xb]
                y[bi, c, oh, ow] = (one - ly) * top + ly * bottom
        else:
            for ow in range(wo):
                y[bi, c, oh, ow] = x[bi, c, y0, x0s[ow]]


def upscale_concat(x: np.ndarray, skip: np.ndarray, out: np.ndarray, factor: tuple[int, int], bilinear: bool,
                   nhwc: bool) -> None:
    """``out`` = channels of ``x`` upsampled by integer ``factor`` (nearest, or bilinear with half-pixel
    centres) followed by the channels of ``skip``, in one pass spread over the cores.

    C-contiguous float32 physical arrays of one layout (NHWC when ``nhwc``); the upsampled size must equal
    the skip size (the caller checks)."""
    rows = out.shape[0] * (out.shape[1] if nhwc else out.shape[1] * out.shape[2])
    kernel = _rows_nhwc if nhwc else _rows_nchw
    step = -(-rows // _cores())
    _parallel(kernel, [(x, skip, out, r, min(rows, r + step), *factor, bool(bilinear)) for r in range(0, rows, step)])
