"""mono_four_stack: pack a one-channel image into 4 channels of 2x2 pixel phases at half resolution
(Bayer raw packing, space_to_depth with block 2)."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc
from engine.layer import Layer
from engine.tensor import Dims

PHASES = ((0, 0), (0, 1), (1, 0), (1, 1))  # (row, column) offset of output channels 0..3


def mono_four_stack(xp: Any, x: Any) -> Any:
    """(N, 1, H, W) -> (N, 4, ceil(H/2), ceil(W/2)); channel k holds the pixels at (2i + dy, 2j + dx) with
    (dy, dx) = PHASES[k]. An odd H or W is zero-padded at the bottom or right first."""
    n, _, h, w = x.shape
    y = xp.zeros((n, 4, (h + 1) // 2, (w + 1) // 2), dtype=x.dtype)
    for k, (dy, dx) in enumerate(PHASES):
        phase = x[:, 0, dy::2, dx::2]
        y[:, k, :phase.shape[1], :phase.shape[2]] = phase
    return y


_TORCH_STACK = """
def mono_four_stack(x: torch.Tensor) -> torch.Tensor:
    \"\"\"N x 1 x H x W -> N x 4 x ceil(H/2) x ceil(W/2): the 2x2 pixel phases as channels (odd sizes zero-padded).\"\"\"
    return F.pixel_unshuffle(F.pad(x, (0, x.shape[3] % 2, 0, x.shape[2] % 2)), 2)
"""


DESC = LayerDesc(
    name="mono_four_stack",
    display_name="Mono Four Stack",
    summary="Pack a 1-channel image into 4 half-resolution channels of 2x2 pixel phases (Bayer packing).",
    categories=(Category.COLOR, Category.TENSOR),
    documentation=(
        "<p>Splits a single-channel image into its four 2x2 phases and stacks them as channels: "
        "N x 1 x H x W becomes N x 4 x ceil(H/2) x ceil(W/2) with "
        "<code>y[n, 2*dy + dx, i, j] = x[n, 0, 2i + dy, 2j + dx]</code>, i.e. channel 0 = even rows, even columns "
        "(top-left of each 2x2 block), 1 = top-right, 2 = bottom-left, 3 = bottom-right. This is how raw Bayer "
        "sensor data (e.g. RGGB) is fed to denoising and demosaicing networks, and equals ONNX SpaceToDepth with "
        "blocksize 2 on one channel. An odd height or width is padded with a zero row or column at the "
        "bottom or right first.</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), N x 1 x H x W (exactly one channel).</p>"
        "<p><b>Parameters</b>: none.</p>"
        "<p>Example: the 2x4 image <code>[[1, 2, 3, 4], [5, 6, 7, 8]]</code> gives four 1x2 channels "
        "<code>[[1, 3]]</code>, <code>[[2, 4]]</code>, <code>[[5, 7]]</code>, <code>[[6, 8]]</code>.</p>"
    ),
    inputs=(InputDesc("input", doc="single-channel image"),),
)


class MonoFourStack(Layer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        if x.c != 1:
            raise self.shape_error(f"the input {x} has {x.c} channels; mono_four_stack needs exactly 1")
        return Dims(x.n, 4, (x.h + 1) // 2, (x.w + 1) // 2)

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.store(out, self.activate(mono_four_stack(self.xp, self.nchw(inputs[0]))))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        # zero-pad an odd H or W at the bottom/right (sizes read at run time), then 2x2 blocks -> channels
        odd = g.node("Mod", [g.shape(inputs[0], 2, 4), g.ints("two", [2, 2])], "odd")
        pads = g.node("Concat", [g.ints("pads_before", [0, 0, 0, 0, 0, 0]), odd], "pads", axis=0)
        even = g.node("Pad", [inputs[0], pads], "even")
        return g.node("SpaceToDepth", [even], blocksize=2)

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return f"{t.helper('mono_four_stack', _TORCH_STACK)}({inputs[0]})"


LAYER = MonoFourStack
