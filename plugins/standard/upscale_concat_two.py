"""upscale_concat_two: upsample input 0 to input 1's size and concatenate it with two skip tensors."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc
from engine.tensor import Dims
from plugins.standard._common_resample import UPSCALE_DOC, UPSCALE_PARAMS, UpscaleLayer, upscale_concat

DESC = LayerDesc(
    name="upscale_concat_two",
    display_name="Upscale + Concat (two skips)",
    summary="Upsample input 0 to input 1's size and concatenate it with inputs 1 and 2.",
    categories=(Category.RESAMPLING, Category.MERGE),
    documentation=(
        "<p><code>y = concat(upsample(input 0), input 1, input 2)</code> along channels, in that order: "
        "N x C0 x H0 x W0, N x C1 x H1 x W1 and N x C2 x H1 x W1 give N x (C0+C1+C2) x H1 x W1. Inputs 1 and 2 "
        "must have the same N, H and W.</p>"
        + UPSCALE_DOC +
        "<p><b>Inputs</b> (all primary): <b>input</b>: the coarse tensor; <b>skip</b>: the tensor whose size the "
        "result takes; <b>skip2</b>: a second tensor of that size (e.g. a guide image or a second encoder).</p>"
        "<p>Example: factor 2, inputs 1x64x8x8, 1x32x16x16 and 1x3x16x16 give 1x99x16x16.</p>"
    ),
    inputs=(InputDesc("input", doc="coarse tensor, upsampled"), InputDesc("skip", doc="first skip connection"),
            InputDesc("skip2", doc="second skip connection")),
    params=UPSCALE_PARAMS,
)


class UpscaleConcatTwo(UpscaleLayer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        t = self.target_dims(inputs)
        s2 = inputs[2]
        assert s2 is not None
        if (s2.n, s2.h, s2.w) != (t.n, t.h, t.w):
            raise self.shape_error(f"input 2 ({s2}) must have the same N, H and W as input 1 ({t})")
        return Dims(t.n, inputs[0].c + t.c + s2.c, t.h, t.w)  # type: ignore[union-attr]

    def forward(self, inputs: list[Any], out: Any) -> None:
        skips = [self.nchw(inputs[1]), self.nchw(inputs[2])]
        self.store(out, self.activate(upscale_concat(self.xp, self.nchw(inputs[0]), skips, self._taps_h, self._taps_w)))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("Concat", [self.upscaled_onnx(g, inputs), inputs[1], inputs[2]], axis=1)

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return f"torch.cat([{self.upscaled_torch(t, inputs)}, {inputs[1]}, {inputs[2]}], dim=1)"


LAYER = UpscaleConcatTwo
