"""CPU kernels compiled by Numba for the NumPy backend.

Winograd F(4x4, 3x3) convolution: every 3x3 stride-1 convolution of enough channels is computed as
36 matrix products (BLAS) of 4x fewer multiply-adds than im2col needs, between two Numba passes: the
input transform (padding included, reading the input once) and the output transform (bias and ReLU /
leaky ReLU fused, writing the output once). The work goes by blocks of tile rows so that the
transformed tiles of a block stay in cache between the three steps. Other NHWC convolutions are an
im2col by cache-sized blocks of pixels, each straight into one BLAS product.

Every layer is one launch of a parallel Numba kernel (``prange``): its threads call BLAS themselves
(``cblas_sgemm`` of the library NumPy uses, through ctypes, without the GIL), so that a layer costs no
Python thread hand-offs (~50 us each on 2 cores, where an OpenMP launch costs ~2 us). BLAS is held to
one thread meanwhile: one thread per core in all.

Imported only by the NumPy backend, and only when Numba is installed; without it, or without a BLAS
exporting ``cblas_sgemm`` (64-bit integers, as NumPy's own OpenBLAS), the backend reports no fast
convolution and layers use im2col + NumPy. Compiled functions are cached on disk (``cache=True``)."""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import hashlib
import math
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# GNU OpenMP threads spin this many times waiting for the next launch before they sleep (read when Numba first
# loads its OpenMP layer; set it yourself to override). resnet18 on 2 cores (tests/bench), median ms idle / with
# another process busy on one core: 10000 spins 19.2 / 64-66, 3000 20-23 / 46-52, 1000 20.6-24 / 41, the
# Python worker threads this replaced 28.7 / 50. Spinning threads count as busy, so the scheduler makes them wait
# behind other programs; the default (300000) also kept them spinning against the BLAS calls of the next layer.
os.environ.setdefault("GOMP_SPINCOUNT", "1000")


def _openmp_started_before() -> bool:
    """Whether a GNU or Intel OpenMP runtime was loaded before this module (PyTorch imported first, say): Numba's
    OpenMP layer would then run on that runtime, started with the default spin count (``GOMP_SPINCOUNT`` is read
    once, when the runtime starts), and its threads spin against the BLAS calls of the next layer: resnet18 on
    2 cores took 364 ms instead of 29-36 ms with ``import torch`` first."""
    if os.environ.get("OMP_WAIT_POLICY", "").lower() == "passive" or os.environ.get("NUMBA_THREADING_LAYER"):
        return False
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any("libgomp" in line or "libiomp" in line for line in maps)
    except OSError:  # not Linux
        return False


if _openmp_started_before():  # Numba's own work-queue threads instead (57 ms in the case above)
    os.environ["NUMBA_THREADING_LAYER"] = "workqueue"

import numba  # noqa: E402
import numpy as np  # noqa: E402

if os.environ.get("NUMBA_THREADING_LAYER") == "workqueue":  # Numba imported earlier read its settings then
    numba.config.THREADING_LAYER = "workqueue"
from llvmlite import ir as llvm_ir  # noqa: E402
from numba import njit, prange, types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

from engine.tensor import is_nhwc_memory  # noqa: E402

#: fused epilogues the output transform applies itself (``ActivationDesc.epilogue`` -> code used by the kernel)
FUSED_EPILOGUES = {None: 0, "relu": 1, "leaky_relu": 2}

#: bytes of im2col rows per block of output pixels: 1 MiB stays in a core's L2 (3 MiB blocks, in L3, made resnet18's
#: 1x1 strided shortcut 0.15 instead of 0.05 ms and its RGB stem 0.90 instead of 0.86)
BLOCK_BYTES = 1 << 20

#: bytes of transformed input tiles per Winograd block: with the transforms vectorised, 3 MiB blocks (L3) left
#: them waiting on memory; 1 MiB ones stay in a core's L2 (64 -> 64 channels at 256x256: 6.3 instead of 7.8 ms)
WINOGRAD_BLOCK_BYTES = 1 << 20

#: a Winograd layer of fewer 4x4 output tiles stays one block, each of its three steps shared out over the
#: threads; a larger one is cut into blocks of tile rows, at least one per thread (on 2 cores, unet 256 went
#: from 136-145 ms to 91-105 ms when its large layers were cut; resnet18's 28x28 layers are not faster cut)
SPLIT_MIN_TILES = 64
#: a pooling of fewer output values (x 16) runs as one job
SPLIT_MIN_PIXELS = 1024

#: narrowest column block when a small layer's product is cut by output channels instead
COLUMN_SPLIT_MIN = 16

#: fewest output pixels for which an im2col convolution is cut by pixels (each core doing its own im2col and
#: product with all the weights) rather than by output channels (one im2col, the weights shared out). On 2
#: cores, resnet18's 28x28 and 14x14 layers (784 and 196 pixels) went faster cut by pixels; 7x7 ones did not
CONV_SPLIT_MIN_PIXELS = 128

# Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", F(4x4, 3x3)
_G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])


# F(2x2, 3x3): 16 products of 4x4 tiles (stride 2) instead of 36 of 6x6 (stride 4): 4/9 of the direct
# multiplications instead of 1/4, but weights 16/9 of the direct ones instead of 4x. resnet18's 14x14x256 layers
# read 9.4 MB of F(4x4) weights each (from memory, every run: the network's weights do not fit the caches).
_G2 = np.array([[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]])


def transform_weights(w: np.ndarray, nhwc: bool = True, tile: int = 4) -> np.ndarray:
    """Weights (K, C, 3, 3) to the Winograd domain of F(``tile`` x ``tile``, 3x3) (4 or 2), computed in float64:
    float32 (36, C, K) (16 for F(2x2)) for NHWC tensors, (36, K, C) for NCHW ones (F(4x4) only)."""
    g = _G if tile == 4 else _G2
    a = g.shape[0]
    u = np.einsum("ai,kcij,bj->abck", g, np.asarray(w, dtype=np.float64), g).reshape(a * a, w.shape[1], w.shape[0])
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
def _bt2(d0, d1, d2, d3):  # pragma: no cover - compiled
    """One row of B^T d (F(2x2, 3x3) input transform)."""
    return d0 - d2, d1 + d2, d2 - d1, d1 - d3


@njit(inline="always")
def _at2(m0, m1, m2, m3):  # pragma: no cover - compiled
    """One row of A^T m (F(2x2, 3x3) output transform)."""
    return m0 + m1 + m2, m1 - m2 - m3


@njit(inline="always")
def _act(val, act, alpha):  # pragma: no cover - compiled
    """ReLU (1) or leaky ReLU (2) of ``val``; NaN stays NaN. Written with maximum and minimum, not as a select
    on ``val > 0``: activating in place, ``y = val if val > 0 else ...`` is a store only where the test fails,
    which LLVM turns into AVX2's masked store (vmaskmovps), microcoded on AMD's Zen: a 64-channel ReLU pass ran
    4x slower than NumPy's there."""
    if act == 1:
        return np.maximum(val, np.float32(0))
    if act == 2:
        return np.maximum(val, np.float32(0)) + alpha * np.minimum(val, np.float32(0))
    return val


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
def _out_nchw(m, y, bias, act, alpha, ty0, nty, ntx, i0):  # pragma: no cover - compiled
    """Products ``m`` (36, K, tiles) of tile rows ty0..ty0+nty (from tile ``i0`` of ``m`` on) back to pixels
    (A^T m A), plus bias, activated (0 none, 1 relu, 2 leaky relu of slope ``alpha``), into ``y`` (K, Ho, Wo)."""
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
                    row[4 * tx + jj] = _act(o[jj] + b, act, alpha)
            y[k, r0 + i, :] = row[:wo]


@njit(inline="always")
def _in_rows(s, r0, c0, t, c_n):  # pragma: no cover - compiled
    """d B of the 6x6 tile of ``s`` (H, W, C) at r0, c0 (inside ``s``), one row at a time, into ``t`` (6, 6, C).
    Six loads and six stores per channel: few enough pointers for LLVM to vectorise along channels."""
    for i in range(6):
        for c in range(c_n):
            a0, a1, a2, a3, a4, a5 = _bt(s[r0 + i, c0, c], s[r0 + i, c0 + 1, c], s[r0 + i, c0 + 2, c],
                                         s[r0 + i, c0 + 3, c], s[r0 + i, c0 + 4, c], s[r0 + i, c0 + 5, c])
            t[i, 0, c] = a0
            t[i, 1, c] = a1
            t[i, 2, c] = a2
            t[i, 3, c] = a3
            t[i, 4, c] = a4
            t[i, 5, c] = a5


@njit(cache=True, nogil=True)
def _in_nhwc(x, v, ty0, nty, ntx, ph, pw, i0):  # pragma: no cover - compiled
    """As :func:`_in_nchw` for ``x`` (H, W, C), into ``v`` (36, tiles, C). Vectorised along channels; tiles
    lying wholly inside ``x`` are read in place, the others (padding) through a zero-filled copy.

    Rows first (d B), then columns (B^T of that), each column's six results stored six planes apart: the
    other order (columns, then rows stored into six adjacent planes) ran LLVM's scalar fallback loop at
    run time, 3.6x slower (1.17 against 0.32 us a tile of 64 channels)."""
    h, w, c_n = x.shape
    d = np.zeros((6, 6, c_n), np.float32)
    t = np.empty((6, 6, c_n), np.float32)
    for idx in range(nty * ntx):
        r0 = 4 * (ty0 + idx // ntx) - ph
        c0 = 4 * (idx % ntx) - pw
        if r0 >= 0 and c0 >= 0 and r0 + 6 <= h and c0 + 6 <= w:
            _in_rows(x, r0, c0, t, c_n)
        else:
            for i in range(6):
                for j in range(6):
                    if 0 <= r0 + i < h and 0 <= c0 + j < w:
                        d[i, j, :] = x[r0 + i, c0 + j, :]
                    else:
                        d[i, j, :] = 0
            _in_rows(d, 0, 0, t, c_n)
        q = i0 + idx
        for j in range(6):
            for c in range(c_n):
                a0, a1, a2, a3, a4, a5 = _bt(t[0, j, c], t[1, j, c], t[2, j, c], t[3, j, c], t[4, j, c], t[5, j, c])
                v[j, q, c] = a0
                v[6 + j, q, c] = a1
                v[12 + j, q, c] = a2
                v[18 + j, q, c] = a3
                v[24 + j, q, c] = a4
                v[30 + j, q, c] = a5


@njit(cache=True, nogil=True)
def _out_nhwc(m, y, bias, act, alpha, ty0, nty, ntx, i0):  # pragma: no cover - compiled
    """As :func:`_out_nchw` for ``m`` (36, tiles, K), into ``y`` (Ho, Wo, K). Vectorised along channels: rows of
    each product tile first (six adjacent planes in, four rows of ``t`` out), then columns into ``y`` with
    bias and activation (the other order ran the scalar fallback loop, 3.5x slower)."""
    ho, wo, k_n = y.shape
    t = np.empty((6, 4, k_n), np.float32)
    for idx in range(nty * ntx):
        r0 = 4 * (ty0 + idx // ntx)
        c0 = 4 * (idx % ntx)
        q = i0 + idx
        for i in range(6):
            p = 6 * i
            for k in range(k_n):
                a0, a1, a2, a3 = _at(m[p, q, k], m[p + 1, q, k], m[p + 2, q, k], m[p + 3, q, k], m[p + 4, q, k],
                                     m[p + 5, q, k])
                t[i, 0, k] = a0
                t[i, 1, k] = a1
                t[i, 2, k] = a2
                t[i, 3, k] = a3
        nj, ni = min(4, wo - c0), min(4, ho - r0)
        for jj in range(nj):
            for k in range(k_n):
                o0, o1, o2, o3 = _at(t[0, jj, k], t[1, jj, k], t[2, jj, k], t[3, jj, k], t[4, jj, k], t[5, jj, k])
                b = bias[k]
                if ni == 4:
                    y[r0, c0 + jj, k] = _act(o0 + b, act, alpha)
                    y[r0 + 1, c0 + jj, k] = _act(o1 + b, act, alpha)
                    y[r0 + 2, c0 + jj, k] = _act(o2 + b, act, alpha)
                    y[r0 + 3, c0 + jj, k] = _act(o3 + b, act, alpha)
                else:
                    o = (o0, o1, o2, o3)
                    for i in range(ni):
                        y[r0 + i, c0 + jj, k] = _act(o[i] + b, act, alpha)


@njit(inline="always")
def _in2_rows(s, r0, c0, t, c_n):  # pragma: no cover - compiled
    """d B of the 4x4 tile of ``s`` (H, W, C) at r0, c0 (inside ``s``), row by row, into ``t`` (4, 4, C)."""
    for i in range(4):
        for c in range(c_n):
            a0, a1, a2, a3 = _bt2(s[r0 + i, c0, c], s[r0 + i, c0 + 1, c], s[r0 + i, c0 + 2, c], s[r0 + i, c0 + 3, c])
            t[i, 0, c] = a0
            t[i, 1, c] = a1
            t[i, 2, c] = a2
            t[i, 3, c] = a3


@njit(cache=True, nogil=True)
def _in2_nhwc(x, v, ty0, nty, ntx, ph, pw, i0):  # pragma: no cover - compiled
    """:func:`_in_nhwc` for F(2x2, 3x3): 4x4 tiles at stride 2 into ``v`` (16, tiles, C)."""
    h, w, c_n = x.shape
    d = np.zeros((4, 4, c_n), np.float32)
    t = np.empty((4, 4, c_n), np.float32)
    for idx in range(nty * ntx):
        r0 = 2 * (ty0 + idx // ntx) - ph
        c0 = 2 * (idx % ntx) - pw
        if r0 >= 0 and c0 >= 0 and r0 + 4 <= h and c0 + 4 <= w:
            _in2_rows(x, r0, c0, t, c_n)
        else:
            for i in range(4):
                for j in range(4):
                    if 0 <= r0 + i < h and 0 <= c0 + j < w:
                        d[i, j, :] = x[r0 + i, c0 + j, :]
                    else:
                        d[i, j, :] = 0
            _in2_rows(d, 0, 0, t, c_n)
        q = i0 + idx
        for j in range(4):
            for c in range(c_n):
                a0, a1, a2, a3 = _bt2(t[0, j, c], t[1, j, c], t[2, j, c], t[3, j, c])
                v[j, q, c] = a0
                v[4 + j, q, c] = a1
                v[8 + j, q, c] = a2
                v[12 + j, q, c] = a3


@njit(cache=True, nogil=True)
def _out2_nhwc(m, y, bias, act, alpha, ty0, nty, ntx, i0):  # pragma: no cover - compiled
    """:func:`_out_nhwc` for F(2x2, 3x3): ``m`` (16, tiles, K) to 2x2 pixels a tile."""
    ho, wo, k_n = y.shape
    t = np.empty((4, 2, k_n), np.float32)
    for idx in range(nty * ntx):
        r0 = 2 * (ty0 + idx // ntx)
        c0 = 2 * (idx % ntx)
        q = i0 + idx
        for i in range(4):
            p = 4 * i
            for k in range(k_n):
                a0, a1 = _at2(m[p, q, k], m[p + 1, q, k], m[p + 2, q, k], m[p + 3, q, k])
                t[i, 0, k] = a0
                t[i, 1, k] = a1
        nj, ni = min(2, wo - c0), min(2, ho - r0)
        for jj in range(nj):
            for k in range(k_n):
                o0, o1 = _at2(t[0, jj, k], t[1, jj, k], t[2, jj, k], t[3, jj, k])
                b = bias[k]
                y[r0, c0 + jj, k] = _act(o0 + b, act, alpha)
                if ni == 2:
                    y[r0 + 1, c0 + jj, k] = _act(o1 + b, act, alpha)


#: whether NHWC Winograd products run on the panel micro-kernel (where it exists and K is a multiple of PANEL)
#: rather than OpenBLAS
WINOGRAD_PANELS = True


def winograd_panels(u: np.ndarray) -> np.ndarray:
    """NHWC Winograd weights (P, C, K) from :func:`transform_weights` as the (P, K / PANEL, C, PANEL) panels of the
    micro-kernel, which :func:`winograd_conv3x3` then multiplies by."""
    p, c, k = u.shape
    return np.ascontiguousarray(u.reshape(p, c, k // PANEL, PANEL).transpose(0, 2, 1, 3))


def winograd_panels_apply(k: int) -> bool:
    """Whether NHWC Winograd products of ``k`` outputs run on the panel micro-kernel (:func:`winograd_panels`)."""
    return WINOGRAD_PANELS and panels_available() and k % PANEL == 0


def winograd_conv3x3(x: np.ndarray, u: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
                     padding: tuple[int, int], act: int = 0, alpha: float = 0.0,
                     residual: np.ndarray | None = None) -> None:
    """``act(conv3x3(x) + bias)`` into ``out`` (stride 1, no dilation, one group).

    ``x`` (N, C, H, W) and ``out`` (N, K, Ho, Wo) are float32 logical NCHW views of NCHW or NHWC memory
    (the layout decides the kernels; other strides are copied first); ``u`` is
    :func:`transform_weights` of the weights, (36, C, K) for NHWC tensors, (36, K, C) for NCHW.

    One parallel launch: blocks of tile rows go to the threads, each running its three steps; a layer of
    fewer blocks than threads runs each step of a block over all the threads instead. ``residual`` (an array of
    ``out``'s shape and strides, or None) is added before the activation, block by block while the output rows
    are in cache."""
    winograd_plan(x, u, bias, out, padding, act, alpha, residual)()


def winograd_plan(x: np.ndarray, u: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
                  padding: tuple[int, int], act: int = 0, alpha: float = 0.0,
                  residual: np.ndarray | None = None) -> Callable[[], None]:
    """:func:`winograd_conv3x3` made ready to run: a function of no arguments computing it for the same arrays
    (their memory read when it is called), all the per-call work in Python done once."""
    n, c = x.shape[:2]
    k, ho, wo = out.shape[1:]
    nmat = u.shape[0]  # 36: F(4x4, 3x3); 16: F(2x2, 3x3) (NHWC only)
    f = 4 if nmat == 36 else 2
    if (f == 2 or u.ndim == 4) and not is_nhwc_memory(out):
        raise ValueError("F(2x2, 3x3) and panel Winograd weights need NHWC tensors")
    nty, ntx = -(-ho // f), -(-wo // f)
    rows = max(1, min(nty, WINOGRAD_BLOCK_BYTES // (nmat * 4 * ntx * max(c, k))))
    if nty * ntx * n >= SPLIT_MIN_TILES:
        rows = _share(nty * n, rows, n)
    b = np.zeros(k, np.float32) if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    nhwc = is_nhwc_memory(out)
    live = _live_contiguous(x.transpose(0, 2, 3, 1) if nhwc else x)
    ys = out.transpose(0, 2, 3, 1) if nhwc else out
    rs = ys if residual is None else (residual.transpose(0, 2, 3, 1) if nhwc else residual)
    threads = _threads()
    shapes = ((threads, nmat * rows * ntx * c), (threads, nmat * rows * ntx * k))
    head = (blas_sgemm(),)
    tail = (u, b, act, np.float32(alpha), padding[0], padding[1], nty, ntx, rows, nhwc, f)
    per_image = -(-nty // rows)
    if n * per_image >= max(2, threads // 2):  # some threads may idle: one launch still beats three a block
        def run() -> None:
            if _threads() != threads:  # the cores this process may use changed: the work buffers' shapes too
                winograd_plan(x, u, bias, out, padding, act, alpha, residual)()
                return
            _launch(_wino_par, 0, n * per_image, -1, *head, live(), ys, rs, residual is not None, *tail, _scratch(0, shapes[0]),
                    _scratch(1, shapes[1]))
        return run

    def run_steps() -> None:
        # too few blocks to go round: each step of a block over all the threads. (With 16 cores, taking this
        # path for 14 blocks made 42 launches of a 56x56 layer: 2.7 ms instead of about 0.3.)
        if _threads() != threads:
            winograd_plan(x, u, bias, out, padding, act, alpha, residual)()
            return
        args = (*head, live(), ys, rs, residual is not None, *tail, _scratch(0, shapes[0]), _scratch(1, shapes[1]))
        for j in range(n * per_image):
            r = min(rows, nty - j % per_image * rows)
            for step, shares in ((0, r), (1, threads), (2, r)):
                _launch(_wino_par, j, shares, step, *args)
    return run_steps


def _live_contiguous(v: np.ndarray) -> Callable[[], np.ndarray]:
    """A function giving ``v`` as a C-contiguous array when called: ``v`` itself when it is one, else a copy made
    then (its memory may have changed since)."""
    if v.flags.c_contiguous:
        return lambda: v
    return lambda: np.ascontiguousarray(v)


@njit(cache=True, nogil=True)
def _products(sgemm, v, u, m, q0, q1, nhwc):  # pragma: no cover - compiled
    """Winograd products q0..q1 of the 36: ``m[q] = v[q] @ u[q]`` (NHWC: tiles x C by C x K), or
    ``u[q] @ v[q]`` (NCHW: K x C by C x tiles)."""
    one, zero = np.float32(1), np.float32(0)
    for q in range(q0, q1):
        if nhwc:
            t, c = v.shape[1], v.shape[2]
            k = u.shape[2]
            sgemm(101, 111, 111, t, k, c, one, v[q].ctypes.data, c, u[q].ctypes.data, k, zero, m[q].ctypes.data, k)
        else:
            c, t = v.shape[1], v.shape[2]
            k = u.shape[1]
            sgemm(101, 111, 111, k, t, c, one, u[q].ctypes.data, c, v[q].ctypes.data, t, zero, m[q].ctypes.data, t)


@njit(cache=True, nogil=True)
def _panel_products(v, up, m, q0, q1):  # pragma: no cover - compiled
    """:func:`_products` (NHWC) through the panel micro-kernel: ``up`` (P, K / PANEL, C, PANEL) from
    :func:`winograd_panels`. The products have few rows (a 14x14 image: 49 tiles), where OpenBLAS is slow."""
    zeros = np.zeros(m.shape[2], np.float32)
    for q in range(q0, q1):
        for p in range(up.shape[1]):
            _panel_product(v[q], up[q], m[q], m[q], False, p, zeros, 0, np.float32(0))


@njit(cache=True, nogil=True)
def _tiles(buf, nmat, tiles, c, nhwc):  # pragma: no cover - compiled
    """A work buffer as the (nmat, tiles, C) array of NHWC kernels, (nmat, C, tiles) of NCHW ones."""
    flat = buf[:nmat * tiles * c]
    return flat.reshape((nmat, tiles, c)) if nhwc else flat.reshape((nmat, c, tiles))


# Parallel kernels are one prange over a job (an ordinary compiled function): cheap to compile, since the
# parallel passes see one call (a kernel with the work inline took 30 s to compile), and cached.

@njit(cache=True, nogil=True, parallel=True)
def _wino_par(j0, count, step, sgemm, xs, ys, rs, has_res, u, b, act, alpha, ph, pw, nty, ntx, rows, nhwc, f, vbuf,
              mbuf):  # pragma: no cover - compiled
    """Step -1: blocks j0..j0+count, one per iteration, in the work buffers of the thread running it. Steps
    0, 1, 2: shares 0..count of that step of block j0."""
    for q in prange(count):
        if step < 0:
            _wino_job(j0 + q, 0, -1, numba.get_thread_id(), sgemm, xs, ys, rs, has_res, u, b, act, alpha, ph, pw,
                      nty, ntx, rows, nhwc, f, vbuf, mbuf)
        else:
            _wino_job(j0, q, step, 0, sgemm, xs, ys, rs, has_res, u, b, act, alpha, ph, pw, nty, ntx, rows, nhwc,
                      f, vbuf, mbuf)


@njit(cache=True, nogil=True)
def _wino_job(j, q, step, tid, sgemm, xs, ys, rs, has_res, u, b, act, alpha, ph, pw, nty, ntx, rows, nhwc, f, vbuf,
              mbuf):  # pragma: no cover - compiled
    """Block ``j`` (``rows`` tile rows of one image) in the work buffers of thread ``tid``: all of it (step -1:
    input transform, the products, output transform) or share ``q`` of one step, the shares of a step being
    run by all the threads: tile row ``q`` of the input (0) or output (2) transform, or products
    P q/T..P (q+1)/T of the P (1), T threads. ``f``: F(4x4, 3x3) (36 products) or F(2x2, 3x3) (16, NHWC)."""
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
        if u.ndim == 4:
            _panel_products(v, u, m, q0, q1)
        else:
            _products(sgemm, v, u, m, q0, q1, nhwc)
    if step == -1 or step == 2:
        out_act = 0 if has_res else act  # with a residual: activated after the sum, below
        if f == 2:
            _out2_nhwc(m, ys[i], b, out_act, alpha, t0, nr, ntx, i0)
        elif nhwc:
            _out_nhwc(m, ys[i], b, out_act, alpha, t0, nr, ntx, i0)
        else:
            _out_nchw(m, ys[i], b, out_act, alpha, t0, nr, ntx, i0)
        if has_res:
            ho = ys.shape[1] if nhwc else ys.shape[2]
            _residual_rows(ys[i], rs[i], f * t0, min(ho, f * (t0 + nr)), nhwc, act, alpha)


@njit(cache=True, nogil=True)
def _residual_rows(y, r, r0, r1, nhwc, act, alpha):  # pragma: no cover - compiled
    """Rows r0..r1 of one image ``y`` += ``r`` (both (H, W, K) when ``nhwc``, else (K, H, W)), activated."""
    if nhwc:
        for h in range(r0, r1):
            yr, rr = y[h], r[h]
            for w in range(yr.shape[0]):
                a, e = yr[w], rr[w]
                for k in range(a.size):
                    a[k] = _act(a[k] + e[k], act, alpha)
    else:
        for k in range(y.shape[0]):
            for h in range(r0, r1):
                a, e = y[k, h], r[k, h]
                for j in range(a.size):
                    a[j] = _act(a[j] + e[j], act, alpha)


_local = threading.local()


def _scratch(slot: int, shape: tuple[int, ...]) -> np.ndarray:
    """A float32 work array of ``shape`` for the calling thread, reused between calls."""
    bufs = _local.__dict__.setdefault("bufs", {})
    size = math.prod(shape)
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


#: seconds a count of the cores is used for (each layer asks; the system calls cost microseconds on a VM)
CORES_TTL = 1.0
#: share of a core other processes must have used over the last CORES_TTL for the kernels to leave it to them
CORE_TAKEN = 0.5
_cores_seen: list[float] = [0.0, -1e9]
#: the last look at the machine: (monotonic time, busy clock ticks of all CPUs, this process's CPU seconds)
_load_seen: list[tuple[float, int, float]] = []


def _busy_ticks() -> int | None:
    """Clock ticks all CPUs spent running something (user, nice, system, interrupts) since boot, None without
    /proc/stat. Time the hypervisor gave other machines (steal) is not counted: no thread count gets it back."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 8:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return user + nice + system + irq + softirq


def _cores_taken() -> float:
    """Cores' worth of CPU time other processes used since the last call (0 on the first call, or without
    /proc/stat): everything the machine ran less this process's own CPU time."""
    ticks = _busy_ticks()
    if ticks is None:
        return 0.0
    now, own = time.monotonic(), sum(os.times()[:2])
    last = _load_seen[0] if _load_seen else None
    _load_seen[:] = [(now, ticks, own)]
    if last is None or now - last[0] <= 0:
        return 0.0
    others = (ticks - last[1]) / _CLOCK_TICKS - (own - last[2])
    return max(0.0, others / (now - last[0]))


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cores() -> int:
    """Cores the kernels share their work over: those this process may run on, less those other processes kept
    busy (more than CORE_TAKEN of one) over the last CORES_TTL seconds. Waiting OpenMP threads spin
    (GOMP_SPINCOUNT), and a thread spinning on a core another program needs makes both slow; one thread fewer
    leaves that core alone (a kernel run on one thread wakes no other)."""
    count, when = _cores_seen
    now = time.monotonic()
    if now - when < CORES_TTL:
        return int(count)
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        count = os.cpu_count() or 1
    count = max(1, count - int(_cores_taken() + 1.0 - CORE_TAKEN))
    _cores_seen[:] = [count, now]
    return int(count)


_launch_lock = threading.Lock()


def _threads() -> int:
    """Threads of the parallel kernels: one per core this process may use (set for the calling thread; Numba's
    count is per thread, remembered here so that each layer does not ask Numba again)."""
    n = min(numba.config.NUMBA_NUM_THREADS, _cores())
    if _local.__dict__.get("threads") != n:
        numba.set_num_threads(n)
        _local.threads = n
    return n


def _launch(kernel: Any, *args: Any) -> None:
    """Run a parallel kernel with BLAS held to one thread, one launch at a time in the process (Numba's
    fallback threading layer, used where neither OpenMP nor TBB can be loaded, refuses concurrent ones).
    Inside :func:`single_threaded_blas` (a network's run) no context manager is entered: a launch's Python
    work between kernels is a network's cost per layer."""
    if _held.depth:
        with _launch_lock:
            kernel(*args)
        return
    with _launch_lock, _blas_single_thread():
        kernel(*args)


def compiled_before() -> bool:
    """Whether Numba's on-disk cache already holds the main kernels (compiled by an earlier run on this
    machine); compiling them all takes about half a minute on 2 cores."""
    try:
        panels = (_panel_windows_par, _panel_par) if panels_available() else ()
        kernels = (_wino_par, _conv_par, _few_par, *panels)
        return all(os.path.exists(k._cache._cache_file._index_path) for k in kernels)
    except AttributeError:  # a Numba without this cache layout: say nothing
        return True


def warmup_lock_path() -> Path:
    """The lock file that a background compile of these kernels (``engine.backends.warmup``) holds meanwhile."""
    digest = hashlib.sha1(__file__.encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"layerlab-warmup-{digest}.lock"


def compile_under_way() -> bool:
    """Whether another process is compiling these kernels now (it holds :func:`warmup_lock_path`)."""
    try:
        with open(warmup_lock_path(), "a+b") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(lock, fcntl.LOCK_UN)
    except OSError:  # no temporary folder to lock in: the warmup cannot lock either
        return False
    return False


@functools.cache
def blas_sgemm() -> Any:
    """``cblas_sgemm`` (64-bit integers) of the BLAS library NumPy uses, as a ctypes function the kernels
    call without the GIL; None when there is none (the backend then has no fast convolution)."""
    try:
        from threadpoolctl import threadpool_info  # noqa: PLC0415
    except ImportError:
        return None
    for info in threadpool_info():
        if info.get("user_api") != "blas":
            continue
        try:
            lib = ctypes.CDLL(info["filepath"])
        except OSError:
            continue
        for name in ("scipy_cblas_sgemm64_", "cblas_sgemm64_", "cblas_sgemm_64"):
            fn = getattr(lib, name, None)
            if fn is not None:
                i64, f32, ptr = ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
                fn.restype = None
                fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, i64, i64, i64, f32, ptr, i64, ptr, i64, f32,
                               ptr, i64]
                return fn
    return None


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
def _im2col_nhwc(x, cols, p0, q0, q1, wo, kh, kw, sh, sw, ph, pw, dh, dw):  # pragma: no cover - compiled
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
def _bias_act(y, r, has_res, p0, p1, k0, k1, bias, act, alpha):  # pragma: no cover - compiled
    """Rows p0..p1, columns k0..k1 of ``y`` (P, K) += bias (and ``r`` (P, K) when ``has_res``), activated in place."""
    bb = bias[k0:k1]
    for p in range(p0, p1):
        row = y[p][k0:k1]
        if has_res:
            rr = r[p][k0:k1]
            for k in range(row.size):
                row[k] = _act(row[k] + bb[k] + rr[k], act, alpha)
        else:
            for k in range(row.size):
                row[k] = _act(row[k] + bb[k], act, alpha)


def _nhwc_operands(x: np.ndarray, out: np.ndarray,
                   bias: np.ndarray | None) -> tuple[Callable[[], np.ndarray], np.ndarray, np.ndarray]:
    """The input as a function giving a contiguous (N, H, W, C) array when called (see :func:`_live_contiguous`),
    the output as (N, pixels, K) rows and the bias (zeros when there is none), for the NHWC convolutions."""
    n, k, ho, wo = out.shape
    b = np.zeros(k, np.float32) if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    return _live_contiguous(x.transpose(0, 2, 3, 1)), out.transpose(0, 2, 3, 1).reshape(n, ho * wo, k), b


def _pixel_rows(a: np.ndarray) -> np.ndarray:
    """A logical NCHW view of NHWC memory as (N, pixels, K) rows (a view: the caller checks the layout)."""
    n, k, h, w = a.shape
    return a.transpose(0, 2, 3, 1).reshape(n, h * w, k)


def gemm_weights(w: np.ndarray) -> np.ndarray:
    """Weights (K, C, KH, KW) as the (KH*KW*C, K) float32 matrix of :func:`conv_nhwc`."""
    k = w.shape[0]
    return np.ascontiguousarray(np.asarray(w, dtype=np.float32).transpose(2, 3, 1, 0).reshape(-1, k))


def conv_nhwc(x: np.ndarray, wm: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None, out: np.ndarray,
              stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], act: int = 0,
              alpha: float = 0.0) -> None:
    """``act(conv(x) + bias)`` into ``out`` for NHWC tensors (logical NCHW views, ``out`` contiguous
    NHWC): im2col by cache-sized blocks of output pixels straight into one matrix product per block,
    whose result lands in ``out`` itself; a 1x1 convolution of stride 1 needs no im2col at all. A layer
    of fewer blocks than threads (a 7x7 image) is cut by output channels instead."""
    conv_nhwc_plan(x, wm, kernel, bias, out, stride, padding, dilation, act, alpha)()


def conv_nhwc_plan(x: np.ndarray, wm: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None, out: np.ndarray,
                   stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], act: int = 0,
                   alpha: float = 0.0, residual: np.ndarray | None = None) -> Callable[[], None]:
    """:func:`conv_nhwc` made ready to run (see :func:`winograd_plan`), ``residual`` (as ``out``) added before the
    activation in each block's epilogue."""
    n, c, h, w = x.shape
    k, ho, wo = out.shape[1:]
    kh, kw = kernel
    live, ys, b = _nhwc_operands(x, out, bias)
    rs = ys if residual is None else _pixel_rows(residual)
    direct = kh == kw == 1 and stride == (1, 1) and padding == (0, 0)
    step = max(16, min(ho * wo, BLOCK_BYTES // (4 * max(kh * kw * c, k))))
    if ho * wo * n >= CONV_SPLIT_MIN_PIXELS:
        step = _share(ho * wo * n, step, n)
    threads = _threads()
    blocks = n * -(-(ho * wo) // step)
    split = blocks < threads and k >= 2 * COLUMN_SPLIT_MIN
    bounds = np.array([0] + [s.stop for s in _share_columns(k)] if split else [0, k], np.int64)
    shape = (threads, 0 if direct else (ho * wo if split else step) * wm.shape[0])
    head = (blas_sgemm(),)
    tail = (wm, b, act, np.float32(alpha), wo, kh, kw, *stride, *padding, *dilation, step, direct, bounds)

    def run() -> None:
        if _threads() != threads:  # the cores this process may use changed: the work buffers' shapes too
            conv_nhwc_plan(x, wm, kernel, bias, out, stride, padding, dilation, act, alpha, residual)()
            return
        args = (*head, live(), ys, rs, residual is not None, *tail, _scratch(0, shape))
        if not split:
            _launch(_conv_par, 0, blocks, 0, *args)
            return
        for i in range(n):  # an image of one block: the im2col shared out by rows, then the product by columns
            if not direct:
                _launch(_conv_par, i, threads, 1, *args)
            _launch(_conv_par, i, len(bounds) - 1, 2, *args)
    return run


@njit(cache=True, nogil=True)
def _product(sgemm, a, lda, m, wm, k0, k1, y, p0):  # pragma: no cover - compiled
    """Rows p0..p0+m, columns k0..k1 of ``y`` (P, K) = the ``m`` rows at address ``a`` (leading dimension
    ``lda``) times columns k0..k1 of ``wm``."""
    kk, k = wm.shape
    sgemm(101, 111, 111, m, k1 - k0, kk, np.float32(1), a, lda, wm.ctypes.data + 4 * k0, k, np.float32(0),
          y.ctypes.data + 4 * (p0 * k + k0), k)


@njit(cache=True, nogil=True, parallel=True)
def _conv_par(j0, count, step_kind, sgemm, xs, ys, rs, has_res, wm, b, act, alpha, wo, kh, kw, sh, sw, ph, pw, dh, dw,
              step, direct, bounds, cbuf):  # pragma: no cover - compiled
    """Kind 0: pixel blocks j0..j0+count, one per iteration, in the im2col rows of the thread running it. Kinds 1
    and 2, for image j0 cut by output channels: shares of its im2col (by rows), then of its product."""
    for q in prange(count):
        tid = numba.get_thread_id() if step_kind == 0 else 0
        _conv_job(j0 + q if step_kind == 0 else j0, q, step_kind, tid, sgemm, xs, ys, rs, has_res, wm, b, act, alpha,
                  wo, kh, kw, sh, sw, ph, pw, dh, dw, step, direct, bounds, cbuf)


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
            _product(sgemm, xs[i].ctypes.data + 4 * p0 * c, c, p1 - p0, wm, 0, k, ys[i], p0)
        else:
            cols = cbuf[tid][:(p1 - p0) * kk].reshape((p1 - p0, kk))
            _im2col_nhwc(xs[i], cols, p0, 0, p1 - p0, wo, kh, kw, sh, sw, ph, pw, dh, dw)
            _product(sgemm, cols.ctypes.data, kk, p1 - p0, wm, 0, k, ys[i], p0)
        _bias_act(ys[i], rs[i], has_res, p0, p1, 0, k, b, act, alpha)
        return
    if direct:  # a 1x1 convolution of stride 1 reads its input as it is
        a, lda = xs[j].ctypes.data, c
    else:
        cols = cbuf[0][:total * kk].reshape((total, kk))
        if step_kind == 1:
            shares = cbuf.shape[0]
            _im2col_nhwc(xs[j], cols, 0, total * q // shares, total * (q + 1) // shares, wo, kh, kw, sh, sw, ph, pw,
                         dh, dw)
            return
        a, lda = cols.ctypes.data, kk
    _product(sgemm, a, lda, total, wm, bounds[q], bounds[q + 1], ys[j], 0)
    _bias_act(ys[j], rs[j], has_res, 0, total, bounds[q], bounds[q + 1], b, act, alpha)


def _share_columns(k: int) -> list[slice]:
    """``k`` output channels cut into one block per core, each a multiple of 16 wide (SIMD rows of BLAS)."""
    cores = _cores()
    per_core = -(-k // cores)
    width = -(-per_core // COLUMN_SPLIT_MIN) * COLUMN_SPLIT_MIN
    return [slice(k0, min(k, k0 + width)) for k0 in range(0, k, width)]


# ---- small images: a product over weights packed once in panels (AVX-512 and AVX2) --------------------

def _vector_shape() -> tuple[int, int, int] | None:
    """The micro-kernel's shape on this CPU: (floats per vector register, vectors per tile row, tile rows), or
    None without FMA vectors (the BLAS path). AVX-512 (32 registers of 16 floats): 7 rows x 2 vectors, fourteen
    accumulators. AVX2 (16 registers of 8 floats): 6 rows x 2 vectors, twelve accumulators, two loads of the
    panel and one broadcast."""
    try:
        from llvmlite import binding  # noqa: PLC0415

        features = binding.get_host_cpu_features()
    except Exception:  # no feature query
        return None
    if features.get("avx512f"):
        return 16, 2, 7
    if features.get("avx2") and features.get("fma"):
        return 8, 2, 6
    return None


_SHAPE = _vector_shape()
#: output channels per panel, rows of the micro-kernel's tile, input values per pass over a panel (L2-sized)
PANEL_VECTOR, PANEL_VECTORS, PANEL_ROWS = _SHAPE or (16, 2, 7)
PANEL = PANEL_VECTOR * PANEL_VECTORS
PANEL_KBLOCK = 1024

#: largest output (pixels per image) the panel product takes: there OpenBLAS, which packs the weights on every
#: call, ran 1.4-1.7x slower (7x7, 4608 -> 512: 0.97 against 0.58 ms; 14x14, 2304 -> 256: 0.76 against 0.53); from
#: 28x28 on it is as fast and stays
PANEL_MAX_PIXELS = 256

#: whether a 3x3 convolution of stride 1 that Winograd takes (numpy_backend.WINOGRAD_MIN_TILES) goes there before
#: the panels: on AVX2 (8-wide micro-kernel, Zen 3) resnet18's 14x14 256 -> 256 layer took 0.90 ms by Winograd
#: against 1.35 by panels (tests/bench/bench_cpu_panels.py), while the 7x7 ones (4 tiles) stay on panels (1.8
#: against 3.9); on AVX-512 the panels were measured against im2col only and keep their place
WINOGRAD_BEFORE_PANELS = PANEL_VECTOR < 16


def panels_available() -> bool:
    """Whether this CPU has the FMA vectors of the micro-kernel (AVX-512, or AVX2 with FMA)."""
    return _SHAPE is not None


def _phis(builder: Any, ty: Any, values: list[Any], block: Any) -> list[Any]:
    """One phi node of type ``ty`` per value, each taking its value when coming from ``block``."""
    phis = [builder.phi(ty) for _ in values]
    _incoming(phis, values, block)
    return phis


def _incoming(phis: list[Any], values: list[Any], block: Any) -> None:
    """Each phi takes its value when coming from ``block``."""
    for phi, value in zip(phis, values):
        phi.add_incoming(value, block)


def _make_tile(nr: int) -> Any:
    """The micro-kernel for tiles of ``nr`` rows (see ``_tile_n``)."""

    def _tile(typingctx, rows_a, rows_c, bp, depth, outer, a_step):  # pragma: no cover - compiled
        return _tile_codegen(nr)

    _tile.__name__ = _tile.__qualname__ = f"_tile{nr}"  # one name each: Numba keys intrinsics by name
    return intrinsic(_tile)


def _make_tile_bias(nr: int) -> Any:
    """The micro-kernel for tiles of ``nr`` rows that starts from a bias and may end with a ReLU (``_tile_bias_n``)."""

    def _tile(typingctx, rows_a, rows_c, bp, depth, outer, a_step, bias, relu):  # pragma: no cover - compiled
        return _tile_codegen(nr, fused=True)

    _tile.__name__ = _tile.__qualname__ = f"_tile_bias{nr}"
    return intrinsic(_tile)


def _tile_codegen(nr: int, fused: bool = False) -> Any:
    """C[r, 0:PANEL] += sum over o < outer, i < depth of A_r[o * a_step + i] * B[o * depth + i, 0:PANEL] for the
    ``nr`` rows r, where A_r are float32 rows at the addresses held in the int64 array at ``rows_a``
    (``a_step`` in bytes), C rows at those held at ``rows_c``, and B a contiguous panel of PANEL columns at ``bp``:
    ``nr`` x PANEL_VECTORS vector accumulators kept in registers across the whole sum (PANEL_VECTORS vector
    loads of B, one broadcast of A per row and ``nr`` x PANEL_VECTORS fused multiply-adds per step), which
    Numba's loops cannot be made to do. AVX-512: seven rows, resnet's 7x7 and 14x14 images are whole tiles (six
    rows ran 0.58 instead of 0.48 ms on 49 x 4608 x 512). ``outer`` > 1 sums over the rows of a convolution
    window in place (``a_step`` apart in the input), the accumulators staying in registers between them.

    ``fused``: two more arguments, the address of PANEL float32 bias values and a ReLU flag. The accumulators start
    from the bias instead of C, and a ReLU (NaN kept) is applied before the store when the flag is set. C is then
    only written, which saves the two passes over the output panel of a single-call sum (the bias fill and the
    activation: about 0.6 ms of resnet18's RGB stem on one core)."""
    sig = types.void(*([types.int64] * (8 if fused else 6)))
    width, nv = PANEL_VECTOR, PANEL_VECTORS

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        f32, i64, i32 = llvm_ir.FloatType(), llvm_ir.IntType(64), llvm_ir.IntType(32)
        vec = llvm_ir.VectorType(f32, width)
        pf, pv, pi = f32.as_pointer(), vec.as_pointer(), i64.as_pointer()
        fma = cgutils.get_or_insert_function(builder.module, llvm_ir.FunctionType(vec, [vec, vec, vec]),
                                             f"llvm.fma.v{width}f32")
        table_a, table_c = builder.inttoptr(args[0], pi), builder.inttoptr(args[1], pi)
        a_addr = [builder.load(builder.gep(table_a, [llvm_ir.Constant(i64, r)])) for r in range(nr)]
        c_addr = [builder.load(builder.gep(table_c, [llvm_ir.Constant(i64, r)])) for r in range(nr)]
        parts = [builder.bitcast(builder.gep(builder.inttoptr(c, pf), [llvm_ir.Constant(i64, width * h)]), pv)
                 for c in c_addr for h in range(nv)]
        panel, depth, outer, a_step = builder.inttoptr(args[2], pf), args[3], args[4], args[5]
        zero = llvm_ir.Constant(i64, 0)
        start = []
        if fused:
            bias_p = builder.inttoptr(args[6], pf)
            init = []
            for h in range(nv):
                value = builder.load(builder.bitcast(builder.gep(bias_p, [llvm_ir.Constant(i64, width * h)]), pv))
                value.align = 4
                init.append(value)
            start = [init[j % nv] for j in range(len(parts))]
        else:
            for p in parts:
                value = builder.load(p)
                value.align = 4
                start.append(value)
        entry = builder.block
        head = builder.append_basic_block("tile_outer")
        inner = builder.append_basic_block("tile_inner")
        latch = builder.append_basic_block("tile_outer_next")
        done = builder.append_basic_block("tile_done")
        work = builder.and_(builder.icmp_signed(">", depth, zero), builder.icmp_signed(">", outer, zero))
        builder.cbranch(work, head, done)
        # outer loop: one row of the window (or the whole sum when outer is 1)
        builder.position_at_end(head)
        o = builder.phi(i64)
        o.add_incoming(zero, entry)
        acc_o = _phis(builder, vec, start, entry)
        rows = [builder.inttoptr(builder.add(a, builder.mul(o, a_step)), pf) for a in a_addr]
        first = builder.mul(builder.mul(o, depth), llvm_ir.Constant(i64, width * nv))
        builder.branch(inner)
        # inner loop: one value of the tile's rows, against one row of the panel
        builder.position_at_end(inner)
        i = builder.phi(i64)
        i.add_incoming(zero, head)
        acc = _phis(builder, vec, acc_o, head)
        offset = builder.add(first, builder.mul(i, llvm_ir.Constant(i64, width * nv)))
        b = []
        for h in range(nv):
            load = builder.load(builder.bitcast(builder.gep(panel, [builder.add(offset, llvm_ir.Constant(i64, width * h))]),
                                                pv))
            load.align = 4
            b.append(load)
        splat = llvm_ir.Constant(llvm_ir.VectorType(i32, width), [0] * width)
        new = []
        for r in range(nr):
            one = builder.insert_element(llvm_ir.Constant(vec, llvm_ir.Undefined), builder.load(builder.gep(rows[r], [i])),
                                         llvm_ir.Constant(i32, 0))
            one = builder.shuffle_vector(one, llvm_ir.Constant(vec, llvm_ir.Undefined), splat)
            new += [builder.call(fma, [one, b[h], acc[nv * r + h]]) for h in range(nv)]
        step = builder.add(i, llvm_ir.Constant(i64, 1))
        i.add_incoming(step, inner)
        _incoming(acc, new, inner)
        builder.cbranch(builder.icmp_signed("<", step, depth), inner, latch)
        builder.position_at_end(latch)
        o_next = builder.add(o, llvm_ir.Constant(i64, 1))
        o.add_incoming(o_next, latch)
        _incoming(acc_o, new, latch)
        builder.cbranch(builder.icmp_signed("<", o_next, outer), head, done)
        builder.position_at_end(done)
        finals = _phis(builder, vec, start, entry)  # every phi first: LLVM wants them at the top of the block
        _incoming(finals, new, latch)
        if fused:  # ReLU where asked: v < 0 -> 0 (a NaN compares false and stays), one select a vector
            zero_v = llvm_ir.Constant(vec, [0.0] * width)
            bools = llvm_ir.VectorType(llvm_ir.IntType(1), width)
            relu = builder.insert_element(llvm_ir.Constant(bools, llvm_ir.Undefined),
                                          builder.icmp_signed("!=", args[7], zero), llvm_ir.Constant(i32, 0))
            relu = builder.shuffle_vector(relu, llvm_ir.Constant(bools, llvm_ir.Undefined),
                                          llvm_ir.Constant(llvm_ir.VectorType(i32, width), [0] * width))
            finals = [builder.select(builder.and_(builder.fcmp_ordered("<", f, zero_v), relu), zero_v, f)
                      for f in finals]
        for p, final in zip(parts, finals):
            builder.store(final, p).align = 4
        return context.get_dummy_value()

    return sig, codegen


_tile1, _tile2, _tile3, _tile4, _tile5, _tile6, _tile7 = (_make_tile(r) for r in range(1, 8))
_tile_bias1, _tile_bias2, _tile_bias3, _tile_bias4, _tile_bias5, _tile_bias6, _tile_bias7 = (
    _make_tile_bias(r) for r in range(1, 8))


@njit(inline="always")
def _tile_bias_n(nr, rows_a, rows_c, bp, depth, outer, a_step, bias, relu):  # pragma: no cover - compiled
    """:func:`_tile_n` starting from the PANEL bias values at address ``bias``, with a ReLU at the end when
    ``relu``: C is only written."""
    if nr == 7:
        _tile_bias7(rows_a, rows_c, bp, depth, outer, a_step, bias, relu)
    elif nr == 6:
        _tile_bias6(rows_a, rows_c, bp, depth, outer, a_step, bias, relu)
    elif nr == 5:
        _tile_bias5(rows_a, rows_c, bp, depth, outer, a_step, bias, relu)
    elif nr == 4:
        _tile_bias4(rows_a, rows_c, bp, depth, outer, a_step, bias, relu)
    elif nr == 3:
        _tile_bias3(rows_a, rows_c, bp, depth, outer, a_step, bias, relu)
    elif nr == 2:
        _tile_bias2(rows_a, rows_c, bp, depth, outer, a_step, bias, relu)
    else:
        _tile_bias1(rows_a, rows_c, bp, depth, outer, a_step, bias, relu)


@njit(inline="always")
def _tile_n(nr, rows_a, rows_c, bp, depth, outer, a_step):  # pragma: no cover - compiled
    """The micro-kernel on a tile of ``nr`` rows (1 to PANEL_ROWS), row addresses in the int64 arrays at
    ``rows_a`` and ``rows_c``."""
    if nr == 7:
        _tile7(rows_a, rows_c, bp, depth, outer, a_step)
    elif nr == 6:
        _tile6(rows_a, rows_c, bp, depth, outer, a_step)
    elif nr == 5:
        _tile5(rows_a, rows_c, bp, depth, outer, a_step)
    elif nr == 4:
        _tile4(rows_a, rows_c, bp, depth, outer, a_step)
    elif nr == 3:
        _tile3(rows_a, rows_c, bp, depth, outer, a_step)
    elif nr == 2:
        _tile2(rows_a, rows_c, bp, depth, outer, a_step)
    else:
        _tile1(rows_a, rows_c, bp, depth, outer, a_step)


@njit(inline="always")
def _tile_rows(left):  # pragma: no cover - compiled
    """Rows of the next tile when ``left`` rows remain: full tiles, the last one exact. A remainder of one to
    three rows after a full tile is cut with it into two tiles of about half (a tile of fewer than four rows
    waits on its few accumulators' latency; AVX2's 49 pixels of a 7x7 image: 6 x 7 + 4 + 3, the time of about
    50 rows instead of 54 in nine full tiles)."""
    if left <= PANEL_ROWS or left >= PANEL_ROWS + 4:
        return min(left, PANEL_ROWS)
    return (left + 1) // 2


@njit(cache=True, nogil=True)
def _panel_fill(y, r, has_res, k0, b):  # pragma: no cover - compiled
    """Columns k0..k0+PANEL of every row of ``y`` (rows, K) set to the bias, plus the residual ``r`` (rows, K)
    when ``has_res`` (the micro-kernel adds to them). Row by row through slices: indexing ``y[q, k0 + j]`` here
    kept LLVM from vectorising (resnet18's stem, 448 such passes, 2.75 instead of 2.2 ms)."""
    bb = b[k0:k0 + PANEL]
    if has_res:
        for q in range(y.shape[0]):
            row, rr = y[q][k0:k0 + PANEL], r[q][k0:k0 + PANEL]
            for j in range(PANEL):
                row[j] = bb[j] + rr[j]
        return
    for q in range(y.shape[0]):
        row = y[q][k0:k0 + PANEL]
        for j in range(PANEL):
            row[j] = bb[j]


@njit(cache=True, nogil=True)
def _panel_activate(y, k0, act, alpha):  # pragma: no cover - compiled
    """Columns k0..k0+PANEL of every row of ``y`` activated in place (nothing to do for ``act`` 0); row slices,
    as in :func:`_panel_fill`."""
    if act == 0:
        return
    for q in range(y.shape[0]):
        row = y[q][k0:k0 + PANEL]
        for j in range(PANEL):
            row[j] = _act(row[j], act, alpha)


def panel_weights(w: np.ndarray) -> np.ndarray:
    """Weights (K, C, KH, KW), K a multiple of PANEL, as the (K / PANEL, KH*KW*C, PANEL) float32 panels of
    :func:`conv_panels`: each panel's rows contiguous, read once per pass with no packing."""
    wm = gemm_weights(w)
    kk, k = wm.shape
    return np.ascontiguousarray(wm.reshape(kk, k // PANEL, PANEL).transpose(1, 0, 2))


def panels_apply(pixels: int, k: int) -> bool:
    """Whether :func:`conv_panels` takes a convolution of ``pixels`` output pixels per image and ``k`` outputs."""
    return pixels <= PANEL_MAX_PIXELS and k % PANEL == 0 and panels_available()


def conv_panels(x: np.ndarray, wp: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None, out: np.ndarray,
                stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], act: int = 0,
                alpha: float = 0.0) -> None:
    """``act(conv(x) + bias)`` into ``out`` for NHWC tensors (logical NCHW views, ``out`` contiguous NHWC; see
    :func:`panels_apply` and :func:`stem_panels_apply`) through the micro-kernel, weights ``wp`` from
    :func:`panel_weights`. Without dilation every kernel row of an output pixel's window is one contiguous run of
    KW*C input values (the input copied once with its padding where the layer pads), read in place: no im2col.
    A small image goes one panel of PANEL output channels per thread; a large one (an RGB stem) by output rows,
    every panel of them. Dilated windows go through an im2col first. (The micro-kernel over an im2col of
    larger images ran no faster than OpenBLAS's: 213 GFLOP/s a core on resnet18's stem.)"""
    conv_panels_plan(x, wp, kernel, bias, out, stride, padding, dilation, act, alpha)()


def conv_panels_plan(x: np.ndarray, wp: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None,
                     out: np.ndarray, stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int],
                     act: int = 0, alpha: float = 0.0, residual: np.ndarray | None = None) -> Callable[[], None]:
    """:func:`conv_panels` made ready to run (see :func:`winograd_plan`); a padded input is a buffer of the plan
    whose border stays zero, its inside copied at each call. ``residual`` (as ``out``) is where the sums start
    from (with the bias), so it costs no pass of its own."""
    n, c, h, w = x.shape
    k, ho, wo = out.shape[1:]
    kh, kw = kernel
    live, ys, b = _nhwc_operands(x, out, bias)
    rs, has_res = (ys, False) if residual is None else (_pixel_rows(residual), True)
    al = np.float32(alpha)
    if dilation == (1, 1):
        ph, pw = padding
        step = ho * wo if ho * wo <= PANEL_MAX_PIXELS else wo  # a small image whole, a large one by rows
        if not (ph or pw):
            return lambda: _launch(_panel_windows_par, live(), wp, ys, rs, has_res, b, act, al, kh, kw, *stride, wo,
                                   step)
        xpad = np.zeros((n, h + 2 * ph, w + 2 * pw, c), np.float32)
        inside = xpad[:, ph:ph + h, pw:pw + w]
        xv = x.transpose(0, 2, 3, 1)

        def run() -> None:
            inside[...] = xv
            _launch(_panel_windows_par, xpad, wp, ys, rs, has_res, b, act, al, kh, kw, *stride, wo, step)
        return run

    def run_im2col() -> None:
        xs = live()
        cols = _scratch(0, (ho * wo, wp.shape[1]))
        for i in range(n):
            _launch(_im2col_par, xs[i], cols, _threads(), wo, kh, kw, *stride, *padding, *dilation)
            _launch(_panel_par, cols, wp, ys[i], rs[i], has_res, b, act, al)
    return run_im2col


@njit(cache=True, nogil=True, parallel=True)
def _panel_windows_par(x, wp, ys, rs, has_res, b, act, alpha, kh, kw, sh, sw, wo, step):  # pragma: no cover - compiled
    """``ys`` (N, P, K) = act(conv(``x``) + ``b``) for the (padded) images ``x`` (N, Hp, Wp, C), one block of
    ``step`` output pixels of one panel of PANEL output channels per iteration (the panels of a block one after the
    other): tiles of up to PANEL_ROWS output pixels whose windows the micro-kernel reads in place, every kernel row
    of them in one call (no im2col: at 7x7 x 512 channels, 0.9 MB of it a layer)."""
    n, m, k = ys.shape
    c = x.shape[3]
    span, kk, panels = kw * c, wp.shape[1], wp.shape[0]
    row_bytes, pix_bytes = x.strides[1], x.strides[2]
    blocks = (m + step - 1) // step
    for job in prange(n * blocks * panels):
        i, blk, p = job // (blocks * panels), job // panels % blocks, job % panels
        q0, q1 = blk * step, min(m, blk * step + step)
        y = ys[i][q0:q1]
        k0 = p * PANEL
        fused = not has_res and act <= 1  # the bias and a ReLU inside the micro-kernel: no passes over the panel
        if not fused:
            _panel_fill(y, rs[i][q0:q1], has_res, k0, b)
        rows_a = np.empty(PANEL_ROWS, np.int64)
        rows_c = np.empty(PANEL_ROWS, np.int64)
        panel = wp.ctypes.data + 4 * p * kk * PANEL
        image = x[i].ctypes.data
        bias = b.ctypes.data + 4 * k0
        t0 = q0
        while t0 < q1:
            nr = _tile_rows(q1 - t0)
            for t in range(nr):
                q = t0 + t
                rows_a[t] = image + (q // wo) * sh * row_bytes + (q % wo) * sw * pix_bytes
                rows_c[t] = y.ctypes.data + 4 * ((q - q0) * k + k0)
            if fused:
                _tile_bias_n(nr, rows_a.ctypes.data, rows_c.ctypes.data, panel, span, kh, row_bytes, bias, act)
            else:
                _tile_n(nr, rows_a.ctypes.data, rows_c.ctypes.data, panel, span, kh, row_bytes)
            t0 += nr
        if not fused:
            _panel_activate(y, k0, act, alpha)


@njit(cache=True, nogil=True, parallel=True)
def _im2col_par(x, cols, shares, wo, kh, kw, sh, sw, ph, pw, dh, dw):  # pragma: no cover - compiled
    total = cols.shape[0]
    for q in prange(shares):
        _im2col_nhwc(x, cols, 0, total * q // shares, total * (q + 1) // shares, wo, kh, kw, sh, sw, ph, pw, dh, dw)


@njit(cache=True, nogil=True, parallel=True)
def _panel_par(a, wp, y, r, has_res, b, act, alpha):  # pragma: no cover - compiled
    """``y`` (P, K) = act(``a`` (P, KK) @ panels ``wp`` + ``b``), one panel of PANEL output channels per iteration."""
    for p in prange(wp.shape[0]):
        _panel_product(a, wp, y, r, has_res, p, b, act, alpha)


@njit(cache=True, nogil=True)
def _panel_product(a, wp, y, r, has_res, p, b, act, alpha):  # pragma: no cover - compiled
    """Columns of panel ``p`` of ``y`` (M, K) = act(``a`` (M, KK) @ ``wp[p]`` + bias): bias first, then passes of
    PANEL_KBLOCK input values (a block of ``a`` and of the panel in L2), each over tiles of at most PANEL_ROWS rows
    (:func:`_tile_rows`), then the activation. Rows of ``a`` and ``y`` may have any stride."""
    m, kk = a.shape
    k0 = p * PANEL
    lda, ldy = a.strides[0], y.strides[0]
    _panel_fill(y, r, has_res, k0, b)
    rows_a = np.empty(PANEL_ROWS, np.int64)
    rows_c = np.empty(PANEL_ROWS, np.int64)
    for d0 in range(0, kk, PANEL_KBLOCK):
        depth = min(kk, d0 + PANEL_KBLOCK) - d0
        panel = wp.ctypes.data + 4 * (p * kk + d0) * PANEL
        m0 = 0
        while m0 < m:
            nr = _tile_rows(m - m0)
            for r in range(nr):
                rows_a[r] = a.ctypes.data + (m0 + r) * lda + 4 * d0
                rows_c[r] = y.ctypes.data + (m0 + r) * ldy + 4 * k0
            _tile_n(nr, rows_a.ctypes.data, rows_c.ctypes.data, panel, depth, 1, 0)
            m0 += nr
    _panel_activate(y, k0, act, alpha)


def stem_panels_apply(w_shape: tuple[int, ...], dilation: tuple[int, int], pixels: int) -> bool:
    """Whether :func:`conv_panels` takes a large image too, for weights ``w_shape`` (K, C, KH, KW): few input
    channels (an RGB stem, whose im2col is mostly copying) and a window of at least STEM_PANEL_MIN_WINDOW values,
    no dilation, outputs a multiple of PANEL, AVX-512 or AVX2. resnet18's 7x7 stem: 0.7 instead of 0.9-1.1 ms
    through im2col and OpenBLAS (AVX-512)."""
    k, c, kh, kw = w_shape
    return (c <= STEM_PANEL_MAX_CHANNELS and c * kh * kw >= STEM_PANEL_MIN_WINDOW and dilation == (1, 1)
            and k % PANEL == 0 and pixels > PANEL_MAX_PIXELS and panels_available())


#: most input channels of a stem for :func:`conv_panels`, and fewest values in its window: a 3x3 RGB window (27)
#: made too short a sum per call of the micro-kernel (dncnn's first layer: 1.64 against 1.39 ms through im2col)
STEM_PANEL_MAX_CHANNELS = 4
STEM_PANEL_MIN_WINDOW = 64


# ---- convolution to few output channels (a network's last layer: 64 -> 3) ----------------------------

#: most output channels of :func:`conv_few_outputs`, and fewest input channels (its sums run along C)
FEW_OUTPUTS_MAX = 4
FEW_OUTPUTS_MIN_CHANNELS = 8

_SUMS = {"reassoc", "contract"}  # reordered float32 sums (vectorised, as BLAS's); NaN and Inf kept


def few_output_weights(w: np.ndarray) -> np.ndarray:
    """Weights (K, C, KH, KW) as the (1, 4, KH, KW*C) float32 array of :func:`conv_few_outputs`: the K output
    channels padded to 4 with zeros, each kernel row one run of KW*C values in the NHWC order of the input."""
    k, c, kh, kw = w.shape
    padded = np.zeros((FEW_OUTPUTS_MAX, c, kh, kw), np.float32)
    padded[:k] = w
    return np.ascontiguousarray(padded.transpose(0, 2, 3, 1)).reshape(1, FEW_OUTPUTS_MAX, kh, kw * c)


def conv_few_outputs(x: np.ndarray, wr: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None, out: np.ndarray,
                     stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], act: int = 0,
                     alpha: float = 0.0) -> None:
    """``act(conv(x) + bias)`` into ``out`` (at most FEW_OUTPUTS_MAX output channels) for NHWC tensors (logical
    NCHW views, ``out`` contiguous NHWC): per output pixel, four dot products along each kernel row's KW*C input
    values at once, by blocks of output rows over the cores. Winograd and im2col spend their products on
    a matrix of 3 or 4 columns here (dncnn's 64 -> 3 output layer at 256x256: 2.1 ms against 3.9 by
    Winograd, 6.4 by im2col)."""
    conv_few_outputs_plan(x, wr, kernel, bias, out, stride, padding, dilation, act, alpha)()


def conv_few_outputs_plan(x: np.ndarray, wr: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None,
                          out: np.ndarray, stride: tuple[int, int], padding: tuple[int, int],
                          dilation: tuple[int, int], act: int = 0, alpha: float = 0.0) -> Callable[[], None]:
    """:func:`conv_few_outputs` made ready to run (see :func:`winograd_plan`)."""
    n, k, ho, wo = out.shape
    live = _live_contiguous(x.transpose(0, 2, 3, 1))
    ys = out.transpose(0, 2, 3, 1)
    b = np.zeros(FEW_OUTPUTS_MAX, np.float32)
    if bias is not None:
        b[:k] = bias
    rows = _share(ho * n, ho, n) if out.size >= SPLIT_MIN_PIXELS else ho
    geometry = (*kernel, *stride, *padding, *dilation, act, np.float32(alpha))
    return lambda: _launch(_few_par, live(), wr, b, ys, rows, *geometry)


@njit(cache=True, nogil=True, fastmath=_SUMS)
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
                y[oh, ow, kk] = _act(sums[kk] + b[kk], act, alpha)


@njit(cache=True, nogil=True, parallel=True)
def _few_par(x, wr, b, y, rows, kh, kw, sh, sw, ph, pw, dh, dw, act, alpha):  # pragma: no cover - compiled
    n, ho = y.shape[:2]
    per_image = (ho + rows - 1) // rows
    for j in prange(n * per_image):
        i, r0 = j // per_image, (j % per_image) * rows
        _few_rows(x[i], wr, b, y[i], r0, min(ho, r0 + rows), kh, kw, sh, sw, ph, pw, dh, dw, act, alpha)


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
            if c1n:
                dst, src = y[bi, oh, ow][c0n:], skip[bi, oh, ow]  # indexed from 0: no wrap-around tests
                for c in range(c1n):
                    dst[c] = src[c]


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
    threads = _threads()
    for xs, ss, ys in parts:
        _launch(_upsample, xs, ss, ys, factor[0], factor[1], bilinear, threads)


@njit(cache=True, nogil=True, parallel=True)
def _upsample(x, skip, y, fh, fw, bilinear, parts):  # pragma: no cover - compiled
    total = y.shape[0] * y.shape[1]
    for q in prange(parts):
        _upsample_rows(x, skip, y, total * q // parts, total * (q + 1) // parts, fh, fw, bilinear)


# ---- fully connected ---------------------------------------------------------------------------------

#: most items of a batch :func:`dense` takes (larger batches are products worth BLAS's blocking)
DENSE_MAX_ITEMS = 8


def dense(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, out: np.ndarray, act: int = 0,
          alpha: float = 0.0) -> None:
    """``out`` (N, O) = act(``x`` (N, K) @ ``w`` (O, K) transposed + ``bias``), float32 C-contiguous, N at most
    DENSE_MAX_ITEMS: blocks of outputs over the cores, each output one dot product along K for every item
    (the weights, read once, are the traffic: resnet18's 512 -> 1000 layer took 0.3 ms as one BLAS
    matrix-vector product on one core)."""
    b = np.zeros(w.shape[0], np.float32) if bias is None else bias
    threads = _threads()
    if w.size < ELEMENT_WISE_SPLIT_MIN:
        _dense_range(x, w, b, out, 0, w.shape[0], act, np.float32(alpha))
        return
    _launch(_dense_par, x, w, b, out, act, np.float32(alpha), threads)


@njit(cache=True, nogil=True, fastmath=_SUMS)
def _dense_range(x, w, b, y, o0, o1, act, alpha):  # pragma: no cover - compiled
    n, k = x.shape
    for o in range(o0, o1):
        wo = w[o]
        for i in range(n):
            xi = x[i]
            s = np.float32(0)
            for e in range(k):
                s += xi[e] * wo[e]
            y[i, o] = _act(s + b[o], act, alpha)


@njit(cache=True, nogil=True, parallel=True)
def _dense_par(x, w, b, y, act, alpha, parts):  # pragma: no cover - compiled
    o = w.shape[0]
    for q in prange(parts):
        _dense_range(x, w, b, y, o * q // parts, o * (q + 1) // parts, act, alpha)


# ---- element-wise ------------------------------------------------------------------------------------

#: element-wise operations of two inputs (name -> code used by the kernel)
ELEMENT_WISE_OPS = {"sum": 0, "product": 1, "max": 2, "min": 3, "sub": 4}

#: smallest tensor (elements) whose element-wise pass is cut over the cores
ELEMENT_WISE_SPLIT_MIN = 1 << 16


@njit(cache=True, nogil=True)
def _element_wise_range(a, b, y, i0, i1, op, act, alpha):  # pragma: no cover - compiled
    """``y[i] = act(a[i] op b[i])`` for i in i0..i1 of flat arrays; NaN wins a max or a min, as in NumPy. One
    loop per operation and per activation (branch-free bodies vectorise), by chunks that stay in L1, each
    indexed from 0 (an index Numba cannot prove non-negative costs a wrap-around test: gathers, not loads)."""
    for j0 in range(i0, i1, 2048):
        j1 = min(i1, j0 + 2048)
        u, v, z = a[j0:j1], b[j0:j1], y[j0:j1]
        n = z.size
        if op == 0:
            for i in range(n):
                z[i] = _act(u[i] + v[i], act, alpha)
        elif op == 1:
            for i in range(n):
                z[i] = _act(u[i] * v[i], act, alpha)
        elif op == 2:
            for i in range(n):
                z[i] = _act(np.maximum(u[i], v[i]), act, alpha)  # NaN wins (see _act for why not a select)
        elif op == 3:
            for i in range(n):
                z[i] = _act(np.minimum(u[i], v[i]), act, alpha)
        else:
            for i in range(n):
                z[i] = _act(u[i] - v[i], act, alpha)


def element_wise(a: np.ndarray, b: np.ndarray, out: np.ndarray, op: int, act: int = 0, alpha: float = 0.0) -> None:
    """``out = act(a op b)`` (codes of :data:`ELEMENT_WISE_OPS` and :data:`FUSED_EPILOGUES`) in one pass,
    spread over the cores; float32 C-contiguous arrays of one shape (``out`` may be ``a`` or ``b``)."""
    fy = out.reshape(-1)
    if fy.size < ELEMENT_WISE_SPLIT_MIN:  # on this thread: no parallel region to wake
        _element_wise_range(a.reshape(-1), b.reshape(-1), fy, 0, fy.size, op, act, np.float32(alpha))
        return
    _launch(_element_wise, a.reshape(-1), b.reshape(-1), fy, op, act, np.float32(alpha), _threads())


@njit(cache=True, nogil=True, parallel=True)
def _element_wise(a, b, y, op, act, alpha, parts):  # pragma: no cover - compiled
    step = (y.size + parts - 1) // parts
    step = (step + 15) // 16 * 16  # a multiple of 16 floats: no cache line shared by two threads
    for q in prange(parts):
        _element_wise_range(a, b, y, min(y.size, q * step), min(y.size, (q + 1) * step), op, act, alpha)


# ---- pooling -----------------------------------------------------------------------------------------

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
                        for k in range(c):  # NaN wins; a select here was a masked store (see _act)
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


def pool_nhwc(x: np.ndarray, out: np.ndarray, is_max: bool, kernel: tuple[int, int], stride: tuple[int, int],
              padding: tuple[int, int], count_include_pad: bool) -> None:
    """Max or average pooling of float32 NHWC ``x`` (N, H, W, C) into ``out`` (N, Ho, Wo, C), one pass,
    by blocks of output rows over the cores. Averages divide by the real cells of each window unless
    ``count_include_pad``."""
    n, ho = out.shape[:2]
    rows = _share(ho * n, ho, n) if out.size >= SPLIT_MIN_PIXELS * 16 else ho
    geometry = (*kernel, *stride, *padding, is_max, count_include_pad)
    if n == 1 and rows >= ho:  # one job (resnet18's global average: 7x7x512): on this thread, no parallel region
        _pool_rows(x[0], out[0], 0, ho, *geometry)
        return
    _launch(_pool, x, out, rows, *geometry)


@njit(cache=True, nogil=True, parallel=True)
def _pool(x, y, rows, kh, kw, sh, sw, ph, pw, is_max, include_pad):  # pragma: no cover - compiled
    n, ho = y.shape[:2]
    per_image = (ho + rows - 1) // rows
    for j in prange(n * per_image):
        i, r0 = j // per_image, (j % per_image) * rows
        _pool_rows(x[i], y[i], r0, min(ho, r0 + rows), kh, kw, sh, sw, ph, pw, is_max, include_pad)

