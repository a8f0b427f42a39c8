"""mono_to_rgb: repeat a single channel three times (grey image to RGB)."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc
from engine.layer import Layer
from engine.tensor import Dims


def mono_to_rgb(xp: Any, x: Any) -> Any:
    """(N, 1, H, W) -> (N, 3, H, W) with every output channel equal to the input channel."""
    return xp.repeat(x, 3, axis=1)


DESC = LayerDesc(
    name="mono_to_rgb",
    display_name="Mono to RGB",
    summary="Repeat a single-channel (grey) image into 3 identical channels.",
    categories=(Category.COLOR,),
    documentation=(
        "<p>Copies the only channel into red, green and blue: N x 1 x H x W becomes N x 3 x H x W with "
        "<code>y[n, k, h, w] = x[n, 0, h, w]</code> for k = 0, 1, 2 (no colour weighting). Use it to feed a grey "
        "image to a network trained on RGB, or to view a single feature map as an image.</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), N x 1 x H x W (exactly one channel).</p>"
        "<p><b>Parameters</b>: none.</p>"
        "<p>Example: the 1x1x1x2 image <code>[[0.2, 0.8]]</code> gives three channels <code>[[0.2, 0.8]]</code>.</p>"
    ),
    inputs=(InputDesc("input", doc="single-channel image"),),
)


class MonoToRGB(Layer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        if x.c != 1:
            raise self.shape_error(f"the input {x} has {x.c} channels; mono_to_rgb needs exactly 1")
        return Dims(x.n, 3, x.h, x.w)

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.store(out, self.activate(mono_to_rgb(self.xp, self.nchw(inputs[0]))))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("Concat", [inputs[0]] * 3, axis=1)

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return f"{inputs[0]}.repeat(1, 3, 1, 1)"


LAYER = MonoToRGB
