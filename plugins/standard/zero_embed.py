"""zero_embed: place the input inside a larger zero tensor (more channels and/or a larger canvas) at an offset."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims

# (size parameter, offset parameter, axis letter, Dims field)
AXES = (("channels", "channel_offset", "C", "c"), ("height", "top", "H", "h"), ("width", "left", "W", "w"))


def zero_embed(xp: Any, x: Any, size: tuple[int, int, int], offset: tuple[int, int, int]) -> Any:
    """Zeros of shape (N, *size) with ``x`` copied in at ``offset`` (channel, row, column)."""
    n, c, h, w = x.shape
    y = xp.zeros((n, *size), dtype=x.dtype)
    oc, oh, ow = offset
    y[:, oc:oc + c, oh:oh + h, ow:ow + w] = x
    return y


DESC = LayerDesc(
    name="zero_embed",
    display_name="Zero Embed",
    summary="Place the input in a larger zero tensor: extra zero channels and/or a larger zero canvas.",
    categories=(Category.TENSOR,),
    documentation=(
        "<p>Makes a tensor of zeros of <b>channels</b> x <b>height</b> x <b>width</b> (per image) and copies the "
        "input into it with its first channel at <b>channel_offset</b> and its top-left pixel at "
        "(<b>top</b>, <b>left</b>): <code>y[n, channel_offset + c, top + h, left + w] = x[n, c, h, w]</code>, "
        "everything else 0. Typical uses: pad 3 RGB channels to 4 or 8 (aligned channel counts), add empty "
        "channels for a network that expects extra inputs, or put an image on a larger canvas.</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), N x C x H x W.</p>"
        "<p><b>Parameters</b> (integers; a size of 0 means <i>the input's size</i>)</p><ul>"
        "<li><b>channels</b>: output channels, default 0, in [0, 65536].</li>"
        "<li><b>height</b>, <b>width</b>: output size, default 0, in [0, 65536].</li>"
        "<li><b>channel_offset</b>, <b>top</b>, <b>left</b>: where the input goes, default 0, in [0, 65536].</li>"
        "</ul><p>The input must fit: <code>channel_offset + C &lt;= channels</code>, "
        "<code>top + H &lt;= height</code>, <code>left + W &lt;= width</code>.</p>"
        "<p>Example: 1x3x32x32 with channels 4 gives 1x4x32x32 whose channel 3 is zero; with channels 8 and "
        "channel_offset 2, channels 0, 1 and 5..7 are zero.</p>"
    ),
    inputs=(InputDesc("input"),),
    params=(
        ParamDesc("channels", "uint", 0, "output channels (0 = as the input)", max=65536, main=True),
        ParamDesc("height", "uint", 0, "output height (0 = as the input)", max=65536),
        ParamDesc("width", "uint", 0, "output width (0 = as the input)", max=65536),
        ParamDesc("channel_offset", "uint", 0, "first channel of the input in the output", max=65536),
        ParamDesc("top", "uint", 0, "first row of the input in the output", max=65536),
        ParamDesc("left", "uint", 0, "first column of the input in the output", max=65536),
    ),
)


class ZeroEmbed(Layer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        sizes = []
        for size_p, off_p, axis, attr in AXES:
            have = getattr(x, attr)
            size = self.p[size_p] or have
            if self.p[off_p] + have > size:
                raise self.shape_error(f"the input {x} does not fit: {off_p} {self.p[off_p]} + input {axis} {have} = "
                                       f"{self.p[off_p] + have} exceeds {size_p} {size}")
            sizes.append(size)
        return Dims(x.n, *sizes)

    def forward(self, inputs: list[Any], out: Any) -> None:
        size = tuple(self.out_dims[1:])  # type: ignore[index]
        offset = tuple(self.p[off] for _, off, _, _ in AXES)
        self.store(out, self.activate(zero_embed(self.xp, self.nchw(inputs[0]), size, offset)))  # type: ignore[arg-type]

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        # pads after = size - offset - input size on each axis with a size (read at run time), else 0
        sizes = [self.p[size_p] for size_p, _, _, _ in AXES]
        offsets = [self.p[off_p] for _, off_p, _, _ in AXES]
        room = g.node("Sub", [g.ints("target", [s - o for s, o in zip(sizes, offsets)]), g.shape(inputs[0], 1, 4)], "room")
        after = g.node("Mul", [room, g.ints("sized", [int(s > 0) for s in sizes])], "after")
        pads = g.node("Concat", [g.ints("before", [0, *offsets, 0]), after], "pads", axis=0)
        return g.node("Pad", [inputs[0], pads])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        x = inputs[0]
        amounts = []
        for axis, (size_p, off_p, _, _) in reversed(list(enumerate(AXES, 1))):
            size, off = self.p[size_p], self.p[off_p]
            amounts += [str(off), f"{size - off} - {x}.shape[{axis}]" if size else "0"]
        return f"F.pad({x}, ({', '.join(amounts)}))"


LAYER = ZeroEmbed
