"""Convolution to few output channels (a network's last layer: 64 -> 3): per output pixel, four dot products
along each kernel row's input values at once."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit, prange

from engine.backends.cpu import runtime as rt
from engine.backends.cpu.blocks import row_block, row_blocks
from engine.backends.cpu.epilogue import activate, kernel_alpha
from engine.backends.cpu.jobs import job_caller
from engine.backends.cpu.memory import aligned_copy
from engine.backends.cpu.runtime import REORDERED_SUMS

#: most output channels of :func:`conv_few_outputs`, and fewest input channels (its sums run along C)
FEW_OUTPUTS_MAX = 4
FEW_OUTPUTS_MIN_CHANNELS = 8


def few_output_weights(w: np.ndarray) -> np.ndarray:
    """Weights (K, C, KH, KW) as the (1, 4, KH, KW*C) float32 array of :func:`conv_few_outputs`: the K output
    channels padded to 4 with zeros, each kernel row one run of KW*C values in the NHWC order of the input."""
    k, c, kh, kw = w.shape
    padded = np.zeros((FEW_OUTPUTS_MAX, c, kh, kw), np.float32)
    padded[:k] = w
    return aligned_copy(padded.transpose(0, 2, 3, 1)).reshape(1, FEW_OUTPUTS_MAX, kh, kw * c)


def conv_few_outputs(x: np.ndarray, wr: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None, out: np.ndarray,
                     stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], act: int = 0,
                     alpha: float | tuple[float, float] = 0.0) -> None:
    """``act(conv(x) + bias)`` into ``out`` (at most FEW_OUTPUTS_MAX output channels) for NHWC tensors (logical
    NCHW views, ``out`` contiguous NHWC): per output pixel, four dot products along each kernel row's KW*C input
    values at once, by blocks of output rows over the cores. Winograd and im2col spend their products on
    a matrix of 3 or 4 columns here (dncnn's 64 -> 3 output layer at 256x256: 2.1 ms against 3.9 by
    Winograd, 6.4 by im2col)."""
    conv_few_outputs_plan(x, wr, kernel, bias, out, stride, padding, dilation, act, alpha)()


def conv_few_outputs_plan(x: np.ndarray, wr: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None,
                          out: np.ndarray, stride: tuple[int, int], padding: tuple[int, int],
                          dilation: tuple[int, int], act: int = 0,
                          alpha: float | tuple[float, float] = 0.0) -> Callable[[], None]:
    """:func:`conv_few_outputs` made ready to run (see ``winograd.winograd_plan``)."""
    n, k, ho, wo = out.shape
    live = rt.live_contiguous(x.transpose(0, 2, 3, 1))
    ys = out.transpose(0, 2, 3, 1)
    b = np.zeros(FEW_OUTPUTS_MAX, np.float32)
    if bias is not None:
        b[:k] = bias
    rows = rt.share(ho * n, ho, n) if out.size >= rt.SPLIT_MIN_PIXELS else ho
    geometry = (*kernel, *stride, *padding, *dilation, act, kernel_alpha(alpha))
    if x.transpose(0, 2, 3, 1).flags.c_contiguous:  # read in place: one launch on fixed arrays
        return rt.Launch(_few_par, live(), wr, b, ys, rows, *geometry)
    return lambda: rt.launch(_few_par, live(), wr, b, ys, rows, *geometry)


@njit(cache=True, nogil=True, fastmath=REORDERED_SUMS)
def _few_rows(x, wr, b, y, r0, r1, kh, kw, sh, sw, ph, pw, dh, dw, act, alpha):  # pragma: no cover - compiled
    """Output rows r0..r1 of ``y`` (Ho, Wo, K <= 4) from ``x`` (H, W, C); pixels outside ``x`` count as zero. A
    kernel row lying wholly inside ``x`` (no dilation) is one contiguous run of KW*C values, summed as such."""
    h, w, c = x.shape
    wo, k = y.shape[1], y.shape[2]
    xr = x.reshape(h, w * c)
    span = kw * c
    for oh in range(r0, r1):
        for ow in range(wo):
            c0 = ow * sw - pw
            whole = dw == 1 and c0 >= 0 and c0 + kw <= w
            s0 = s1 = s2 = s3 = np.float32(0)
            for i in range(kh):
                r = oh * sh - ph + i * dh
                if r < 0 or r >= h:
                    continue
                w0, w1, w2, w3 = wr[0, 0, i], wr[0, 1, i], wr[0, 2, i], wr[0, 3, i]
                if whole:
                    seg = xr[r, c0 * c:c0 * c + span]
                    for e in range(span):
                        v = seg[e]
                        s0 += v * w0[e]
                        s1 += v * w1[e]
                        s2 += v * w2[e]
                        s3 += v * w3[e]
                    continue
                for j in range(kw):
                    q = c0 + j * dw
                    if 0 <= q < w:
                        pix = x[r, q]
                        o = j * c
                        for cc in range(c):
                            v = pix[cc]
                            s0 += v * w0[o + cc]
                            s1 += v * w1[o + cc]
                            s2 += v * w2[o + cc]
                            s3 += v * w3[o + cc]
            sums = (s0, s1, s2, s3)
            for kk in range(k):
                y[oh, ow, kk] = activate(sums[kk] + b[kk], act, alpha)


_call_few_rows = job_caller(_few_rows)


@njit(cache=True, nogil=True, parallel=True)
def _few_par(x, wr, b, y, rows, kh, kw, sh, sw, ph, pw, dh, dw, act, alpha):  # pragma: no cover - compiled
    n, ho = y.shape[:2]
    for j in prange(row_blocks(n, ho, rows)):
        i, r0, r1 = row_block(j, ho, rows)
        _call_few_rows((x[i], wr, b, y[i], r0, r1, kh, kw, sh, sw, ph, pw, dh, dw, act, alpha))

