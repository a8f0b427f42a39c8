"""conv_sum: convolution whose result is added to another tensor (a residual connection), fused into one layer.

On the CPU the residual goes into the convolution kernels' epilogues (the sum starts from it, or it is added
while the output rows are in cache), so a ResNet block's addition costs no pass over memory of its own."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc
from engine.layer import REPLAYABLE_FORWARDS
from engine.tensor import Dims
from plugins.standard._common_conv import (
    CONV_INPUTS,
    CONV_PARAMS,
    CONV_PARAMS_DOC,
    CONV_WEIGHTS,
    CONV_WEIGHTS_FILES_DOC,
    FUSED_CONV_WEIGHTS_DOC,
    ConvolutionBase,
    padding_end_doc,
)

#: the fused layers' input 1: what the element_wise sum added to the convolution
RESIDUAL_INPUT = InputDesc("residual", doc="tensor added to the convolution result (N x C_out x H_out x W_out; "
                                           "axes of size 1 broadcast)")

RESIDUAL_DOC = (
    "<li><b>residual</b> (primary, input 1): the tensor added to the convolution result, of its dimensions "
    "(an axis of size 1 on either side broadcasts, as in element_wise).</li>"
)


class ResidualSum:
    """What conv_sum and conv_bn_sum share: the output dimensions of the sum, its cost, and its export. The output
    may be written over the residual's buffer (``convolve_sum`` reads each residual value where it writes, or copies
    the residual first)."""

    overwritable_inputs = (1,)

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        conv = super().output_dims(inputs)  # type: ignore[misc]
        r = inputs[1]
        if r is None:
            return conv
        out = list(conv)
        for axis, (a, b) in enumerate(zip(conv, r)):
            if a != b and 1 not in (a, b):
                raise self.shape_error(  # type: ignore[attr-defined]
                    f"residual of dimensions {r} differs from the convolution result {conv} in {'NCHW'[axis]} "
                    f"({b} vs {a})")
            out[axis] = max(a, b)
        return Dims(*out)

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        conv = ConvolutionBase.output_dims(self, inputs)  # type: ignore[arg-type]
        return super().flops(inputs, conv) + output.elements  # type: ignore[misc]

    def onnx_sum(self, g: Any, conv: str, inputs: list[str | None]) -> str:
        return g.node("Add", [conv, inputs[1]])

    def torch_sum(self, conv: str, inputs: list[str | None]) -> str:
        return f"({conv} + {inputs[1]})"


DESC = LayerDesc(
    name="conv_sum",
    display_name="Convolution + sum",
    summary="Convolution whose result is added to another tensor (a residual connection), fused into one layer.",
    categories=(Category.CONVOLUTION, Category.ARITHMETIC),
    documentation=(
        "<p>Computes the chain <b>convolution</b> -&gt; <b>element_wise</b> (sum) as one layer: "
        "<code>y = activation(conv(x, weights) + bias + residual)</code>, the activation after the sum (a ResNet "
        "block's <code>relu(conv(x) + shortcut)</code>). The built-in fusing rule makes it from a convolution "
        "without activation read only by a two-input sum, at either of that sum's inputs (the other one becomes "
        "the residual).</p>"
        "<ul><li><b>input</b> (primary): N x C_in x H x W.</li>" + RESIDUAL_DOC
        + FUSED_CONV_WEIGHTS_DOC
        + CONV_PARAMS_DOC + padding_end_doc() +
        "</ul>"
        + CONV_WEIGHTS_FILES_DOC
    ),
    inputs=(CONV_INPUTS[0], RESIDUAL_INPUT, *CONV_INPUTS[1:]),
    params=CONV_PARAMS,
    weights=CONV_WEIGHTS,
)


class ConvSum(ResidualSum, ConvolutionBase):
    desc = DESC

    def forward(self, inputs: list[Any], out: Any) -> None:
        w = self.weight("weights", inputs)
        b = self.weight("bias", inputs) if self.p["bias"] else None
        self.convolve_sum(inputs[0], w, b, inputs[1], out, cacheable=not self.weights_from_inputs(inputs))

    onnx_support = "yes"
    torch_support = "partial: weights and bias from secondary inputs are not exported"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return self.onnx_sum(g, self.onnx_conv(g, inputs, "conv"), inputs)

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        t.no_weight_inputs(inputs)
        return self.torch_sum(self.torch_conv(t, inputs), inputs)


REPLAYABLE_FORWARDS.add(ConvSum.forward)
LAYER = ConvSum
