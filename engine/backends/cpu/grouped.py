"""Grouped convolutions (more than one group, not depthwise: RegNet's and ResNeXt's 3x3 layers) of NHWC tensors on
the panel micro-kernel (:mod:`engine.backends.cpu.microkernel`).

A panel of PANEL output channels (one vector of them where a group has fewer: :data:`NARROW_PANELS`) reads the input
channels of the groups its outputs belong to, a contiguous run of each pixel's channels, against weights packed per
panel with zeros where an output's group does not hold the input channel: the panel's width / (outputs per group)
times the multiply-adds of the convolution itself (two with AVX-512's 16-wide vectors and RegNet's groups of 8), at
the micro-kernel's speed, where the generic path made one small product per
group (regnet_y_400mf's grouped layers 6.8 ms against ONNX Runtime's 1.5 on two Zen 5 cores). Each kernel row of a
tile's windows is one call of the micro-kernel (the accumulators kept in the output between rows); the activation
is the micro-kernel's epilogue for a window of one row, else a pass over the tile's rows. A NaN or infinite input
spoils the outputs of the other groups of its panel too (the packed zeros times it) at the pixels whose windows hold
it, where the generic path keeps them finite: the next layer mixing the channels would spoil them anyway."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit, prange

from engine.backends.cpu import microkernel as mk
from engine.backends.cpu import runtime as rt
from engine.backends.cpu.blocks import copy_inside
from engine.backends.cpu.epilogue import activate_row, kernel_alpha
from engine.backends.cpu.jobs import job_caller
from engine.backends.cpu.memory import aligned_copy, aligned_zeros
from engine.backends.cpu.microkernel import PANEL, PANEL_ROWS, tile_bias_n, tile_n, tile_rows

#: runs of jobs per thread (several, so that a thread slowed by another program leaves its last runs to the others)
GROUPED_JOB_SHARES = 4


def grouped_applies(w_shape: tuple[int, ...], groups: int, channels: int) -> bool:
    """Whether the grouped kernel takes a convolution of logical weights ``w_shape`` (K, C/groups, KH, KW) in
    ``groups`` groups over ``channels`` inputs: more than one group, not one filter per channel (the depthwise
    kernel's), on a CPU with the micro-kernel's FMA vectors."""
    k, per_group = w_shape[0], w_shape[1]
    return (groups > 1 and channels == per_group * groups and k % groups == 0
            and not (per_group == 1 and k == groups) and mk.panels_available())


#: outputs of a panel where a group has fewer than PANEL outputs, a multiple of the vector or at most one vector
#: of them: one vector (the micro-kernel's one-vector tiles), so that a panel reads fewer other groups' inputs
#: (regnet_y_800mf's 16 outputs a group: its own 16 inputs only, where a 32-wide panel read two groups' 32). One
#: layer alone, 2 Zen 5 cores: 64 channels in groups of 16 at stride 2 from 112x112 0.27 against 0.36 ms, 144 in
#: groups of 16 at 28x28 0.13 against 0.15, 48 in groups of 8 at 56x56 0.16 against 0.19 (an ungrouped 48 -> 48
#: layer 0.30); in turns in one process (``bench_cpu_setting``): regnet_y_800mf 0.979, regnet_y_400mf 0.968
NARROW_PANELS = True


def panel_width(outputs_per_group: int) -> int:
    """The outputs of a panel (:data:`NARROW_PANELS`) for groups of ``outputs_per_group`` outputs."""
    kg = outputs_per_group
    narrow = kg < PANEL and (kg <= mk.PANEL_VECTOR or kg % mk.PANEL_VECTOR == 0)
    return mk.PANEL_VECTOR if NARROW_PANELS and narrow else PANEL


def grouped_weights(w: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """The weights (K, C/groups, KH, KW) packed per panel of :func:`panel_width` outputs, one after the other: panel
    p holds (KH, KW, Cp, PANEL) float32 values (rows PANEL apart, as the micro-kernel reads them, the columns past
    the panel's width zero), Cp the input channels of the groups its outputs belong to, zero where an output's group
    does not hold the input channel (and for outputs past K). Returns the packed values and, per panel, its (offset
    in values, first input channel, Cp, first output, outputs)."""
    k, cg, kh, kw = w.shape
    kg = k // groups
    width = panel_width(kg)
    panels = -(-k // width)
    blocks, meta, offset = [], np.zeros((panels, 5), np.int64), 0
    for p in range(panels):
        k0, k1 = p * width, min(k, p * width + width)
        g0, g1 = k0 // kg, (k1 - 1) // kg
        cin0, cp = g0 * cg, (g1 - g0 + 1) * cg
        block = np.zeros((kh, kw, cp, PANEL), np.float32)
        for o in range(k0, k1):
            rel = (o // kg - g0) * cg
            block[:, :, rel:rel + cg, o - k0] = np.asarray(w[o], np.float32).transpose(1, 2, 0)
        meta[p] = (offset, cin0, cp, k0, k1 - k0)
        blocks.append(block.reshape(-1))
        offset += block.size
    return aligned_copy(np.concatenate(blocks)), meta


@njit(cache=True, nogil=True)
def _grouped_share(share, x, wg, meta, ys, b, act, alpha, epi, ident, fused, kh, kw, sh, sw, dh, dw, wo,
                   shares):  # pragma: no cover - compiled
    """Run ``share`` of :func:`_grouped_par`'s jobs, a job one output row of one image times one panel: tiles of up
    to PANEL_ROWS pixels, their windows read in place from the padded input ``x`` (N, Hp, Wp, C), each kernel row one
    call of the micro-kernel over the panel's input channels (``meta``: offset, first channel, count), the first
    from the bias, the others adding to the output. ``fused``: the activation is ``epi``, applied by the (only)
    call, else a pass over each tile's rows after its calls."""
    n, m, k = ys.shape
    panels = meta.shape[0]
    ho = m // wo
    jobs = n * ho * panels
    rows_a = np.empty(PANEL_ROWS, np.int64)
    rows_c = np.empty(PANEL_ROWS, np.int64)
    row_bytes, pix_bytes = x.strides[1], x.strides[2]
    for job in range(jobs * share // shares, jobs * (share + 1) // shares):
        i, oh, p = job // (ho * panels), job // panels % ho, job % panels
        offset, cin0, cp, k0, width = meta[p, 0], meta[p, 1], meta[p, 2], meta[p, 3], meta[p, 4]
        panel = wg.ctypes.data + 4 * offset
        cell_values = kw * cp * PANEL  # one kernel row of the panel
        bias = b.ctypes.data + 4 * k0
        y = ys[i]
        top = x[i].ctypes.data + oh * sh * row_bytes + 4 * cin0
        ow = 0
        while ow < wo:
            nr = tile_rows(wo - ow)
            _tile_addresses(rows_a, rows_c, top + ow * sw * pix_bytes, sw * pix_bytes,
                            y.ctypes.data + 4 * ((oh * wo + ow) * k + k0), 4 * k, nr)
            tile_bias_n(nr, rows_a.ctypes.data, rows_c.ctypes.data, panel, cp, kw, dw * pix_bytes, bias,
                        epi.ctypes.data if fused else ident.ctypes.data, width)
            for r in range(1, kh):
                for t in range(nr):
                    rows_a[t] += dh * row_bytes
                tile_n(nr, rows_a.ctypes.data, rows_c.ctypes.data, panel + 4 * r * cell_values, cp, kw,
                       dw * pix_bytes, width)
            if not fused and act != 0:
                _activate_tile(y, oh * wo + ow, nr, k0, width, act, alpha)
            ow += nr


_call_grouped_share = job_caller(_grouped_share)


@njit(inline="always")
def _tile_addresses(rows_a, rows_c, a0, a_step, c0, c_step, nr):  # pragma: no cover - compiled
    """A tile's row addresses: ``nr`` inputs from ``a0`` by ``a_step`` bytes, outputs from ``c0`` by ``c_step``."""
    for t in range(nr):
        rows_a[t] = a0 + t * a_step
        rows_c[t] = c0 + t * c_step


@njit(inline="always")
def _activate_tile(y, q0, nr, k0, width, act, alpha):  # pragma: no cover - compiled
    """The activation over columns k0..k0+``width`` of rows q0..q0+``nr`` of ``y`` (pixels, K)."""
    for t in range(nr):
        activate_row(y[q0 + t][k0:k0 + width], act, alpha)


@njit(cache=True, nogil=True, parallel=True)
def _grouped_par(src, x, wg, meta, ys, b, act, alpha, epi, ident, fused, kh, kw, sh, sw, dh, dw, wo,
                 shares):  # pragma: no cover - compiled
    """:func:`_grouped_share` over the threads; ``src``, unless empty, the images first copied inside ``x``'s zero
    border by the threads (:func:`blocks.copy_inside`; regnet_y_800mf's stride-2 layer from 112x112 had copied 3.2 MB
    in the calling thread)."""
    if src.shape[0] > 0:
        for part in prange(shares):
            copy_inside(src, x, part, shares)
    for share in prange(shares):
        _call_grouped_share((np.int64(share), x, wg, meta, ys, b, act, alpha, epi, ident, fused, kh, kw, sh, sw, dh,
                             dw, wo, shares))


#: the micro-kernel's epilogue that leaves the sums as they are (a window's first kernel rows)
_IDENTITY = mk.fused_epilogue(0, 0.0)

#: whether a layer of stride 1 whose panels read disjoint runs of the input channels, together all of them, each as
#: long as the others (RegNet's and ResNeXt's groups), copies its input at each call into blocks, one per panel:
#: (N, panels, H + 2 PH, W + 2 PW, run), the padding's zeros included. A kernel row of a window is then one
#: contiguous run of KW x run values, and each tile's whole window one call of the micro-kernel
#: (:func:`_blocked_share`), where the channels in place took one call per kernel row of 16 x KW values, the
#: accumulators stored and loaded again between them. One layer alone (2 Zen 5 cores): 320 channels in groups of 16
#: at 14x14 0.064 against 0.070 ms, 144 at 28x28 0.114 against 0.127, 48 in groups of 8 at 56x56 0.147 against
#: 0.163; a strided layer reads four input pixels an output pixel and its copy cost more than the calls saved (64
#: channels at stride 2 from 112x112: 0.356 against 0.263), so strided layers keep the channels in place. In turns
#: in one process (``bench_cpu_setting``): regnet_y_800mf 0.934-0.942, regnet_y_400mf 0.959, resnext50_32x4d 0.959
GROUP_BLOCKS = True


def channel_blocks(meta: np.ndarray, channels: int) -> int:
    """The input channels of each panel where the panels (``meta`` of :func:`grouped_weights`) read disjoint runs of
    the same length covering all ``channels`` in order, else 0."""
    run = int(meta[0, 2])
    starts = meta[:, 1]
    if run * meta.shape[0] != channels or not np.array_equal(starts, np.arange(meta.shape[0]) * run):
        return 0
    return run if bool(np.all(meta[:, 2] == run)) else 0


@njit(cache=True, nogil=True, parallel=True)
def _to_blocks_par(x, xb, ph, pw, shares):  # pragma: no cover - compiled
    """``xb`` (N, P, Hp, Wp, run): the channels of ``x`` (N, H, W, P * run) by runs, each image row at row + ``ph``,
    column + ``pw`` (the border left as it is: zeros); rows of all images and blocks shared out."""
    n, blocks, run = xb.shape[0], xb.shape[1], xb.shape[4]
    h, w = x.shape[1], x.shape[2]
    rows = n * blocks * h
    for q in prange(shares):
        for j in range(rows * q // shares, rows * (q + 1) // shares):
            i, p, y = j // (blocks * h), j // h % blocks, j % h
            dst, src = xb[i, p, y + ph], x[i, y]
            for px in range(w):
                d, s = dst[px + pw], src[px]
                for v in range(run):
                    d[v] = s[p * run + v]


@njit(cache=True, nogil=True)
def _blocked_share(share, xb, wg, meta, ys, b, act, alpha, epi, fused, kh, kw, sh, sw, wo,
                   shares):  # pragma: no cover - compiled
    """Run ``share`` of :func:`_blocked_par`'s jobs, a job one output row of one image times one panel: tiles of up
    to PANEL_ROWS pixels, each tile's whole window one call of the micro-kernel over the panel's block of ``xb``
    (N, P, Hp, Wp, run): KH rows of KW x run contiguous values, from the bias, with the epilogue ``epi`` where
    ``fused``, else a pass over the tile's rows."""
    n, m, k = ys.shape
    ho, panels = m // wo, meta.shape[0]
    jobs = n * ho * panels
    rows_a, rows_c = np.empty(PANEL_ROWS, np.int64), np.empty(PANEL_ROWS, np.int64)
    row_bytes, pix_bytes, run = xb.strides[2], xb.strides[3], xb.shape[4]
    for job in range(jobs * share // shares, jobs * (share + 1) // shares):
        i, oh, p = job // (ho * panels), job // panels % ho, job % panels
        offset, k0, width = meta[p, 0], meta[p, 3], meta[p, 4]
        panel = wg.ctypes.data + 4 * offset
        bias = b.ctypes.data + 4 * k0
        y = ys[i]
        top = xb[i, p].ctypes.data + oh * sh * row_bytes
        ow = 0
        while ow < wo:
            nr = tile_rows(wo - ow)
            _tile_addresses(rows_a, rows_c, top + ow * sw * pix_bytes, sw * pix_bytes,
                            y.ctypes.data + 4 * ((oh * wo + ow) * k + k0), 4 * k, nr)
            tile_bias_n(nr, rows_a.ctypes.data, rows_c.ctypes.data, panel, kw * run, kh, row_bytes, bias,
                        epi.ctypes.data, width)
            if not fused and act != 0:
                _activate_tile(y, oh * wo + ow, nr, k0, width, act, alpha)
            ow += nr


_call_blocked_share = job_caller(_blocked_share)


@njit(cache=True, nogil=True, parallel=True)
def _blocked_par(xb, wg, meta, ys, b, act, alpha, epi, fused, kh, kw, sh, sw, wo, shares):  # pragma: no cover
    for share in prange(shares):
        _call_blocked_share((np.int64(share), xb, wg, meta, ys, b, act, alpha, epi, fused, kh, kw, sh, sw, wo,
                             shares))


def grouped_plan(x: np.ndarray, packed: tuple[np.ndarray, np.ndarray], kernel: tuple[int, int], bias: np.ndarray | None,
                 out: np.ndarray, stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int],
                 act: int = 0, alpha: float | tuple[float, float] = 0.0) -> Callable[[], None]:
    """``act(conv(x) + bias)`` in groups into ``out``, logical NCHW views of NHWC float32 memory (``out``
    C-contiguous as NHWC), weights from :func:`grouped_weights`, as a call ready to run (again) on these arrays: by
    blocks of channels (:data:`GROUP_BLOCKS`) where they apply, else from the channels in place (a padded input a
    buffer of the plan whose border stays zero, its inside copied at each call by the launch's threads)."""
    wg, meta = packed
    n, c, h, w = x.shape
    k, ho, wo = out.shape[1:]
    kh, kw = kernel
    ph, pw = padding
    ys = out.transpose(0, 2, 3, 1).reshape(n, ho * wo, k)
    b = np.zeros(k + PANEL, np.float32)  # a panel's bias vectors read whole
    if bias is not None:
        b[:k] = bias
    fused = kh == 1 and act in mk.MICROKERNEL_EPILOGUES  # else a pass after the kernel rows' calls
    epi = mk.fused_epilogue(act if fused else 0, alpha)
    al = kernel_alpha(alpha)
    jobs = n * ho * meta.shape[0]
    xv = x.transpose(0, 2, 3, 1)
    geometry = (ys, b, act, al, epi, _IDENTITY, fused, kh, kw, *stride, *dilation, wo)

    def shares(t: int) -> tuple[int]:
        return (max(1, min(jobs, GROUPED_JOB_SHARES * t)),)

    run = channel_blocks(meta, c) if GROUP_BLOCKS and dilation == (1, 1) and stride == (1, 1) else 0
    if run:
        xb = aligned_zeros((n, c // run, h + 2 * ph, w + 2 * pw, run))
        blocked_fused = act in mk.MICROKERNEL_EPILOGUES  # the whole window in one call: its epilogue
        to_blocks = rt.Launch(_to_blocks_par, x.transpose(0, 2, 3, 1), xb, ph, pw,
                              per_threads=lambda t: (max(1, min(n * c // run * h, t)),))
        products = rt.Launch(_blocked_par, xb, wg, meta, ys, b, act, al,
                             mk.fused_epilogue(act if blocked_fused else 0, alpha), blocked_fused, kh, kw, *stride, wo,
                             per_threads=shares)

        def blocked() -> None:
            to_blocks()
            products()
        return blocked
    if not (ph or pw) and xv.flags.c_contiguous:
        return rt.Launch(_grouped_par, xv[:0], xv, wg, meta, *geometry, per_threads=shares)
    xpad = aligned_zeros((n, h + 2 * ph, w + 2 * pw, c))  # the launch copies the input inside its zero border
    if xv.flags.c_contiguous:
        return rt.Launch(_grouped_par, xv, xpad, wg, meta, *geometry, per_threads=shares)
    inside = xpad[:, ph:ph + h, pw:pw + w]  # a strided input: copied inside the border once, here

    def run_strided() -> None:
        inside[...] = xv
        rt.launch(_grouped_par, xpad[:0], xpad, wg, meta, *geometry, *shares(rt.threads()))
    return run_strided
