"""CPU kernels compiled by Numba for the NumPy backend.

Winograd F(4x4, 3x3) convolution: every 3x3 stride-1 convolution of enough channels is computed as
36 matrix products (BLAS) of 4x fewer multiply-adds than im2col needs, between two Numba passes that
run on every core: the input transform (padding included, reading the input once) and the output
transform (bias and ReLU / leaky ReLU fused, writing the output once). The work goes by blocks of tile
rows so that the transformed tiles of a block stay in cache between the three steps.

Imported only by the NumPy backend, and only when Numba is installed; without it the backend reports
no fast path and layers use im2col + BLAS. Compiled functions are cached on disk (``cache=True``)."""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numba import njit

from engine.tensor import is_nhwc_memory

#: activations the output transform applies itself (name -> code used by the kernel)
FUSED_ACTIVATIONS = {None: 0, "relu": 1, "leaky_relu": 2}

#: bytes of transformed input tiles per block (cache-sized)
BLOCK_BYTES = 3 << 20

#: below these sizes a layer stays one block, whose matrix product BLAS spreads over the cores itself;
#: above them, blocks are cut so that every core gets its share of the transforms too (measured on
#: 2 cores: unet 256 went from 136-145 ms to 91-105 ms; splitting resnet18 7x7 and 28x28 layers too made it slower)
SPLIT_MIN_TILES = 64
SPLIT_MIN_PIXELS = 1024

# Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", F(4x4, 3x3)
_G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])


def transform_weights(w: np.ndarray, nhwc: bool = True) -> np.ndarray:
    """Weights (K, C, 3, 3) to the Winograd domain, computed in float64: float32 (36, C, K) for NHWC
    tensors, (36, K, C) for NCHW ones."""
    u = np.einsum("ai,kcij,bj->abck", _G, np.asarray(w, dtype=np.float64), _G).reshape(36, w.shape[1], w.shape[0])
    return np.ascontiguousarray(u if nhwc else u.transpose(0, 2, 1), dtype=np.float32)


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
def _act(val, act, alpha):  # pragma: no cover - compiled
    if act == 1:
        return val if val > 0 else val * np.float32(0)  # NaN stays NaN
    if act == 2:
        return val if val > 0 else val * alpha
    return val


@njit(cache=True, nogil=True)
def _in_nchw(x, v, ty0, nty, ntx, ph, pw):  # pragma: no cover - compiled
    """Input tiles (6x6, stride 4) of tile rows ty0..ty0+nty of ``x`` (C, H, W), transformed (B^T d B),
    into ``v`` (36, C, tiles); pixels outside ``x`` (padding) read as zero. Vectorised along tiles."""
    c_n, h, w = x.shape
    wp = 4 * ntx + 2
    for job in range(c_n * nty):
        c, r = job // nty, job % nty
        r0 = 4 * (ty0 + r) - ph
        buf = np.zeros((6, wp), np.float32)
        for i in range(6):
            if 0 <= r0 + i < h:
                n = min(w, wp - pw)
                buf[i, pw:pw + n] = x[c, r0 + i, :n]
        t = np.empty((6, 6, ntx), np.float32)
        for j in range(6):
            for tx in range(ntx):
                q = 4 * tx + j
                t[0, j, tx], t[1, j, tx], t[2, j, tx], t[3, j, tx], t[4, j, tx], t[5, j, tx] = _bt(
                    buf[0, q], buf[1, q], buf[2, q], buf[3, q], buf[4, q], buf[5, q])
        base = r * ntx
        for i in range(6):
            k = 6 * i
            for tx in range(ntx):
                a = _bt(t[i, 0, tx], t[i, 1, tx], t[i, 2, tx], t[i, 3, tx], t[i, 4, tx], t[i, 5, tx])
                for jj in range(6):
                    v[k + jj, c, base + tx] = a[jj]


@njit(cache=True, nogil=True)
def _out_nchw(m, y, bias, act, alpha, ty0, nty, ntx):  # pragma: no cover - compiled
    """Products ``m`` (36, K, tiles) of tile rows ty0..ty0+nty back to pixels (A^T m A), plus bias,
    activated (0 none, 1 relu, 2 leaky relu of slope ``alpha``), into ``y`` (K, Ho, Wo)."""
    k_n, ho, wo = y.shape
    for job in range(k_n * nty):
        k, r = job // nty, job % nty
        r0 = 4 * (ty0 + r)
        base = r * ntx
        t = np.empty((4, 6, ntx), np.float32)
        for j in range(6):
            for tx in range(ntx):
                i = base + tx
                t[0, j, tx], t[1, j, tx], t[2, j, tx], t[3, j, tx] = _at(
                    m[j, k, i], m[6 + j, k, i], m[12 + j, k, i], m[18 + j, k, i], m[24 + j, k, i], m[30 + j, k, i])
        row = np.empty(4 * ntx, np.float32)
        b = bias[k]
        for i in range(4):
            if r0 + i >= ho:
                break
            for tx in range(ntx):
                o = _at(t[i, 0, tx], t[i, 1, tx], t[i, 2, tx], t[i, 3, tx], t[i, 4, tx], t[i, 5, tx])
                for jj in range(4):
                    row[4 * tx + jj] = _act(o[jj] + b, act, alpha)
            y[k, r0 + i, :] = row[:wo]


@njit(cache=True, nogil=True)
def _in_nhwc(x, v, ty0, nty, ntx, ph, pw):  # pragma: no cover - compiled
    """As :func:`_in_nchw` for ``x`` (H, W, C), into ``v`` (36, tiles, C). Vectorised along channels."""
    h, w, c_n = x.shape
    for idx in range(nty * ntx):
        r0 = 4 * (ty0 + idx // ntx) - ph
        c0 = 4 * (idx % ntx) - pw
        d = np.zeros((6, 6, c_n), np.float32)
        for i in range(6):
            if 0 <= r0 + i < h:
                for j in range(6):
                    if 0 <= c0 + j < w:
                        d[i, j, :] = x[r0 + i, c0 + j, :]
        t = np.empty((6, 6, c_n), np.float32)
        for j in range(6):
            for c in range(c_n):
                t[0, j, c], t[1, j, c], t[2, j, c], t[3, j, c], t[4, j, c], t[5, j, c] = _bt(
                    d[0, j, c], d[1, j, c], d[2, j, c], d[3, j, c], d[4, j, c], d[5, j, c])
        for i in range(6):
            k = 6 * i
            for c in range(c_n):
                a = _bt(t[i, 0, c], t[i, 1, c], t[i, 2, c], t[i, 3, c], t[i, 4, c], t[i, 5, c])
                for jj in range(6):
                    v[k + jj, idx, c] = a[jj]


@njit(cache=True, nogil=True)
def _out_nhwc(m, y, bias, act, alpha, ty0, nty, ntx):  # pragma: no cover - compiled
    """As :func:`_out_nchw` for ``m`` (36, tiles, K), into ``y`` (Ho, Wo, K). Vectorised along channels."""
    ho, wo, k_n = y.shape
    for idx in range(nty * ntx):
        r0 = 4 * (ty0 + idx // ntx)
        c0 = 4 * (idx % ntx)
        t = np.empty((4, 6, k_n), np.float32)
        for j in range(6):
            for k in range(k_n):
                t[0, j, k], t[1, j, k], t[2, j, k], t[3, j, k] = _at(
                    m[j, idx, k], m[6 + j, idx, k], m[12 + j, idx, k], m[18 + j, idx, k], m[24 + j, idx, k],
                    m[30 + j, idx, k])
        nj = min(4, wo - c0)
        for i in range(4):
            if r0 + i >= ho:
                break
            for k in range(k_n):
                o = _at(t[i, 0, k], t[i, 1, k], t[i, 2, k], t[i, 3, k], t[i, 4, k], t[i, 5, k])
                b = bias[k]
                for jj in range(nj):
                    y[r0 + i, c0 + jj, k] = _act(o[jj] + b, act, alpha)


def winograd_conv3x3(x: np.ndarray, u: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
                     padding: tuple[int, int], act: int = 0, alpha: float = 0.0) -> None:
    """``act(conv3x3(x) + bias)`` into ``out`` (stride 1, no dilation, one group).

    ``x`` (N, C, H, W) and ``out`` (N, K, Ho, Wo) are float32 logical NCHW views of NCHW or NHWC memory
    (the layout decides the kernels; other strides are copied first); ``u`` is
    :func:`transform_weights` of the weights, (36, C, K) for NHWC tensors, (36, K, C) for NCHW.

    Blocks of tile rows go to one worker thread per core; each runs its three steps with a
    single-threaded BLAS (one thread per core in all: no BLAS threads spinning against the workers)."""
    n, c = x.shape[:2]
    k, ho, wo = out.shape[1:]
    nty, ntx = -(-ho // 4), -(-wo // 4)
    rows = max(1, min(nty, BLOCK_BYTES // (36 * 4 * ntx * max(c, k))))
    if nty * ntx * n >= SPLIT_MIN_TILES:
        rows = _share(nty * n, rows, n)
    b = np.zeros(k, np.float32) if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    nhwc = is_nhwc_memory(out)
    xs = np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if nhwc else np.ascontiguousarray(x)
    ys = out.transpose(0, 2, 3, 1) if nhwc else out
    args = (u, b, act, np.float32(alpha), padding, nty, ntx, rows, nhwc)
    _parallel(_block, [(xs[i], ys[i], ty0, *args) for i in range(n) for ty0 in range(0, nty, rows)])


def _parallel(fn: Any, jobs: list[tuple[Any, ...]]) -> None:
    """``fn(*job)`` for every job, spread over one worker thread per core (the kernels release the GIL)
    with BLAS limited to one thread meanwhile, so that exactly one thread runs per core."""
    workers = min(len(jobs), _cores())
    if workers <= 1:
        for job in jobs:
            fn(*job)
        return
    with _blas_single_thread():
        list(_pool(workers).map(lambda job: fn(*job), jobs))


_local = threading.local()


def _block(x: np.ndarray, y: np.ndarray, ty0: int, u: np.ndarray, b: np.ndarray, act: int, alpha: np.float32,
           padding: tuple[int, int], nty: int, ntx: int, rows: int, nhwc: bool) -> None:
    """Tile rows ty0..ty0+rows of one image: input transform, 36 products, output transform."""
    r = min(rows, nty - ty0)
    ph, pw = padding
    c, k = (x.shape[2], y.shape[2]) if nhwc else (x.shape[0], y.shape[0])
    shapes = ((36, r * ntx, c), (36, r * ntx, k)) if nhwc else ((36, c, r * ntx), (36, k, r * ntx))
    v, m = (_scratch(i, s) for i, s in enumerate(shapes))
    if nhwc:
        _in_nhwc(x, v, ty0, r, ntx, ph, pw)
        np.matmul(v, u, out=m)
        _out_nhwc(m, y, b, act, alpha, ty0, r, ntx)
    else:
        _in_nchw(x, v, ty0, r, ntx, ph, pw)
        np.matmul(u, v, out=m)
        _out_nchw(m, y, b, act, alpha, ty0, r, ntx)


def _scratch(slot: int, shape: tuple[int, ...]) -> np.ndarray:
    """A float32 work array of ``shape`` for the calling thread, reused between calls."""
    bufs = _local.__dict__.setdefault("bufs", {})
    size = int(np.prod(shape))
    buf = bufs.get(slot)
    if buf is None or buf.size < size:
        buf = bufs[slot] = np.empty(size, np.float32)
    return buf[:size].reshape(shape)


def _share(total: int, size: int, images: int) -> int:
    """A block size no larger than ``size`` that splits ``total`` units (over ``images`` images) into at
    least one block per core and a multiple of the core count, so that no core idles."""
    cores = _cores()
    per_image = total // images
    blocks = -(-per_image // size) * images
    blocks = max(cores, -(-blocks // cores) * cores)
    return max(1, -(-per_image // max(1, blocks // images)))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_pools: dict[int, ThreadPoolExecutor] = {}


def _pool(workers: int) -> ThreadPoolExecutor:
    if workers not in _pools:
        _pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix="layerlab-cpu")
    return _pools[workers]


@contextlib.contextmanager
def _blas_single_thread() -> Iterator[None]:
    """BLAS limited to one thread (threadpoolctl) while the worker threads run, when it can be."""
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController  # noqa: PLC0415

            _controller = ThreadpoolController()
        except Exception:  # no threadpoolctl: BLAS keeps its threads
            _controller = False
    if not _controller:
        yield
        return
    with _controller.limit(limits=1, user_api="blas"):
        yield


_controller: Any = None


# ---- convolution by im2col in NHWC (every kernel size, stride, padding, dilation) --------------------

@njit(cache=True, nogil=True)
def _im2col_nhwc(x, cols, p0, wo, kh, kw, sh, sw, ph, pw, dh, dw):  # pragma: no cover - compiled
    """Rows of ``cols`` (P, KH*KW*C): the receptive fields of output pixels p0.. of ``x`` (H, W, C), in
    (kernel row, kernel column, channel) order; pixels outside ``x`` read as zero. A kernel row lying
    wholly inside ``x`` (no dilation) is one contiguous run of KW*C values, copied as such."""
    h, w, c_n = x.shape
    xr = x.reshape(h, w * c_n)
    span = kw * c_n
    for q in range(cols.shape[0]):
        p = p0 + q
        oh, ow = p // wo, p % wo
        c0 = ow * sw - pw
        whole = dw == 1 and c0 >= 0 and c0 + kw <= w
        for i in range(kh):
            r = oh * sh - ph + i * dh
            base = i * span
            if r < 0 or r >= h:
                for e in range(span):
                    cols[q, base + e] = 0
            elif whole:
                src = c0 * c_n
                for e in range(span):
                    cols[q, base + e] = xr[r, src + e]
            else:
                for j in range(kw):
                    cc = c0 + j * dw
                    col = base + j * c_n
                    if 0 <= cc < w:
                        for c in range(c_n):
                            cols[q, col + c] = x[r, cc, c]
                    else:
                        for c in range(c_n):
                            cols[q, col + c] = 0


@njit(cache=True, nogil=True)
def _bias_act(y, bias, act, alpha):  # pragma: no cover - compiled
    """``y`` (P, K) += bias, activated in place."""
    for p in range(y.shape[0]):
        for k in range(y.shape[1]):
            y[p, k] = _act(y[p, k] + bias[k], act, alpha)


def gemm_weights(w: np.ndarray) -> np.ndarray:
    """Weights (K, C, KH, KW) as the (KH*KW*C, K) float32 matrix of :func:`conv_nhwc`."""
    k = w.shape[0]
    return np.ascontiguousarray(np.asarray(w, dtype=np.float32).transpose(2, 3, 1, 0).reshape(-1, k))


def conv_nhwc(x: np.ndarray, wm: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None, out: np.ndarray,
              stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], act: int = 0,
              alpha: float = 0.0) -> None:
    """``act(conv(x) + bias)`` into ``out`` for NHWC tensors (logical NCHW views, ``out`` contiguous
    NHWC): im2col by cache-sized blocks of output pixels straight into one matrix product per block,
    whose result lands in ``out`` itself; a 1x1 convolution of stride 1 needs no im2col at all."""
    n, c, h, w = x.shape
    k, ho, wo = out.shape[1:]
    kh, kw = kernel
    xs = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    ys = out.transpose(0, 2, 3, 1).reshape(n, ho * wo, k)
    b = np.zeros(k, np.float32) if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    direct = kh == kw == 1 and stride == (1, 1) and padding == (0, 0)
    step = max(16, min(ho * wo, BLOCK_BYTES // (4 * max(kh * kw * c, k))))
    if ho * wo * n >= SPLIT_MIN_PIXELS:
        step = _share(ho * wo * n, step, n)
    geometry = (wo, kh, kw, *stride, *padding, *dilation)
    jobs = [(xs[i], ys[i], p0, min(ho * wo, p0 + step), wm, b, act, np.float32(alpha), direct, geometry)
            for i in range(n) for p0 in range(0, ho * wo, step)]
    _parallel(_conv_block, jobs)


def _conv_block(x: np.ndarray, y: np.ndarray, p0: int, p1: int, wm: np.ndarray, b: np.ndarray, act: int,
                alpha: np.float32, direct: bool, geometry: tuple[int, ...]) -> None:
    if direct:
        cols = x.reshape(-1, x.shape[2])[p0:p1]
    else:
        cols = _scratch(0, (p1 - p0, wm.shape[0]))
        _im2col_nhwc(x, cols, p0, *geometry)
    np.matmul(cols, wm, out=y[p0:p1])
    _bias_act(y[p0:p1], b, act, alpha)


# ---- upsampling --------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _upsample_rows(x, y, r0, r1, fh, fw, bilinear):  # pragma: no cover - compiled
    """Rows r0..r1 (counted over all images) of ``y`` (B, Ho, Wo, C) from ``x`` (B, H, W, C): nearest,
    or bilinear with half-pixel centres and edge pixels extended (the CUDA kernel's arithmetic)."""
    h, w, c_n = x.shape[1:]
    ho, wo = y.shape[1], y.shape[2]
    half, one, zero = np.float32(0.5), np.float32(1), np.float32(0)
    for t in range(r0, r1):
        bi, oh = t // ho, t % ho
        if not bilinear:
            sy = min(oh // fh, h - 1)
            for ow in range(wo):
                sx = min(ow // fw, w - 1)
                for c in range(c_n):
                    y[bi, oh, ow, c] = x[bi, sy, sx, c]
            continue
        fy = max((oh + half) / np.float32(fh) - half, zero)
        y0 = int(fy)
        y1 = min(y0 + 1, h - 1)
        ly = np.float32(fy - y0)
        for ow in range(wo):
            fx = max((ow + half) / np.float32(fw) - half, zero)
            x0 = int(fx)
            x1 = min(x0 + 1, w - 1)
            lx = np.float32(fx - x0)
            for c in range(c_n):
                top = (one - lx) * x[bi, y0, x0, c] + lx * x[bi, y0, x1, c]
                bottom = (one - lx) * x[bi, y1, x0, c] + lx * x[bi, y1, x1, c]
                y[bi, oh, ow, c] = (one - ly) * top + ly * bottom


def upsample(x: np.ndarray, out: np.ndarray, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> None:
    """Upsampling by integer factors of the C-contiguous physical array ``x`` into ``out`` (same dtype,
    float32 or float16), in one pass spread over the cores."""
    if nhwc:
        xs, ys = x, out
    else:  # every channel as an image of one channel
        n, c, h, w = x.shape
        xs, ys = x.reshape(n * c, h, w, 1), out.reshape(n * c, out.shape[2], out.shape[3], 1)
    total = ys.shape[0] * ys.shape[1]
    step = -(-total // _cores())
    _parallel(_upsample_rows, [(xs, ys, r, min(total, r + step), *factor, bilinear) for r in range(0, total, step)])
