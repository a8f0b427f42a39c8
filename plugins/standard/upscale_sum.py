"""upscale_sum: upsample input 0 to input 1's size and add input 1 (FPN-style top-down merge)."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc
from engine.tensor import Dims
from plugins.standard._common_resample import UPSCALE_DOC, UPSCALE_PARAMS, Taps, UpscaleLayer, resample


def upscale_sum(xp: Any, x: Any, skip: Any, taps_h: Taps, taps_w: Taps) -> Any:
    """Upscaled ``x`` plus ``skip`` (same channels)."""
    return resample(xp, x, taps_h, taps_w) + skip


DESC = LayerDesc(
    name="upscale_sum",
    display_name="Upscale + Sum",
    summary="Upsample input 0 to input 1's size and add input 1.",
    categories=(Category.RESAMPLING, Category.MERGE),
    documentation=(
        "<p><code>y = upsample(input 0) + input 1</code>: N x C x H0 x W0 and N x C x H1 x W1 give "
        "N x C x H1 x W1 (a feature-pyramid top-down merge, or adding a residual computed at low resolution). "
        "Both inputs must have the same number of channels.</p>"
        + UPSCALE_DOC +
        "<p><b>Inputs</b> (both primary): <b>input</b>: the coarse tensor; <b>skip</b>: the tensor it is added "
        "to, whose size the result takes.</p>"
        "<p>Example: factor 2 and nearest, input 0 <code>[[1, 2]]</code> (1x1x1x2) and input 1 of ones "
        "(1x1x2x4) give <code>[[2, 2, 3, 3], [2, 2, 3, 3]]</code>.</p>"
    ),
    inputs=(InputDesc("input", doc="coarse tensor, upsampled"), InputDesc("skip", doc="tensor added")),
    params=UPSCALE_PARAMS,
)


class UpscaleSum(UpscaleLayer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        t = self.target_dims(inputs)
        x = self.primary(inputs)
        if x.c != t.c:
            raise self.shape_error(f"input 0 ({x}) and input 1 ({t}) must have the same number of channels "
                                   f"({x.c} vs {t.c})")
        return t

    def forward(self, inputs: list[Any], out: Any) -> None:
        y = upscale_sum(self.xp, self.nchw(inputs[0]), self.nchw(inputs[1]), self._taps_h, self._taps_w)
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("Add", [self.upscaled_onnx(g, inputs), inputs[1]])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return f"{self.upscaled_torch(t, inputs)} + {inputs[1]}"


LAYER = UpscaleSum
