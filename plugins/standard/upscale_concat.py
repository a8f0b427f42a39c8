"""upscale_concat: upsample input 0 to the size of input 1, then concatenate their channels (U-Net decoder step).
"""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc
from engine.tensor import Dims
from plugins.standard._common_resample import UPSCALE_DOC, UPSCALE_PARAMS, UpscaleLayer, upscale_concat

DESC = LayerDesc(
    name="upscale_concat",
    display_name="Upscale + Concat",
    summary="Upsample input 0 to input 1's size and concatenate the channels of both.",
    categories=(Category.RESAMPLING, Category.MERGE),
    documentation=(
        "<p>A decoder step of a U-Net: <code>y = concat(upsample(input 0), input 1)</code> along channels, "
        "the upsampled channels first. N x C0 x H0 x W0 and N x C1 x H1 x W1 give N x (C0+C1) x H1 x W1.</p>"
        + UPSCALE_DOC +
        "<p><b>Inputs</b>: <b>input</b> (primary): the coarse tensor; <b>skip</b> (primary): the tensor whose "
        "size the result takes.</p>"
        "<p>Example: factor 2, input 0 1x64x8x8 and input 1 1x32x16x16 give 1x96x16x16; with input 1 "
        "1x32x15x15 the upsampled 16x16 is cropped to 15x15 and the result is 1x96x15x15.</p>"
    ),
    inputs=(InputDesc("input", doc="coarse tensor, upsampled"), InputDesc("skip", doc="skip connection")),
    params=UPSCALE_PARAMS,
)


class UpscaleConcat(UpscaleLayer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        t = self.target_dims(inputs)
        return Dims(t.n, inputs[0].c + t.c, t.h, t.w)  # type: ignore[union-attr]

    def forward(self, inputs: list[Any], out: Any) -> None:
        x, skip, f = inputs[0], inputs[1], self.p["factor"]
        d, s = self.input_dims[0], self.input_dims[1]
        exact = d is not None and s is not None and (d.h * f.h, d.w * f.w) == (s.h, s.w)
        kernel = self.backend.kernel("upsample_concat") if exact else None
        if kernel is not None and kernel(x, skip, out, (f.h, f.w), self.p["method"] == "bilinear", self.hw_axes == (1, 2)):
            self.activate_inplace(out)
            return
        y = upscale_concat(self.xp, self.nchw(inputs[0]), [self.nchw(inputs[1])], self._taps_h, self._taps_w)
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("Concat", [self.upscaled_onnx(g, inputs), inputs[1]], axis=1)

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return f"torch.cat([{self.upscaled_torch(t, inputs)}, {inputs[1]}], dim=1)"


LAYER = UpscaleConcat
