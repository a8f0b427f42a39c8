"""gram_matrix: channel-by-channel correlations of a feature map (style losses, texture statistics)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims

NORMALIZATIONS = ("hw", "chw", "none")


def gram_matrix(xp: Any, x: Any, normalization: str) -> Any:
    """(N, C, H, W) -> (N, 1, C, C): ``G[n, 0, i, j] = sum over h, w of x[n,i,h,w] * x[n,j,h,w] / D`` with
    D = H*W ('hw'), C*H*W ('chw') or 1 ('none'). Computed in float32 with one batched matrix product."""
    n, c, h, w = x.shape
    f = x.astype(np.float32, copy=False).reshape(n, c, h * w)
    g = xp.matmul(f, f.transpose(0, 2, 1))
    divisor = {"hw": h * w, "chw": c * h * w, "none": 1}[normalization]
    if divisor != 1:
        g *= np.float32(1.0 / divisor)
    return g.reshape(n, 1, c, c)


_TORCH_GRAM = """
def gram_matrix(x: torch.Tensor, normalization: str) -> torch.Tensor:
    \"\"\"N x C x H x W -> N x 1 x C x C channel correlations, divided by H*W ('hw'), C*H*W ('chw') or 1.\"\"\"
    n, c, h, w = x.shape
    f = x.reshape(n, c, h * w)
    g = f @ f.transpose(1, 2)
    divisor = {"hw": h * w, "chw": c * h * w, "none": 1}[normalization]
    return (g / divisor)[:, None]
"""


DESC = LayerDesc(
    name="gram_matrix",
    display_name="Gram Matrix",
    summary="Correlations between every pair of channels: N x C x H x W to N x 1 x C x C.",
    categories=(Category.STATISTICS,),
    documentation=(
        "<p>Flattens each channel into a row of F (C rows of H*W values) and computes "
        "<code>G = F * F<sup>T</sup> / D</code> for each image: <code>G[n, 0, i, j] = sum over h, w of "
        "x[n,i,h,w] * x[n,j,h,w] / D</code>. The output is N x 1 x C x C (H = W = C), symmetric, as used by "
        "style-transfer losses.</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), N x C x H x W.</p>"
        "<p><b>Parameters</b></p><ul>"
        "<li><b>normalization</b>: the divisor D: <code>hw</code> (default) D = H*W, the mean product; "
        "<code>chw</code> D = C*H*W (Gatys et al.); <code>none</code> D = 1, the raw sums.</li></ul>"
        "<p>Example: one image with 2 channels of 1x2 pixels, <code>[[1, 2]]</code> and <code>[[3, 4]]</code>, "
        "gives with hw: <code>[[2.5, 5.5], [5.5, 12.5]]</code> (1x1x2x2).</p>"
    ),
    inputs=(InputDesc("input"),),
    params=(ParamDesc("normalization", "enum", "hw", "divisor of the sums", enum_values=NORMALIZATIONS, main=True),),
)


class GramMatrix(Layer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        return Dims(x.n, 1, x.c, x.c)

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.store(out, self.activate(gram_matrix(self.xp, self.nchw(inputs[0]), self.p["normalization"])))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        f = g.node("Reshape", [inputs[0], g.ints("rows", [0, 0, -1])], "rows")
        gram = g.node("MatMul", [f, g.node("Transpose", [f], "columns", perm=[0, 2, 1])], "products")
        norm = self.p["normalization"]
        if norm != "none":
            count = g.node("ReduceProd", [g.shape(inputs[0], 2 if norm == "hw" else 1, 4)], "count", keepdims=0)
            gram = g.node("Div", [gram, g.node("Cast", [count], "divisor", to=g.elem_type)], "normalized")
        return g.node("Unsqueeze", [gram, g.ints("axes", [1])])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return f"{t.helper('gram_matrix', _TORCH_GRAM)}({inputs[0]}, {self.p['normalization']!r})"


LAYER = GramMatrix
