"""instance_normalization: normalise every channel of every image over H and W, then scale and shift (ONNX
InstanceNormalization)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import LayerDesc, ParamDesc
from engine.tensor import Dims
from plugins.standard._common_norm import AFFINE_NORM_INPUTS, AffineNormBase


def instance_normalization(xp: Any, x: Any, scale: Any, bias: Any, epsilon: float) -> Any:
    """``scale[c] * (x - mean) / sqrt(var + epsilon) + bias[c]``, mean and (biased) variance over H, W of each
    (n, c). Statistics are computed in float32 whatever the storage precision."""
    xf = x.astype(np.float32, copy=False)
    mean = xf.mean(axis=(2, 3), keepdims=True)
    centred = xf - mean
    var = (centred * centred).mean(axis=(2, 3), keepdims=True)
    c = x.shape[1]
    gain = scale.astype(np.float32, copy=False).reshape(1, c, 1, 1) / xp.sqrt(var + np.float32(epsilon))
    return centred * gain + bias.astype(np.float32, copy=False).reshape(1, c, 1, 1)


DESC = LayerDesc(
    name="instance_normalization",
    display_name="Instance Normalization",
    summary="Normalise each channel of each image to zero mean and unit variance, then scale and shift.",
    categories=(Category.NORMALIZATION,),
    documentation=(
        "<p>For every image n and channel c: <code>y = scale[c] * (x - mean) / sqrt(var + epsilon) + bias[c]</code>, "
        "where <code>mean</code> and <code>var</code> are the mean and the biased variance (divided by H*W) of "
        "x[n, c] over H and W, as in ONNX InstanceNormalization and <code>torch.nn.InstanceNorm2d(affine=True)</code>. "
        "The output has the input's dimensions.</p>"
        "<p><b>Inputs</b></p><ul>"
        "<li><b>input</b> (primary): N x C x H x W.</li>"
        "<li><b>scale</b> (secondary): replaces the loaded scale; C values (e.g. a 1 x C x 1 x 1 tensor).</li>"
        "<li><b>bias</b> (secondary): replaces the loaded bias; C values.</li></ul>"
        "<p><b>Parameters</b></p><ul>"
        "<li><b>epsilon</b>: added to the variance, default 1e-05, in (0, 1].</li></ul>"
        "<p>Weights files: <code>NAME_scale.npy</code> and <code>NAME_bias.npy</code>, each of shape (C,). "
        "Without weights the scale is 1 and the bias 0.</p>"
        "<p>Example: the channel <code>[[1, 3]]</code> with scale 2 and bias 1 becomes "
        "<code>[[-1, 3]]</code> (mean 2, variance 1, epsilon neglected).</p>"
    ),
    inputs=AFFINE_NORM_INPUTS,
    params=(ParamDesc("epsilon", "float", 1e-5, "added to the variance", min=0.0, max=1.0, main=True),),
    weights=("scale", "bias"),
)


class InstanceNormalization(AffineNormBase):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        return x

    def forward(self, inputs: list[Any], out: Any) -> None:
        y = instance_normalization(self.xp, self.nchw(inputs[0]), self.weight("scale", inputs),
                                   self.weight("bias", inputs), self.p["epsilon"])
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "partial: scale and bias from secondary inputs are not exported"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("InstanceNormalization", [inputs[0], g.weight("scale", inputs), g.weight("bias", inputs)],
                      epsilon=float(self.p["epsilon"]))

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        t.no_weight_inputs(inputs)
        c = self.input_dims[0].c
        eps = float(self.p["epsilon"])
        state = {"weight": t.weight("scale"), "bias": t.weight("bias")}
        ref = t.module(f"nn.InstanceNorm2d({c}, eps={eps!r}, affine=True)", state)
        return f"{ref}({inputs[0]})"


LAYER = InstanceNormalization
