"""One-pass pointwise kernels of the NumPy backend (Numba, every core): an activation by its fused epilogue (an
activation no producer fused), the per-channel ``act(x * scale + shift)`` of batch normalization, and layer
normalization over the rows of a matrix."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit, prange

from engine.backends.cpu import runtime as rt
from engine.backends.cpu.epilogue import FUSED_EPILOGUES, _exp_neg, activate_row, activate_span, kernel_alpha
from engine.backends.cpu.jobs import job_caller
from engine.backends.cpu.runtime import REORDERED_SUMS
from engine.epilogues import coefficients

#: values a thread handles at least (fewer threads for small tensors)
MIN_PER_THREAD = 16384


def _parts(size: int) -> int:
    return max(1, min(rt.threads(), size // MIN_PER_THREAD))


@njit(cache=True, nogil=True, parallel=True)
def _activation(x, y, act, a, b, parts, inplace):  # pragma: no cover - compiled
    """Each part copied (where ``y`` is not ``x``) and activated in place by ``activate_row``: one vectorised loop
    per epilogue (SiLU, GELU: 5-10x faster than a switch per value)."""
    step = (x.size + parts - 1) // parts
    for q in prange(parts):
        _call_activate_part((x, y, min(x.size, q * step), min(x.size, (q + 1) * step), act, (a, b), inplace))


@njit(cache=True, nogil=True)
def _activate_part(x, y, lo, hi, act, ab, inplace):  # pragma: no cover - compiled
    """Values lo..hi of :func:`_activation`."""
    seg = y[lo:hi]
    if not inplace:
        seg[:] = x[lo:hi]
    activate_span(seg, act, ab)


_call_activate_part = job_caller(_activate_part)


def activation(x: np.ndarray, out: np.ndarray, epilogue: str, coefs: dict[str, float]) -> None:
    """``out = act(x)`` over float32 C-contiguous arrays of one shape (``out`` may be ``x``)."""
    a, b = coefficients(epilogue, coefs)
    inplace = x.__array_interface__["data"][0] == out.__array_interface__["data"][0]
    rt.launch(_activation, x.reshape(-1), out.reshape(-1), FUSED_EPILOGUES[epilogue], np.float32(a), np.float32(b),
              _parts(x.size), inplace)


@njit(cache=True, nogil=True)
def _channels_last_rows(x, y, r0, r1):  # pragma: no cover - compiled
    """Rows r0..r1 of the images of ``y`` (N, H, W, C) = ``x`` (N, C, H, W), the row index over all images: a row's
    values interleaved from its C planes in one loop (three channels: a loop LLVM vectorises with shuffles)."""
    n, c, h, w = x.shape
    for r in range(r0, r1):
        i, row = r // h, r % h
        dst = y[i, row].reshape(w * c)
        if c == 3:
            a, b, d = x[i, 0, row], x[i, 1, row], x[i, 2, row]
            for q in range(w):
                dst[3 * q] = a[q]
                dst[3 * q + 1] = b[q]
                dst[3 * q + 2] = d[q]
        else:
            for ch in range(c):
                src = x[i, ch, row]
                for q in range(w):
                    dst[q * c + ch] = src[q]


_call_channels_last_rows = job_caller(_channels_last_rows)


@njit(cache=True, nogil=True, parallel=True)
def _channels_last_par(x, y, parts):  # pragma: no cover - compiled
    rows = x.shape[0] * x.shape[2]
    for q in prange(parts):
        _call_channels_last_rows((x, y, rows * q // parts, rows * (q + 1) // parts))


#: fewest values worth sharing the copy over the cores (a 224x224 RGB image: 17 us on one Zen 5 core, 6.6 on two)
CHANNELS_LAST_SPLIT_MIN = 1 << 16


def to_channels_last(x: np.ndarray, y: np.ndarray) -> None:
    """``y`` (N, H, W, C) = ``x`` (N, C, H, W), both C-contiguous float32: an image into a channels-last input buffer
    in one pass, over the cores where large. NumPy's transposing copy ran its innermost loop over the channels (224x224
    RGB: 234 us on a Zen 3 core), one copy per channel plane 40 us on two Zen 5 cores, this 6.6."""
    if x.size < CHANNELS_LAST_SPLIT_MIN:
        _channels_last_rows(x, y, 0, x.shape[0] * x.shape[2])
    else:
        rt.launch(_channels_last_par, x, y, rt.threads())


@njit(cache=True, nogil=True, parallel=True)
def _scale_shift_rows(x, y, scale, shift, act, a, b, parts):  # pragma: no cover - compiled
    """Rows (pixels, C) of NHWC memory: channel = column (the first ``y.shape[1]`` columns of ``x``, whose rows may
    be longer: a join's leading channels). Each row scaled and shifted, then activated by ``activate_row`` while in
    L1 (one vectorised loop per epilogue: a switch per value kept the loop scalar)."""
    rows = x.shape[0]
    for q in prange(parts):
        _call_scale_shift_row_range((x, y, scale, shift, act, (a, b), rows * q // parts, rows * (q + 1) // parts))


@njit(cache=True, nogil=True)
def _scale_shift_row_range(x, y, scale, shift, act, ab, r0, r1):  # pragma: no cover - compiled
    """Rows r0..r1 of :func:`_scale_shift_rows`."""
    for p in range(r0, r1):
        src, dst = x[p], y[p]
        for c in range(dst.size):
            dst[c] = src[c] * scale[c] + shift[c]
        activate_row(dst, act, ab)


_call_scale_shift_row_range = job_caller(_scale_shift_row_range)


@njit(cache=True, nogil=True, parallel=True)
def _scale_shift_planes(x, y, scale, shift, act, a, b, parts):  # pragma: no cover - compiled
    """Planes (N, C, H*W) of NCHW memory (the first ``y.shape[1]`` planes of each image of ``x``), each activated as
    :func:`_scale_shift_rows` activates a row."""
    planes = y.shape[0] * y.shape[1]
    for q in prange(parts):
        _call_scale_shift_plane_range((x, y, scale, shift, act, (a, b), planes * q // parts,
                                       planes * (q + 1) // parts))


@njit(cache=True, nogil=True)
def _scale_shift_plane_range(x, y, scale, shift, act, ab, q0, q1):  # pragma: no cover - compiled
    """Planes q0..q1 (counted over the images) of :func:`_scale_shift_planes`."""
    for q in range(q0, q1):
        n, c = q // y.shape[1], q % y.shape[1]
        s, t = scale[c], shift[c]
        src, dst = x[n, c], y[n, c]
        for i in range(src.size):
            dst[i] = src[i] * s + t
        activate_span(dst, act, ab)


_call_scale_shift_plane_range = job_caller(_scale_shift_plane_range)


def leading_rows(x: np.ndarray, channel_axis: int) -> np.ndarray | None:
    """``x`` (float32, 4-D) as a C-contiguous array of its memory whose axis ``channel_axis`` is longer than
    ``x``'s where ``x`` is the leading channels of a larger tensor (a join's buffer read as a view: each pixel row in
    NHWC, each image in NCHW, longer than ``x``'s): NHWC (pixels, C'), NCHW (N, C', H*W); ``x`` itself so reshaped
    where it is C-contiguous; None for other layouts. Kernels read only ``x``'s channels of it."""
    n, *_ = x.shape
    if x.flags.c_contiguous:
        return x.reshape(-1, x.shape[3]) if channel_axis == 3 else x.reshape(n, x.shape[1], -1)
    item = x.itemsize
    if channel_axis == 3:
        _, h, w, _ = x.shape
        row = x.strides[2]
        if x.strides[3] != item or row % item or x.strides[1] != w * row or (n > 1 and x.strides[0] != h * w * row):
            return None
        shape, strides = (n * h * w, row // item), (row, item)
    else:
        _, c, h, w = x.shape
        image = x.strides[0]
        if x.strides[3] != item or x.strides[2] != w * item or x.strides[1] != h * w * item or image % (h * w * item):
            return None
        shape, strides = (n, image // (h * w * item), h * w), (image, h * w * item, item)
    whole = x
    while isinstance(whole.base, np.ndarray):
        whole = whole.base
    end = whole.__array_interface__["data"][0] + whole.nbytes
    if not whole.flags.c_contiguous or x.__array_interface__["data"][0] + shape[0] * strides[0] > end:
        return None  # the last row's tail may lie outside the memory
    return np.lib.stride_tricks.as_strided(x, shape, strides)


def scale_shift_call(x: np.ndarray, scale: np.ndarray, shift: np.ndarray, out: np.ndarray, nhwc: bool,
                     epilogue: str | None, coefs: dict[str, float]) -> Callable[[], None] | None:
    """The prepared call of ``out = act(x * scale[c] + shift[c])`` per channel of physical 4-D float32 ``x``
    (C-contiguous, or the leading channels of a larger tensor: :func:`leading_rows`) into ``out`` (C-contiguous, may
    be ``x``), to run now and again on the same arrays; None (nothing to run) for other layouts of ``x``."""
    rows = leading_rows(x, 3 if nhwc else 1)
    if rows is None:
        return None
    a, b = (np.float32(v) for v in coefficients(epilogue, coefs))
    act = FUSED_EPILOGUES[epilogue]
    if nhwc:
        return rt.Launch(_scale_shift_rows, rows, out.reshape(-1, x.shape[3]), scale, shift, act, a, b,
                         per_threads=lambda t: (t,))
    return rt.Launch(_scale_shift_planes, rows, out.reshape(x.shape[0], x.shape[1], -1), scale, shift, act, a, b,
                     per_threads=lambda t: (t,))


def scale_shift(x: np.ndarray, scale: np.ndarray, shift: np.ndarray, out: np.ndarray, nhwc: bool,
                epilogue: str | None, coefs: dict[str, float]) -> bool:
    """Run :func:`scale_shift_call`; False (nothing done) where it declines ``x``."""
    call = scale_shift_call(x, scale, shift, out, nhwc, epilogue, coefs)
    if call is None:
        return False
    call()
    return True


def layer_norm_rows(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, out: np.ndarray, epsilon: float, act: int = 0,
                    alpha: float | tuple[float, float] = 0.0) -> None:
    """``out`` = act((x - mean) / sqrt(var + epsilon) * scale + bias) over each row of the float32 C-contiguous
    matrix ``x`` (``out`` may be ``x``): the rows shared out over the cores, each row read twice (its sum, then its
    squared deviations) and written once, activated while in cache."""
    parts = _parts(x.size)
    args = (x, scale, bias, out, np.float32(epsilon), act, kernel_alpha(alpha))
    if parts == 1:
        _layer_norm_range(*args, 0, x.shape[0])
        return
    rt.launch(_layer_norm_par, *args, parts)


@njit(cache=True, nogil=True, fastmath=REORDERED_SUMS)
def _layer_norm_range(x, scale, bias, y, eps, act, alpha, r0, r1):  # pragma: no cover - compiled
    n = x.shape[1]
    for r in range(r0, r1):
        xr, yr = x[r], y[r]
        s = np.float32(0)
        for k in range(n):
            s += xr[k]
        mean = s / np.float32(n)
        v = np.float32(0)
        for k in range(n):
            d = xr[k] - mean
            v += d * d
        inv = np.float32(1) / np.sqrt(v / np.float32(n) + eps)
        for k in range(n):
            yr[k] = (xr[k] - mean) * inv * scale[k] + bias[k]
        activate_row(yr, act, alpha)


_call_layer_norm_range = job_caller(_layer_norm_range)


@njit(cache=True, nogil=True, parallel=True)
def _layer_norm_par(x, scale, bias, y, eps, act, alpha, parts):  # pragma: no cover - compiled
    rows = x.shape[0]
    for q in prange(parts):
        _call_layer_norm_range((x, scale, bias, y, eps, act, alpha, rows * q // parts, rows * (q + 1) // parts))


def softmax_rows(x: np.ndarray, out: np.ndarray, bias: np.ndarray | None = None) -> bool:
    """``out = softmax(x + bias)`` along the last axis of float32 C-contiguous ``x`` (``out`` alike, may be ``x``):
    ``bias`` (optional, float32 C-contiguous) has the trailing axes of ``x``, leading ones aside, and repeats over
    the leading ones, as broadcasting does (a relative-position bias or a window mask onto every window's scores).
    Rows shared out over the cores, each read once and written three times while in L1, the maximum subtracted
    first, the exponential by ``epilogue._exp_neg`` (vectorised, no libm call). False (nothing written) for other
    shapes."""
    n = x.shape[-1] if x.ndim else 0
    if not (x.dtype == out.dtype == np.float32 and x.shape == out.shape and n >= 1 and x.flags.c_contiguous
            and out.flags.c_contiguous):
        return False
    bias_rows = 0
    if bias is not None:
        shape = tuple(bias.shape)
        while len(shape) > 1 and shape[0] == 1:
            shape = shape[1:]
        if not (bias.dtype == np.float32 and bias.flags.c_contiguous and len(shape) <= x.ndim
                and shape == x.shape[x.ndim - len(shape):]):
            return False
        bias_rows = bias.size // n
    rows = x.size // n
    b = bias.reshape(-1, n) if bias is not None else out.reshape(-1, n)[:1]  # not read without a bias
    parts = _parts(x.size)
    args = (x.reshape(rows, n), out.reshape(rows, n), b, bias_rows)
    if parts == 1:
        _softmax_range(*args, 0, rows)
    else:
        rt.launch(_softmax_par, *args, parts)
    return True


@njit(cache=True, nogil=True, fastmath={"nnan", "nsz", "reassoc"})
def _row_max(row, n):  # pragma: no cover - compiled
    """The largest of ``row[:n]``, in vectors (compiled without NaN semantics: a NaN in the row still makes the
    softmax's sum, and so the whole row, NaN, the exponentials carrying it)."""
    top = row[0]
    for k in range(1, n):
        top = max(top, row[k])
    return top


@njit(cache=True, nogil=True, fastmath=REORDERED_SUMS)
def softmax_row(row, n):  # pragma: no cover - compiled
    """``row[:n]`` = its softmax, in place: the maximum subtracted first, the exponential by ``_exp_neg``."""
    top = _row_max(row, n)
    total = np.float32(0)
    for k in range(n):
        e = _exp_neg(row[k] - top)
        row[k] = e
        total += e
    inv = np.float32(1) / total
    for k in range(n):
        row[k] *= inv


@njit(cache=True, nogil=True, fastmath=REORDERED_SUMS)
def _softmax_range(x, y, bias, bias_rows, r0, r1):  # pragma: no cover - compiled
    n = x.shape[1]
    for r in range(r0, r1):
        xr, yr = x[r], y[r]
        if bias_rows:
            br = bias[r % bias_rows]
            for k in range(n):
                yr[k] = xr[k] + br[k]
        else:
            for k in range(n):
                yr[k] = xr[k]
        softmax_row(yr, n)


_call_softmax_range = job_caller(_softmax_range)


@njit(cache=True, nogil=True, parallel=True)
def _softmax_par(x, y, bias, bias_rows, parts):  # pragma: no cover - compiled
    rows = x.shape[0]
    for q in prange(parts):
        _call_softmax_range((x, y, bias, bias_rows, rows * q // parts, rows * (q + 1) // parts))
