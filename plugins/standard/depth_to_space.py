"""depth_to_space: moves channel blocks into spatial blocks (pixel shuffle), like ONNX DepthToSpace."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc
from engine.tensor import Dims
from plugins.standard._common_vendor import SHUFFLE_PARAMS, SHUFFLE_PARAMS_DOC, ShuffleLayer


def depth_to_space(x: Any, block: int, mode: str) -> Any:
    """Logical NCHW (N, C, H, W) -> (N, C/b², H*b, W*b).

    DCR (depth-column-row): input channel ``(i*b + j)*C' + c`` goes to output channel c at (h*b+i, w*b+j).
    CRD (column-row-depth, PyTorch PixelShuffle): input channel ``c*b*b + i*b + j`` goes there."""
    n, c, h, w = x.shape
    b = block
    co = c // (b * b)
    if mode == "DCR":
        t = x.reshape(n, b, b, co, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, co, b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, co, h * b, w * b)


_TORCH_DCR = """
def depth_to_space_dcr(x: torch.Tensor, b: int) -> torch.Tensor:
    \"\"\"DepthToSpace in DCR order (ONNX's default; F.pixel_shuffle is the CRD order).\"\"\"
    n, c, h, w = x.shape
    return x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2).reshape(n, c // (b * b), h * b, w * b)
"""


DESC = LayerDesc(
    name="depth_to_space",
    display_name="Depth to space",
    summary="Rearranges blocks of channels into blocks of pixels (pixel shuffle), upscaling H and W.",
    categories=(Category.TENSOR,),
    documentation=(
        "<p>Moves groups of b*b channels into b x b blocks of pixels: N x C x H x W becomes "
        "N x C/b² x H*b x W*b (ONNX DepthToSpace). Output pixel <code>(c, h*b + i, w*b + j)</code> "
        "takes the input value at <code>(k, h, w)</code> where, by <b>mode</b>:</p>"
        "<ul><li><code>DCR</code> (depth-column-row, the ONNX default): <code>k = (i*b + j)*C/b² + c</code>.</li>"
        "<li><code>CRD</code> (column-row-depth, like PyTorch PixelShuffle): <code>k = c*b² + i*b + j</code>.</li></ul>"
        "<ul><li><b>input</b> (primary): N x C x H x W, C a multiple of b².</li>"
        + SHUFFLE_PARAMS_DOC +
        "<p>space_to_depth with the same block size and mode is its inverse.</p>"
    ),
    inputs=(InputDesc("input", doc="N x C x H x W tensor, C a multiple of block_size²"),),
    params=SHUFFLE_PARAMS,
    legacy_names=("pixel_shuffle",),
)


class DepthToSpace(ShuffleLayer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        b = self.p["block_size"]
        if x.c % (b * b):
            raise self.shape_error(f"input has {x.c} channels ({x}), not a multiple of block_size² = {b * b}")
        return Dims(x.n, x.c // (b * b), x.h * b, x.w * b)

    def forward(self, inputs: list[Any], out: Any) -> None:
        y = depth_to_space(self.nchw(inputs[0]), self.p["block_size"], self.p["mode"])
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("DepthToSpace", [inputs[0]], blocksize=self.p["block_size"], mode=self.p["mode"])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        b = self.p["block_size"]
        if self.p["mode"] == "CRD":
            return f"F.pixel_shuffle({inputs[0]}, {b})"
        return f"{t.helper('depth_to_space_dcr', _TORCH_DCR)}({inputs[0]}, {b})"


LAYER = DepthToSpace
