"""Shared by the pooling layers (pooling, conv_pool): the pooling maths, its exporters and its parameter
descriptors."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.descriptors import ParamDesc
from engine.tensor import Dims
from plugins.standard._common_conv import conv_output_size

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


def pool_shape_problem(h: int, w: int, kernel: Dims, padding: Dims, what: str = "input") -> str | None:
    """Message when the kernel does not fit the padded input (``what`` names that input), else None."""
    ph, pw = h + 2 * padding.h, w + 2 * padding.w
    if kernel.h <= ph and kernel.w <= pw:
        return None
    k = str(kernel.h) if kernel.h == kernel.w else f"{kernel.h}x{kernel.w}"
    p = str(ph) if ph == pw and kernel.h == kernel.w else f"{ph}x{pw}"
    return f"kernel {k} is larger than the padded {what} {p}"


def _valid_counts(size: int, out: int, kernel: int, stride: int, padding: int) -> np.ndarray:
    """How many real (not padded) cells each output window covers along one axis."""
    start = np.arange(out) * stride - padding
    return (np.minimum(start + kernel, size) - np.maximum(start, 0)).astype(np.float64)


def pool2d(xp: Any, x: Any, pool_type: str, kernel: tuple[int, int], stride: tuple[int, int],
           padding: tuple[int, int], count_include_pad: bool = False, axes: tuple[int, int] = (2, 3)) -> Any:
    """Pooling of ``x`` over KhxKw windows of its H and W ``axes`` ((2, 3) for NCHW, (1, 2) for NHWC),
    a loop over kernel taps.

    Max pooling pads with -inf; average pooling pads with zeros and divides by the window size
    (``count_include_pad``) or by the number of real cells in the window."""
    ah, aw = axes
    h, w = x.shape[ah], x.shape[aw]
    kh, kw = kernel
    sh, sw = stride
    ph, pw = padding
    ho, wo = pool_output_size(h, kh, sh, ph), pool_output_size(w, kw, sw, pw)
    is_max = pool_type == "max"

    def window(hs: slice, ws: slice) -> tuple[slice, ...]:
        index = [slice(None)] * x.ndim
        index[ah], index[aw] = hs, ws
        return tuple(index)

    if ph or pw:
        shape = list(x.shape)
        shape[ah], shape[aw] = h + 2 * ph, w + 2 * pw
        xpad = xp.full(tuple(shape), -np.inf if is_max else 0, dtype=x.dtype)
        xpad[window(slice(ph, ph + h), slice(pw, pw + w))] = x
    else:
        xpad = x
    acc = None
    for i in range(kh):
        for j in range(kw):
            tap = xpad[window(slice(i, i + sh * (ho - 1) + 1, sh), slice(j, j + sw * (wo - 1) + 1, sw))]
            if acc is None:
                acc = tap.copy()
            elif is_max:
                xp.maximum(acc, tap, out=acc)
            else:
                acc += tap
    if is_max:
        return acc
    if count_include_pad or not (ph or pw):
        acc *= acc.dtype.type(1.0 / (kh * kw))
    else:
        counts = np.outer(_valid_counts(h, ho, kh, sh, ph), _valid_counts(w, wo, kw, sw, pw))
        shape = [1] * x.ndim
        shape[ah], shape[aw] = ho, wo
        acc *= xp.asarray((1.0 / counts).astype(acc.dtype).reshape(shape))
    return acc


def global_pool2d(xp: Any, x: Any, pool_type: str) -> Any:
    """Max or mean over H and W of logical NCHW ``x``; the result is N x C x 1 x 1 (means sum in fp32)."""
    if pool_type == "max":
        return x.max(axis=(2, 3), keepdims=True)
    return xp.mean(x, axis=(2, 3), keepdims=True, dtype=np.float32).astype(x.dtype)


def pool_flops(x: Dims, output: Dims, kernel: Dims, global_pool: bool, pool_type: str) -> int:
    """Operations of one pooling pass: a compare or add per window cell (plus a multiply for averages)."""
    taps = x.h * x.w if global_pool else kernel.h * kernel.w
    return output.elements * (taps + (pool_type == "average"))


def pool_onnx(g: Any, x: str, pool_type: str, k: Dims, s: Dims, p: Dims, global_pool: bool, count_include_pad: bool) -> str:
    """ONNX MaxPool / AveragePool (or their Global forms) equal to these pooling parameters."""
    if global_pool:
        return g.node("GlobalMaxPool" if pool_type == "max" else "GlobalAveragePool", [x])
    attrs: dict[str, Any] = dict(kernel_shape=[k.h, k.w], strides=[s.h, s.w], pads=[p.h, p.w, p.h, p.w])
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


def pool_torch(t: Any, x: str, pool_type: str, k: Dims, s: Dims, p: Dims, global_pool: bool,
               count_include_pad: bool) -> str:
    """PyTorch expression of these pooling parameters applied to ``x``. PyTorch pools pad at most half
    the kernel; larger paddings (allowed here up to kernel - 1) pad explicitly first."""
    if global_pool:
        return f"torch.amax({x}, dim=(2, 3), keepdim=True)" if pool_type == "max" else \
            f"torch.mean({x}, dim=(2, 3), keepdim=True)"
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
)
