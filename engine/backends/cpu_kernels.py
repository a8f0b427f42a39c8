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
import functools
import os
import threading
from collections.abc import Iterator
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

#: narrowest column block when a small layer's product is cut by output channels instead
COLUMN_SPLIT_MIN = 16

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
    jobs = [(xs[i], ys[i], ty0, *args) for i in range(n) for ty0 in range(0, nty, rows)]
    if len(jobs) < _cores():  # too small to cut into blocks: the 36 products are shared out instead
        for job in jobs:
            _block(*job, split=True)
        return
    _parallel(_block, jobs)


def _parallel(fn: Any, jobs: list[tuple[Any, ...]]) -> None:
    """``fn(*job)`` for every job, spread over the calling thread and one helper thread per other core (the
    kernels release the GIL), with BLAS limited to one thread meanwhile, so that exactly one thread runs
    per core. A call made while the team is busy (from a job, or from another thread) runs its jobs itself."""
    helpers = min(len(jobs), _cores()) - 1
    if helpers <= 0 or not _team_lock.acquire(blocking=False):
        for job in jobs:
            fn(*job)
        return
    try:
        with _blas_single_thread():
            team = _team()
            team.run(fn, jobs, min(helpers, team.size))
    finally:
        _team_lock.release()


class _Team:
    """Helper threads that share a list of jobs with the calling thread. Each helper waits on a lock of its
    own (a thread wakes in ~20 us, where a ThreadPoolExecutor round trip took ~80 us on 2 cores: ~40
    dispatches per resnet18 inference)."""

    def __init__(self, helpers: int) -> None:
        self.size = helpers
        self._go = [threading.Lock() for _ in range(helpers)]
        self._done = [threading.Lock() for _ in range(helpers)]
        for lock in self._go + self._done:
            lock.acquire()
        self._next_lock = threading.Lock()
        self._fn: Any = None
        self._jobs: list[tuple[Any, ...]] = []
        self._next = 0
        self._error: BaseException | None = None
        for i in range(helpers):
            threading.Thread(target=self._helper, args=(i,), name=f"layerlab-cpu_{i}", daemon=True).start()

    def run(self, fn: Any, jobs: list[tuple[Any, ...]], helpers: int) -> None:
        self._fn, self._jobs, self._next, self._error = fn, jobs, 0, None
        for i in range(helpers):
            self._go[i].release()
        self._work()
        for i in range(helpers):
            self._done[i].acquire()
        error, self._error, self._fn, self._jobs = self._error, None, None, []
        if error is not None:
            raise error

    def _work(self) -> None:
        while True:
            with self._next_lock:
                i = self._next
                self._next += 1
            if i >= len(self._jobs):
                return
            try:
                self._fn(*self._jobs[i])
            except BaseException as exc:  # handed to the caller of run()
                self._error = exc

    def _helper(self, i: int) -> None:
        while True:
            self._go[i].acquire()
            self._work()
            self._done[i].release()


_local = threading.local()


def _block(x: np.ndarray, y: np.ndarray, ty0: int, u: np.ndarray, b: np.ndarray, act: int, alpha: np.float32,
           padding: tuple[int, int], nty: int, ntx: int, rows: int, nhwc: bool, split: bool = False) -> None:
    """Tile rows ty0..ty0+rows of one image: input transform, 36 products (shared out among the workers
    when ``split``), output transform."""
    r = min(rows, nty - ty0)
    ph, pw = padding
    c, k = (x.shape[2], y.shape[2]) if nhwc else (x.shape[0], y.shape[0])
    shapes = ((36, r * ntx, c), (36, r * ntx, k)) if nhwc else ((36, c, r * ntx), (36, k, r * ntx))
    v, m = (_scratch(i, s) for i, s in enumerate(shapes))
    a, bb = (v, u) if nhwc else (u, v)
    (_in_nhwc if nhwc else _in_nchw)(x, v, ty0, r, ntx, ph, pw)
    if split:
        cores = _cores()
        parts = [(slice(36 * i // cores, 36 * (i + 1) // cores),) for i in range(cores)]
        _parallel(lambda s: np.matmul(a[s], bb[s], out=m[s]), parts)
    else:
        np.matmul(a, bb, out=m)
    (_out_nhwc if nhwc else _out_nchw)(m, y, b, act, alpha, ty0, r, ntx)


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


_team_lock = threading.Lock()


@functools.cache
def _team() -> _Team:
    """The helper team, one thread per core beyond the calling thread (created on first use)."""
    return _Team(_cores() - 1)


@contextlib.contextmanager
def _blas_single_thread() -> Iterator[None]:
    """BLAS limited to one thread (threadpoolctl) while the worker threads run, when it can be; a no-op
    inside :func:`single_threaded_blas` (already limited)."""
    global _controller
    if _held.depth:
        yield
        return
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


class _Held(threading.local):
    depth = 0


_held = _Held()


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """BLAS held to one thread for a whole inference, every product being spread over the cores by the
    workers instead. Switching OpenBLAS between 1 and 2 threads around each layer, with a multi-threaded
    product in between, left its helper thread spinning against the workers (2 cores: the resnet18 stem
    took 4.7-5.4 ms instead of 2.4-2.9)."""
    with _blas_single_thread():
        _held.depth += 1
        try:
            yield
        finally:
            _held.depth -= 1


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
    if len(jobs) < _cores() and k >= 2 * COLUMN_SPLIT_MIN:  # too few pixels to cut: cut the output channels
        for job in jobs:
            _conv_block(*job, split=True)
        return
    _parallel(_conv_block, jobs)


def _conv_block(x: np.ndarray, y: np.ndarray, p0: int, p1: int, wm: np.ndarray, b: np.ndarray, act: int,
                alpha: np.float32, direct: bool, geometry: tuple[int, ...], split: bool = False) -> None:
    """Output pixels p0..p1 of one image: im2col, then the product (by column blocks over the workers when
    ``split``) with bias and activation."""
    if direct:
        cols = x.reshape(-1, x.shape[2])[p0:p1]
    else:
        cols = _scratch(0, (p1 - p0, wm.shape[0]))
        _im2col_nhwc(x, cols, p0, *geometry)
    if split:
        _parallel(lambda s: _product(cols, wm[:, s], y[p0:p1, s], b[s], act, alpha),
                  [(s,) for s in _share_columns(wm.shape[1])])
    else:
        _product(cols, wm, y[p0:p1], b, act, alpha)


def _product(cols: np.ndarray, wm: np.ndarray, y: np.ndarray, b: np.ndarray, act: int, alpha: np.float32) -> None:
    np.matmul(cols, wm, out=y)
    _bias_act(y, b, act, alpha)


def _share_columns(k: int) -> list[slice]:
    """``k`` output channels cut into one block per core, each a multiple of 16 wide (SIMD rows of BLAS)."""
    cores = _cores()
    per_core = -(-k // cores)
    width = -(-per_core // COLUMN_SPLIT_MIN) * COLUMN_SPLIT_MIN
    return [slice(k0, min(k, k0 + width)) for k0 in range(0, k, width)]


# ---- upsampling --------------------------------------------------------------------------------------

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
            for c in range(c1n):
                y[bi, oh, ow, c0n + c] = skip[bi, oh, ow, c]


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
    jobs = []
    for xs, ss, ys in parts:
        total = ys.shape[0] * ys.shape[1]
        step = -(-total // _cores())
        jobs += [(xs, ss, ys, r, min(total, r + step), *factor, bilinear) for r in range(0, total, step)]
    _parallel(_upsample_rows, jobs)


# ---- pooling -----------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _pool_rows(x, y, r0, r1, kh, kw, sh, sw, ph, pw, is_max, include_pad):  # pragma: no cover - compiled
    """Output rows r0..r1 of a max or average pooling of ``x`` (H, W, C) into ``y`` (Ho, Wo, C); NaN wins a max."""
    h, w, c = x.shape
    acc = np.empty(c, np.float32)
    for oh in range(r0, r1):
        for ow in range(y.shape[1]):
            for k in range(c):
                acc[k] = -np.inf if is_max else 0
            cells = 0
            for i in range(kh):
                r = oh * sh - ph + i
                if r < 0 or r >= h:
                    continue
                for j in range(kw):
                    q = ow * sw - pw + j
                    if q < 0 or q >= w:
                        continue
                    cells += 1
                    if is_max:
                        for k in range(c):  # a select, not a branch: vectorised
                            v, a = x[r, q, k], acc[k]
                            acc[k] = v if (v > a) | (v != v) else a
                    else:
                        for k in range(c):
                            acc[k] += x[r, q, k]
            if is_max:
                for k in range(c):
                    y[oh, ow, k] = acc[k]
            else:
                scale = np.float32(1.0 / (kh * kw if include_pad else max(cells, 1)))
                for k in range(c):
                    y[oh, ow, k] = acc[k] * scale


def pool_nhwc(x: np.ndarray, out: np.ndarray, is_max: bool, kernel: tuple[int, int], stride: tuple[int, int],
              padding: tuple[int, int], count_include_pad: bool) -> None:
    """Max or average pooling of float32 NHWC ``x`` (N, H, W, C) into ``out`` (N, Ho, Wo, C), one pass,
    by blocks of output rows over the cores. Averages divide by the real cells of each window unless
    ``count_include_pad``."""
    n, ho = out.shape[:2]
    rows = _share(ho * n, ho, n) if out.size >= SPLIT_MIN_PIXELS * 16 else ho
    geometry = (*kernel, *stride, *padding, is_max, count_include_pad)
    _parallel(_pool_rows, [(x[i], out[i], r0, min(ho, r0 + rows), *geometry) for i in range(n) for r0 in range(0, ho, rows)])

