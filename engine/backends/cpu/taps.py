"""Convolutions by their taps, each tap over only the output pixels whose input it reads inside the image: the
atrous (dilated) convolutions of segmentation heads, whose taps mostly read padding. DeepLab's ASPP runs 3x3
convolutions of dilation 12, 24 and 36 on a 32x32 image (512² input): 44%, 75% and 89% of their multiply-adds
read zeros, which im2col multiplies all the same. Here each tap is a product of the pixels it reads (gathered by
rows of its rectangle) with that tap's C x K weights, added into the output; the output rows are shared out over
the cores, each core owning its rows (no two add into one pixel), one BLAS product per tap and share. On AVX-512
the micro-kernel does the products instead (:func:`conv_tap_panels_plan`): each tap's weights packed once in
panels, the pixels it reads taken in place, its sums added straight into the output tile."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit, prange

from engine.backends.cpu import microkernel as mk
from engine.backends.cpu import runtime as rt
from engine.backends.cpu.epilogue import activate_row
from engine.backends.cpu.jobs import job_caller
from engine.backends.cpu.memory import aligned_copy
from engine.backends.cpu.microkernel import PANEL, PANEL_ROWS, tile_n, tile_rows
from engine.backends.cpu.panels import LARGE_PANELS, _job_shares, _panel_activate, _panel_fill, panel_weights

#: largest share of a convolution's multiply-adds that read inside the image for which the taps pay (above it,
#: im2col's one product over all taps, padding included, is as fast)
TAPS_MAX_SHARE = 0.7


def tap_rectangles(size: tuple[int, int], out: tuple[int, int], kernel: tuple[int, int], padding: tuple[int, int],
                   dilation: tuple[int, int]) -> np.ndarray:
    """(taps, 6) int64: for each tap that reads inside the image at all, ``ky, kx`` and the output rows ``y0:y1``
    and columns ``x0:x1`` where it does (stride 1)."""
    spans = []
    for axis in (0, 1):
        spans.append([])
        for k in range(kernel[axis]):
            d = k * dilation[axis] - padding[axis]  # input index = output index + d
            lo, hi = max(0, -d), min(out[axis], size[axis] - d)
            spans[axis].append((k, lo, hi))
    rects = [(ky, kx, y0, y1, x0, x1) for ky, y0, y1 in spans[0] for kx, x0, x1 in spans[1] if y1 > y0 and x1 > x0]
    return np.array(rects, np.int64).reshape(-1, 6)


def inside_share(size: tuple[int, int], out: tuple[int, int], kernel: tuple[int, int], padding: tuple[int, int],
                 dilation: tuple[int, int]) -> float:
    """The share of a stride-1 convolution's tap-pixel products that read inside the image."""
    rects = tap_rectangles(size, out, kernel, padding, dilation)
    inside = int(((rects[:, 3] - rects[:, 2]) * (rects[:, 5] - rects[:, 4])).sum())
    return inside / max(1, kernel[0] * kernel[1] * out[0] * out[1])


def tap_weights(w: np.ndarray) -> np.ndarray:
    """Weights (K, C, KH, KW) as one C x K matrix per tap, (KH * KW, C, K) float32 C-contiguous."""
    k, c, kh, kw = w.shape
    return np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(kh * kw, c, k), dtype=np.float32)


def conv_taps_plan(x: np.ndarray, wt: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None, out: np.ndarray,
                   padding: tuple[int, int], dilation: tuple[int, int], act: int = 0,
                   alpha: tuple[np.float32, np.float32] = (np.float32(0), np.float32(0))) -> Callable[[], None]:
    """The prepared call of ``out`` (N, Ho, Wo, K) = act(conv(``x`` (N, H, W, C)) + ``bias``), stride 1, both float32
    C-contiguous NHWC, ``wt`` from :func:`tap_weights`: each tap a product over the pixels it reads inside the image
    only. The taps' rectangles and the bias are worked out once; each call takes its work buffers and its cores."""
    n, h, w, c = x.shape
    _, ho, wo, k = out.shape
    rects = tap_rectangles((h, w), (ho, wo), kernel, padding, dilation)
    b = np.zeros(k, np.float32) if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    head = (rt.blas_sgemm(), x, wt, b, out, rects, kernel[1], padding[0], padding[1], dilation[0], dilation[1])

    def run() -> None:
        parts = max(1, min(rt.threads(), n * ho))
        most = -(-n * ho // parts) * wo  # pixels of a share's largest product
        rt.launch(_taps_par, *head, rt.scratch(0, (parts, most, c)), rt.scratch(1, (parts, most, k)), act, alpha,
                  parts)
    return run


@njit(cache=True, nogil=True, parallel=True)
def _taps_par(sgemm, x, wt, b, y, rects, kw, ph, pw, dh, dw, gathered, products, act, alpha,
              parts):  # pragma: no cover - compiled
    for q in prange(parts):
        _call_taps_share((np.int64(q), sgemm, x, wt, b, y, rects, kw, ph, pw, dh, dw, gathered, products, act, alpha,
                          parts))


@njit(cache=True, nogil=True)
def _taps_share(q, sgemm, x, wt, b, y, rects, kw, ph, pw, dh, dw, gathered, products, act, alpha,
                parts):  # pragma: no cover - compiled
    """Share ``q`` of :func:`_taps_par`'s output rows (counted over the images)."""
    n, h, w, c = x.shape
    ho, wo, k = y.shape[1], y.shape[2], y.shape[3]
    rows = n * ho
    r0, r1 = rows * q // parts, rows * (q + 1) // parts
    for r in range(r0, r1):  # the bias first: every tap adds into it
        for ox in range(wo):
            dst = y[r // ho, r % ho, ox]
            for e in range(k):
                dst[e] = b[e]
    a_buf, t_buf = gathered[q], products[q]
    for t in range(rects.shape[0]):
        ky, kx, y0, y1, x0, x1 = rects[t]
        cols = x1 - x0
        # this share's output rows (counted over the images) inside the tap's rectangle
        m = 0
        for r in range(r0, r1):
            oy = r % ho
            if y0 <= oy < y1:
                src = x[r // ho, oy + ky * dh - ph]
                for j in range(cols):
                    pixel, row = src[x0 + j + kx * dw - pw], a_buf[m + j]
                    for e in range(c):
                        row[e] = pixel[e]
                m += cols
        if m == 0:
            continue
        sgemm(101, 111, 111, m, k, c, np.float32(1), a_buf.ctypes.data, c, wt[ky * kw + kx].ctypes.data, k,
              np.float32(0), t_buf.ctypes.data, k)
        m = 0
        for r in range(r0, r1):
            oy = r % ho
            if y0 <= oy < y1:
                dst = y[r // ho, oy]
                for j in range(cols):
                    pixel, row = dst[x0 + j], t_buf[m + j]
                    for e in range(k):
                        pixel[e] += row[e]
                m += cols
    for r in range(r0, r1):
        for ox in range(wo):
            activate_row(y[r // ho, r % ho, ox], act, alpha)


_call_taps_share = job_caller(_taps_share)


#: whether the micro-kernel takes the taps' products (:func:`conv_tap_panels_plan`): on AVX-512 (its 7 x 32 tile),
#: where OpenBLAS packed each tap's 960 x 256 weights again at every call and ran deeplabv3's ASPP at about half the
#: micro-kernel's rate (2 Zen 5 cores: dilation 12 at 32x32, 960 -> 256, 10.96 ms against ONNX Runtime's 7.44)
TAP_PANELS = LARGE_PANELS


def tap_panels_apply() -> bool:
    """Whether :func:`conv_tap_panels_plan` serves the taps' convolutions here (TAP_PANELS and the micro-kernel)."""
    return TAP_PANELS and mk.panels_available()


def tap_panel_weights(w: np.ndarray) -> np.ndarray:
    """Weights (K, C, KH, KW) as the panels of each tap (``panels.panel_weights`` of its C x K matrix),
    (KH * KW, ceil(K / PANEL), C, PANEL) float32, C-contiguous."""
    _, _, kh, kw = w.shape
    return aligned_copy(np.stack([panel_weights(w[:, :, ky:ky + 1, kx:kx + 1]) for ky in range(kh)
                                  for kx in range(kw)]))


#: jobs (blocks of output rows x panels) a tap convolution is cut into, about: each job reads every tap's panel of
#: weights once (9 x 123 kB for 960 inputs), so fewer, larger blocks read less; enough for every core
TAP_JOBS = 32


def conv_tap_panels_plan(x: np.ndarray, wp: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None,
                         out: np.ndarray, padding: tuple[int, int], dilation: tuple[int, int], act: int = 0,
                         alpha: tuple[np.float32, np.float32] = (np.float32(0), np.float32(0))) -> Callable[[], None]:
    """:func:`conv_taps_plan` through the micro-kernel: ``x`` (N, H, W, C) and ``out`` (N, Ho, Wo, K) float32
    C-contiguous NHWC, stride 1, ``wp`` from :func:`tap_panel_weights`. A job is a block of output rows and one
    panel of PANEL outputs: the bias set, then each tap's tiles of up to PANEL_ROWS pixels of a row of its
    rectangle added in (their inputs read in place, the tap's panel of weights in L2 across the block), then the
    activation. One launch on fixed arrays (replayed as it is)."""
    n, h, w, c = x.shape
    _, ho, wo, k = out.shape
    panels = wp.shape[1]
    rects = tap_rectangles((h, w), (ho, wo), kernel, padding, dilation)
    b = np.zeros(panels * PANEL, np.float32)
    if bias is not None:
        b[:k] = bias
    blocks = max(1, min(ho, -(-TAP_JOBS // (n * panels))))
    step = -(-ho // blocks)
    jobs = n * -(-ho // step) * panels
    ys = out.reshape(n, ho * wo, k)
    return rt.Launch(_tap_panels_par, x, wp, ys, b, rects, act, alpha, kernel[1], *padding, *dilation, wo, step,
                     per_threads=lambda t: (_job_shares(jobs, t),))


@njit(cache=True, nogil=True, parallel=True)
def _tap_panels_par(x, wp, ys, b, rects, act, alpha, kw, ph, pw, dh, dw, wo, step,
                    shares):  # pragma: no cover - compiled
    for q in prange(shares):
        _call_tap_panels_share((np.int64(q), x, wp, ys, b, rects, act, alpha, kw, ph, pw, dh, dw, wo, step, shares))


@njit(cache=True, nogil=True)
def _tap_panels_share(q, x, wp, ys, b, rects, act, alpha, kw, ph, pw, dh, dw, wo, step,
                      shares):  # pragma: no cover - compiled
    """Share ``q`` of :func:`_tap_panels_par`'s jobs (a job: image, block of ``step`` output rows, panel)."""
    n, h, w, c = x.shape
    m, k = ys.shape[1], ys.shape[2]
    ho = m // wo
    panels = wp.shape[1]
    blocks = (ho + step - 1) // step
    jobs = n * blocks * panels
    rows_a = np.empty(PANEL_ROWS, np.int64)
    rows_c = np.empty(PANEL_ROWS, np.int64)
    pix = 4 * c
    for job in range(jobs * q // shares, jobs * (q + 1) // shares):
        i, blk, p = job // (blocks * panels), job // panels % blocks, job % panels
        oy0, oy1 = blk * step, min(ho, blk * step + step)
        y = ys[i][oy0 * wo:oy1 * wo]
        k0 = p * PANEL
        width = min(PANEL, k - k0)
        _panel_fill(y, y, False, k0, b, width)
        image, out = x[i].ctypes.data, ys[i].ctypes.data
        for t in range(rects.shape[0]):
            ky, kx, y0, y1, x0, x1 = rects[t]
            panel = wp[ky * kw + kx, p].ctypes.data
            for oy in range(max(oy0, y0), min(oy1, y1)):
                src = image + ((oy + ky * dh - ph) * w + kx * dw - pw) * pix
                dst = out + 4 * (oy * wo * k + k0)
                ox = x0
                while ox < x1:
                    nr = tile_rows(x1 - ox)
                    for r in range(nr):
                        rows_a[r] = src + (ox + r) * pix
                        rows_c[r] = dst + 4 * (ox + r) * k
                    tile_n(nr, rows_a.ctypes.data, rows_c.ctypes.data, panel, c, 1, 0, width)
                    ox += nr
        _panel_activate(y, k0, act, alpha)


_call_tap_panels_share = job_caller(_tap_panels_share)

