"""convolution: 2-D convolution (cross-correlation, like ONNX Conv and torch.nn.Conv2d)."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import LayerDesc
from plugins.standard._common_conv import (
    CONV_INPUTS,
    CONV_PARAMS,
    CONV_WEIGHTS,
    CONV_WEIGHTS_FILES_DOC,
    ConvolutionBase,
    padding_end_doc,
)

DESC = LayerDesc(
    name="convolution",
    display_name="Convolution",
    summary="2-D convolution with stride, padding, dilation, groups and optional bias.",
    categories=(Category.CONVOLUTION,),
    documentation=(
        "<p>Computes <code>y[n,o] = bias[o] + sum over c,kh,kw of w[o,c,kh,kw] * x[n, g*C/G + c, "
        "h*stride + kh*dilation - pad, ...]</code> (cross-correlation, as in ONNX Conv and PyTorch).</p>"
        "<p>Output size: <code>H_out = (H + 2*pad - dilation*(K-1) - 1) / stride + 1</code> (rounded down).</p>"
        "<ul><li><b>input</b> (primary): N x C x H x W.</li>"
        "<li><b>weights</b> (secondary): replaces the loaded weights; dimensions C_out x C_in/groups x K_h x K_w.</li>"
        "<li><b>bias</b> (secondary): replaces the loaded bias; C_out elements.</li>"
        "<li><b>num_output_channels</b>: C_out, default 16, at least 1.</li>"
        "<li><b>kernel_size</b>: K or KhxKw, default 3.</li>"
        "<li><b>stride</b>: default 1. <b>dilation</b>: default 1 (both at least 1).</li>"
        "<li><b>padding</b>: zero padding on each side (top and left when padding_end is set), P or PhxPw, "
        "default 1.</li>"
        "<li><b>groups</b>: default 1; C_in and C_out must both be multiples of it.</li>"
        "<li><b>bias</b>: add a bias, default true.</li>"
        + padding_end_doc() +
        "</ul>"
        + CONV_WEIGHTS_FILES_DOC
    ),
    inputs=CONV_INPUTS,
    params=CONV_PARAMS,
    weights=CONV_WEIGHTS,
)


class Convolution(ConvolutionBase):
    desc = DESC
    #: the CPU kernel widens an fp16 input and rounds an fp16 output once; the GPU's (cuDNN, fp16 kernels) take one
    #: precision throughout, so on the GPU conversions stay unfused here (engine.format_conversion)
    conversion_fusion = frozenset({"read", "write"})

    def fuses_conversion(self, kind: str) -> bool:
        return self.backend.device_kind == "cpu" and super().fuses_conversion(kind)

    onnx_support = "yes"
    torch_support = "partial: weights and bias from secondary inputs are not exported"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return self.onnx_conv(g, inputs)

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        t.no_weight_inputs(inputs)
        return self.torch_conv(t, inputs)



LAYER = Convolution
