"""Depthwise convolutions (one filter per channel: groups == input channels == output channels) of NHWC tensors,
the bias and the activation fused, by blocks of output rows over the cores.

These layers do two multiply-adds per value they read, so they are bound by memory, not arithmetic: a product
over the channels (im2col, panels) has nothing to gain, and the grouped path of the generic code made one small
product per channel (0.05-0.25 GFLOP/s). Here every output pixel is a sum of R x S rows of channels, each read from
cache, the channels vectorised: with FMA vectors by the vector tile of :mod:`engine.backends.cpu.depthwise_tile`
(several pixels or several vectors of channels summed in registers at once), else by Numba's loops."""
from __future__ import annotations

import functools

import numpy as np
from numba import njit, prange

from engine.backends.cpu import microkernel as mk
from engine.backends.cpu import runtime as rt
from engine.backends.cpu.blocks import row_block, row_blocks
from engine.backends.cpu.depthwise_tile import DEPTHWISE_TILE, DEPTHWISE_VECTOR, MASKED_TAILS, dw_tile
from engine.backends.cpu.epilogue import activate_row, activate_span, kernel_alpha
from engine.backends.cpu.jobs import job_caller
from engine.backends.cpu.memory import aligned_copy
from engine.backends.cpu.runtime import REORDERED_SUMS

#: largest filter (either side) the depthwise kernel takes
DEPTHWISE_MAX_KERNEL = 7
#: a convolution of stride 1 goes by whole rows (:func:`_depthwise_rows_flat`) where it has fewer channels than
#: this (from 64 on, pixel by pixel was as fast or faster on one Zen 3 core: 72 channels at 56x56 0.28 against
#: 0.34 ms, 480 at 14x14 0.085 against 0.12) and its filters repeated along an output row (:func:`tiled_weights`,
#: read once per output row) take at most FLAT_MAX_BYTES
FLAT_MAX_CHANNELS = 64
FLAT_MAX_BYTES = 256 * 1024
#: the vector tiles' 3x3 and 5x5 windows inside the image: 0 their cells looped over, 1 unrolled, 2 unrolled with
#: each input column loaded once for the cells it meets where the pixels are one or two cells apart (the same sums,
#: bit for bit; ``depthwise_tile._tile_codegen``'s ``gap``)
UNROLLED_CELLS = 2
#: most vectors of channels the vector tiles take along a whole output row before the next block of them (the
#: blocks of a layer about equal): a row's windows over all of a wide layer's channels (960 at 7x7, 5x5: 134 KB of
#: input and 96 KB of filters a row) left L1 and the tiles waited on L2, 3.3 cycles a multiply-add. One layer, 2 Zen 5
#: cores, all channels a row against blocks of 8 vectors (16 floats): 960 channels at 7x7 5x5 31.4 -> 22.9 us, 576
#: 19.0 -> 12.5, 1152 38.1 -> 28.7, 672 at 14x14 5x5 50.5 -> 41.2; blocks of 16 or 4 vectors gained less
CHUNK_VECTORS = 8


def depthwise_weights(w: np.ndarray) -> np.ndarray:
    """The filters of a depthwise convolution, logical (C, 1, R, S), as the kernel reads them: (R, S, C)
    float32, C-contiguous (one row of channels per filter cell)."""
    return aligned_copy(w[:, 0].transpose(1, 2, 0))


def tiled_weights(wd: np.ndarray, width: int) -> np.ndarray:
    """Filters ``wd`` (R, S, C) repeated ``width`` times along each cell's channels: (R, S, width * C)."""
    return aligned_copy(np.tile(wd, (1, 1, width)))


@njit(cache=True, nogil=True, fastmath=REORDERED_SUMS)
def _depthwise_rows(x, w, b, y, r0, r1, sh, sw, ph, pw, dh, dw, act, alpha):  # pragma: no cover - compiled
    """Output rows r0..r1 of ``y`` (Ho, Wo, C) = act(depthwise(``x`` (H, W, C), ``w`` (R, S, C)) + ``b``), any
    stride and dilation.

    Each output pixel's channels are summed in place over the filter cells inside the image (its row of channels
    stays in L1), one loop over all the channels per cell: LLVM vectorises such a loop, testing at run time that
    the rows do not overlap; loops over fixed blocks of 8 channels were left scalar (4 instead of 12-19 GFLOP/s on
    one Zen 3 core)."""
    h, wi, c = x.shape
    kh, kw = w.shape[0], w.shape[1]
    wo = y.shape[1]
    three = kh == 3 and kw == 3
    for oh in range(r0, r1):
        yr = y[oh]
        ih0 = oh * sh - ph
        rows_inside = ih0 >= 0 and ih0 + (kh - 1) * dh < h
        for ow in range(wo):
            dst = yr[ow]
            iw0 = ow * sw - pw
            if three and rows_inside and iw0 >= 0 and iw0 + 2 * dw < wi:
                _inside3(x, w, b, dst, ih0, iw0, dh, dw)
                activate_row(dst, act, alpha)
                continue
            for k in range(c):
                dst[k] = b[k]
            for i in range(kh):
                ih = ih0 + i * dh
                if ih < 0 or ih >= h:
                    continue
                xr = x[ih]
                wr = w[i]
                for j in range(kw):
                    iw = iw0 + j * dw
                    if iw < 0 or iw >= wi:
                        continue
                    src = xr[iw]
                    wv = wr[j]
                    for k in range(c):
                        dst[k] += src[k] * wv[k]
            activate_row(dst, act, alpha)


_call_depthwise_rows = job_caller(_depthwise_rows)


@njit(inline="always", fastmath=REORDERED_SUMS)
def _inside3(x, w, b, dst, ih0, iw0, dh, dw):  # pragma: no cover - compiled
    """``dst`` (C) = ``b`` + the 3x3 filter ``w`` (3, 3, C) over the window of ``x`` (H, W, C) at (ih0, iw0), all of
    it inside ``x``: the nine products in one loop over the channels, each sum kept in a register, where a loop per
    filter cell loaded and stored the pixel's row of channels nine times and tested it for overlap with its
    operands nine times (72 channels at 128x128 on one Zen 3 core: 1.46 against 1.93 ms)."""
    r0, r1, r2 = x[ih0], x[ih0 + dh], x[ih0 + 2 * dh]
    a0, a1, a2 = r0[iw0], r0[iw0 + dw], r0[iw0 + 2 * dw]
    b0, b1, b2 = r1[iw0], r1[iw0 + dw], r1[iw0 + 2 * dw]
    c0, c1, c2 = r2[iw0], r2[iw0 + dw], r2[iw0 + 2 * dw]
    w0, w1, w2 = w[0], w[1], w[2]
    wa0, wa1, wa2, wb0, wb1, wb2, wc0, wc1, wc2 = w0[0], w0[1], w0[2], w1[0], w1[1], w1[2], w2[0], w2[1], w2[2]
    for k in range(dst.size):
        dst[k] = (b[k] + a0[k] * wa0[k] + a1[k] * wa1[k] + a2[k] * wa2[k] + b0[k] * wb0[k] + b1[k] * wb1[k]
                  + b2[k] * wb2[k] + c0[k] * wc0[k] + c1[k] * wc1[k] + c2[k] * wc2[k])


@njit(cache=True, nogil=True, fastmath=REORDERED_SUMS)
def _depthwise_rows_flat(x, wt, b, y, r0, r1, ph, pw, dh, dw, act, alpha):  # pragma: no cover - compiled
    """:func:`_depthwise_rows` of stride 1, each filter cell one pass along a whole output row: the input row
    shifted by the cell is then one contiguous run of pixels and channels, multiplied by the cell's filter repeated
    along the row (``wt`` (R, S, Wo * C), from :func:`tiled_weights`). One long loop instead of one per pixel: a
    16-channel layer at 112x112 took 0.43 instead of 0.75 ms on one Zen 3 core."""
    h, wi, c = x.shape
    kh, kw = wt.shape[0], wt.shape[1]
    wo = y.shape[1]
    for oh in range(r0, r1):
        yr = y[oh].reshape(wo * c)
        for ow in range(wo):
            for k in range(c):
                yr[ow * c + k] = b[k]
        for i in range(kh):
            ih = oh - ph + i * dh
            if ih < 0 or ih >= h:
                continue
            xr = x[ih].reshape(wi * c)
            for j in range(kw):
                lo = max(0, pw - j * dw)  # output columns whose cell j lies inside the row
                hi = min(wo, wi + pw - j * dw)
                if hi <= lo:
                    continue
                d = yr[lo * c:hi * c]
                src = xr[(lo - pw + j * dw) * c:(hi - pw + j * dw) * c]
                v = wt[i, j, lo * c:hi * c]
                for k in range(d.size):
                    d[k] += src[k] * v[k]
        activate_span(yr, act, alpha)


_call_depthwise_rows_flat = job_caller(_depthwise_rows_flat)


@njit(cache=True, nogil=True, fastmath=REORDERED_SUMS)
def _depthwise_rows_vec(x, w, b, y, r0, r1, sh, sw, ph, pw, dh, dw, act, alpha, epi, fused, unroll, chunk, v_lo,
                        v_hi):  # pragma: no cover
    """:func:`_depthwise_rows` by vector tiles (:func:`depthwise_tile.dw_tile`): along each output row, tiles of up
    to DEPTHWISE_TILE pixels whose windows lie inside the image across, each one vector of channels at a time, the
    sums in registers over the filter's cells; a pixel whose window crosses the left or right edge is a tile of one
    over the cells inside; the filter's rows outside the image (top and bottom) are left out of every tile of the
    row. Channels past the last whole vector are one masked vector of the tiles on AVX-512 (``MASKED_TAILS``), else
    summed pixel by pixel. ``fused``: the activation is the tile's
    epilogue ``epi`` (``microkernel.fused_epilogue``), else ``epi`` is the identity and each row is activated after
    its sums. ``x`` (H, W, C) and ``y`` (Ho, Wo, C) C-contiguous, ``w`` (R, S, C). Only the vectors of channels
    ``v_lo``..``v_hi`` (blocks of ``chunk`` from ``v_lo``), the channels past the whole vectors with the block that
    ends at the last vector (a job of :func:`_depthwise_vec_par`, which may cut the channels between jobs)."""
    h, wi, c = x.shape
    kh, kw = w.shape[0], w.shape[1]
    wo = y.shape[1]
    cv = c - c % DEPTHWISE_VECTOR
    tail = c - cv if MASKED_TAILS else 0  # channels of a last, partial vector the tiles sum (masked)
    cb = 4 * c
    xrow = wi * cb
    xa, wa, ba, ya, ea = x.ctypes.data, w.ctypes.data, b.ctypes.data, y.ctypes.data, epi.ctypes.data
    nvec = cv // DEPTHWISE_VECTOR
    first_inside = (pw + sw - 1) // sw  # the output columns whose windows lie inside across: first..last
    last_inside = (wi - 1 - (kw - 1) * dw + pw) // sw
    owns_end = v_hi >= nvec  # the channels past the whole vectors are this job's
    k_lo = v_lo * DEPTHWISE_VECTOR
    k_hi = c if owns_end else min(c, v_hi * DEPTHWISE_VECTOR)
    for oh in range(r0, r1):
        ih0 = oh * sh - ph
        i0 = 0 if ih0 >= 0 else (-ih0 + dh - 1) // dh
        i1 = min(kh, (h - 1 - ih0) // dh + 1) if ih0 <= h - 1 else 0
        ni = i1 - i0
        x_row = xa + (ih0 + i0 * dh) * xrow
        w_row = wa + i0 * kw * cb
        y_row = ya + oh * wo * cb
        for v0 in range(v_lo, max(min(v_hi, nvec), 1), chunk):  # blocks of channels whose row of windows stays in L1
            nv = min(chunk, nvec - v0)
            off = v0 * 4 * DEPTHWISE_VECTOR
            last = v0 + chunk >= nvec
            ow = 0
            while ow < wo:
                iw0 = ow * sw - pw
                if first_inside <= ow <= last_inside:
                    inside = last_inside - ow + 1
                    nt = DEPTHWISE_TILE if inside >= DEPTHWISE_TILE else 4 if inside >= 4 else 2 if inside >= 2 else 1
                    j0, nj = 0, kw
                else:  # a window across the left or right edge: the cells inside, alone
                    nt = 1
                    j0 = 0 if iw0 >= 0 else (-iw0 + dw - 1) // dw
                    nj = (min(kw, (wi - 1 - iw0) // dw + 1) if iw0 <= wi - 1 else 0) - j0
                dw_tile(nt, x_row + (iw0 + j0 * dw) * cb + off, dh * xrow, dw * cb, sw * cb, w_row + j0 * cb + off,
                        kw * cb, cb, ni, nj, ba + off, y_row + ow * cb + off, cb, ea, nv, unroll, tail if last else 0)
                ow += nt
        if cv + tail < c and owns_end:
            yr = y[oh]
            for ow in range(wo):
                dst = yr[ow]
                iw0 = ow * sw - pw
                for k in range(cv, c):
                    dst[k] = b[k]
                for i in range(kh):
                    ih = ih0 + i * dh
                    if ih < 0 or ih >= h:
                        continue
                    for j in range(kw):
                        iw = iw0 + j * dw
                        if iw < 0 or iw >= wi:
                            continue
                        src, wv = x[ih, iw], w[i, j]
                        for k in range(cv, c):
                            dst[k] += src[k] * wv[k]
                if fused:
                    activate_span(dst[cv:], act, alpha)
        if not fused:
            if k_lo == 0 and k_hi == c:
                activate_span(y[oh].reshape(wo * c), act, alpha)
            else:
                for ow in range(wo):
                    activate_span(y[oh, ow, k_lo:k_hi], act, alpha)


_call_depthwise_rows_vec = job_caller(_depthwise_rows_vec)


@njit(cache=True, nogil=True, parallel=True)
def _depthwise_vec_par(x, w, b, y, rows, sh, sw, ph, pw, dh, dw, act, alpha, epi, fused, unroll, chunk,
                       parts):  # pragma: no cover
    """Jobs of blocks of ``rows`` output rows, each cut into ``parts`` runs of blocks of ``chunk`` vectors of
    channels (whole blocks, about equal runs)."""
    n, ho = y.shape[:2]
    chunks = max(1, (y.shape[3] // DEPTHWISE_VECTOR + chunk - 1) // chunk)
    for j in prange(row_blocks(n, ho, rows) * parts):
        i, r0, r1 = row_block(j // parts, ho, rows)
        q = j % parts
        v_lo, v_hi = chunks * q // parts * chunk, chunks * (q + 1) // parts * chunk
        _call_depthwise_rows_vec((x[i], w, b, y[i], r0, r1, sh, sw, ph, pw, dh, dw, act, alpha, epi, fused, unroll,
                                  chunk, v_lo, v_hi))


@njit(cache=True, nogil=True, parallel=True)
def _depthwise_par(x, w, b, y, rows, sh, sw, ph, pw, dh, dw, act, alpha):  # pragma: no cover - compiled
    n, ho = y.shape[:2]
    for j in prange(row_blocks(n, ho, rows)):
        i, r0, r1 = row_block(j, ho, rows)
        _call_depthwise_rows((x[i], w, b, y[i], r0, r1, sh, sw, ph, pw, dh, dw, act, alpha))


@njit(cache=True, nogil=True, parallel=True)
def _depthwise_flat_par(x, wt, b, y, rows, ph, pw, dh, dw, act, alpha):  # pragma: no cover - compiled
    n, ho = y.shape[:2]
    for j in prange(row_blocks(n, ho, rows)):
        i, r0, r1 = row_block(j, ho, rows)
        _call_depthwise_rows_flat((x[i], wt, b, y[i], r0, r1, ph, pw, dh, dw, act, alpha))


#: jobs per thread the vector tiles' layers are cut into where their row blocks alone are fewer: each block of rows
#: then also cut by its blocks of CHUNK_VECTORS vectors of channels (a small image of many channels: 1152 at 7x7 had
#: gone as two jobs of 4 and 3 rows). In turns in one process against row blocks alone (2 Zen 5 cores):
#: efficientnet_b0 0.981, mnasnet1_0 0.988-0.992, mobilenet_v3_large 0.989, mobilenet_v2 0.994-1.02 (noise).
#: Cutting small images by channels alone (each core the channels the layer before wrote) gained nothing.
DEPTHWISE_JOBS_PER_THREAD = 4


def channel_parts(nvec: int, chunk: int, blocks: int, threads: int) -> int:
    """Runs of channel blocks (of ``chunk`` vectors, ``nvec`` vectors in all) each of ``blocks`` row blocks is cut
    into, for ``threads`` threads: enough for DEPTHWISE_JOBS_PER_THREAD jobs a thread, at most one a channel block."""
    chunks = -(-nvec // chunk)
    wanted = -(-DEPTHWISE_JOBS_PER_THREAD * threads // blocks)
    return max(1, min(chunks, wanted))


def chunk_vectors(nvec: int) -> int:
    """Vectors of channels per block of the vector tiles for a layer of ``nvec`` vectors: blocks of about equal size,
    at most CHUNK_VECTORS, where the layer has at least two blocks' worth (144 channels at 56x56 ran 42 -> 46 us in
    two blocks); at least 1."""
    return max(1, -(-nvec // max(1, -(-nvec // CHUNK_VECTORS))) if nvec >= 2 * CHUNK_VECTORS else nvec)


def vector_tiles_apply(channels: int) -> bool:
    """Whether :func:`_depthwise_rows_vec` takes a layer of ``channels`` channels: FMA vectors (AVX2 or AVX-512)
    and at least one vector of channels. Against :func:`_depthwise_rows`, ReLU, mobilenet_v3_large's depthwise
    layers in turns (medians, ms, one Zen 3 core): 72 channels at 56x56 0.18 against 0.24, 120 at 28x28 (5x5) 0.16
    against 0.25, 480 at 14x14 0.077 against 0.089; 16 at 112x112 0.16 against 0.23 for the flat kernel on two
    cores; ten of its layers 1.14 against 2.52 on one core, 1.06 against 2.40 on two."""
    return mk.panels_available() and channels >= DEPTHWISE_VECTOR


def depthwise_applies(w_shape: tuple[int, ...], groups: int, channels: int) -> bool:
    """Whether a convolution of logical weights ``w_shape`` (K, C/groups, R, S) over ``channels`` input channels
    is one the depthwise kernel takes: one filter per channel, filters up to DEPTHWISE_MAX_KERNEL a side."""
    k, per_group, r, s = w_shape
    return (groups == channels == k and per_group == 1 and r <= DEPTHWISE_MAX_KERNEL
            and s <= DEPTHWISE_MAX_KERNEL)


def depthwise_plan(x: np.ndarray, wd: np.ndarray, bias: np.ndarray | None, out: np.ndarray, stride: tuple[int, int],
                   padding: tuple[int, int], dilation: tuple[int, int], act: int, alpha: float):  # noqa: ANN201
    """The depthwise convolution of logical NCHW views ``x`` and ``out`` of NHWC float32 memory (C-contiguous
    as N, H, W, C), filters ``wd`` from :func:`depthwise_weights`, as a call ready to run (again) on these arrays:
    one job on the calling thread for a small output, else blocks of output rows over the cores."""
    xp, yp = x.transpose(0, 2, 3, 1), out.transpose(0, 2, 3, 1)
    b = np.zeros(wd.shape[2], np.float32) if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    n, ho, wo, c = yp.shape
    flat = stride == (1, 1) and c < FLAT_MAX_CHANNELS and wd.shape[0] * wd.shape[1] * wo * c * 4 <= FLAT_MAX_BYTES
    rows = rt.share(ho * n, ho, n) if yp.size >= rt.SPLIT_MIN_PIXELS * 16 else ho
    if vector_tiles_apply(c) and xp.flags.c_contiguous and yp.flags.c_contiguous:  # the tiles step by bytes
        fused = act in mk.MICROKERNEL_EPILOGUES
        epi = mk.fused_epilogue(act if fused else 0, alpha)
        nvec = c // DEPTHWISE_VECTOR
        chunk = chunk_vectors(nvec)
        args = (*stride, *padding, *dilation, act, kernel_alpha(alpha), epi, fused, UNROLLED_CELLS, chunk)
        if n == 1 and rows >= ho:
            return functools.partial(_depthwise_rows_vec, xp[0], wd, b, yp[0], 0, ho, *args, 0, nvec)

        def cut(t: int) -> tuple:  # noqa: ANN202
            rows = rt.share(ho * n, ho, n)
            return (rows, *args, channel_parts(nvec, chunk, n * -(-ho // rows), t))
        return rt.Launch(_depthwise_vec_par, xp, wd, b, yp, per_threads=cut)
    if flat:
        kernel, one, filters = _depthwise_flat_par, _depthwise_rows_flat, tiled_weights(wd, wo)
        geometry = (*padding, *dilation, act, kernel_alpha(alpha))
    else:
        kernel, one, filters = _depthwise_par, _depthwise_rows, wd
        geometry = (*stride, *padding, *dilation, act, kernel_alpha(alpha))
    if n == 1 and rows >= ho:  # a small output: one job on this thread, no parallel region to wake
        return functools.partial(one, xp[0], filters, b, yp[0], 0, ho, *geometry)

    return rt.Launch(kernel, xp, filters, b, yp, per_threads=lambda t: (rt.share(ho * n, ho, n), *geometry))
