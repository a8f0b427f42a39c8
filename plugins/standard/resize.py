"""resize: resample H and W to a target size or by scale factors (nearest, bilinear, bicubic), like ONNX Resize.

Its maths (``axis_taps`` and ``resample``) is in ``_common_resample``, shared with upsample and the upscale_* layers."""
from __future__ import annotations

import math
from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims, Layout
from plugins.standard._common_resample import CUBIC_A, axis_taps, device_taps, resample

METHODS = ("nearest", "bilinear", "bicubic")
COORDINATE_MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel")
#: how nearest rounds a source position to a pixel (ONNX Resize nearest_mode); the first is the default
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def scaled_size(size: int, scale: float) -> int:
    """``floor(size * scale)``, where a product within 1e-6 of an integer counts as that integer."""
    return int(math.floor(size * scale + 1e-6))


_TORCH_GENERAL = """
def resize_general(x: torch.Tensor, size: tuple[int, int] | None, scale: tuple[float, float] | None, method: str,
                   coordinate_mode: str, nearest_mode: str, cubic_a: float, exclude_outside: bool) -> torch.Tensor:
    \"\"\"Resize as LayerLab and ONNX Resize compute it, for the coordinate modes, nearest roundings and cubic
    coefficients F.interpolate does not offer: output pixel o reads input position (o + 0.5) / scale - 0.5
    (half_pixel; pytorch_half_pixel: 0 when the output has 1 pixel), o / scale (asymmetric) or
    o * (in - 1) / (out - 1) (align_corners), then takes the nearest pixel or interpolates, edges extended
    (or, with exclude_outside, taps outside the input dropped and the weights renormalised).\"\"\"
    for axis in (2, 3):
        n_in = x.shape[axis]
        s = scale[axis - 2] if scale is not None else None
        n_out = size[axis - 2] if size is not None else int(math.floor(n_in * s + 1e-6))
        o = torch.arange(n_out, dtype=torch.float64)
        r = s if s is not None else n_out / n_in
        if coordinate_mode == "align_corners" or (coordinate_mode == "pytorch_half_pixel" and n_out == 1):
            pos = o * ((n_in - 1) / (n_out - 1)) if n_out > 1 else o * 0
        elif coordinate_mode == "asymmetric":
            pos = o / r
        else:
            pos = (o + 0.5) / r - 0.5
        if method == "nearest":
            index = {"round_prefer_floor": torch.ceil(pos - 0.5), "round_prefer_ceil": torch.floor(pos + 0.5),
                     "floor": torch.floor(pos), "ceil": torch.ceil(pos)}[nearest_mode]
            x = x.index_select(axis, torch.clamp(index, 0, n_in - 1).long().to(x.device))
            continue
        start = torch.floor(pos)
        t = pos - start
        if method == "bilinear":
            offsets, weights = (0, 1), [1 - t, t]
        else:
            def cubic(d: torch.Tensor) -> torch.Tensor:
                d, a = d.abs(), cubic_a
                near = ((a + 2) * d - (a + 3)) * d * d + 1
                far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
                return torch.where(d <= 1, near, torch.where(d < 2, far, torch.zeros_like(d)))
            offsets, weights = (-1, 0, 1, 2), [cubic(t + 1), cubic(t), cubic(1 - t), cubic(2 - t)]
        taps = [start + k for k in offsets]
        if exclude_outside:
            weights = [w * ((i >= 0) & (i <= n_in - 1)) for i, w in zip(taps, weights)]
            total = sum(weights)
            weights = [w / total for w in weights]
        shape = [1] * x.dim()
        shape[axis] = -1
        x = sum(x.index_select(axis, torch.clamp(i, 0, n_in - 1).long().to(x.device)) * w.to(x.dtype).view(shape)
                for i, w in zip(taps, weights))
    return x
"""

_TORCH_NEAREST = """
def resize_nearest(x: torch.Tensor, size: tuple[int, int] | None, scale: tuple[float, float] | None,
                   align_corners: bool) -> torch.Tensor:
    \"\"\"Nearest-neighbour resize as LayerLab and ONNX Resize (round_prefer_floor) compute it: output pixel o
    reads input position (o + 0.5) / scale - 0.5 (or o * (in - 1) / (out - 1) with align_corners), rounded
    half down and clamped to the edge.\"\"\"
    for axis in (2, 3):
        n_in = x.shape[axis]
        s = scale[axis - 2] if scale is not None else None
        n_out = size[axis - 2] if size is not None else int(math.floor(n_in * s + 1e-6))
        o = torch.arange(n_out, dtype=torch.float64)
        if align_corners:
            pos = o * ((n_in - 1) / (n_out - 1)) if n_out > 1 else o * 0
        else:
            pos = (o + 0.5) / (s if s is not None else n_out / n_in) - 0.5
        index = torch.clamp(torch.ceil(pos - 0.5), 0, n_in - 1).long().to(x.device)
        x = x.index_select(axis, index)
    return x
"""


DESC = LayerDesc(
    name="resize",
    display_name="Resize",
    summary="Resample H and W to a target size or by scale factors: nearest, bilinear or bicubic.",
    categories=(Category.RESAMPLING,),
    documentation=(
        "<p>Resamples every channel to a new height and width, as ONNX <code>Resize</code> does. Each output "
        "pixel <code>o</code> is mapped to a position <code>x</code> in the input, then interpolated:</p>"
        "<ul><li><b>coordinate_mode</b> <code>half_pixel</code> (default): <code>x = (o + 0.5) / s - 0.5</code>, "
        "where <code>s</code> is the scale factor when resizing by factors, or <code>out/in</code> when "
        "resizing to a size (PyTorch <code>align_corners=False</code>).</li>"
        "<li><code>align_corners</code>: <code>x = o * (in - 1) / (out - 1)</code> (0 when out = 1): the centres "
        "of the corner pixels stay in place (PyTorch <code>align_corners=True</code>).</li>"
        "<li><code>asymmetric</code>: <code>x = o / s</code> (PyTorch <code>nearest</code>, TensorFlow 1 "
        "resizing).</li>"
        "<li><code>pytorch_half_pixel</code>: as half_pixel, but 0 when the output has one pixel (what the "
        "PyTorch ONNX exporter writes for <code>align_corners=False</code>).</li></ul>"
        "<p><b>mode</b>: <code>nearest</code> takes the pixel at <code>x</code> rounded as <b>nearest_mode</b> "
        "says; <code>bilinear</code> (default) interpolates linearly between the 2 nearest pixels per axis; "
        "<code>bicubic</code> uses 4 pixels per axis with the cubic kernel of coefficient <b>cubic_coeff_a</b>. "
        "Positions outside the input take the edge pixel (unless <b>exclude_outside</b>).</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), N x C x H x W.</p>"
        "<p><b>Parameters</b></p><ul>"
        "<li><b>mode</b>: nearest, bilinear or bicubic; default bilinear.</li>"
        "<li><b>coordinate_mode</b>: half_pixel, align_corners, asymmetric or pytorch_half_pixel; default "
        "half_pixel.</li>"
        "<li><b>nearest_mode</b>: how nearest rounds <code>x</code>: <code>round_prefer_floor</code> (default: to "
        "the nearest pixel, halves down), <code>round_prefer_ceil</code> (halves up), <code>floor</code> or "
        "<code>ceil</code>, as ONNX Resize. PyTorch <code>nearest</code> is asymmetric + floor; "
        "<code>nearest-exact</code> is half_pixel + round_prefer_ceil.</li>"
        "<li><b>cubic_coeff_a</b>: coefficient A of the bicubic kernel, default -0.75 (ONNX, PyTorch); "
        "TensorFlow uses -0.5. In [-1, 0].</li>"
        "<li><b>exclude_outside</b>: bicubic taps that fall outside the input get weight 0 and the others are "
        "renormalised (ONNX <code>exclude_outside</code>, TensorFlow's bicubic); default false (edge pixels are "
        "repeated). For bilinear it changes nothing.</li>"
        "<li><b>size</b>: target HxW (a single number for a square); default 0, meaning "
        "<i>use the scale factors</i>. Both sizes must be given, or neither.</li>"
        "<li><b>scale_h</b>, <b>scale_w</b>: scale factors used when <b>size</b> is 0, in [0.01, 1024], "
        "default 2. The output is <code>floor(H * scale_h)</code> x <code>floor(W * scale_w)</code> and must "
        "be at least 1x1.</li></ul>"
        "<p>Example: 1x3x5x7 with scale 2 gives 1x3x10x14; with size 8x8 it gives 1x3x8x8.</p>"
    ),
    inputs=(InputDesc("input", doc="tensor to resample"),),
    params=(
        ParamDesc("mode", "enum", "bilinear", "interpolation", enum_values=METHODS, main=True),
        ParamDesc("coordinate_mode", "enum", "half_pixel", "how output pixels map to input positions",
                  enum_values=COORDINATE_MODES),
        ParamDesc("size", "dimension", Dims(1, 1, 0, 0), "target HxW; 0 = use the scale factors", main=True),
        ParamDesc("scale_h", "float", 2.0, "height scale factor (when size is 0)", min=0.01, max=1024.0),
        ParamDesc("scale_w", "float", 2.0, "width scale factor (when size is 0)", min=0.01, max=1024.0),
        ParamDesc("nearest_mode", "enum", NEAREST_MODES[0], "rounding of nearest", enum_values=NEAREST_MODES),
        ParamDesc("cubic_coeff_a", "float", CUBIC_A, "bicubic kernel coefficient A", min=-1.0, max=0.0),
        ParamDesc("exclude_outside", "bool", False, "drop taps outside the input and renormalise"),
    ),
)


class Resize(Layer):
    desc = DESC

    def validate(self) -> None:
        size = self.p["size"]
        if (size.h == 0) != (size.w == 0):
            raise self.param_error("size", f"{size.h}x{size.w}: give both the height and the width, "
                                           "or 0 to resize by scale_h and scale_w")

    @property
    def by_factors(self) -> bool:
        return self.p["size"].h == 0

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        if not self.by_factors:
            return Dims(x.n, x.c, self.p["size"].h, self.p["size"].w)
        h, w = scaled_size(x.h, self.p["scale_h"]), scaled_size(x.w, self.p["scale_w"])
        if h < 1 or w < 1:
            raise self.shape_error(f"scaling the input {x.h}x{x.w} by {self.p['scale_h']:g}x{self.p['scale_w']:g} "
                                   f"gives {h}x{w}; the output must be at least 1x1")
        return Dims(x.n, x.c, h, w)

    def reshape(self, inputs: list[Dims | None], output: Dims) -> None:
        x = self.primary(inputs)
        mode, coords = self.p["mode"], self.p["coordinate_mode"]
        sh = self.p["scale_h"] if self.by_factors else None
        sw = self.p["scale_w"] if self.by_factors else None
        extra = dict(nearest_mode=self.p["nearest_mode"], cubic_a=self.p["cubic_coeff_a"],
                     exclude_outside=self.p["exclude_outside"])
        self._taps_h = device_taps(self.xp, axis_taps(x.h, output.h, mode, coords, sh, **extra), self.cdtype)
        self._taps_w = device_taps(self.xp, axis_taps(x.w, output.w, mode, coords, sw, **extra), self.cdtype)

    def forward(self, inputs: list[Any], out: Any) -> None:
        x = inputs[0]
        kernel = self.backend.kernel("resize_taps") if self.activation is None else None
        if kernel is not None and x.ndim == 4 and kernel(x, out, self._taps_h, self._taps_w,
                                                         self.fmt.layout is Layout.NHWC) is not None:
            return
        y = resample(self.xp, self.nchw(x), self._taps_h, self._taps_w)
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        mode, coords = self.p["mode"], self.p["coordinate_mode"]
        attrs: dict[str, Any] = dict(mode={"nearest": "nearest", "bilinear": "linear", "bicubic": "cubic"}[mode],
                                     coordinate_transformation_mode=coords)
        if mode == "nearest":
            attrs["nearest_mode"] = self.p["nearest_mode"]
        if mode == "bicubic":  # (bilinear: exclude_outside equals edge clamping, and ONNX Runtime refuses it)
            attrs.update(cubic_coeff_a=float(self.p["cubic_coeff_a"]), exclude_outside=int(self.p["exclude_outside"]))
        if self.by_factors:
            scales = g.const("scales", [1.0, 1.0, self.p["scale_h"], self.p["scale_w"]])
            return g.node("Resize", [inputs[0], None, scales], **attrs)
        size = self.p["size"]
        sizes = g.node("Concat", [g.shape(inputs[0], 0, 2, "batch_channels"), g.ints("size", [size.h, size.w])],
                       "sizes", axis=0)
        return g.node("Resize", [inputs[0], None, None, sizes], **attrs)

    @property
    def _interpolate_matches(self) -> bool:
        """True when F.interpolate (or the nearest helper) computes exactly this resize."""
        p = self.p
        if p["coordinate_mode"] not in ("half_pixel", "align_corners"):
            return False
        if p["mode"] == "nearest":
            return p["nearest_mode"] == "round_prefer_floor"
        return not p["exclude_outside"] and (p["mode"] == "bilinear" or p["cubic_coeff_a"] == CUBIC_A)

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        mode, align = self.p["mode"], self.p["coordinate_mode"] == "align_corners"
        size = self.p["size"]
        if not self._interpolate_matches:
            sizes = "None" if self.by_factors else f"({size.h}, {size.w})"
            scales = f"({float(self.p['scale_h'])!r}, {float(self.p['scale_w'])!r})" if self.by_factors else "None"
            return (f"{t.helper('resize_general', _TORCH_GENERAL)}({inputs[0]}, {sizes}, {scales}, {mode!r}, "
                    f"{self.p['coordinate_mode']!r}, {self.p['nearest_mode']!r}, {float(self.p['cubic_coeff_a'])!r}, "
                    f"{bool(self.p['exclude_outside'])})")
        target = f"size=({size.h}, {size.w})" if not self.by_factors else \
            f"scale_factor=({float(self.p['scale_h'])!r}, {float(self.p['scale_w'])!r})"
        if mode == "nearest":
            sizes = "None" if self.by_factors else f"({size.h}, {size.w})"
            scales = f"({float(self.p['scale_h'])!r}, {float(self.p['scale_w'])!r})" if self.by_factors else "None"
            return f"{t.helper('resize_nearest', _TORCH_NEAREST)}({inputs[0]}, {sizes}, {scales}, {align})"
        return f"F.interpolate({inputs[0]}, {target}, mode={mode!r}, align_corners={align})"


LAYER = Resize
