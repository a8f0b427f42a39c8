"""Scaled dot-product attention in one pass per matrix (Numba, every core, the panel micro-kernel):
``softmax(scale * q @ k^T + bias) @ v`` for each matrix of a stack, its scores never leaving the core's cache.

Window attention (Swin, MaxViT) is hundreds of small products (49 x 32 by 32 x 49) per layer. One BLAS call each
packs both operands and sets up its blocking for a few microseconds of work, and the scores went through memory
three times (the product, the softmax, the second product). Here each core takes whole matrices: it packs k^T and
v into panels of PANEL columns once, then for each tile of rows of q computes the scores with the micro-kernel,
scales them, adds the bias and takes the softmax while they are in L1, and multiplies them into v's panels
straight into the output."""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from numba import njit, prange

from engine.backends.cpu import microkernel as mk
from engine.backends.cpu import runtime as rt
from engine.backends.cpu.dense import _offsets
from engine.backends.cpu.jobs import job_caller
from engine.backends.cpu.memory import aligned_zeros
from engine.backends.cpu.microkernel import PANEL, PANEL_ROWS, tile_bias_n, tile_rows
from engine.backends.cpu.pointwise import softmax_row
from engine.backends.cpu.runtime import REORDERED_SUMS

#: most keys (S) and widest rows (D, Dv) the kernel takes: its per-core panels stay a few MiB
ATTENTION_MAX_KEYS = 1 << 16
ATTENTION_MAX_DEPTH = 1024
#: the micro-kernel's epilogue that leaves the sums as they are, and the zeros its sums start from
_IDENTITY = mk.fused_epilogue(0, 0.0)
_ZEROS = aligned_zeros(PANEL)


def _flat(x: np.ndarray) -> np.ndarray | None:
    """A 1-D float32 view of the memory ``x`` spans from its first element (its element offsets then index it),
    or None where a stride is negative or not a whole number of floats."""
    if any(s < 0 or s % 4 for s in x.strides):
        return None
    extent = 1 + sum((n - 1) * (s // 4) for n, s in zip(x.shape, x.strides, strict=True) if n > 1)
    return np.lib.stride_tricks.as_strided(x, shape=(extent,), strides=(4,))


def _rows(x: np.ndarray) -> int | None:
    """The step (floats) between the rows of ``x``'s matrices whose values are contiguous, None otherwise (a row
    repeated by broadcasting: step 0)."""
    if x.shape[-1] > 1 and x.strides[-1] != 4:
        return None
    return x.strides[-2] // 4 if x.shape[-2] > 1 else 0


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray | None, out: np.ndarray, scale: float,
              k_transposed: bool = False) -> bool:
    """``out = softmax(scale * q @ k^T + bias) @ v`` over the last two axes (see :func:`attention_call`); False
    (nothing written) where the kernel does not serve the arrays."""
    call = attention_call(q, k, v, bias, out, scale, k_transposed)
    if call is None:
        return False
    call()
    return True


def attention_call(q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
                   scale: float, k_transposed: bool = False) -> Callable[[], None] | None:
    """The prepared call that computes ``out = softmax(scale * q @ k^T + bias) @ v`` over the last two axes, the
    leading axes broadcast into ``out``'s (NumPy's rules), as often as it is called on whatever the arrays then
    hold: float32 ``q`` (... x L x D), ``k`` (... x S x D, or ``k_transposed``: ... x D x S), ``v`` (... x S x Dv)
    and ``bias`` (None, or broadcasting onto ... x L x S) read in place where each matrix's rows are contiguous and
    the arrays writable; ``out`` C-contiguous float32 (... x L x Dv). The matrices (or, for fewer matrices than
    cores, blocks of their rows) shared out over the cores. None for other arrays, for sizes past
    ``ATTENTION_MAX_KEYS`` or ``ATTENTION_MAX_DEPTH``, or without the micro-kernel's vectors."""
    if not mk.panels_available():
        return None
    arrays = (q, k, v) if bias is None else (q, k, v, bias)
    if any(a.dtype != np.float32 or not a.flags.writeable for a in arrays) or min(q.ndim, k.ndim, v.ndim) < 2 or \
            out.dtype != np.float32 or out.ndim < 2:
        return None  # (a read-only array would be another type to Numba, compiled again)
    m, d = q.shape[-2:]
    d_k, s = (k.shape[-2], k.shape[-1]) if k_transposed else (k.shape[-1], k.shape[-2])
    s_v, dv = v.shape[-2:]
    if d_k != d or s_v != s or out.shape[-2:] != (m, dv) or not out.flags.c_contiguous or min(m, d, s, dv) < 1:
        return None
    if s > ATTENTION_MAX_KEYS or d > ATTENTION_MAX_DEPTH or dv > ATTENTION_MAX_DEPTH:
        return None
    batch = tuple(out.shape[:-2])
    if bias is not None and bias.ndim < 2:
        bias = bias.reshape((1,) * (2 - bias.ndim) + bias.shape)
    if bias is not None and bias.shape[-1] != s:
        return None
    try:
        if tuple(np.broadcast_shapes(*(a.shape[:-2] for a in arrays), batch)) != batch:
            return None
        if bias is not None and np.broadcast_shapes(bias.shape[-2:], (m, s)) != (m, s):
            return None
    except ValueError:
        return None
    steps = [_rows(q), _rows(k), _rows(v), 0 if bias is None else _rows(bias)]
    flats = [_flat(a) for a in (q, k, v)] + [_flat(bias) if bias is not None else _ZEROS]
    if any(x is None for x in steps) or any(f is None for f in flats):
        return None
    count = out.size // (m * dv)
    parts = rt.threads()
    splits = 1 if count >= parts else min(parts, -(-m // PANEL_ROWS))  # few matrices: blocks of rows of each
    zero = np.zeros(1, np.int64)
    offsets = [_offsets(a, batch) for a in (q, k, v)] + [_offsets(bias, batch) if bias is not None else zero]
    return functools.partial(
        rt.launch, _attention_par, flats[0], steps[0], offsets[0], flats[1], steps[1], offsets[1],
        bool(k_transposed), flats[2], steps[2], offsets[2], flats[3], steps[3], offsets[3], bias is not None,
        out.reshape(-1), m, s, d, dv, np.float32(scale), splits, parts, _ZEROS, _IDENTITY)


@njit(cache=True, nogil=True, parallel=True)
def _attention_par(q, lq, q_off, k, lk, k_off, k_transposed, v, lv, v_off, b, lb, b_off, has_bias, y, m, s, d, dv,
                   scale, splits, parts, zeros, epi):  # pragma: no cover - compiled
    """Jobs (a matrix, a block of its rows) shared out over ``parts`` cores, each core with its own panels."""
    for part in prange(parts):
        _call_attention_share((np.int64(part), q, lq, q_off, k, lk, k_off, k_transposed, v, lv, v_off, b, lb, b_off,
                               has_bias, y, m, s, d, dv, scale, splits, parts, zeros, epi))


@njit(cache=True, nogil=True)
def _attention_share(part, q, lq, q_off, k, lk, k_off, k_transposed, v, lv, v_off, b, lb, b_off, has_bias, y, m, s, d,
                     dv, scale, splits, parts, zeros, epi):  # pragma: no cover - compiled
    """Share ``part`` of :func:`_attention_par`'s jobs."""
    jobs = y.size // (m * dv) * splits
    key_panels, value_panels = -(-s // PANEL), -(-dv // PANEL)
    kp = np.empty(key_panels * d * PANEL, np.float32)
    vp = np.empty(value_panels * s * PANEL, np.float32)
    scores = np.empty(PANEL_ROWS * key_panels * PANEL, np.float32)
    tile = np.empty(PANEL_ROWS * value_panels * PANEL, np.float32)
    rows_a = np.empty(PANEL_ROWS, np.int64)
    rows_c = np.empty(PANEL_ROWS, np.int64)
    for job in range(jobs * part // parts, jobs * (part + 1) // parts):
        i, split = job // splits, job % splits
        r0, r1 = m * split // splits, m * (split + 1) // splits
        if r1 <= r0:
            continue
        _pack_keys(k, k_off[i if k_off.size > 1 else 0], lk, k_transposed, s, d, kp)
        _pack_values(v, v_off[i if v_off.size > 1 else 0], lv, s, dv, vp)
        bo = b_off[i if b_off.size > 1 else 0]
        _attention_rows(q, q_off[i if q_off.size > 1 else 0], lq, b, bo, lb, has_bias, y, i * m * dv, r0, r1,
                        s, d, dv, scale, kp, vp, scores, tile, rows_a, rows_c, zeros, epi)


_call_attention_share = job_caller(_attention_share)


@njit(cache=True, nogil=True)
def _pack_keys(k, off, lk, k_transposed, s, d, kp):  # pragma: no cover - compiled
    """k^T in panels: ``kp[p, c, j]`` = k[p * PANEL + j, c] (zeros past the last key)."""
    panels = -(-s // PANEL)
    for key in range(s, panels * PANEL):  # the last panel's columns past the last key
        p, j = key // PANEL, key % PANEL
        for c in range(d):
            kp[(p * d + c) * PANEL + j] = 0
    if k_transposed:  # rows of k^T: runs of PANEL keys copied whole
        for p in range(panels):
            width = min(PANEL, s - p * PANEL)
            for c in range(d):
                dst = kp[(p * d + c) * PANEL:(p * d + c) * PANEL + width]
                src = k[off + c * lk + p * PANEL:off + c * lk + p * PANEL + width]
                for j in range(width):
                    dst[j] = src[j]
        return
    for key in range(s):
        p, j = key // PANEL, key % PANEL
        row = k[off + key * lk:off + key * lk + d]
        panel = kp[p * d * PANEL + j:(p + 1) * d * PANEL]
        for c in range(d):
            panel[c * PANEL] = row[c]


@njit(cache=True, nogil=True)
def _pack_values(v, off, lv, s, dv, vp):  # pragma: no cover - compiled
    """v in panels: ``vp[p, t, j]`` = v[t, p * PANEL + j] (zeros past the last column)."""
    panels = -(-dv // PANEL)
    for p in range(panels):
        width = min(PANEL, dv - p * PANEL)
        for t in range(s):
            dst = vp[(p * s + t) * PANEL:(p * s + t + 1) * PANEL]
            src = v[off + t * lv + p * PANEL:off + t * lv + p * PANEL + width]
            for j in range(width):
                dst[j] = src[j]
            for j in range(width, PANEL):
                dst[j] = 0


@njit(cache=True, nogil=True, fastmath=REORDERED_SUMS)
def _attention_rows(q, qo, lq, b, bo, lb, has_bias, y, yo, r0, r1, s, d, dv, scale, kp, vp, scores, tile, rows_a,
                    rows_c, zeros, epi):  # pragma: no cover - compiled
    """Rows r0..r1 of one matrix, a tile of at most PANEL_ROWS rows at a time: its scores against every key panel,
    their softmax in place, then their products with every value panel (into ``y`` where Dv is whole panels, else
    through ``tile``)."""
    key_panels, value_panels = -(-s // PANEL), -(-dv // PANEL)
    width = key_panels * PANEL
    direct = dv % PANEL == 0
    t0 = r0
    while t0 < r1:
        nr = tile_rows(r1 - t0)
        for t in range(nr):
            rows_a[t] = q.ctypes.data + 4 * (qo + (t0 + t) * lq)
        for p in range(key_panels):
            for t in range(nr):
                rows_c[t] = scores.ctypes.data + 4 * (t * width + p * PANEL)
            tile_bias_n(nr, rows_a.ctypes.data, rows_c.ctypes.data, kp.ctypes.data + 4 * p * d * PANEL, d, 1, 0,
                        zeros.ctypes.data, epi.ctypes.data, PANEL)
        for t in range(nr):
            row = scores[t * width:t * width + s]
            if has_bias:
                br = bo + (t0 + t) * lb
                brow = b[br:br + s]
                for j in range(s):
                    row[j] = row[j] * scale + brow[j]
            else:
                for j in range(s):
                    row[j] *= scale
            softmax_row(row, s)
            rows_a[t] = scores.ctypes.data + 4 * t * width
        for p in range(value_panels):
            for t in range(nr):
                if direct:
                    rows_c[t] = y.ctypes.data + 4 * (yo + (t0 + t) * dv + p * PANEL)
                else:
                    rows_c[t] = tile.ctypes.data + 4 * (t * value_panels * PANEL + p * PANEL)
            tile_bias_n(nr, rows_a.ctypes.data, rows_c.ctypes.data, vp.ctypes.data + 4 * p * s * PANEL, s, 1, 0,
                        zeros.ctypes.data, epi.ctypes.data, PANEL)
        if not direct:
            for t in range(nr):
                dst = y[yo + (t0 + t) * dv:yo + (t0 + t + 1) * dv]
                src = tile[t * value_panels * PANEL:t * value_panels * PANEL + dv]
                for j in range(dv):
                    dst[j] = src[j]
        t0 += nr
