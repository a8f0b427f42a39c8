"""Winograd convolution F(m x m, 3x3) for 3x3 convolutions of stride 1: each is computed as (m + 2)^2 matrix
products (BLAS, or the panel micro-kernel) between two Numba passes: the input transform (padding included,
reading the input once) and the output transform (bias, a residual and ReLU / leaky ReLU fused, writing the output
once). The work goes by blocks of tile rows so that the transformed tiles of a block stay in cache between the
three steps.

F(4x4, 3x3) (36 products of 6x6 tiles) serves NCHW and NHWC tensors; F(2x2, 3x3) (16 products of 4x4 tiles,
fewer weight bytes, more products) serves small NHWC images. Both tile sizes share one implementation of the
tile passes (:func:`_nhwc_transforms`), which differ only in the rows of B^T and A^T they apply (Lavin & Gray,
"Fast Algorithms for Convolutional Neural Networks")."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from numba import njit, prange

from engine.backends.cpu import microkernel as mk
from engine.backends.cpu import runtime as rt
from engine.backends.cpu.blocks import plain
from engine.backends.cpu.epilogue import activate, kernel_alpha
from engine.backends.cpu.jobs import job_caller
from engine.backends.cpu.memory import aligned_copy
from engine.backends.cpu.microkernel import PANEL
from engine.backends.cpu.panels import panel_product
from engine.tensor import is_nhwc_memory

#: bytes of transformed input tiles per Winograd block: with the transforms vectorised, 3 MiB blocks (L3) left
#: them waiting on memory; 1 MiB ones stay in a core's L2 (64 -> 64 channels at 256x256: 6.3 instead of 7.8 ms)
WINOGRAD_BLOCK_BYTES = 1 << 20

#: a Winograd layer of fewer 4x4 output tiles stays one block, each of its three steps shared out over the
#: threads; a larger one is cut into blocks of tile rows, at least one per thread (on 2 cores, unet 256 went
#: from 136-145 ms to 91-105 ms when its large layers were cut; resnet18's 28x28 layers are not faster cut)
SPLIT_MIN_TILES = 64

#: G of F(m x m, 3x3) by output tile size m: weights to the Winograd domain, G w G^T. F(2x2, 3x3): 16 products of
#: 4x4 tiles (stride 2) instead of 36 of 6x6 (stride 4): 4/9 of the direct multiplications instead of 1/4, but
#: weights 16/9 of the direct ones instead of 4x. resnet18's 14x14x256 layers read 9.4 MB of F(4x4) weights each
#: (from memory, every run: the network's weights do not fit the caches).
_G = {4: np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                   [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]),
      2: np.array([[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]])}


def transform_weights(w: np.ndarray, nhwc: bool = True, tile: int = 4) -> np.ndarray:
    """Weights (K, C, 3, 3) to the Winograd domain of F(``tile`` x ``tile``, 3x3) (4 or 2), computed in float64:
    float32 (36, C, K) (16 for F(2x2)) for NHWC tensors, (36, K, C) for NCHW ones (F(4x4) only)."""
    g = _G[tile]
    a = g.shape[0]
    u = np.einsum("ai,kcij,bj->abck", g, np.asarray(w, dtype=np.float64), g).reshape(a * a, w.shape[1], w.shape[0])
    return aligned_copy(u if nhwc else u.transpose(0, 2, 1))

_2, _4, _5, _8 = np.float32(2), np.float32(4), np.float32(5), np.float32(8)  # float32 constants keep float32 math


@njit(inline="always")
def _bt(d0, d1, d2, d3, d4, d5):  # pragma: no cover - compiled
    """One row of B^T d (F(4x4, 3x3) input transform)."""
    return (_4 * d0 - _5 * d2 + d4, d3 + d4 - _4 * (d1 + d2), _4 * (d1 - d2) - d3 + d4,
            _2 * (d3 - d1) - d2 + d4, _2 * (d1 - d3) - d2 + d4, _4 * d1 - _5 * d3 + d5)


@njit(inline="always")
def _at(m0, m1, m2, m3, m4, m5):  # pragma: no cover - compiled
    """One row of A^T m (F(4x4, 3x3) output transform)."""
    return (m0 + m1 + m2 + m3 + m4, m1 - m2 + _2 * (m3 - m4), m1 + m2 + _4 * (m3 + m4), m1 - m2 + _8 * (m3 - m4) + m5)


@njit(inline="always")
def _bt2(d0, d1, d2, d3):  # pragma: no cover - compiled
    """One row of B^T d (F(2x2, 3x3) input transform)."""
    return d0 - d2, d1 + d2, d2 - d1, d1 - d3


@njit(inline="always")
def _at2(m0, m1, m2, m3):  # pragma: no cover - compiled
    """One row of A^T m (F(2x2, 3x3) output transform)."""
    return m0 + m1 + m2, m1 - m2 - m3


@njit(cache=True, nogil=True)
def _in_nchw(x, v, ty0, nty, ntx, ph, pw, i0):  # pragma: no cover - compiled
    """Input tiles (6x6, stride 4) of tile rows ty0..ty0+nty of ``x`` (C, H, W), transformed (B^T d B),
    into ``v`` (36, C, tiles) from tile ``i0`` on; pixels outside ``x`` (padding) read as zero. Vectorised
    along tiles."""
    c_n, h, w = x.shape
    wp = 4 * ntx + 2
    buf = np.empty((6, wp), np.float32)
    t = np.empty((6, 6, ntx), np.float32)
    for job in range(c_n * nty):
        c, r = job // nty, job % nty
        r0 = 4 * (ty0 + r) - ph
        buf[:] = 0
        for i in range(6):
            if 0 <= r0 + i < h:
                n = min(w, wp - pw)
                buf[i, pw:pw + n] = x[c, r0 + i, :n]
        for j in range(6):
            for tx in range(ntx):
                q = 4 * tx + j
                t[0, j, tx], t[1, j, tx], t[2, j, tx], t[3, j, tx], t[4, j, tx], t[5, j, tx] = _bt(
                    buf[0, q], buf[1, q], buf[2, q], buf[3, q], buf[4, q], buf[5, q])
        base = i0 + r * ntx
        for i in range(6):
            k = 6 * i
            for tx in range(ntx):
                a = _bt(t[i, 0, tx], t[i, 1, tx], t[i, 2, tx], t[i, 3, tx], t[i, 4, tx], t[i, 5, tx])
                for jj in range(6):
                    v[k + jj, c, base + tx] = a[jj]


@njit(cache=True, nogil=True)
def _out_nchw(m, y, r_, has_res, bias, act, alpha, ty0, nty, ntx, i0):  # pragma: no cover - compiled
    """Products ``m`` (36, K, tiles) of tile rows ty0..ty0+nty (from tile ``i0`` of ``m`` on) back to pixels
    (A^T m A), plus bias (and the residual ``r_`` of ``y``'s shape when ``has_res``, read where each value is
    written: ``y`` may be it), activated (the epilogue of code ``act``, coefficients ``alpha``:
    ``epilogue.activate``), into ``y`` (K, Ho, Wo)."""
    k_n, ho, wo = y.shape
    t = np.empty((4, 6, ntx), np.float32)
    row = np.empty(4 * ntx, np.float32)
    for job in range(k_n * nty):
        k, r = job // nty, job % nty
        r0 = 4 * (ty0 + r)
        base = i0 + r * ntx
        for j in range(6):
            for tx in range(ntx):
                i = base + tx
                t[0, j, tx], t[1, j, tx], t[2, j, tx], t[3, j, tx] = _at(
                    m[j, k, i], m[6 + j, k, i], m[12 + j, k, i], m[18 + j, k, i], m[24 + j, k, i], m[30 + j, k, i])
        b = bias[k]
        for i in range(4):
            if r0 + i >= ho:
                break
            for tx in range(ntx):
                o = _at(t[i, 0, tx], t[i, 1, tx], t[i, 2, tx], t[i, 3, tx], t[i, 4, tx], t[i, 5, tx])
                for jj in range(4):
                    row[4 * tx + jj] = o[jj] + b if has_res else activate(o[jj] + b, act, alpha)
            if has_res:
                yr, rr = y[k, r0 + i], r_[k, r0 + i]
                for jj in range(wo):
                    yr[jj] = activate(row[jj] + rr[jj], act, alpha)
            else:
                y[k, r0 + i, :] = row[:wo]



def _nhwc_transforms(m: int) -> tuple[Any, Any]:
    """The input and output passes of F(``m`` x ``m``, 3x3) (4 or 2) for NHWC tiles, compiled for that tile size
    (a constant of the compiled code: its loops unrolled, the other size's rows pruned):

    ``input(x, v, ty0, nty, ntx, ph, pw, i0)``: input tiles ((m + 2)^2, stride m) of tile rows ty0..ty0+nty of
    ``x`` (H, W, C), transformed (B^T d B), into ``v`` ((m + 2)^2, tiles, C) from tile ``i0`` on; pixels outside
    ``x`` (padding) read as zero. Vectorised along channels; tiles lying wholly inside ``x`` are read in place,
    the others through a zero-filled copy. Rows first (d B), then columns (B^T of that), each column's results
    stored m + 2 planes apart: the other order (columns, then rows stored into adjacent planes) ran LLVM's scalar
    fallback loop at run time, 3.6x slower (1.17 against 0.32 us a tile of 64 channels).

    ``output(m_, y, r_, has_res, bias, act, alpha, ty0, nty, ntx, i0)``: products ``m_`` ((m + 2)^2, tiles, K) of
    those tile rows back to pixels (A^T m A), plus bias (and the residual ``r_`` of ``y``'s shape when ``has_res``,
    read where each value is written: ``y`` may be it), activated (the epilogue of code ``act``, coefficients ``alpha``:
    ``epilogue.activate``), into ``y`` (Ho, Wo, K). Rows of each product tile first, then columns into ``y`` (the
    other order ran the scalar fallback loop, 3.5x slower)."""
    a = m + 2  # input tile side

    @njit(cache=True, nogil=True)
    def input_pass(x, v, ty0, nty, ntx, ph, pw, i0):  # pragma: no cover - compiled
        h, w, c_n = x.shape
        d = np.zeros((a, a, c_n), np.float32)
        t = np.empty((a, a, c_n), np.float32)
        for idx in range(nty * ntx):
            r0 = m * (ty0 + idx // ntx) - ph
            c0 = m * (idx % ntx) - pw
            if r0 >= 0 and c0 >= 0 and r0 + a <= h and c0 + a <= w:
                s, sr, sc = x, r0, c0
            else:
                for i in range(a):
                    for j in range(a):
                        if 0 <= r0 + i < h and 0 <= c0 + j < w:
                            d[i, j, :] = x[r0 + i, c0 + j, :]
                        else:
                            d[i, j, :] = 0
                s, sr, sc = d, 0, 0
            for i in range(a):  # d B, one row at a time: few enough pointers for LLVM to vectorise along channels
                r = sr + i
                for c in range(c_n):
                    if m == 4:
                        e = _bt(s[r, sc, c], s[r, sc + 1, c], s[r, sc + 2, c], s[r, sc + 3, c], s[r, sc + 4, c],
                                s[r, sc + 5, c])
                    else:
                        e = _bt2(s[r, sc, c], s[r, sc + 1, c], s[r, sc + 2, c], s[r, sc + 3, c])
                    for j in range(a):
                        t[i, j, c] = e[j]
            q = i0 + idx
            for j in range(a):
                for c in range(c_n):
                    if m == 4:
                        e = _bt(t[0, j, c], t[1, j, c], t[2, j, c], t[3, j, c], t[4, j, c], t[5, j, c])
                    else:
                        e = _bt2(t[0, j, c], t[1, j, c], t[2, j, c], t[3, j, c])
                    for i in range(a):
                        v[a * i + j, q, c] = e[i]

    @njit(cache=True, nogil=True)
    def output_pass(mm, y, r_, has_res, bias, act, alpha, ty0, nty, ntx, i0):  # pragma: no cover - compiled
        ho, wo, k_n = y.shape
        t = np.empty((a, m, k_n), np.float32)
        for idx in range(nty * ntx):
            r0 = m * (ty0 + idx // ntx)
            c0 = m * (idx % ntx)
            q = i0 + idx
            for i in range(a):
                p = a * i
                for k in range(k_n):
                    if m == 4:
                        o = _at(mm[p, q, k], mm[p + 1, q, k], mm[p + 2, q, k], mm[p + 3, q, k], mm[p + 4, q, k],
                                mm[p + 5, q, k])
                    else:
                        o = _at2(mm[p, q, k], mm[p + 1, q, k], mm[p + 2, q, k], mm[p + 3, q, k])
                    for jj in range(m):
                        t[i, jj, k] = o[jj]
            nj, ni = min(m, wo - c0), min(m, ho - r0)
            for jj in range(nj):
                for k in range(k_n):
                    if m == 4:
                        o = _at(t[0, jj, k], t[1, jj, k], t[2, jj, k], t[3, jj, k], t[4, jj, k], t[5, jj, k])
                    else:
                        o = _at2(t[0, jj, k], t[1, jj, k], t[2, jj, k], t[3, jj, k])
                    b = bias[k]
                    if has_res:
                        for i in range(ni):
                            y[r0 + i, c0 + jj, k] = activate(o[i] + b + r_[r0 + i, c0 + jj, k], act, alpha)
                    elif ni == m:
                        for i in range(m):
                            y[r0 + i, c0 + jj, k] = activate(o[i] + b, act, alpha)
                    else:
                        for i in range(ni):
                            y[r0 + i, c0 + jj, k] = activate(o[i] + b, act, alpha)

    return input_pass, output_pass


_in_nhwc, _out_nhwc = _nhwc_transforms(4)
_in2_nhwc, _out2_nhwc = _nhwc_transforms(2)


#: whether NHWC Winograd products run on the panel micro-kernel (where it exists and K is a multiple of PANEL)
#: rather than OpenBLAS
WINOGRAD_PANELS = True


def winograd_panels(u: np.ndarray) -> np.ndarray:
    """NHWC Winograd weights (P, C, K) from :func:`transform_weights` as the (P, K / PANEL, C, PANEL) panels of the
    micro-kernel, which :func:`winograd_conv3x3` then multiplies by."""
    p, c, k = u.shape
    return aligned_copy(u.reshape(p, c, k // PANEL, PANEL).transpose(0, 2, 1, 3))


def winograd_panels_apply(k: int) -> bool:
    """Whether NHWC Winograd products of ``k`` outputs run on the panel micro-kernel (:func:`winograd_panels`)."""
    return WINOGRAD_PANELS and mk.panels_available() and k % PANEL == 0


def winograd_conv3x3(x: np.ndarray, u: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
                     padding: tuple[int, int], act: int = 0, alpha: float | tuple[float, float] = 0.0,
                     residual: np.ndarray | None = None) -> None:
    """``act(conv3x3(x) + bias)`` into ``out`` (stride 1, no dilation, one group).

    ``x`` (N, C, H, W) and ``out`` (N, K, Ho, Wo) are float32 logical NCHW views of NCHW or NHWC memory
    (the layout decides the kernels; other strides are copied first); ``u`` is
    :func:`transform_weights` of the weights, (36, C, K) for NHWC tensors, (36, K, C) for NCHW.

    One parallel launch: blocks of tile rows go to the threads, each running its three steps; a layer of
    fewer blocks than threads runs each step of a block over all the threads instead. ``residual`` (an array of
    ``out``'s shape and strides, or None) is added before the activation as each output value is written (``out``
    may be ``residual``)."""
    winograd_plan(x, u, bias, out, padding, act, alpha, residual)()


def winograd_plan(x: np.ndarray, u: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
                  padding: tuple[int, int], act: int = 0, alpha: float | tuple[float, float] = 0.0,
                  residual: np.ndarray | None = None) -> Callable[[], None]:
    """:func:`winograd_conv3x3` made ready to run: a function of no arguments computing it for the same arrays
    (their memory read when it is called), all the per-call work in Python done once."""
    n, c = x.shape[:2]
    k, ho, wo = out.shape[1:]
    nmat = u.shape[0]  # 36: F(4x4, 3x3); 16: F(2x2, 3x3) (NHWC only)
    f = math.isqrt(nmat) - 2
    if (f == 2 or u.ndim == 4) and not is_nhwc_memory(out):
        raise ValueError("F(2x2, 3x3) and panel Winograd weights need NHWC tensors")
    nty, ntx = -(-ho // f), -(-wo // f)
    rows = max(1, min(nty, WINOGRAD_BLOCK_BYTES // (nmat * 4 * ntx * max(c, k))))
    if nty * ntx * n >= SPLIT_MIN_TILES:
        rows = rt.share(nty * n, rows, n)
    b = np.zeros(k, np.float32) if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    nhwc = is_nhwc_memory(out)
    live = rt.live_contiguous(x.transpose(0, 2, 3, 1) if nhwc else x)
    ys = out.transpose(0, 2, 3, 1) if nhwc else out
    rs = ys if residual is None else (residual.transpose(0, 2, 3, 1) if nhwc else residual)
    threads = rt.threads()
    shapes = ((threads, nmat * rows * ntx * c), (threads, nmat * rows * ntx * k))
    head = (rt.blas_sgemm(),)
    # weights of both kinds as one 4-D array type, (P, 1, C, K) for OpenBLAS's products: one compile of the kernel
    # serves both (each kind compiled on its own took about 35 s more on 2 cores)
    panels = u.ndim == 4
    tail = (u if panels else u[:, None], panels, b, act, kernel_alpha(alpha), padding[0], padding[1], nty, ntx, rows, nhwc, f)
    per_image = -(-nty // rows)
    if n * per_image >= max(2, threads // 2):  # some threads may idle: one launch still beats three a block
        def run() -> None:
            if rt.threads() != threads:  # the cores this process may use changed: the work buffers' shapes too
                winograd_plan(x, u, bias, out, padding, act, alpha, residual)()
                return
            rt.launch(_wino_par, 0, n * per_image, -1, *head, live(), ys, rs, residual is not None, *tail,
                      rt.scratch(0, shapes[0]), rt.scratch(1, shapes[1]))
        return run

    def run_steps() -> None:
        # too few blocks to go round: each step of a block over all the threads. (With 16 cores, taking this
        # path for 14 blocks made 42 launches of a 56x56 layer: 2.7 ms instead of about 0.3.)
        if rt.threads() != threads:
            winograd_plan(x, u, bias, out, padding, act, alpha, residual)()
            return
        args = (*head, live(), ys, rs, residual is not None, *tail, rt.scratch(0, shapes[0]), rt.scratch(1, shapes[1]))
        for j in range(n * per_image):
            r = min(rows, nty - j % per_image * rows)
            for step, shares in ((0, r), (1, threads), (2, r)):
                rt.launch(_wino_par, j, shares, step, *args)
    return run_steps



@njit(cache=True, nogil=True)
def _products(sgemm, v, u, m, q0, q1, nhwc):  # pragma: no cover - compiled
    """Winograd products q0..q1 of the 36: ``m[q] = v[q] @ u[q, 0]`` (NHWC: tiles x C by C x K), or
    ``u[q, 0] @ v[q]`` (NCHW: K x C by C x tiles)."""
    one, zero = np.float32(1), np.float32(0)
    for q in range(q0, q1):
        if nhwc:
            t, c = v.shape[1], v.shape[2]
            k = u.shape[3]
            sgemm(101, 111, 111, t, k, c, one, v[q].ctypes.data, c, u[q, 0].ctypes.data, k, zero, m[q].ctypes.data,
                  k)
        else:
            c, t = v.shape[1], v.shape[2]
            k = u.shape[2]
            sgemm(101, 111, 111, k, t, c, one, u[q, 0].ctypes.data, c, v[q].ctypes.data, t, zero, m[q].ctypes.data,
                  t)


@njit(cache=True, nogil=True)
def _panel_products(v, up, m, q0, q1):  # pragma: no cover - compiled
    """:func:`_products` (NHWC) through the panel micro-kernel: ``up`` (P, K / PANEL, C, PANEL) from
    :func:`winograd_panels`. The products have few rows (a 14x14 image: 49 tiles), where OpenBLAS is slow."""
    zeros = np.zeros(m.shape[2], np.float32)
    for q in range(q0, q1):
        for p in range(up.shape[1]):
            panel_product(v[q], up[q], m[q], m[q], plain(False), p, zeros, plain(0), (np.float32(0), np.float32(0)))


@njit(cache=True, nogil=True)
def _tiles(buf, nmat, tiles, c, nhwc):  # pragma: no cover - compiled
    """A work buffer as the (nmat, tiles, C) array of NHWC kernels, (nmat, C, tiles) of NCHW ones."""
    flat = buf[:nmat * tiles * c]
    return flat.reshape((nmat, tiles, c)) if nhwc else flat.reshape((nmat, c, tiles))


# Parallel kernels are one prange over a job (an ordinary compiled function): cheap to compile, since the
# parallel passes see one call (a kernel with the work inline took 30 s to compile), and cached.

@njit(cache=True, nogil=True, parallel=True)
def _wino_par(j0, count, step, sgemm, xs, ys, rs, has_res, u, panels, b, act, alpha, ph, pw, nty, ntx, rows, nhwc,
              f, vbuf, mbuf):  # pragma: no cover - compiled
    """Step -1: blocks j0..j0+count, one per iteration, in the work buffers of the thread running it. Steps
    0, 1, 2: shares 0..count of that step of block j0."""
    for q in prange(count):
        # one call, its arguments of one type (no literal constant, no unsigned loop index): Numba compiles a
        # callee once per argument types, and this one holds every Winograd pass (three compiles took 90 s)
        _call_wino_job((j0, np.int64(q), step, np.int64(numba.get_thread_id()), sgemm, xs, ys, rs, has_res, u, panels,
                        b, act, alpha, ph, pw, nty, ntx, rows, nhwc, f, vbuf, mbuf))


@njit(cache=True, nogil=True)
def _wino_job(j0, q, step, tid, sgemm, xs, ys, rs, has_res, u, panels, b, act, alpha, ph, pw, nty, ntx, rows, nhwc,
              f, vbuf, mbuf):  # pragma: no cover - compiled
    """Iteration ``q`` of :func:`_wino_par` on thread ``tid``. Step -1: all of block ``j0 + q`` (``rows`` tile rows
    of one image: input transform, the products, output transform) in the work buffers of thread ``tid``. Steps 0,
    1, 2: share ``q`` of that step of block ``j0``, the shares of a step being run by all the threads in the work
    buffers of thread 0: tile row ``q`` of the input (0) or output (2) transform, or products P q/T..P (q+1)/T of
    the P (1), T threads. ``f``: F(4x4, 3x3) (36 products) or F(2x2, 3x3) (16, NHWC). ``u``: the weights over the
    panels (``panels``) or (P, 1, C, K), (P, 1, K, C) for NCHW, for OpenBLAS."""
    j, q, tid = (j0 + q, 0, tid) if step < 0 else (j0, q, 0)
    per_image = (nty + rows - 1) // rows
    i, ty0 = j // per_image, (j % per_image) * rows
    r = min(rows, nty - ty0)
    c, k = (xs.shape[3], ys.shape[3]) if nhwc else (xs.shape[1], ys.shape[1])
    nmat = u.shape[0]
    v, m = _tiles(vbuf[tid], nmat, r * ntx, c, nhwc), _tiles(mbuf[tid], nmat, r * ntx, k, nhwc)
    t0, nr, i0 = (ty0, r, 0) if step < 0 else (ty0 + q, 1, q * ntx)
    if step <= 0:
        if f == 2:
            _in2_nhwc(xs[i], v, t0, nr, ntx, ph, pw, i0)
        elif nhwc:
            _in_nhwc(xs[i], v, t0, nr, ntx, ph, pw, i0)
        else:
            _in_nchw(xs[i], v, t0, nr, ntx, ph, pw, i0)
    if step == -1 or step == 1:
        shares = vbuf.shape[0]
        q0, q1 = (0, nmat) if step < 0 else (nmat * q // shares, nmat * (q + 1) // shares)
        if panels:
            _panel_products(v, u, m, q0, q1)
        else:
            _products(sgemm, v, u, m, q0, q1, nhwc)
    if step == -1 or step == 2:  # (a residual added as each value is written: the output may be written over it)
        if f == 2:
            _out2_nhwc(m, ys[i], rs[i], has_res, b, act, alpha, t0, nr, ntx, i0)
        elif nhwc:
            _out_nhwc(m, ys[i], rs[i], has_res, b, act, alpha, t0, nr, ntx, i0)
        else:
            _out_nchw(m, ys[i], rs[i], has_res, b, act, alpha, t0, nr, ntx, i0)


_call_wino_job = job_caller(_wino_job)

