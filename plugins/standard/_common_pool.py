"""Shared by the pooling layers (pooling, conv_pool): the pooling maths, its exporters and its parameter
descriptors."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.descriptors import ParamDesc
from engine.tensor import Dims
from plugins.standard._common_conv import conv_output_size, padding_end_param

POOL_TYPES = ("max", "average")


def pool_output_size(size: int, kernel: int, stride: int, padding: int) -> int:
    """Output length along one axis (floor rounding, like ONNX MaxPool/AveragePool without ceil_mode)."""
    return conv_output_size(size, kernel, stride, padding, padding, 1)


def pool_param_problem(kernel: Dims, stride: Dims, padding: Dims) -> tuple[str, str] | None:
    """(parameter, message) for the first invalid pooling parameter, or None when they are valid.

    Kernel and stride must be at least 1x1; padding must be smaller than the kernel on each axis, so
    that every window holds at least one real input cell."""
    for name, d in (("kernel_size", kernel), ("stride", stride)):
        if d.h < 1 or d.w < 1:
            return name, f"{d.h}x{d.w} must be at least 1x1"
    if padding.h >= kernel.h or padding.w >= kernel.w:
        return "padding", (f"{padding.h}x{padding.w} must be smaller than the kernel {kernel.h}x{kernel.w} "
                           "on each axis (a window would hold only padding)")
    return None


def pool_shape_problem(h: int, w: int, kernel: Dims, padding: Dims, what: str = "input",
                       padding_end: Dims | None = None) -> str | None:
    """Message when the kernel does not fit the padded input (``what`` names that input), else None.
    ``padding_end``: the bottom/right padding when it differs from ``padding``."""
    end = padding_end or padding
    ph, pw = h + padding.h + end.h, w + padding.w + end.w
    if kernel.h <= ph and kernel.w <= pw:
        return None
    k = str(kernel.h) if kernel.h == kernel.w else f"{kernel.h}x{kernel.w}"
    p = str(ph) if ph == pw and kernel.h == kernel.w else f"{ph}x{pw}"
    return f"kernel {k} is larger than the padded {what} {p}"


def pool_output_size_ext(size: int, kernel: int, stride: int, before: int, after: int, ceil_mode: bool) -> int:
    """Output length along one axis with padding ``before``/``after`` the input, rounding down or (``ceil_mode``)
    up as ONNX and PyTorch do: in ceil mode the last window must start inside the input or the padding before
    it (a window starting in the padding after the input is dropped)."""
    if not ceil_mode:
        return conv_output_size(size, kernel, stride, before, after, 1)
    out = -(-(size + before + after - kernel) // stride) + 1
    if (out - 1) * stride >= size + before:
        out -= 1
    return out


def _window_counts(size: int, out: int, kernel: int, stride: int, before: int, after: int,
                   count_include_pad: bool) -> np.ndarray:
    """The divisor of each average-pooling window along one axis: its cells inside the input (or, with
    ``count_include_pad``, inside the input and its padding), as ONNX Runtime and PyTorch count them."""
    start = np.arange(out) * stride - before
    if count_include_pad:
        return (np.minimum(start + kernel, size + after) - start).astype(np.float64)
    return (np.minimum(start + kernel, size) - np.maximum(start, 0)).astype(np.float64)


def pool2d_ext(xp: Any, x: Any, pool_type: str, kernel: tuple[int, int], stride: tuple[int, int],
               pads: tuple[int, int, int, int], ceil_mode: bool, count_include_pad: bool,
               axes: tuple[int, int] = (2, 3)) -> Any:
    """Pooling with top, left, bottom, right ``pads`` and optional ceil rounding, a loop over kernel taps on the
    H and W ``axes`` ((2, 3) for NCHW, (1, 2) for NHWC). ``pool2d`` is its symmetric, floor-rounded case; the
    backends' kernels take only that case.

    The input is padded to exactly what the output windows read (-inf for max, 0 for average; in ceil mode
    that can go beyond the given padding, and those cells never count); averages divide by
    ``_window_counts``."""
    ah, aw = axes
    h, w = x.shape[ah], x.shape[aw]
    (kh, kw), (sh, sw), (top, left, bottom, right) = kernel, stride, pads
    ho = pool_output_size_ext(h, kh, sh, top, bottom, ceil_mode)
    wo = pool_output_size_ext(w, kw, sw, left, right, ceil_mode)
    is_max = pool_type == "max"
    shape = list(x.shape)
    shape[ah], shape[aw] = max((ho - 1) * sh + kh, top + h), max((wo - 1) * sw + kw, left + w)
    if top == left == 0 and shape[ah] == h and shape[aw] == w:
        xpad = x  # the windows read the input only: no padded copy
    else:
        xpad = xp.full(tuple(shape), -np.inf if is_max else 0, dtype=x.dtype)
        inner = [slice(None)] * x.ndim
        inner[ah], inner[aw] = slice(top, top + h), slice(left, left + w)
        xpad[tuple(inner)] = x
    acc = None
    for i in range(kh):
        for j in range(kw):
            index = [slice(None)] * x.ndim
            index[ah], index[aw] = slice(i, i + sh * (ho - 1) + 1, sh), slice(j, j + sw * (wo - 1) + 1, sw)
            tap = xpad[tuple(index)]
            if acc is None:
                acc = tap.copy()
            elif is_max:
                xp.maximum(acc, tap, out=acc)
            else:
                acc += tap
    if is_max:
        return acc
    counts = np.outer(_window_counts(h, ho, kh, sh, top, bottom, count_include_pad),
                      _window_counts(w, wo, kw, sw, left, right, count_include_pad))
    if np.all(counts == kh * kw):  # every window whole: one scale
        acc *= acc.dtype.type(1.0 / (kh * kw))
        return acc
    divisor = [1] * x.ndim
    divisor[ah], divisor[aw] = ho, wo
    acc *= xp.asarray((1.0 / counts).astype(acc.dtype).reshape(divisor))
    return acc


def pool2d(xp: Any, x: Any, pool_type: str, kernel: tuple[int, int], stride: tuple[int, int],
           padding: tuple[int, int], count_include_pad: bool = False, axes: tuple[int, int] = (2, 3)) -> Any:
    """Pooling of ``x`` over KhxKw windows of its H and W ``axes`` ((2, 3) for NCHW, (1, 2) for NHWC),
    a loop over kernel taps.

    Max pooling pads with -inf; average pooling pads with zeros and divides by the window size
    (``count_include_pad``) or by the number of real cells in the window."""
    ph, pw = padding
    return pool2d_ext(xp, x, pool_type, kernel, stride, (ph, pw, ph, pw), False, count_include_pad, axes)


def global_pool2d(xp: Any, x: Any, pool_type: str) -> Any:
    """Max or mean over H and W of logical NCHW ``x``; the result is N x C x 1 x 1 (means sum in fp32)."""
    if pool_type == "max":
        return x.max(axis=(2, 3), keepdims=True)
    return xp.mean(x, axis=(2, 3), keepdims=True, dtype=np.float32).astype(x.dtype)


def pool_flops(x: Dims, output: Dims, kernel: Dims, global_pool: bool, pool_type: str) -> int:
    """Operations of one pooling pass: a compare or add per window cell (plus a multiply for averages)."""
    taps = x.h * x.w if global_pool else kernel.h * kernel.w
    return output.elements * (taps + (pool_type == "average"))


def onnx_ceil_agrees(size: int, kernel: int, stride: int, before: int, after: int) -> bool:
    """True when ONNX's ceil-mode size formula before opset 22 (which keeps a last window starting in the end
    padding, where onnxruntime and PyTorch drop it) gives LayerLab's size along this axis."""
    ours = pool_output_size_ext(size, kernel, stride, before, after, True)
    return ours == -(-(size + before + after - kernel) // stride) + 1


def ceil_as_floor_padding(size: int, kernel: int, stride: int, before: int, after: int) -> int:
    """The end padding with which floor rounding gives the windows ceil rounding gives along one axis of
    length ``size`` (``after`` itself, or more: what the extra window reads; always less than the kernel)."""
    out = pool_output_size_ext(size, kernel, stride, before, after, True)
    if out == pool_output_size_ext(size, kernel, stride, before, after, False):
        return after
    return (out - 1) * stride + kernel - size - before


def pool_onnx(g: Any, x: str, pool_type: str, k: Dims, s: Dims, p: Dims, global_pool: bool, count_include_pad: bool,
              padding_end: Dims | None = None, ceil_mode: bool = False, input_hw: tuple[int, int] | None = None) -> str:
    """ONNX MaxPool / AveragePool (or their Global forms) equal to these pooling parameters.

    ``input_hw``: the input's size when the export fixes it. ONNX's shape inference before opset 22 keeps a
    last ceil-mode window that starts in the end padding (onnxruntime drops it, as LayerLab does); for a fixed
    size where that happens, the ceil rounding is written as floor rounding with the end padding it reads, so
    that the file's sizes check (with an explicit zero Pad first for averages counting padded cells)."""
    if global_pool:
        return g.node("GlobalMaxPool" if pool_type == "max" else "GlobalAveragePool", [x])
    e = padding_end or p
    attrs: dict[str, Any] = dict(kernel_shape=[k.h, k.w], strides=[s.h, s.w], pads=[p.h, p.w, e.h, e.w])
    axes = [] if input_hw is None else list(zip(input_hw, (k.h, k.w), (s.h, s.w), (p.h, p.w), (e.h, e.w)))
    if ceil_mode and axes and not all(onnx_ceil_agrees(*axis) for axis in axes):
        ends = [ceil_as_floor_padding(*axis) for axis in axes]
        if pool_type == "average" and count_include_pad:
            x = g.node("Pad", [x, g.ints("pads", [0, 0, p.h, p.w, 0, 0, e.h, e.w])], "padded")
            attrs["pads"] = [0, 0, ends[0] - e.h, ends[1] - e.w]
            return g.node("AveragePool", [x], count_include_pad=0, **attrs)
        attrs["pads"] = [p.h, p.w, *ends]
    elif ceil_mode:
        attrs["ceil_mode"] = 1
    if pool_type == "max":
        return g.node("MaxPool", [x], **attrs)
    return g.node("AveragePool", [x], count_include_pad=int(count_include_pad), **attrs)


_AVG_EXCLUDE_PAD = """
def avg_pool_exclude_pad(x: torch.Tensor, kernel: tuple[int, int], stride: tuple[int, int],
                         padding: tuple[int, int]) -> torch.Tensor:
    \"\"\"Average pooling over the real (not padded) cells of each window, for paddings larger than half
    the kernel (which F.avg_pool2d refuses).\"\"\"
    pad = (padding[1], padding[1], padding[0], padding[0])
    total = F.avg_pool2d(F.pad(x, pad), kernel, stride)
    share = F.avg_pool2d(F.pad(torch.ones_like(x[:, :1]), pad), kernel, stride)
    return total / share
"""


_POOL_GENERAL = """
def pool2d_general(x: torch.Tensor, is_max: bool, kernel: tuple[int, int], stride: tuple[int, int],
                   pads: tuple[int, int, int, int], ceil_mode: bool, count_include_pad: bool) -> torch.Tensor:
    \"\"\"Max or average pooling with top, left, bottom, right pads and ONNX / PyTorch ceil rounding (the last
    window starts inside the input or the top/left padding), by explicit padding; averages divide by the
    cells of each window inside the input (or inside the input and its padding with count_include_pad).\"\"\"
    top, left, bottom, right = pads
    reach = []  # how far past the input the windows read, per axis
    for size, k, s, before, after in ((x.shape[2], kernel[0], stride[0], top, bottom),
                                      (x.shape[3], kernel[1], stride[1], left, right)):
        span = size + before + after - k
        out = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (out - 1) * s >= size + before:
            out -= 1
        reach.append((out - 1) * s + k - size - before)
    pad = (left, reach[1], top, reach[0])
    if is_max:
        return F.max_pool2d(F.pad(x, pad, value=-float("inf")), kernel, stride)
    total = F.avg_pool2d(F.pad(x, pad), kernel, stride)
    ones = torch.ones_like(x[:, :1])
    if count_include_pad:
        ones = F.pad(ones, (left, right, top, bottom), value=1.0)
        pad = (0, reach[1] - right, 0, reach[0] - bottom)
    return total / F.avg_pool2d(F.pad(ones, pad), kernel, stride)
"""


def pool_torch(t: Any, x: str, pool_type: str, k: Dims, s: Dims, p: Dims, global_pool: bool,
               count_include_pad: bool, padding_end: Dims | None = None, ceil_mode: bool = False) -> str:
    """PyTorch expression of these pooling parameters applied to ``x``. PyTorch pools pad at most half
    the kernel; larger paddings (allowed here up to kernel - 1) pad explicitly first, and so do
    asymmetric padding and ceil mode (``pool2d_general``)."""
    if global_pool:
        return f"torch.amax({x}, dim=(2, 3), keepdim=True)" if pool_type == "max" else \
            f"torch.mean({x}, dim=(2, 3), keepdim=True)"
    e = padding_end or p
    if ceil_mode or e != p:
        return (f"{t.helper('pool2d_general', _POOL_GENERAL)}({x}, {pool_type == 'max'}, ({k.h}, {k.w}), "
                f"({s.h}, {s.w}), ({p.h}, {p.w}, {e.h}, {e.w}), {bool(ceil_mode)}, {bool(count_include_pad)})")
    kernel, stride, padding = f"({k.h}, {k.w})", f"({s.h}, {s.w})", f"({p.h}, {p.w})"
    small = p.h <= k.h // 2 and p.w <= k.w // 2
    pad = f"({p.w}, {p.w}, {p.h}, {p.h})"
    if pool_type == "max":
        if small:
            return f"F.max_pool2d({x}, kernel_size={kernel}, stride={stride}, padding={padding})"
        return f"F.max_pool2d(F.pad({x}, {pad}, value=-float('inf')), kernel_size={kernel}, stride={stride})"
    if small:
        return (f"F.avg_pool2d({x}, kernel_size={kernel}, stride={stride}, padding={padding}, "
                f"count_include_pad={bool(count_include_pad)})")
    if count_include_pad:
        return f"F.avg_pool2d(F.pad({x}, {pad}), kernel_size={kernel}, stride={stride})"
    return f"{t.helper('avg_pool_exclude_pad', _AVG_EXCLUDE_PAD)}({x}, {kernel}, {stride}, {padding})"


#: parameters of a pooling (conv_pool takes them with a ``pool_`` prefix)
POOLING_PARAMS: tuple[ParamDesc, ...] = (
    ParamDesc("pool_type", "enum", "max", "maximum or mean of each window", enum_values=POOL_TYPES,
              main=True, legacy_names=("type", "mode")),
    ParamDesc("kernel_size", "dimension", Dims(1, 1, 2, 2), "window size", main=True, legacy_names=("kernel",)),
    ParamDesc("stride", "dimension", Dims(1, 1, 2, 2), "step between windows"),
    ParamDesc("padding", "dimension", Dims(1, 1, 0, 0), "padding on each side"),
    ParamDesc("global", "bool", False, "pool over the whole image", legacy_names=("global_pooling",)),
    ParamDesc("count_include_pad", "bool", False, "average pooling counts padded cells"),
    padding_end_param(),
    ParamDesc("ceil_mode", "bool", False, "round the output size up"),
)
