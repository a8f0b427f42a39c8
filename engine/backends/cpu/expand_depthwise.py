"""A 1x1 expansion and the depthwise convolution reading it (an inverted residual block's first two layers: MobileNet,
EfficientNet, MnasNet) as one kernel over NHWC float32 tensors: the expanded tensor never goes to memory.

Each job is a band of the depthwise layer's output rows of one image. It computes the expanded rows its next few
output rows read (the micro-kernel's panels over those input pixels, the expansion's bias and activation fused) into a
buffer of its thread, then those output rows from the buffer (the depthwise vector tiles, its own bias and activation
fused); the expanded rows the next output rows read again move to the buffer's top instead of being computed again.
The buffer stays in L2, where the two layers apart wrote the whole expanded tensor and read it back (mobilenet_v2's
112x112x96: 4.8 MB)."""
from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np
from numba import get_thread_id, njit, prange

from engine.backends.cpu import depthwise
from engine.backends.cpu import microkernel as mk
from engine.backends.cpu import runtime as rt
from engine.backends.cpu.depthwise import UNROLLED_CELLS, _depthwise_rows_vec
from engine.backends.cpu.depthwise_tile import DEPTHWISE_VECTOR
from engine.backends.cpu.epilogue import kernel_alpha
from engine.backends.cpu.jobs import job_caller
from engine.backends.cpu.microkernel import PANEL, PANEL_ROWS
from engine.backends.cpu.panels import _panel_job

#: whether the pair runs as one kernel (else the layer runs its two convolutions one after the other)
EXPAND_DEPTHWISE = True
#: fewest output rows a band of an image takes (fewer: the image is cut by channels instead; see :func:`cut`)
BAND_MIN_ROWS = 8
#: the work array of the threads' buffers (``runtime.scratch``; 0 and 1 are the Winograd and taps kernels')
SCRATCH_SLOT = 2
#: bytes of a thread's buffer of expanded rows (the rows of one step of output rows and the rows their windows share
#: with the next step's): in L2 with the weights
BAND_BYTES = 512 * 1024


@njit(cache=True, nogil=True)
def _band(x, wp, b1, act1, alpha1, epi1, wd, b2, act2, alpha2, epi2, fused2, y, o0, o1, v_lo, v_hi, sh, sw, ph, pw,
          step, chunk, unroll, buf, rows_a, rows_c, patch):  # pragma: no cover - compiled
    """Output rows o0..o1 of ``y`` (Ho, Wo, K) = depthwise(act1(``x`` (1, H, W, C) @ panels ``wp`` + ``b1``)) by steps
    of ``step`` output rows, through ``buf`` (rows, W, K) of expanded rows; the channels of the vectors v_lo..v_hi
    (blocks of ``chunk`` vectors; the job whose range reaches the last vector takes the channels after it), whose
    expansion is the panels covering them."""
    h, w = x.shape[1], x.shape[2]
    k = y.shape[2]
    kh = wd.shape[0]
    nvec = k // DEPTHWISE_VECTOR
    p_lo = v_lo * DEPTHWISE_VECTOR // PANEL
    p_hi = wp.shape[0] if v_hi >= nvec else (v_hi * DEPTHWISE_VECTOR + PANEL - 1) // PANEL
    flat = buf.reshape((1, buf.shape[0] * w, k))
    lo = hi = 0  # the expanded rows lo..hi are in the buffer's first rows
    o = o0
    while o < o1:
        r = min(step, o1 - o)
        e0 = max(0, o * sh - ph)
        e1 = max(e0, min(h, (o + r - 1) * sh - ph + kh))  # (none where the windows read padding alone)
        start = e0
        if lo <= e0 < hi:  # rows the last step computed: to the top
            keep, shift = hi - e0, e0 - lo
            if shift > 0:
                for i in range(keep):
                    buf[i] = buf[shift + i]
            start = hi
        if e1 > start:  # the expansion of the input rows start..e1, its panels one after the other
            part = x[:, start:e1]
            out = flat[:, (start - e0) * w:(e1 - e0) * w]
            pixels = (e1 - start) * w
            for p in range(p_lo, p_hi):
                _panel_job(p, part, wp, out, out, False, b1, act1, alpha1, epi1, 1, 1, 1, 1, 0, 0, w, pixels,
                           rows_a, rows_c, patch)
        lo, hi = e0, e1
        _depthwise_rows_vec(buf[:e1 - e0], wd, b2, y[o:o + r], 0, r, sh, sw, ph + e0 - o * sh, pw, 1, 1, act2, alpha2,
                            epi2, fused2, unroll, chunk, v_lo, v_hi)
        o += r


_call_band = job_caller(_band)


@njit(cache=True, nogil=True, parallel=True)
def _expand_depthwise_par(x, wp, b1, act1, alpha1, epi1, wd, b2, act2, alpha2, epi2, fused2, y, sh, sw, ph, pw, step,
                          chunk, unroll, bands, parts, bufs, rows_a, rows_c, patch):  # pragma: no cover - compiled
    """``bands`` bands of output rows per image (N, Ho, Wo, K), each cut into ``parts`` runs of blocks of ``chunk``
    vectors of channels, over the threads, each job in its thread's buffer."""
    n, ho = y.shape[0], y.shape[1]
    chunks = (y.shape[3] // DEPTHWISE_VECTOR + chunk - 1) // chunk
    for j in prange(n * bands * parts):
        i, q, c = j // (bands * parts), j // parts % bands, j % parts
        tid = get_thread_id()
        _call_band((x[i:i + 1], wp, b1, act1, alpha1, epi1, wd, b2, act2, alpha2, epi2, fused2, y[i],
                    np.int64(ho * q // bands), np.int64(ho * (q + 1) // bands), np.int64(chunks * c // parts * chunk),
                    np.int64(chunks * (c + 1) // parts * chunk), sh, sw, ph, pw, step, chunk, unroll, bufs[tid],
                    rows_a[tid], rows_c[tid], patch))


def even_chunk(nvec: int, parts: int) -> int:
    """Vectors per block of channels (at most CHUNK_VECTORS) whose blocks cut into ``parts`` runs (as
    :func:`_expand_depthwise_par` cuts them) leave the largest run smallest: 72 vectors in blocks of 8 went 4 + 5
    blocks to two cores, in blocks of 6 they go 6 + 6."""
    def largest(chunk: int) -> int:
        chunks = -(-nvec // chunk)
        return max(min(nvec, chunks * (q + 1) // parts * chunk) - chunks * q // parts * chunk for q in range(parts))
    return min(range(depthwise.CHUNK_VECTORS, 0, -1), key=largest)


def cut(n: int, ho: int, chunks: int, threads: int) -> tuple[int, int]:
    """(bands of output rows, runs of channel blocks) each image of ``n`` is cut into for ``threads`` threads:
    bands where each has BAND_MIN_ROWS output rows at least, else runs of channels (each job then expands the
    panels of its own channels over the whole image: a band's expanded rows its neighbour's windows read too are
    computed by both, which for a 7x7 image in two bands of a 5x5 layer was 11 rows of 7)."""
    wanted = -(-threads // n)
    if wanted <= 1:
        return 1, 1
    if ho >= BAND_MIN_ROWS * wanted or chunks < 2:
        return min(ho, wanted), 1
    return 1, min(chunks, wanted)


def expand_depthwise_applies(c: int, k: int, dw_shape: tuple[int, ...], stride: tuple[int, int],
                             dilation: tuple[int, int]) -> bool:
    """Whether the kernel takes a 1x1 expansion of ``c`` to ``k`` channels and a depthwise layer of filters
    ``dw_shape`` (K, 1, R, S): the micro-kernel and the vector tiles exist here, no dilation, square odd filters."""
    return (EXPAND_DEPTHWISE and mk.panels_available() and depthwise.vector_tiles_apply(k) and dilation == (1, 1)
            and dw_shape[0] == k and dw_shape[1] == 1 and dw_shape[2] == dw_shape[3] and dw_shape[2] % 2 == 1)


def expand_depthwise_plan(x: np.ndarray, wp: np.ndarray, b1: np.ndarray | None, act1: int, alpha1: float,
                          wd: np.ndarray, b2: np.ndarray | None, act2: int, alpha2: float, out: np.ndarray,
                          stride: tuple[int, int], padding: tuple[int, int]) -> Callable[[], None]:
    """The pair on logical NCHW views ``x`` (N, C, H, W) and ``out`` (N, K, Ho, Wo) of NHWC memory, the expansion's
    weights in panels (``panels.panel_weights``), the depthwise filters as ``depthwise.depthwise_weights``: one
    launch on these arrays."""
    xp, yp = x.transpose(0, 2, 3, 1), out.transpose(0, 2, 3, 1)
    n, h, w, c = xp.shape
    ho, k = yp.shape[1], yp.shape[3]
    kh = wd.shape[0]
    b1p = np.zeros(wp.shape[0] * PANEL, np.float32)
    if b1 is not None:
        b1p[:k] = b1
    b2p = np.zeros(k, np.float32) if b2 is None else np.ascontiguousarray(b2, dtype=np.float32)
    epi1 = mk.fused_epilogue(act1 if act1 in mk.MICROKERNEL_EPILOGUES else 0, alpha1)
    fused2 = act2 in mk.MICROKERNEL_EPILOGUES
    epi2 = mk.fused_epilogue(act2 if fused2 else 0, alpha2)
    nvec = k // DEPTHWISE_VECTOR
    chunk = depthwise.chunk_vectors(nvec)
    sh = stride[0]
    row_bytes = 4 * w * k
    step = max(1, (BAND_BYTES // row_bytes - kh) // sh + 1)
    rows = (step - 1) * sh + kh
    threads = rt.threads()
    most = numba.config.NUMBA_NUM_THREADS  # the buffers of every thread Numba may run
    bands, parts = cut(n, ho, -(-nvec // chunk), threads)
    if parts > 1:  # blocks of channels that share out evenly
        chunk = even_chunk(nvec, parts)
    # the threads' buffers: the calling thread's work array, which every pair's launch shares (one launch at a time)
    bufs = rt.scratch(SCRATCH_SLOT, (most, rows, w, k))
    rows_a = np.empty((most, PANEL_ROWS), np.int64)
    rows_c = np.empty((most, PANEL_ROWS), np.int64)
    patch = np.empty((1, 1), np.float32)
    args = (xp, wp, b1p, act1, kernel_alpha(alpha1), epi1, wd, b2p, act2, kernel_alpha(alpha2),
            epi2, fused2, yp, *stride, *padding, step, chunk, UNROLLED_CELLS, bands, parts, bufs, rows_a,
            rows_c, patch)
    return rt.Launch(_expand_depthwise_par, *args)
