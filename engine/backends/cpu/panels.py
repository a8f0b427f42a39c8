"""Convolutions as products over weights packed once in panels of PANEL output channels, through the
micro-kernel (:mod:`engine.backends.cpu.microkernel`): small images (where OpenBLAS, packing the weights on every
call, is slow) and RGB stems; every kernel row of an output pixel's window read in place, no im2col."""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numba import njit, prange

from engine.backends.cpu import microkernel as mk
from engine.backends.cpu import runtime as rt
from engine.backends.cpu.blocks import copy_inside, plain
from engine.backends.cpu.epilogue import activate_row, kernel_alpha
from engine.backends.cpu.im2col import gemm_weights, im2col_nhwc, nhwc_operands, pixel_rows
from engine.backends.cpu.jobs import job_caller
from engine.backends.cpu.memory import aligned_copy, aligned_zeros
from engine.backends.cpu.microkernel import (
    PANEL,
    PANEL_KBLOCK,
    PANEL_ROWS,
    PANEL_VECTOR,
    strip_n,
    strip_residual_n,
    tile_bias_n,
    tile_n,
    tile_rows,
)

#: largest output (pixels per image) the panel product takes: there OpenBLAS, which packs the weights on every
#: call, ran 1.4-1.7x slower (7x7, 4608 -> 512: 0.97 against 0.58 ms; 14x14, 2304 -> 256: 0.76 against 0.53); from
#: 28x28 on it is as fast and stays
PANEL_MAX_PIXELS = 256


@njit(cache=True, nogil=True)
def _panel_fill(y, r, has_res, k0, b, width=PANEL):  # pragma: no cover - compiled
    """Columns k0..k0+``width`` (at most PANEL) of every row of ``y`` (rows, K) set to the bias, plus the
    residual ``r`` (rows, K) when ``has_res`` (the micro-kernel adds to them). Row by row through slices, each a
    loop of a constant count: indexing ``y[q, k0 + j]`` here kept LLVM from vectorising (resnet18's stem, 448 such
    passes, 2.75 instead of 2.2 ms)."""
    if width == PANEL:
        _fill_columns(y, r, has_res, k0, b, PANEL)
    elif width == PANEL_VECTOR:
        _fill_columns(y, r, has_res, k0, b, PANEL_VECTOR)
    else:
        _fill_columns(y, r, has_res, k0, b, width)


@njit(inline="always")
def _fill_columns(y, r, has_res, k0, b, width):  # pragma: no cover - compiled
    bb = b[k0:k0 + width]
    if has_res:
        for q in range(y.shape[0]):
            row, rr = y[q][k0:k0 + width], r[q][k0:k0 + width]
            for j in range(width):
                row[j] = bb[j] + rr[j]
        return
    for q in range(y.shape[0]):
        row = y[q][k0:k0 + width]
        for j in range(width):
            row[j] = bb[j]


@njit(cache=True, nogil=True)
def _panel_activate(y, k0, act, alpha):  # pragma: no cover - compiled
    """Columns k0..k0+PANEL of every row of ``y`` activated in place (nothing to do for ``act`` 0); row slices,
    as in :func:`_panel_fill`."""
    if act == 0:
        return
    for q in range(y.shape[0]):
        activate_row(y[q][k0:k0 + PANEL], act, alpha)


def panel_weights(w: np.ndarray) -> np.ndarray:
    """Weights (K, C, KH, KW) as the (ceil(K / PANEL), KH*KW*C, PANEL) float32 panels of :func:`conv_panels`: each
    panel's rows contiguous, read once per pass with no packing; the last panel's columns past K are zeros."""
    wm = gemm_weights(w)
    kk, k = wm.shape
    panels = -(-k // PANEL)
    if k % PANEL:
        wm = np.concatenate([wm, np.zeros((kk, panels * PANEL - k), np.float32)], axis=1)
    return aligned_copy(wm.reshape(kk, panels, PANEL).transpose(1, 0, 2))


def panels_apply(pixels: int, k: int) -> bool:
    """Whether :func:`conv_panels` takes a convolution of ``pixels`` output pixels per image and ``k`` outputs (whole
    panels: a small 3x3 layer of other counts keeps Winograd's or im2col's path, not measured against the panels
    with a last one part-filled)."""
    return pixels <= PANEL_MAX_PIXELS and k % PANEL == 0 and mk.panels_available()


#: whether the panels take large images of any convolution (:func:`large_panels_apply`): AVX-512's micro-kernel
#: (7 rows x 32 channels) ran every shape measured at half im2col + OpenBLAS's time on 2 Zen 5 cores
#: (``tests/bench/bench_cpu_panels.py``): 128 -> 128 3x3 stride 2 from 56x56 0.48 against 0.97 ms, 64 -> 64 stride
#: 2 from 112x112 0.51 against 1.04, 96 -> 96 5x5 at 28x28 0.71 against 1.65; AVX2's (6 x 16) had been no faster
#: than OpenBLAS from 28x28 on
LARGE_PANELS = mk.PANEL_VECTOR >= 16


def large_panels_apply(w_shape: tuple[int, ...], dilation: tuple[int, int], pixels: int) -> bool:
    """Whether :func:`conv_panels` takes a convolution of weights ``w_shape`` (K, C, KH, KW) over more than
    PANEL_MAX_PIXELS output pixels per image, any K and C, undilated: on AVX-512 (LARGE_PANELS). The caller leaves
    the 3x3 convolutions of stride 1 Winograd takes to it (faster where both have many channels: 128 -> 128 at 28x28
    0.35 against 0.47 ms)."""
    return LARGE_PANELS and pixels > PANEL_MAX_PIXELS and dilation == (1, 1) and mk.panels_available()


def panels_before_winograd(w_shape: tuple[int, ...]) -> bool:
    """Whether the panels take a 3x3 convolution of stride 1 of weights ``w_shape`` (K, C, 3, 3) on a large image
    before Winograd: on AVX-512 (LARGE_PANELS), where it has no more than one panel's width of inputs, whose
    Winograd input transform costs as much as the products it saves (32 -> 64 at 112x112 0.98 against 1.33 ms alone;
    unet, whose first stage is 32 channels, 0.934 of the time in turns). Few outputs alone are not enough: densenet's
    128 -> 32 layers, faster alone on the panels (0.13 against 0.21 ms at 28x28), made the network 1.065 times as
    slow in turns; 64 -> 64 at 56x56 (0.50 against 0.47) stays Winograd's too."""
    return LARGE_PANELS and w_shape[1] <= PANEL


def pointwise_panels_apply(w_shape: tuple[int, ...], act: int) -> bool:
    """Whether :func:`conv_panels` takes a 1x1 convolution of weights ``w_shape`` (K, C, 1, 1) on an image of any
    size, any K (the last panel part-filled), with an activation of code ``act`` the micro-kernel applies itself
    (mk.MICROKERNEL_EPILOGUES): it reads each pixel's channels in place and fuses the bias and the activation, where
    OpenBLAS packs both operands on every call and leaves bias and activation to a pass of their own.
    mobilenet_v2's 1x1 layers of 16 to 32 input channels at 56x56 to 112x112 (ReLU6) ran 2-4x faster than through
    OpenBLAS on a 2-core AVX2 machine (tests/bench/bench_cpu_layers.py on the zoo's files); with SiLU or GELU in the
    epilogue, efficientnet's and ConvNeXt's too. Other activations keep OpenBLAS, whose rows of all K channels the
    epilogue pass activates in long vector loops: through the panels SiLU at 112x112, 16 -> 96 had run 6.4 against
    2.2 ms with a pass per panel, and about as fast as OpenBLAS with the rows activated whole (``by_rows``)."""
    return w_shape[2:] == (1, 1) and act in mk.MICROKERNEL_EPILOGUES and mk.panels_available()


def conv_panels(x: np.ndarray, wp: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None, out: np.ndarray,
                stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], act: int = 0,
                alpha: float | tuple[float, float] = 0.0) -> None:
    """``act(conv(x) + bias)`` into ``out`` for NHWC tensors (logical NCHW views, ``out`` contiguous NHWC; see
    :func:`panels_apply` and :func:`stem_panels_apply`) through the micro-kernel, weights ``wp`` from
    :func:`panel_weights`. Without dilation every kernel row of an output pixel's window is one contiguous run of
    KW*C input values, read in place (a window over the image's edge from a copy of its values and zeros): no im2col.
    A small image goes one panel of PANEL output channels per thread; a large one (an RGB stem) by output rows,
    every panel of them. Dilated windows go through an im2col first. (The micro-kernel over an im2col of
    larger images ran no faster than OpenBLAS's: 213 GFLOP/s a core on resnet18's stem.)"""
    conv_panels_plan(x, wp, kernel, bias, out, stride, padding, dilation, act, alpha)()


def conv_panels_plan(x: np.ndarray, wp: np.ndarray, kernel: tuple[int, int], bias: np.ndarray | None,
                     out: np.ndarray, stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int],
                     act: int = 0, alpha: float | tuple[float, float] = 0.0,
                     residual: np.ndarray | None = None) -> Callable[[], None]:
    """:func:`conv_panels` made ready to run (see ``winograd.winograd_plan``), one launch on the arrays it was
    given. ``residual`` (as ``out``) is where the sums start from (with the bias), so it costs no pass of its own."""
    n, c = x.shape[:2]
    k, ho, wo = out.shape[1:]
    kh, kw = kernel
    if kernel == (1, 1):  # a 1x1 window's dilation changes nothing
        dilation = (1, 1)
    live, ys, b = nhwc_operands(x, out, bias)
    rs, has_res = (ys, False) if residual is None else (pixel_rows(residual), True)
    al = kernel_alpha(alpha)
    if dilation == (1, 1):
        b = np.concatenate([b, np.zeros(wp.shape[0] * PANEL - k, np.float32)])  # whole panels of bias
        ph, pw = padding
        large = ho * wo > PANEL_MAX_PIXELS
        # (a residual is no reason to go by rows: the micro-kernel starts from it, its epilogue then fused; by rows,
        # resnet50's 64 -> 256 block ends at 56x56 took 0.24-0.25 instead of 0.22-0.23 ms, two Zen 5 cores)
        by_rows = large and act not in mk.MICROKERNEL_EPILOGUES
        if not large:  # a small image whole, or in blocks where its panels alone would leave a core idle
            step = small_image_step(ho * wo, wp.shape[0], n)
        elif kernel == (1, 1) and stride == (1, 1) and not (ph or pw):  # a strip: blocks of several output rows
            step = strip_rows(wo, ho, c, k, by_rows, wp.shape[0], n) * wo
        else:  # a large image's windows by output rows
            step = wo
        epi = mk.fused_epilogue(act if act in mk.MICROKERNEL_EPILOGUES and not by_rows else 0, alpha)
        jobs = n * -(-(ho * wo) // step) * (1 if by_rows else wp.shape[0])
        h, w = x.shape[2:]
        xpad = None
        if (ph or pw) and 2 * edge_values(c, h, w, ho, wo, kernel, stride, padding) * wp.shape[0] > h * w * c:
            # windows over the edge in too many tiles, or panels: the input copied inside a zero border at each call,
            # by the launch's threads before the sums
            xpad = aligned_zeros((n, h + 2 * ph, w + 2 * pw, c))
            ph = pw = 0

        def operands(xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # (images to copy first, images read)
            return (xs, xpad) if xpad is not None else (xs[:0], xs)
        tail = (wp, ys, rs, has_res, b, act, al, epi, kh, kw, *stride, ph, pw, wo, step, by_rows)
        xv = x.transpose(0, 2, 3, 1)
        if xv.flags.c_contiguous:  # one launch, fixed arrays
            return rt.Launch(_panel_windows_par, *operands(live()), *tail, per_threads=lambda t: (_job_shares(jobs, t),))
        if xpad is not None:  # a strided input: copied inside the border once, here (not made contiguous first)
            inside = xpad[:, padding[0]:padding[0] + h, padding[1]:padding[1] + w]

            def run_strided() -> None:
                inside[...] = xv
                rt.launch(_panel_windows_par, xpad[:0], xpad, *tail, _job_shares(jobs))
            return run_strided
        return lambda: rt.launch(_panel_windows_par, *operands(live()), *tail, _job_shares(jobs))

    def run_im2col() -> None:
        xs = live()
        cols = rt.scratch(0, (ho * wo, wp.shape[1]))
        for i in range(n):
            rt.launch(_im2col_par, xs[i], cols, rt.threads(), wo, kh, kw, *stride, *padding, *dilation)
            rt.launch(_panel_par, cols, wp, ys[i], rs[i], has_res, b, act, al)
    return run_im2col


def edge_values(c: int, h: int, w: int, ho: int, wo: int, kernel: tuple[int, int], stride: tuple[int, int],
                padding: tuple[int, int]) -> int:
    """Input values :func:`_panel_job` copies per panel of a padded convolution (an image of ``c`` x ``h`` x ``w``
    to one of ``ho`` x ``wo``) into its patches, about: the windows of every tile holding an output pixel whose window
    crosses the image's edge (whole rows at the top and bottom, a tile of PANEL_ROWS pixels at each end of the
    other rows). Where twice these, times the panels, outnumber the input's own values, the plan copies the input
    inside a zero border at each call instead: on 2 Zen 5 cores, in turns, mobilenet_v2 took 0.96 of the time with
    its stem read in place (27-value windows, one panel), resnet50 1.25 with all its padded layers read so (7x7 and
    14x14 images of 4 to 16 panels: most tiles cross an edge, and each panel copies them again)."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    top, left = min(ho, -(-ph // sh)), min(wo, -(-pw // sw))
    bottom = max(0, ho - max(0, (h + ph - kh) // sh + 1))
    right = max(0, wo - max(0, (w + pw - kw) // sw + 1))
    rows = min(ho, top + bottom)
    pixels = rows * wo + (ho - rows) * min(wo, PANEL_ROWS * ((left > 0) + (right > 0)))
    return pixels * kh * kw * c


#: input and output bytes of a block of :func:`_panel_windows_par`'s 1x1 convolutions of stride 1 on a large image
STRIP_BLOCK_BYTES = 256 << 10


#: whether a small image's pixels are cut in blocks where its panels do not share out evenly over the cores
SMALL_IMAGE_BLOCKS = True


def small_image_step(pixels: int, panels: int, images: int) -> int:
    """Pixels of a job of a small image (at most PANEL_MAX_PIXELS) with ``panels`` panels: the whole image, or, where
    the images' panels do not share out evenly over the threads (five panels over two cores: three and two), blocks
    of whole tiles of it that do (each block reads the panel's weights again)."""
    threads = rt.threads()
    jobs = panels * images
    if not SMALL_IMAGE_BLOCKS or threads < 2 or jobs % threads == 0 or jobs >= 4 * threads:
        return pixels
    blocks = threads // math.gcd(jobs, threads)
    per_block = -(-pixels // blocks)
    return -(-per_block // PANEL_ROWS) * PANEL_ROWS


#: whether a strip's blocks are made small enough for its jobs to share out evenly over the threads where they are
#: few (:func:`strip_rows`)
STRIP_EVEN_JOBS = True


def strip_rows(wo: int, ho: int, c: int, k: int, by_rows: bool, panels: int = 1, images: int = 1) -> int:
    """Output rows a block of a 1x1 convolution of stride 1 on a large image (``ho`` rows of ``wo`` pixels, ``c`` in,
    ``k`` out) holds: about STRIP_BLOCK_BYTES of input and output, so that a job's call of the micro-kernel runs over
    a long strip of pixels while its input stays in cache for the next panel; ``by_rows`` (a job is a block and every
    panel of it), no fewer than PANEL_JOB_SHARES blocks a thread. Against a row a block, in turns on two Zen 3 cores:
    16 -> 64 at 112x112 0.85, 24 -> 72 at 56x56 0.81, 40 -> 240 at 28x28 (hard-swish) 0.84, 72 -> 24 at 56x56 with
    the residual 0.85, 96 -> 384 at 56x56 (GELU) 0.96 of the time."""
    rows = max(1, STRIP_BLOCK_BYTES // (wo * (c + k) * 4))
    threads = rt.threads()
    if by_rows:
        rows = min(rows, -(-ho // (PANEL_JOB_SHARES * threads)))
    rows = max(1, min(ho, rows))
    # fewer jobs (blocks x ``panels`` panels, unless ``by_rows``, x ``images``) than PANEL_JOB_SHARES a thread: blocks
    # that share out evenly. 144 -> 32 at 28x28 had gone as three blocks of 13 rows (one panel) to two cores, one
    # taking two: 0.033 ms against ONNX Runtime's 0.022
    per_block = images * (1 if by_rows else panels)
    while STRIP_EVEN_JOBS and rows > 1:
        jobs = -(-ho // rows) * per_block
        if jobs % threads == 0 or jobs >= PANEL_JOB_SHARES * threads:
            break
        rows -= 1
    return rows


@njit(cache=True, nogil=True, parallel=True)
def _panel_windows_par(src, x, wp, ys, rs, has_res, b, act, alpha, epi, kh, kw, sh, sw, ph, pw, wo, step, by_rows,
                       shares):  # pragma: no cover - compiled
    """``ys`` (N, P, K) = act(conv(``x``) + ``b``) for the images ``x`` (N, H, W, C) padded by ``ph`` rows and ``pw``
    columns of zeros, by jobs of one block of ``step`` output pixels and one panel of PANEL output channels
    (:func:`_panel_job`; the panels of a block one after the other), in ``shares`` runs of jobs (:func:`_job_shares`,
    one :func:`_panel_share` each). ``src`` (N, H', W', C), unless empty: the images, first copied by the threads
    inside ``x``'s zero border (as wide on each side), which the sums then read (a NumPy copy in the calling thread
    had left the other core idle: resnet50's 3x3 stride-2 layer from 56x56 x 128, two Zen 5 cores, 0.53 -> 0.50 ms)."""
    if src.shape[0] > 0:
        for part in prange(shares):
            copy_inside(src, x, part, shares)
    for share in prange(shares):
        _call_panel_share((np.int64(share), x, wp, ys, rs, has_res, b, act, alpha, epi, kh, kw, sh, sw, ph, pw, wo,
                           step, by_rows, shares))


@njit(cache=True, nogil=True)
def _panel_share(share, x, wp, ys, rs, has_res, b, act, alpha, epi, kh, kw, sh, sw, ph, pw, wo, step, by_rows,
                 shares):  # pragma: no cover - compiled
    """Run ``share`` of :func:`_panel_windows_par`'s jobs, its work arrays allocated once rather than once per job.

    ``by_rows`` (a large image, whose blocks are output rows, with an activation the micro-kernel does not apply
    itself; ``epi`` then the identity): a job is one block and every panel of it, the block's pixels then
    activated whole rows of K values at a time while in cache, where a pass per panel ran over strips of PANEL
    columns (SiLU after a 1x1 convolution, efficientnet's 16 -> 96 at 112x112)."""
    n, m, k = ys.shape
    panels = wp.shape[0]
    blocks = (m + step - 1) // step
    jobs = n * blocks * (1 if by_rows else panels)
    rows_a = np.empty(PANEL_ROWS, np.int64)
    rows_c = np.empty(PANEL_ROWS, np.int64)
    ho = (m + wo - 1) // wo
    edges = ph > 0 or pw > 0 or (ho - 1) * sh + kh > x.shape[1] or (wo - 1) * sw + kw > x.shape[2]
    patch = np.empty((PANEL_ROWS, kh * kw * x.shape[3]) if edges else (1, 1), np.float32)
    for job in range(jobs * share // shares, jobs * (share + 1) // shares):
        if not by_rows:
            _panel_job(job, x, wp, ys, rs, has_res, b, act, alpha, epi, kh, kw, sh, sw, ph, pw, wo, step, rows_a,
                       rows_c, patch)
            continue
        for p in range(panels):  # the block's sums (and residual), not activated
            _panel_job(job * panels + p, x, wp, ys, rs, has_res, b, plain(0), alpha, epi, kh, kw, sh, sw, ph, pw, wo,
                       step, rows_a, rows_c, patch)
        if act != 0:
            y = ys[job // blocks]
            for q in range(job % blocks * step, min(m, job % blocks * step + step)):
                activate_row(y[q], act, alpha)


_call_panel_share = job_caller(_panel_share)

#: runs of jobs per thread of :func:`_panel_windows_par` (several, so that a thread slowed by another program
#: leaves its last runs to the others)
PANEL_JOB_SHARES = 4


def _job_shares(jobs: int, threads: int | None = None) -> int:
    """Runs of :func:`_panel_windows_par`'s ``jobs`` jobs for ``threads`` threads (default: those this process may
    use now)."""
    return max(1, min(jobs, PANEL_JOB_SHARES * (rt.threads() if threads is None else threads)))


@njit(cache=True, nogil=True)
def _panel_job(job, x, wp, ys, rs, has_res, b, act, alpha, epi, kh, kw, sh, sw, ph, pw, wo, step, rows_a, rows_c,
               patch):  # pragma: no cover - compiled
    """Job ``job`` of :func:`_panel_windows_par`: tiles of up to PANEL_ROWS output pixels whose windows the
    micro-kernel reads in place, every kernel row of them in one call (no im2col: at 7x7 x 512 channels, 0.9 MB of
    it a layer). A tile with a window over the image's edge (its padding) has its windows copied into ``patch``
    (PANEL_ROWS, KH*KW*C) with zeros outside the image (:func:`_gather_windows`) and read there: no padded copy of the
    input at each run (resnet50's eleven padded layers had copied 0.23 ms of input a run, 2 Zen 5 cores). A last panel
    part-filled (K no multiple of PANEL) is read and written under a mask by the micro-kernel (its ``cols``), straight
    in the output. An activation the micro-kernel does not apply itself is a pass over the panel's columns after the
    sums: activating each tile while in L1 (in a tile of the thread's own) was slower, GELU at 56x56, 96 -> 384 8.7
    against 6.2 ms on two Zen 3 cores, SiLU at 56x56, 24 -> 144 1.22 against 0.99."""
    n, m, k = ys.shape
    h, w, c = x.shape[1], x.shape[2], x.shape[3]
    span, kk, panels = kw * c, wp.shape[1], wp.shape[0]
    row_bytes, pix_bytes = x.strides[1], x.strides[2]
    blocks = (m + step - 1) // step
    i, blk, p = job // (blocks * panels), job // panels % blocks, job % panels
    q0, q1 = blk * step, min(m, blk * step + step)
    y, r = ys[i][q0:q1], rs[i][q0:q1]
    k0 = p * PANEL
    width = min(PANEL, k - k0)  # the panel's columns inside K (the micro-kernel's ``cols``)
    # the bias and the activation inside the micro-kernel where it is one of mk.MICROKERNEL_EPILOGUES (no passes
    # over the panel)
    epilogue = act == 0 or act == 1 or act == 5 or act == 6 or act == 8 or act == 9
    fused = not has_res and epilogue
    panel = wp.ctypes.data + 4 * p * kk * PANEL
    image = x[i].ctypes.data
    bias = b.ctypes.data + 4 * k0
    # each pixel's window by steps from the block's first one: a division per pixel (its row and column) cost as
    # much as the sums of a 1x1 layer of 16 input channels (16 -> 64 at 112x112: 0.64 against 0.32 ms, 2 cores)
    t0 = q0
    if kh == 1 and kw == 1 and sh == 1 and sw == 1 and ph == 0 and pw == 0 and row_bytes == wo * pix_bytes:
        # a 1x1 convolution of stride 1: its pixels are one strip, whole tiles of it in one call (with a residual,
        # from bias + residual and the epilogue fused: no passes over those rows)
        strip = (q1 - q0) // PANEL_ROWS * PANEL_ROWS
        if has_res and epilogue:
            strip_residual_n(image + q0 * pix_bytes, pix_bytes, y.ctypes.data + 4 * k0, 4 * k, strip, panel, span,
                             bias, epi.ctypes.data, r.ctypes.data + 4 * k0, r.strides[0], width)
        else:
            own_epilogue = not has_res and epilogue
            if not own_epilogue:
                _panel_fill(y[:strip], r[:strip], has_res, k0, b, width)
            strip_n(own_epilogue, image + q0 * pix_bytes, pix_bytes, y.ctypes.data + 4 * k0, 4 * k, strip, panel,
                    span, bias, epi.ctypes.data, width)
            if not own_epilogue:
                _panel_activate(y[:strip], k0, act, alpha)
        t0 = q0 + strip
    # the rows left: passes for the bias (and residual) and an activation the micro-kernel did not apply
    passes = not fused and t0 < q1
    if passes:
        _panel_fill(y[t0 - q0:], r[t0 - q0:], has_res, k0, b, width)
    t1 = t0
    oh, ow = t0 // wo, t0 % wo
    at = image + (oh * sh - ph) * row_bytes + (ow * sw - pw) * pix_bytes  # the window's first value (maybe outside)
    col_step, row_step = sw * pix_bytes, sh * row_bytes - (wo - 1) * sw * pix_bytes
    while t0 < q1:
        nr = tile_rows(q1 - t0)
        edge = False
        for t in range(nr):
            rows_a[t] = at
            rows_c[t] = y.ctypes.data + 4 * ((t0 + t - q0) * k + k0)
            if oh * sh < ph or oh * sh - ph + kh > h or ow * sw < pw or ow * sw - pw + kw > w:
                edge = True
            ow += 1
            if ow == wo:
                ow = 0
                oh += 1
                at += row_step
            else:
                at += col_step
        step_a = row_bytes
        if edge:  # the tile's windows from the patch, each KH rows of KW*C values
            _gather_windows(x[i], t0, nr, wo, kh, kw, sh, sw, ph, pw, patch)
            for t in range(nr):
                rows_a[t] = patch.ctypes.data + t * patch.strides[0]
            step_a = 4 * span
        if fused:
            tile_bias_n(nr, rows_a.ctypes.data, rows_c.ctypes.data, panel, span, kh, step_a, bias, epi.ctypes.data,
                        width)
        else:
            tile_n(nr, rows_a.ctypes.data, rows_c.ctypes.data, panel, span, kh, step_a, width)
        t0 += nr
    if passes:
        _panel_activate(y[t1 - q0:], k0, act, alpha)


@njit(cache=True, nogil=True)
def _gather_windows(img, q0, nr, wo, kh, kw, sh, sw, ph, pw, patch):  # pragma: no cover - compiled
    """Rows 0..``nr`` of ``patch`` (PANEL_ROWS, KH*KW*C): the windows of output pixels q0..q0+nr of the image ``img``
    (H, W, C) padded by ``ph`` rows and ``pw`` columns, kernel row after kernel row, zeros outside the image."""
    h, w, c = img.shape
    for t in range(nr):
        oh, ow = (q0 + t) // wo, (q0 + t) % wo
        row = patch[t]
        e = 0
        for j in range(kh):
            ih = oh * sh - ph + j
            for i in range(kw):
                iw = ow * sw - pw + i
                if 0 <= ih < h and 0 <= iw < w:
                    src = img[ih, iw]
                    for v in range(c):
                        row[e + v] = src[v]
                else:
                    for v in range(c):
                        row[e + v] = 0.0
                e += c


@njit(cache=True, nogil=True, parallel=True)
def _im2col_par(x, cols, shares, wo, kh, kw, sh, sw, ph, pw, dh, dw):  # pragma: no cover - compiled
    total = cols.shape[0]
    for q in prange(shares):
        _call_im2col_share((x, cols, total * q // shares, total * (q + 1) // shares, wo, kh, kw, sh, sw, ph, pw, dh,
                            dw))


@njit(cache=True, nogil=True)
def _im2col_share(x, cols, q0, q1, wo, kh, kw, sh, sw, ph, pw, dh, dw):  # pragma: no cover - compiled
    """Rows q0..q1 of :func:`_im2col_par`'s im2col (a job of this module: a kernel and the job it calls by symbol
    live in one file, so that Numba's cache, kept per file, renews both together)."""
    im2col_nhwc(x, cols, plain(0), q0, q1, wo, kh, kw, sh, sw, ph, pw, dh, dw)


_call_im2col_share = job_caller(_im2col_share)


@njit(cache=True, nogil=True, parallel=True)
def _panel_par(a, wp, y, r, has_res, b, act, alpha):  # pragma: no cover - compiled
    """``y`` (P, K) = act(``a`` (P, KK) @ panels ``wp`` + ``b``), one panel of PANEL output channels per iteration."""
    for p in prange(wp.shape[0]):
        _call_panel_product((a, wp, y, r, has_res, np.int64(p), b, act, alpha))


@njit(cache=True, nogil=True)
def panel_product(a, wp, y, r, has_res, p, b, act, alpha):  # pragma: no cover - compiled
    """Columns of panel ``p`` of ``y`` (M, K) = act(``a`` (M, KK) @ ``wp[p]`` + bias): bias first, then passes of
    PANEL_KBLOCK input values (a block of ``a`` and of the panel in L2), each over tiles of at most PANEL_ROWS rows
    (:func:`tile_rows`), then the activation. Rows of ``a`` and ``y`` may have any stride."""
    m, kk = a.shape
    k0 = p * PANEL
    lda, ldy = a.strides[0], y.strides[0]
    _panel_fill(y, r, has_res, k0, b, plain(PANEL))
    rows_a = np.empty(PANEL_ROWS, np.int64)
    rows_c = np.empty(PANEL_ROWS, np.int64)
    for d0 in range(0, kk, PANEL_KBLOCK):
        depth = min(kk, d0 + PANEL_KBLOCK) - d0
        panel = wp.ctypes.data + 4 * (p * kk + d0) * PANEL
        m0 = 0
        while m0 < m:
            nr = tile_rows(m - m0)
            for r in range(nr):
                rows_a[r] = a.ctypes.data + (m0 + r) * lda + 4 * d0
                rows_c[r] = y.ctypes.data + (m0 + r) * ldy + 4 * k0
            tile_n(nr, rows_a.ctypes.data, rows_c.ctypes.data, panel, depth, 1, 0, PANEL)
            m0 += nr
    _panel_activate(y, k0, act, alpha)


_call_panel_product = job_caller(panel_product)


def stem_panels_apply(w_shape: tuple[int, ...], dilation: tuple[int, int], pixels: int) -> bool:
    """Whether :func:`conv_panels` takes a large image too, for weights ``w_shape`` (K, C, KH, KW): few input
    channels (an RGB stem, whose im2col is mostly copying) and a window of at least STEM_PANEL_MIN_WINDOW values,
    no dilation, AVX-512 or AVX2. resnet18's 7x7 stem: 0.7 instead of 0.9-1.1 ms through im2col and OpenBLAS
    (AVX-512)."""
    k, c, kh, kw = w_shape
    return (c <= STEM_PANEL_MAX_CHANNELS and c * kh * kw >= STEM_PANEL_MIN_WINDOW and dilation == (1, 1)
            and pixels > PANEL_MAX_PIXELS and mk.panels_available())


#: most input channels of a stem for :func:`conv_panels`, and fewest values in its window: a one-channel 3x3 window
#: (9) makes too short a sum per call of the micro-kernel (dncnn's first layer: 1.64 against 1.39 ms through
#: im2col), while a 3x3 RGB one (27) beats im2col and OpenBLAS (mobilenet_v2's stem, 3 -> 32 at stride 2 from
#: 224x224, on 2 Zen 3 cores: 0.52 against 0.81 ms; 3 -> 64 at stride 1 on 256x256: 4.5 against 6.2)
STEM_PANEL_MAX_CHANNELS = 4
STEM_PANEL_MIN_WINDOW = 27
