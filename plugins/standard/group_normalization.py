"""group_normalization: normalise groups of channels of every image over the channels of the group and H, W,
then scale and shift every channel (ONNX GroupNormalization, opset 21; torch.nn.GroupNorm)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import LayerDesc, ParamDesc
from engine.tensor import Dims
from plugins.standard._common_norm import AFFINE_NORM_INPUTS, AffineNormBase


def group_normalization(xp: Any, x: Any, scale: Any, bias: Any, num_groups: int, epsilon: float) -> Any:
    """``scale[c] * (x - mean) / sqrt(var + epsilon) + bias[c]``, mean and (biased) variance over the C/G
    channels of c's group and H, W of each image. Statistics are computed in float32."""
    n, c, h, w = x.shape
    xf = x.astype(np.float32, copy=False).reshape(n, num_groups, (c // num_groups) * h * w)
    mean = xf.mean(axis=2, keepdims=True)
    centred = xf - mean
    var = (centred * centred).mean(axis=2, keepdims=True)
    normed = (centred / xp.sqrt(var + np.float32(epsilon))).reshape(n, c, h, w)
    return (normed * scale.astype(np.float32, copy=False).reshape(1, c, 1, 1)
            + bias.astype(np.float32, copy=False).reshape(1, c, 1, 1))


DESC = LayerDesc(
    name="group_normalization",
    display_name="Group Normalization",
    summary="Normalise groups of channels of each image to zero mean and unit variance, then scale and shift.",
    categories=(Category.NORMALIZATION,),
    documentation=(
        "<p>The C channels are split into <b>num_groups</b> groups of C/G consecutive channels. For every image n "
        "and channel c of group g: <code>y = scale[c] * (x - mean) / sqrt(var + epsilon) + bias[c]</code>, where "
        "<code>mean</code> and <code>var</code> are the mean and the biased variance of x[n] over the channels of "
        "group g and over H and W, as in ONNX GroupNormalization (opset 21, per-channel scale and bias) and "
        "<code>torch.nn.GroupNorm(affine=True)</code>. One group is layer normalization over C, H, W; C groups "
        "is instance normalization. The output has the input's dimensions.</p>"
        "<p><b>Inputs</b></p><ul>"
        "<li><b>input</b> (primary): N x C x H x W; C must be a multiple of num_groups.</li>"
        "<li><b>scale</b> (secondary): replaces the loaded scale; C values.</li>"
        "<li><b>bias</b> (secondary): replaces the loaded bias; C values.</li></ul>"
        "<p><b>Parameters</b></p><ul>"
        "<li><b>num_groups</b>: G, default 1, at least 1.</li>"
        "<li><b>epsilon</b>: added to the variance, default 1e-05, in (0, 1].</li></ul>"
        "<p>Weights files: <code>NAME_scale.npy</code> and <code>NAME_bias.npy</code>, each of shape (C,). "
        "Without weights the scale is 1 and the bias 0.</p>"
        "<p>ONNX export (opset 17, before GroupNormalization): InstanceNormalization of the input reshaped to "
        "N x G x (C/G*H*W), reshaped back, times scale plus bias.</p>"
    ),
    inputs=AFFINE_NORM_INPUTS,
    params=(
        ParamDesc("num_groups", "uint", 1, "number of channel groups", min=1, max=65536, main=True,
                  legacy_names=("groups",)),
        ParamDesc("epsilon", "float", 1e-5, "added to the variance", min=0.0, max=1.0),
    ),
    weights=("scale", "bias"),
)


class GroupNormalization(AffineNormBase):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        if x.c % self.p["num_groups"]:
            raise self.shape_error(f"input has {x.c} channels, not a multiple of num_groups {self.p['num_groups']}")
        return x

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return output.elements * (6 + int(self.activation is not None))

    def forward(self, inputs: list[Any], out: Any) -> None:
        y = group_normalization(self.xp, self.nchw(inputs[0]), self.weight("scale", inputs), self.weight("bias", inputs),
                                self.p["num_groups"], self.p["epsilon"])
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "partial: scale and bias from secondary inputs are not exported"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        x, groups, c = inputs[0], self.p["num_groups"], self.input_dims[0].c
        grouped = g.node("Reshape", [x, g.ints("group_shape", [0, groups, -1])], "grouped")
        normed = g.node("InstanceNormalization", [grouped, g.value("ones", np.ones(groups)), g.value("zeros", np.zeros(groups))],
                        "normed", epsilon=float(self.p["epsilon"]))
        back = g.node("Reshape", [normed, g.shape(x, 0, 4)], "ungrouped")
        scaled = g.node("Mul", [back, g.weight("scale", inputs, shape=(1, c, 1, 1))], "scaled")
        return g.node("Add", [scaled, g.weight("bias", inputs, shape=(1, c, 1, 1))])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        t.no_weight_inputs(inputs)
        code = f"nn.GroupNorm({self.p['num_groups']}, {self.input_dims[0].c}, eps={float(self.p['epsilon'])!r}, affine=True)"
        ref = t.module(code, {"weight": t.weight("scale"), "bias": t.weight("bias")})
        return f"{ref}({inputs[0]})"


LAYER = GroupNormalization
