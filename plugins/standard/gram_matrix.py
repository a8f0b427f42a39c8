"""gram_matrix: channel-by-channel correlations of a feature map (style losses, texture statistics)."""
from __future__ import annotations

from typing import Any

import numpy as np

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


DESC = LayerDesc(
    name="gram_matrix",
    display_name="Gram Matrix",
    summary="Correlations between every pair of channels: N x C x H x W to N x 1 x C x C.",
    categories=("Statistics",),
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
    fused_activations = frozenset({"*"})

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = inputs[0]
        assert x is not None
        return Dims(x.n, 1, x.c, x.c)

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.store(out, self.activate(gram_matrix(self.xp, self.nchw(inputs[0]), self.p["normalization"])))


LAYER = GramMatrix
