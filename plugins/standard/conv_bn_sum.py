"""conv_bn_sum: convolution and batch normalization whose result is added to another tensor (a ResNet block's
residual connection), fused into one layer: the normalization folded into the weights, the residual added in the
convolution kernels' epilogues on the CPU."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import LayerDesc
from engine.layer import REPLAYABLE_FORWARDS
from plugins.standard._common_conv import CONV_INPUTS, CONV_PARAMS_DOC, padding_end_doc
from plugins.standard.conv_bn import DESC as CONV_BN_DESC
from plugins.standard.conv_bn import ConvBN
from plugins.standard.conv_sum import RESIDUAL_DOC, RESIDUAL_INPUT, ResidualSum

DESC = LayerDesc(
    name="conv_bn_sum",
    display_name="Convolution + batch norm + sum",
    summary="Convolution and batch normalization added to another tensor (a residual connection), fused.",
    categories=(Category.CONVOLUTION, Category.NORMALIZATION, Category.ARITHMETIC),
    documentation=(
        "<p>Computes the chain <b>convolution</b> -&gt; <b>batch_normalization</b> -&gt; <b>element_wise</b> "
        "(sum) as one layer: <code>z = conv(x, weights) + bias</code>, "
        "<code>y = activation((z - bn_mean[o]) / sqrt(bn_variance[o] + epsilon) * bn_scale[o] + bn_bias[o] + "
        "residual)</code>: a ResNet block's <code>relu(bn(conv(x)) + shortcut)</code>. The normalization is folded "
        "into the convolution weights; the built-in fusing rule makes this layer from a conv_bn without activation "
        "read only by a two-input sum, at either of that sum's inputs (the other one becomes the residual).</p>"
        "<ul><li><b>input</b> (primary): N x C_in x H x W.</li>" + RESIDUAL_DOC +
        "<li><b>weights</b>, <b>bias</b>, <b>bn_mean</b>, <b>bn_variance</b>, <b>bn_scale</b>, <b>bn_bias</b> "
        "(secondary): replace the weights of the same names (as in conv_bn).</li>"
        + CONV_PARAMS_DOC + padding_end_doc() +
        "<li><b>epsilon</b>: added to the variance, default 1e-5, at least 0.</li></ul>"
        "<p>Weights files: as conv_bn's, <code>NAME_weights.npy</code>, <code>NAME_bias.npy</code> and "
        "<code>NAME_bn_mean.npy</code>, <code>NAME_bn_variance.npy</code>, <code>NAME_bn_scale.npy</code>, "
        "<code>NAME_bn_bias.npy</code>.</p>"
    ),
    inputs=(CONV_INPUTS[0], RESIDUAL_INPUT, *CONV_BN_DESC.inputs[1:]),
    params=CONV_BN_DESC.params,
    weights=CONV_BN_DESC.weights,
)


class ConvBNSum(ResidualSum, ConvBN):
    desc = DESC

    def forward(self, inputs: list[Any], out: Any) -> None:
        w, b = self.folded_weights(inputs)
        self.convolve_sum(inputs[0], w, b, inputs[1], out, cacheable=not self.weights_from_inputs(inputs))

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return self.onnx_sum(g, super().to_onnx(g, inputs), inputs)

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return self.torch_sum(super().to_torch(t, inputs), inputs)


REPLAYABLE_FORWARDS.add(ConvBNSum.forward)
LAYER = ConvBNSum
