"""space_to_depth: moves spatial blocks into channels (pixel unshuffle), like ONNX SpaceToDepth."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc
from engine.tensor import Dims
from plugins.standard._common_vendor import SHUFFLE_PARAMS, SHUFFLE_PARAMS_DOC, ShuffleLayer


def space_to_depth(x: Any, block: int, mode: str) -> Any:
    """Logical NCHW (N, C, H, W) -> (N, C*b², H/b, W/b), the inverse of depth_to_space in the same mode.

    DCR (ONNX SpaceToDepth): pixel (h*b+i, w*b+j) of channel c goes to channel ``(i*b + j)*C + c``.
    CRD (PyTorch PixelUnshuffle): it goes to channel ``c*b*b + i*b + j``."""
    n, c, h, w = x.shape
    b = block
    t = x.reshape(n, c, h // b, b, w // b, b)
    t = t.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else t.transpose(0, 1, 3, 5, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


_TORCH_DCR = """
def space_to_depth_dcr(x: torch.Tensor, b: int) -> torch.Tensor:
    \"\"\"SpaceToDepth in DCR order (ONNX's; F.pixel_unshuffle is the CRD order).\"\"\"
    n, c, h, w = x.shape
    return x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4).reshape(n, c * b * b, h // b, w // b)
"""


DESC = LayerDesc(
    name="space_to_depth",
    display_name="Space to depth",
    summary="Rearranges blocks of pixels into channels (pixel unshuffle), downscaling H and W.",
    categories=(Category.TENSOR,),
    documentation=(
        "<p>Moves every b x b block of pixels into b*b channels: N x C x H x W becomes "
        "N x C*b² x H/b x W/b. Input pixel <code>(c, h*b + i, w*b + j)</code> goes to output "
        "<code>(k, h, w)</code> where, by <b>mode</b>:</p>"
        "<ul><li><code>DCR</code> (depth-column-row, as ONNX SpaceToDepth): <code>k = (i*b + j)*C + c</code>.</li>"
        "<li><code>CRD</code> (column-row-depth, like PyTorch PixelUnshuffle): <code>k = c*b² + i*b + j</code>.</li></ul>"
        "<ul><li><b>input</b> (primary): N x C x H x W, H and W multiples of b.</li>"
        + SHUFFLE_PARAMS_DOC +
        "<p>depth_to_space with the same block size and mode is its inverse.</p>"
    ),
    inputs=(InputDesc("input", doc="N x C x H x W tensor, H and W multiples of block_size"),),
    params=SHUFFLE_PARAMS,
    legacy_names=("pixel_unshuffle",),
)


class SpaceToDepth(ShuffleLayer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        b = self.p["block_size"]
        if x.h % b or x.w % b:
            raise self.shape_error(f"input {x.h}x{x.w} (H x W) is not a multiple of block_size {b} in "
                                   + " and ".join(a for a, v in (("H", x.h), ("W", x.w)) if v % b))
        return Dims(x.n, x.c * b * b, x.h // b, x.w // b)

    def forward(self, inputs: list[Any], out: Any) -> None:
        y = space_to_depth(self.nchw(inputs[0]), self.p["block_size"], self.p["mode"])
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        b = self.p["block_size"]
        y = g.node("SpaceToDepth", [inputs[0]], "dcr" if self.p["mode"] == "CRD" else "", blocksize=b)
        if self.p["mode"] == "DCR":
            return y
        c = self.input_dims[0].c  # CRD: reorder the DCR channels (i*b + j)*C + c into c*b*b + i*b + j
        order = [(k % (b * b)) * c + k // (b * b) for k in range(c * b * b)]
        return g.node("Gather", [y, g.ints("order", order)], axis=1)

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        b = self.p["block_size"]
        if self.p["mode"] == "CRD":
            return f"F.pixel_unshuffle({inputs[0]}, {b})"
        return f"{t.helper('space_to_depth_dcr', _TORCH_DCR)}({inputs[0]}, {b})"


LAYER = SpaceToDepth
