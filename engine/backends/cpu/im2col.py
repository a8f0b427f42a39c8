"""Convolution of NHWC tensors by im2col (every kernel size, stride, padding and dilation): cache-sized blocks
of output pixels, each gathered into rows and multiplied straight into the output by one BLAS product, bias, a
residual and the activation applied while the block is in cache. A 1x1 convolution of stride 1 needs no im2col;
a layer of fewer blocks than threads (a 7x7 image) is cut by output channels instead."""
from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np
from numba import njit, prange

from engine.backends.cpu import runtime as rt
from engine.backends.cpu.blocks import plain
from engine.backends.cpu.epilogue import activate_row, kernel_alpha
from engine.backends.cpu.jobs import job_caller
from engine.backends.cpu.memory import aligned_copy

#: bytes of im2col rows per block of output pixels: 1 MiB stays in a core's L2 (3 MiB blocks, in L3, made resnet18's
#: 1x1 strided shortcut 0.15 instead of 0.05 ms and its RGB stem 0.90 instead of 0.86)
BLOCK_BYTES = 1 << 20

#: narrowest column block when a small layer's product is cut by output channels instead
COLUMN_SPLIT_MIN = 16

#: fewest output pixels for which an im2col convolution is cut by pixels (each core doing its own im2col and
#: product with all the weights) rather than by output channels (one im2col, the weights shared out). On 2
#: cores, resnet18's 28x28 and 14x14 layers (784 and 196 pixels) went faster cut by pixels; 7x7 ones did not
CONV_SPLIT_MIN_PIXELS = 128


@njit(cache=True, nogil=True)
def im2col_nhwc(x, cols, p0, q0, q1, wo, kh, kw, sh, sw, ph, pw, dh, dw):  # pragma: no cover - compiled
    """Rows q0..q1 of ``cols`` (P, KH*KW*C): the receptive fields of output pixels p0+q0.. of ``x`` (H, W, C), in
    (kernel row, kernel column, channel) order; pixels outside ``x`` read as zero. A kernel row lying
    wholly inside ``x`` (no dilation) is one contiguous run of KW*C values, copied as such."""
    h, w, c_n = x.shape
    xr = x.reshape(h, w * c_n)
    span = kw * c_n
    for q in range(q0, q1):
        p = p0 + q
        oh, ow = p // wo, p % wo
        c0 = ow * sw - pw
        whole = dw == 1 and c0 >= 0 and c0 + kw <= w
        for i in range(kh):
            r = oh * sh - ph + i * dh
            dst = cols[q, i * span:(i + 1) * span]  # copies index slices from 0: plain loads, no wrap-around tests
            if r < 0 or r >= h:
                dst[:] = 0
            elif whole:
                src = xr[r, c0 * c_n:(c0 + kw) * c_n]
                for e in range(span):
                    dst[e] = src[e]
            else:
                for j in range(kw):
                    cc = c0 + j * dw
                    part = dst[j * c_n:(j + 1) * c_n]
                    if 0 <= cc < w:
                        pix = x[r, cc]
                        for c in range(c_n):
                            part[c] = pix[c]
                    else:
                        part[:] = 0


@njit(cache=True, nogil=True)
def _bias_act(y, p0, p1, k0, k1, bias, act, alpha):  # pragma: no cover - compiled
    """Rows p0..p1, columns k0..k1 of ``y`` (P, K) += bias, activated in place."""
    bb = bias[k0:k1]
    for p in range(p0, p1):
        row = y[p][k0:k1]
        for k in range(row.size):
            row[k] += bb[k]
        activate_row(row, act, alpha)


def nhwc_operands(x: np.ndarray, out: np.ndarray,
                   bias: np.ndarray | None) -> tuple[Callable[[], np.ndarray], np.ndarray, np.ndarray]:
    """The input as a function giving a contiguous (N, H, W, C) array when called (see :func:`_live_contiguous`),
    the output as (N, pixels, K) rows and the bias (zeros when there is none), for the NHWC convolutions."""
    n, k, ho, wo = out.shape
    b = np.zeros(k, np.float32) if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    return rt.live_contiguous(x.transpose(0, 2, 3, 1)), out.transpose(0, 2, 3, 1).reshape(n, ho * wo, k), b


def pixel_rows(a: np.ndarray) -> np.ndarray:
    """A logical NCHW view of NHWC memory as (N, pixels, K) rows (a view: the caller checks the layout)."""
    n, k, h, w = a.shape
    return a.transpose(0, 2, 3, 1).reshape(n, h * w, k)


def gemm_weights(w: np.ndarray) -> np.ndarray:
    """Weights (K, C, KH, KW) as the (KH*KW*C, K) float32 matrix of :func:`conv_nhwc`."""
    k = w.shape[0]
    return aligned_copy(np.asarray(w).transpose(2, 3, 1, 0).reshape(-1, k))


def conv_nhwc(x: np.ndarray, wm: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None, out: np.ndarray,
              stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], act: int = 0,
              alpha: float | tuple[float, float] = 0.0) -> None:
    """``act(conv(x) + bias)`` into ``out`` for NHWC tensors (logical NCHW views, ``out`` contiguous
    NHWC): im2col by cache-sized blocks of output pixels straight into one matrix product per block,
    whose result lands in ``out`` itself; a 1x1 convolution of stride 1 needs no im2col at all. A layer
    of fewer blocks than threads (a 7x7 image) is cut by output channels instead."""
    conv_nhwc_plan(x, wm, kernel, bias, out, stride, padding, dilation, act, alpha)()


def conv_nhwc_plan(x: np.ndarray, wm: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None, out: np.ndarray,
                   stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], act: int = 0,
                   alpha: float | tuple[float, float] = 0.0, residual: np.ndarray | None = None) -> Callable[[], None]:
    """:func:`conv_nhwc` made ready to run (see ``winograd.winograd_plan``), ``residual`` (as ``out``) added before the
    activation in each block's epilogue."""
    n, c, h, w = x.shape
    k, ho, wo = out.shape[1:]
    kh, kw = kernel
    live, ys, b = nhwc_operands(x, out, bias)
    rs = ys if residual is None else pixel_rows(residual)
    direct = kh == kw == 1 and stride == (1, 1) and padding == (0, 0)
    step = max(16, min(ho * wo, BLOCK_BYTES // (4 * max(kh * kw * c, k))))
    if ho * wo * n >= CONV_SPLIT_MIN_PIXELS:
        step = rt.share(ho * wo * n, step, n)
    threads = rt.threads()
    blocks = n * -(-(ho * wo) // step)
    split = blocks < threads and k >= 2 * COLUMN_SPLIT_MIN
    bounds = np.array([0] + [s.stop for s in share_columns(k)] if split else [0, k], np.int64)
    shape = (threads, 0 if direct else (ho * wo if split else step) * wm.shape[0])
    head = (rt.blas_sgemm(),)
    tail = (wm, b, act, kernel_alpha(alpha), wo, kh, kw, *stride, *padding, *dilation, step, direct, bounds)

    def run() -> None:
        if rt.threads() != threads:  # the cores this process may use changed: the work buffers' shapes too
            conv_nhwc_plan(x, wm, kernel, bias, out, stride, padding, dilation, act, alpha, residual)()
            return
        args = (*head, live(), ys, rs, residual is not None, *tail, rt.scratch(0, shape))
        if not split:
            rt.launch(_conv_par, 0, blocks, 0, *args)
            return
        for i in range(n):  # an image of one block: the im2col shared out by rows, then the product by columns
            if not direct:
                rt.launch(_conv_par, i, threads, 1, *args)
            rt.launch(_conv_par, i, len(bounds) - 1, 2, *args)
    return run


@njit(cache=True, nogil=True)
def _product(sgemm, a, lda, m, wm, k0, k1, y, p0, r, has_res):  # pragma: no cover - compiled
    """Rows p0..p0+m, columns k0..k1 of ``y`` (P, K) = the ``m`` rows at address ``a`` (leading dimension
    ``lda``) times columns k0..k1 of ``wm``, plus those of ``r`` (P, K) when ``has_res``: BLAS adds the product to
    them in ``y`` (copied there first unless ``y`` is ``r``: the output written over its residual)."""
    kk, k = wm.shape
    if has_res and r.ctypes.data != y.ctypes.data:
        for p in range(p0, p0 + m):
            y[p][k0:k1] = r[p][k0:k1]
    sgemm(101, 111, 111, m, k1 - k0, kk, np.float32(1), a, lda, wm.ctypes.data + 4 * k0, k,
          np.float32(1) if has_res else np.float32(0), y.ctypes.data + 4 * (p0 * k + k0), k)


@njit(cache=True, nogil=True, parallel=True)
def _conv_par(j0, count, step_kind, sgemm, xs, ys, rs, has_res, wm, b, act, alpha, wo, kh, kw, sh, sw, ph, pw, dh, dw,
              step, direct, bounds, cbuf):  # pragma: no cover - compiled
    """Kind 0: pixel blocks j0..j0+count, one per iteration, in the im2col rows of the thread running it. Kinds 1
    and 2, for image j0 cut by output channels: shares of its im2col (by rows), then of its product."""
    for q in prange(count):
        tid = numba.get_thread_id() if step_kind == 0 else 0
        _call_conv_job((j0 + q if step_kind == 0 else j0, np.int64(q), step_kind, tid, sgemm, xs, ys, rs, has_res, wm,
                        b, act, alpha, wo, kh, kw, sh, sw, ph, pw, dh, dw, step, direct, bounds, cbuf))


@njit(cache=True, nogil=True)
def _conv_job(j, q, step_kind, tid, sgemm, xs, ys, rs, has_res, wm, b, act, alpha, wo, kh, kw, sh, sw, ph, pw, dh, dw,
              step, direct, bounds, cbuf):  # pragma: no cover - compiled
    """Convolution of the images ``xs`` (N, H, W, C) into ``ys`` (N, P, K). Kind 0: block ``j`` of ``step`` pixels
    (im2col into the rows of ``cbuf`` of thread ``tid``, product, bias and activation). Kind 1: share ``q`` of the
    im2col of image ``j`` (all its pixels, into the rows of thread 0); kind 2: its product and activation for
    output channels ``bounds[q]..bounds[q + 1]``."""
    n, total, k = ys.shape
    c, kk = xs.shape[3], wm.shape[0]
    if step_kind == 0:
        per_image = (total + step - 1) // step
        i, p0 = j // per_image, (j % per_image) * step
        p1 = min(total, p0 + step)
        if direct:
            _product(sgemm, xs[i].ctypes.data + 4 * p0 * c, c, p1 - p0, wm, plain(0), k, ys[i], p0, rs[i], has_res)
        else:
            cols = cbuf[tid][:(p1 - p0) * kk].reshape((p1 - p0, kk))
            im2col_nhwc(xs[i], cols, p0, plain(0), p1 - p0, wo, kh, kw, sh, sw, ph, pw, dh, dw)
            _product(sgemm, np.int64(cols.ctypes.data), kk, p1 - p0, wm, plain(0), k, ys[i], p0, rs[i], has_res)
        _bias_act(ys[i], p0, p1, plain(0), k, b, act, alpha)
        return
    if direct:  # a 1x1 convolution of stride 1 reads its input as it is
        a, lda = np.int64(xs[j].ctypes.data), c
    else:
        cols = cbuf[0][:total * kk].reshape((total, kk))
        if step_kind == 1:
            shares = cbuf.shape[0]
            im2col_nhwc(xs[j], cols, plain(0), total * q // shares, total * (q + 1) // shares, wo, kh, kw, sh, sw, ph, pw,
                         dh, dw)
            return
        a, lda = np.int64(cols.ctypes.data), kk
    _product(sgemm, a, lda, total, wm, bounds[q], bounds[q + 1], ys[j], plain(0), rs[j], has_res)
    _bias_act(ys[j], plain(0), total, bounds[q], bounds[q + 1], b, act, alpha)


_call_conv_job = job_caller(_conv_job)


def share_columns(k: int) -> list[slice]:
    """``k`` output channels cut into one block per core, each a multiple of 16 wide (SIMD rows of BLAS)."""
    cores = rt.cores()
    per_core = -(-k // cores)
    width = -(-per_core // COLUMN_SPLIT_MIN) * COLUMN_SPLIT_MIN
    return [slice(k0, min(k, k0 + width)) for k0 in range(0, k, width)]
