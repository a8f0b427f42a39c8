"""Shared by the resampling layers (resize, upsample, upscale_concat, upscale_concat_two, upscale_sum): the
resampling maths (``axis_taps``, ``resample``), upsampling by integer factors, and the upscale layers' base
``UpscaleLayer`` with its parameter descriptors."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.descriptors import ParamDesc
from engine.layer import Layer
from engine.tensor import Dims

CUBIC_A = -0.75  # Keys cubic coefficient, as ONNX Resize (cubic_coeff_a) and PyTorch bicubic (TensorFlow: -0.5)


@dataclass(frozen=True)
class Taps:
    """A 1-D resampling: ``index`` (taps, out) source positions and ``weight`` (taps, out), or None
    for nearest (a pure gather)."""

    index: Any
    weight: Any | None


def source_coordinates(in_size: int, out_size: int, coordinate_mode: str, scale: float | None = None) -> np.ndarray:
    """Position in the input (in pixels, 0 = centre of the first one) of every output pixel.

    half_pixel: ``(o + 0.5) / scale - 0.5`` with ``scale`` = the given factor, or out/in when None.
    pytorch_half_pixel: the same, but 0 when out = 1.
    asymmetric: ``o / scale`` (PyTorch nearest, TensorFlow 1 without half-pixel centres).
    align_corners: ``o * (in - 1) / (out - 1)`` (0 when out = 1), so the corner pixels coincide."""
    o = np.arange(out_size, dtype=np.float64)
    if coordinate_mode == "align_corners" or (coordinate_mode == "pytorch_half_pixel" and out_size == 1):
        return o * ((in_size - 1) / (out_size - 1)) if out_size > 1 else np.zeros(out_size)
    s = float(scale) if scale is not None else out_size / in_size
    if coordinate_mode == "asymmetric":
        return o / s
    return (o + 0.5) / s - 0.5


def _cubic(t: np.ndarray, a: float = CUBIC_A) -> np.ndarray:
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def nearest_index(x: np.ndarray, nearest_mode: str) -> np.ndarray:
    """Source positions ``x`` rounded to pixels as ONNX Resize's ``nearest_mode`` says (not yet clamped)."""
    if nearest_mode == "round_prefer_ceil":
        return np.floor(x + 0.5)
    if nearest_mode == "floor":
        return np.floor(x)
    if nearest_mode == "ceil":
        return np.ceil(x)
    return np.ceil(x - 0.5)  # round_prefer_floor


def axis_taps(in_size: int, out_size: int, method: str, coordinate_mode: str = "half_pixel",
              scale: float | None = None, nearest_mode: str = "round_prefer_floor", cubic_a: float = CUBIC_A,
              exclude_outside: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Host source indices and weights, each (taps, out_size), of a 1-D resampling.

    nearest rounds as ``nearest_mode`` (default half down, ONNX ``round_prefer_floor``); bilinear uses 2 taps,
    bicubic 4 taps with coefficient ``cubic_a``. Positions outside the input take the edge pixel (indices are
    clamped), unless ``exclude_outside``: then taps outside the input get weight 0 and the others are
    renormalised (ONNX ``exclude_outside``, TensorFlow's bicubic)."""
    x = source_coordinates(in_size, out_size, coordinate_mode, scale)
    if method == "nearest":
        idx = np.clip(nearest_index(x, nearest_mode), 0, in_size - 1).astype(np.int64)
        return idx[None], None
    x0 = np.floor(x)
    t = x - x0
    if method == "bilinear":
        offsets, weights = (0, 1), [1.0 - t, t]
    else:
        offsets, weights = (-1, 0, 1, 2), [_cubic(d, cubic_a) for d in (t + 1, t, 1 - t, 2 - t)]
    raw = np.stack([x0 + k for k in offsets])
    wts = np.stack(weights)
    if exclude_outside:
        wts = np.where((raw >= 0) & (raw <= in_size - 1), wts, 0.0)
        wts = wts / wts.sum(axis=0, keepdims=True)
    return np.clip(raw, 0, in_size - 1).astype(np.int64), wts


def device_taps(xp: Any, taps: tuple[np.ndarray, np.ndarray | None], dtype: Any) -> Taps:
    """``axis_taps`` output moved to the backend (indices int64, weights in ``dtype``)."""
    idx, wts = taps
    return Taps(xp.asarray(idx), None if wts is None else xp.asarray(wts.astype(dtype)))


def resample(xp: Any, x: Any, taps_h: Taps, taps_w: Taps, axes: tuple[int, int] = (2, 3)) -> Any:
    """Separable resampling: along the H axis with ``taps_h``, then the W axis with ``taps_w`` (``axes``
    (2, 3) for NCHW arrays, (1, 2) for NHWC).

    A loop over the taps (1, 2 or 4), each a gather of whole rows or columns."""
    for axis, taps in ((axes[0], taps_h), (axes[1], taps_w)):
        if taps.weight is None:
            x = xp.take(x, taps.index[0], axis=axis)
            continue
        shape = [1] * x.ndim
        shape[axis] = -1
        acc = None
        for k in range(taps.index.shape[0]):
            term = xp.take(x, taps.index[k], axis=axis) * taps.weight[k].reshape(shape)
            acc = term if acc is None else acc + term
        x = acc
    return x


UPSAMPLE_METHODS = ("nearest", "bilinear")


def upsample_taps(xp: Any, in_size: int, out_size: int, factor: int, method: str, dtype: Any) -> Taps:
    """Taps of an upsampling by ``factor`` along one axis, producing ``out_size`` pixels.

    Coordinates are half_pixel with the factor as the scale, so nearest repeats each pixel ``factor``
    times and bilinear matches ``torch.nn.Upsample(mode='bilinear', align_corners=False)``. Output
    pixels beyond ``in_size * factor`` take the edge value."""
    return device_taps(xp, axis_taps(in_size, out_size, method, "half_pixel", float(factor)), dtype)


FACTOR_DOC = ("<li><b>factor</b>: integer scale factors FhxFw (a single number for both), each in [1, 1024]; "
              "default 2x2.</li>"
              "<li><b>method</b>: <code>nearest</code> (default) repeats every pixel Fh x Fw times; "
              "<code>bilinear</code> interpolates with half-pixel centres: output pixel <code>o</code> reads input "
              "position <code>(o + 0.5) / F - 0.5</code>, edge pixels extended (like ONNX Resize "
              "<code>half_pixel</code> and PyTorch <code>align_corners=False</code>).</li>")

def upsample_onnx(g: Any, x: str, factor: Dims, method: str, suffix: str = "") -> str:
    """ONNX Resize by integer factors with half-pixel centres (nearest repeats pixels)."""
    scales = g.const(f"{suffix}scales" if suffix else "scales", [1.0, 1.0, float(factor.h), float(factor.w)])
    attrs: dict[str, Any] = {"mode": "linear"} if method == "bilinear" else {"mode": "nearest",
                                                                             "nearest_mode": "round_prefer_floor"}
    return g.node("Resize", [x, None, scales], suffix, coordinate_transformation_mode="half_pixel", **attrs)


def upsample_torch(x: str, factor: Dims, method: str) -> str:
    """PyTorch expression upsampling ``x`` by integer factors (torch.nn.Upsample semantics)."""
    extra = ", align_corners=False" if method == "bilinear" else ""
    return f"F.interpolate({x}, scale_factor=({factor.h}, {factor.w}), mode={method!r}{extra})"


def check_factor(layer: Layer, param: str = "factor") -> None:
    """ParameterError unless the factor parameter is rank 4 with an integer H and W in [1, 1024]."""
    f = layer.p[param]
    if len(f) != 4:
        raise layer.param_error(param, f"{f}: the factor is four sizes NxCxHxW (only H and W are used), got {len(f)}")
    if not (1 <= f.h <= 1024 and 1 <= f.w <= 1024):
        raise layer.param_error(param, f"{f.h}x{f.w}: each factor must be an integer in [1, 1024]")


UPSCALE_PARAMS = (
    ParamDesc("factor", "dimension", Dims(1, 1, 2, 2), "integer factors input 0 is upsampled by", main=True),
    ParamDesc("method", "enum", "nearest", "interpolation", enum_values=UPSAMPLE_METHODS, main=True),
)

UPSCALE_DOC = (
    "<p>Input 0 is upsampled by the integer <b>factor</b> (as the <b>upsample</b> layer does) and then "
    "made exactly as large as input 1: extra rows/columns at the bottom/right are dropped, missing ones repeat "
    "the last row/column. So input 0's height must be <code>floor(H1/Fh)</code> or <code>ceil(H1/Fh)</code> "
    "(likewise the width), which covers skip connections of odd size. Both inputs must have the same N.</p>"
    "<p><b>Parameters</b></p><ul>" + FACTOR_DOC + "</ul>"
)


def upscale_concat(xp: Any, x: Any, skips: list[Any], taps_h: Taps, taps_w: Taps) -> Any:
    """Channels of upscaled ``x`` followed by the channels of each skip tensor, in order.

    The taps (``upsample_taps`` to the skip size) already hold the crop or edge extension."""
    return xp.concatenate([resample(xp, x, taps_h, taps_w), *skips], axis=1)


_TORCH_UPSCALE = """
def upscale_to(x: torch.Tensor, like: torch.Tensor, factor: tuple[int, int], mode: str) -> torch.Tensor:
    \"\"\"x upsampled by ``factor`` then made as large as ``like``: the last rows/columns repeat where it is
    smaller, extra ones are dropped where it is larger.\"\"\"
    extra = {"align_corners": False} if mode == "bilinear" else {}
    y = F.interpolate(x, scale_factor=factor, mode=mode, **extra)
    grow_h, grow_w = max(like.shape[2] - y.shape[2], 0), max(like.shape[3] - y.shape[3], 0)
    if grow_h or grow_w:
        y = F.pad(y, (0, grow_w, 0, grow_h), mode="replicate")
    return y[:, :, :like.shape[2], :like.shape[3]]
"""


class UpscaleLayer(Layer):
    """A layer that upsamples input 0 to the spatial size of input 1 (which it then combines with)."""

    def validate(self) -> None:
        check_factor(self)

    def target_dims(self, inputs: list[Dims | None]) -> Dims:
        """Input 1's dimensions, after checking input 0 can be upscaled to them."""
        x, skip = inputs[0], inputs[1]
        assert x is not None and skip is not None
        if x.n != skip.n:
            raise self.shape_error(f"input 0 ({x}) and input 1 ({skip}) have different batch sizes N ({x.n} vs {skip.n})")
        f = self.p["factor"]
        if self.fused and (x.h * f.h, x.w * f.w) != (skip.h, skip.w):
            raise self.shape_error(
                f"this layer joins an upsample and a concatenation (fusing rule): input 0 ({x}) upsampled by "
                f"{f.h}x{f.w} is {x.h * f.h}x{x.w * f.w}, input 1 ({skip}) is {skip.h}x{skip.w}; the concatenation "
                "joins along C, so H and W must be equal")
        for axis, a, b, k in (("H", x.h, skip.h, f.h), ("W", x.w, skip.w, f.w)):
            lo, hi = b // k, -(-b // k)
            if a not in (lo, hi):
                need = str(hi) if lo in (0, hi) else f"{lo} or {hi}"
                raise self.shape_error(
                    f"input 0 ({x}) upsampled by {f.h}x{f.w} is {x.h * f.h}x{x.w * f.w}, too far from input 1 ({skip}): "
                    f"input 0 must have {axis} = {need} to be cropped or edge-extended to {axis} = {b}")
        return skip

    def reshape(self, inputs: list[Dims | None], output: Dims) -> None:
        x, skip = inputs[0], inputs[1]
        assert x is not None and skip is not None
        f, m = self.p["factor"], self.p["method"]
        self._taps_h = upsample_taps(self.xp, x.h, skip.h, f.h, m, self.cdtype)
        self._taps_w = upsample_taps(self.xp, x.w, skip.w, f.w, m, self.cdtype)

    def upscaled_onnx(self, g: Any, inputs: list[str | None]) -> str:
        """ONNX nodes upsampling input 0 by the factor, then making it input 1's size: edge rows/columns
        repeated where it is smaller, cropped where larger (sizes read at run time)."""
        up = upsample_onnx(g, inputs[0], self.p["factor"], self.p["method"], "upsample")  # type: ignore[arg-type]
        target = g.shape(inputs[1], 2, 4, "target")
        missing = g.node("Sub", [target, g.shape(up, 2, 4, "upsampled")], "missing")
        grow = g.node("Max", [missing, g.ints("zero", [0, 0])], "grow")
        pads = g.node("Concat", [g.ints("pads_before", [0, 0, 0, 0, 0, 0]), grow], "pads", axis=0)
        extended = g.node("Pad", [up, pads], "extended", mode="edge")
        return g.node("Slice", [extended, g.ints("starts", [0, 0]), target, g.ints("axes", [2, 3])], "fitted")

    def upscaled_torch(self, t: Any, inputs: list[str | None]) -> str:
        """PyTorch expression of input 0 upsampled and fitted to input 1's size."""
        f, m = self.p["factor"], self.p["method"]
        return f"{t.helper('upscale_to', _TORCH_UPSCALE)}({inputs[0]}, {inputs[1]}, ({f.h}, {f.w}), {m!r})"
