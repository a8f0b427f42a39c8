"""Upsampling by integer factors (nearest, or bilinear with half-pixel centres), alone or followed by the
channels of a skip connection (a fused concatenation), written in one pass."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from engine.backends.cpu import runtime as rt
from engine.backends.cpu.jobs import job_caller


@njit(cache=True, nogil=True)
def _column_taps(w, wo, fw, bilinear):  # pragma: no cover - compiled
    """For each output column: the left and right source columns and the right one's weight (nearest: the
    source column, weight 0). Half-pixel centres, edge columns extended."""
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
def _upsample_rows(x, skip, y, r0, r1, fh, fw, bilinear):  # pragma: no cover - compiled
    """Rows r0..r1 (counted over all images) of ``y`` (B, Ho, Wo, C0 + C1): the channels of ``x`` (B, H, W, C0)
    upsampled (nearest, or bilinear with half-pixel centres and edge pixels extended: the CUDA kernel's
    arithmetic), then those of ``skip`` (B, Ho, Wo, C1; C1 may be 0)."""
    h, w, c0n = x.shape[1:]
    ho, wo = y.shape[1], y.shape[2]
    c1n = skip.shape[3]
    half, one, zero = np.float32(0.5), np.float32(1), np.float32(0)
    x0s, x1s, lxs = _column_taps(w, wo, fw, bilinear)
    for t in range(r0, r1):
        bi, oh = t // ho, t % ho
        if bilinear:
            fy = max((oh + half) / np.float32(fh) - half, zero)
            y0 = int(fy)
            y1, ly = min(y0 + 1, h - 1), np.float32(fy - y0)
        else:
            y0 = y1 = min(oh // fh, h - 1)
            ly = zero
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
            if c1n:
                dst, src = y[bi, oh, ow][c0n:], skip[bi, oh, ow]  # indexed from 0: no wrap-around tests
                for c in range(c1n):
                    dst[c] = src[c]


_call_upsample_rows = job_caller(_upsample_rows)


def upsample(x: np.ndarray, out: np.ndarray, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> None:
    """Upsampling by integer factors of the C-contiguous physical array ``x`` into ``out`` (same dtype,
    float32 or float16), in one pass spread over the cores."""
    upscale_concat(x, None, out, factor, bilinear, nhwc)


def upscale_concat(x: np.ndarray, skip: np.ndarray | None, out: np.ndarray, factor: tuple[int, int], bilinear: bool,
                   nhwc: bool) -> None:
    """``out`` = channels of ``x`` upsampled by integer factors, followed by the channels of ``skip`` (None:
    upsampling alone), written once; C-contiguous physical arrays of one dtype and layout, the skip of the
    upsampled size (the caller checks)."""
    if nhwc:
        parts = [(x, skip if skip is not None else out[:, :, :, :0], out)]
    else:  # every channel as an image of one channel; the skip channels are one contiguous block per image
        n, c0, h, w = x.shape
        ho, wo = out.shape[2:]
        none = np.empty((c0, ho, wo, 0), out.dtype)
        parts = [(x[i].reshape(c0, h, w, 1), none, out[i, :c0].reshape(c0, ho, wo, 1)) for i in range(n)]
        if skip is not None:
            out[:, c0:] = skip
    threads = rt.threads()
    for xs, ss, ys in parts:
        rt.launch(_upsample, xs, ss, ys, factor[0], factor[1], bilinear, threads)


@njit(cache=True, nogil=True, parallel=True)
def _upsample(x, skip, y, fh, fw, bilinear, parts):  # pragma: no cover - compiled
    total = y.shape[0] * y.shape[1]
    for q in prange(parts):
        _call_upsample_rows((x, skip, y, total * q // parts, total * (q + 1) // parts, fh, fw, bilinear))



def resize_taps(x: np.ndarray, out: np.ndarray, ih: np.ndarray, wh: np.ndarray | None, iw: np.ndarray,
                ww: np.ndarray | None, nhwc: bool) -> bool:
    """``out`` = physical 4-D float32 ``x`` resampled by separable taps: ``ih``/``iw`` int64 source rows/columns
    and ``wh``/``ww`` their float32 weights (None: nearest, weight 1), each (taps, output size). Each output pixel
    the weighted sum of its taps' pixels (NHWC: whole pixels of channels; NCHW: one plane at a time), output rows
    shared out over the cores. False (nothing written) for other arrays."""
    if not (x.ndim == out.ndim == 4 and x.dtype == out.dtype == np.float32 and x.flags.c_contiguous
            and out.flags.c_contiguous):
        return False
    n, c, hin, win = (x.shape[0], x.shape[3], x.shape[1], x.shape[2]) if nhwc else x.shape
    n2, c2, hout, wout = (out.shape[0], out.shape[3], out.shape[1], out.shape[2]) if nhwc else out.shape
    taps = ((ih, wh), (iw, ww))
    if (n, c) != (n2, c2) or ih.ndim != 2 or iw.ndim != 2 or ih.shape[1] != hout or iw.shape[1] != wout \
            or not all(i.dtype == np.int64 and (w is None or (w.dtype == np.float32 and w.shape == i.shape))
                       for i, w in taps):
        return False
    if not all(((i >= 0) & (i < size)).all() for (i, _), size in zip(taps, (hin, win), strict=True)):
        return False
    wh = np.ones(ih.shape, np.float32) if wh is None else np.ascontiguousarray(wh)
    ww = np.ones(iw.shape, np.float32) if ww is None else np.ascontiguousarray(ww)
    ih, iw = np.ascontiguousarray(ih), np.ascontiguousarray(iw)
    if out.size:
        planes = x.reshape(n, hin, win, c) if nhwc else x.reshape(n * c, hin, win, 1)
        target = out.reshape(n, hout, wout, c) if nhwc else out.reshape(n * c, hout, wout, 1)
        rt.launch(_resize_rows, planes, target, ih, wh, iw, ww, min(rt.threads(), max(1, out.size // 16384)))
    return True


@njit(cache=True, nogil=True, parallel=True)
def _resize_rows(x, y, ih, wh, iw, ww, parts):  # pragma: no cover - compiled
    """Output rows of ``y`` (B, Ho, Wo, C) from ``x`` (B, H, W, C) by the taps, in ``parts`` shares."""
    rows = y.shape[0] * y.shape[1]
    for q in prange(parts):
        _call_resize_row_range((x, y, ih, wh, iw, ww, rows * q // parts, rows * (q + 1) // parts))


@njit(cache=True, nogil=True)
def _resize_row_range(x, y, ih, wh, iw, ww, r0, r1):  # pragma: no cover - compiled
    """Output rows r0..r1 (counted over the images) of :func:`_resize_rows`."""
    ho, wo, c = y.shape[1], y.shape[2], y.shape[3]
    for r in range(r0, r1):
        image, oy = r // ho, r % ho
        for ox in range(wo):
            dst = y[image, oy, ox]
            dst[:] = 0
            for th in range(ih.shape[0]):
                src_row = x[image, ih[th, oy]]
                wy = wh[th, oy]
                for tw in range(iw.shape[0]):
                    src = src_row[iw[tw, ox]]
                    weight = wy * ww[tw, ox]
                    for ch in range(c):
                        dst[ch] += weight * src[ch]


_call_resize_row_range = job_caller(_resize_row_range)
