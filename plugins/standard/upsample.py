"""upsample: enlarge H and W by integer factors, nearest or bilinear (like torch.nn.Upsample)."""
from __future__ import annotations

from typing import Any

from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims

from .resize import Taps, axis_taps, device_taps, resample

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


DESC = LayerDesc(
    name="upsample",
    display_name="Upsample",
    summary="Enlarge H and W by integer factors with nearest or bilinear interpolation.",
    categories=("Resampling",),
    documentation=(
        "<p>Enlarges every channel: N x C x H x W becomes N x C x (H*Fh) x (W*Fw).</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), N x C x H x W.</p>"
        "<p><b>Parameters</b></p><ul>" + FACTOR_DOC + "</ul>"
        "<p>Example: with factor 2 and nearest, the row <code>[a, b]</code> becomes <code>[a, a, b, b]</code>; "
        "with bilinear it becomes <code>[a, 0.75a+0.25b, 0.25a+0.75b, b]</code>. "
        "For other factors, downscaling or align-corners use <b>resize</b>.</p>"
    ),
    inputs=(InputDesc("input", doc="tensor to enlarge"),),
    params=(
        ParamDesc("factor", "dimension", Dims(1, 1, 2, 2), "integer scale factors FhxFw", main=True),
        ParamDesc("method", "enum", "nearest", "interpolation", enum_values=UPSAMPLE_METHODS, main=True),
    ),
)


def check_factor(layer: Layer, param: str = "factor") -> None:
    """ParameterError unless the factor parameter is an integer pair in [1, 1024]."""
    f = layer.p[param]
    if not (1 <= f.h <= 1024 and 1 <= f.w <= 1024):
        raise layer.param_error(param, f"{f.h}x{f.w}: each factor must be an integer in [1, 1024]")


class Upsample(Layer):
    desc = DESC

    def validate(self) -> None:
        check_factor(self)

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        f = self.p["factor"]
        return Dims(x.n, x.c, x.h * f.h, x.w * f.w)

    def reshape(self, inputs: list[Dims | None], output: Dims) -> None:
        x = self.primary(inputs)
        f, m = self.p["factor"], self.p["method"]
        self._taps_h = upsample_taps(self.xp, x.h, output.h, f.h, m, self.cdtype)
        self._taps_w = upsample_taps(self.xp, x.w, output.w, f.w, m, self.cdtype)

    def forward(self, inputs: list[Any], out: Any) -> None:
        x = inputs[0]
        f = self.p["factor"]
        kernel = self.backend.kernel("upsample")
        if kernel is not None and kernel(x, out, (f.h, f.w), self.p["method"] == "bilinear", self.hw_axes == (1, 2)):
            self.activate_inplace(out)
            return
        y = resample(self.xp, self.physical(x), self._taps_h, self._taps_w, self.hw_axes)
        self.store_physical(out, self.activate_physical(y))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        f = self.p["factor"]
        return upsample_onnx(g, inputs[0], f, self.p["method"])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        f = self.p["factor"]
        return upsample_torch(inputs[0], f, self.p["method"])


LAYER = Upsample
