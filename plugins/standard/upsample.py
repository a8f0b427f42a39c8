"""upsample: enlarge H and W by integer factors, nearest or bilinear (like torch.nn.Upsample)."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims
from plugins.standard._common_resample import (
    FACTOR_DOC,
    UPSAMPLE_METHODS,
    check_factor,
    resample,
    upsample_onnx,
    upsample_taps,
    upsample_torch,
)

DESC = LayerDesc(
    name="upsample",
    display_name="Upsample",
    summary="Enlarge H and W by integer factors with nearest or bilinear interpolation.",
    categories=(Category.RESAMPLING,),
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
