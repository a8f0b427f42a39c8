"""conv_bn: convolution followed by batch normalization, fused into one layer.

The normalization is folded into the convolution (scaled weights, shifted bias), so the fused layer
costs one convolution and gives the result of the chain convolution -> batch_normalization."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.backends.layer_kernels import upload_physical
from engine.categories import Category
from engine.descriptors import InputDesc, InputKind, LayerDesc, ParamDesc
from engine.errors import WeightsError
from engine.layer import REPLAYABLE_FORWARDS
from engine.tensor import Dims
from plugins.standard._common_conv import (
    CONV_INPUTS,
    CONV_PARAMS,
    CONV_WEIGHTS,
    FUSED_CONV_WEIGHTS_DOC,
    ConvolutionBase,
    conv_torch_module,
    torch_padded_input,
)
from plugins.standard._common_norm import BN_WEIGHTS, batch_norm_coefficients, bn_init_weight, variance_problem

#: names of the batch normalization weights in this layer (the convolution has its own 'bias').
BN_NAMES = {w: f"bn_{w}" for w in BN_WEIGHTS}


def fold_batch_norm(xp: Any, w: Any, b: Any | None, mean: Any, variance: Any, scale: Any, bias: Any,
                    epsilon: float) -> tuple[Any, Any]:
    """Weights (O, C/g, KH, KW) and bias (O,) of one convolution equal to convolution then batch norm."""
    mul, add = batch_norm_coefficients(xp, mean, variance, scale, bias, epsilon, np.float32)
    wf = (w.astype(np.float32) * mul.reshape(-1, 1, 1, 1)).astype(w.dtype)
    bf = add if b is None else b.astype(np.float32) * mul + add
    return wf, bf.astype(w.dtype)


DESC = LayerDesc(
    name="conv_bn",
    display_name="Convolution + batch norm",
    summary="Convolution followed by batch normalization, fused (the normalization is folded into the weights).",
    categories=(Category.CONVOLUTION, Category.NORMALIZATION),
    documentation=(
        "<p>Computes the chain <b>convolution</b> -&gt; <b>batch_normalization</b> as one layer:<br>"
        "<code>z = conv(x, weights) + bias</code>, then "
        "<code>y = (z - bn_mean[o]) / sqrt(bn_variance[o] + epsilon) * bn_scale[o] + bn_bias[o]</code>.<br>"
        "The normalization is folded into the convolution weights and bias, so it costs one convolution. "
        "The activation, if any, is applied after the normalization.</p>"
        "<ul><li><b>input</b> (primary): N x C_in x H x W.</li>"
        + FUSED_CONV_WEIGHTS_DOC +
        "<li><b>bn_mean</b>, <b>bn_variance</b>, <b>bn_scale</b>, <b>bn_bias</b> (secondary): replace the "
        "normalization weights (C_out values each).</li>"
        "<li>Convolution parameters, with the same names and defaults as the convolution layer: "
        "<b>num_output_channels</b> (default 16, at least 1), <b>kernel_size</b> (default 3), "
        "<b>stride</b> (default 1), <b>padding</b> (default 1), <b>dilation</b> (default 1), "
        "<b>groups</b> (default 1, divides C_in and C_out), <b>bias</b> (default true), <b>padding_end</b> "
        "(bottom x right padding; default -1: the same as padding).</li>"
        "<li><b>epsilon</b>: added to the variance, default 1e-5, at least 0.</li></ul>"
        "<p>Weights files: <code>NAME_weights.npy</code> (C_out, C_in/groups, K_h, K_w), "
        "<code>NAME_bias.npy</code> (C_out,) and <code>NAME_bn_mean.npy</code>, <code>NAME_bn_variance.npy</code>, "
        "<code>NAME_bn_scale.npy</code>, <code>NAME_bn_bias.npy</code> (C_out,).</p>"
    ),
    inputs=(
        *CONV_INPUTS,
        *(InputDesc(n, InputKind.SECONDARY, doc=f"replaces the batch normalization {w} (C_out values)", weight=n)
          for w, n in BN_NAMES.items()),
    ),
    params=(
        *CONV_PARAMS,
        ParamDesc("epsilon", "float", 1e-5, "added to the variance", min=0.0, legacy_names=("eps",)),
    ),
    weights=(*CONV_WEIGHTS, *BN_NAMES.values()),
    legacy_names=("convolution_bn",),
)


class ConvBN(ConvolutionBase):
    desc = DESC
    _folded: tuple[Any, Any] | None = None

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        shapes = super().weight_shapes(inputs)
        o = self.p["num_output_channels"]
        shapes.update({n: (o,) for n in BN_NAMES.values()})
        return shapes

    def init_weight(self, weight: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        if weight.startswith("bn_"):
            return bn_init_weight(weight[3:], shape, rng)
        return super().init_weight(weight, shape, rng)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Keep the raw weights in host memory (as the layer's precision): the convolution runs on the folded
        weights only, so a device holds one copy of them (folded, in the layer's memory layout), not three (raw,
        folded, and the folded weights in the layout of the tensors). Readers of ``weights`` (exporters, the
        inspector, reports) go through ``backend.to_host``, which takes host arrays as they are."""
        if "bn_variance" in weights:
            problem = variance_problem(weights["bn_variance"], self.p["epsilon"])
            if problem:
                raise WeightsError(f"{self.desc.name} {self.name}: weight 'bn_variance': {problem}")
        self.weights = {k: np.ascontiguousarray(v, dtype=self.cdtype) for k, v in weights.items()}
        self._folded = None

    def folded_weights(self, inputs: list[Any]) -> tuple[Any, Any]:
        """Convolution weights and bias with the normalization folded in, on the device (cached unless an input
        provides a weight, since inputs can change between runs). The cached weights are folded on the host and
        uploaded once, already in the memory layout of the layer's tensors (KRSC for NHWC), seen as logical
        K, C, R, S, so the convolution finds them in place and makes no copy."""
        cached = not self.weights_from_inputs(inputs)
        if self._folded is not None and cached:
            return self._folded
        xp = np if cached else self.xp  # cached: folded from the host weights; else beside the inputs' device arrays

        def value(name: str) -> Any:
            return xp.asarray(self.weight(name, inputs))

        w, b = value("weights"), value("bias") if self.p["bias"] else None
        wf, bf = fold_batch_norm(xp, w, b, *(value(BN_NAMES[k]) for k in BN_WEIGHTS), self.p["epsilon"])
        if not cached:
            return wf, bf
        self._folded = (upload_physical(self, wf), self.backend.to_device(bf))
        return self._folded

    def forward(self, inputs: list[Any], out: Any) -> None:
        w, b = self.folded_weights(inputs)
        self.convolve(inputs[0], w, b, out, cacheable=not self.weights_from_inputs(inputs))

    onnx_support = "yes"
    torch_support = "partial: weights from secondary inputs are not exported"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        conv = self.onnx_conv(g, inputs, "conv")
        stats = [g.weight(BN_NAMES[w], inputs) for w in ("scale", "bias", "mean", "variance")]
        return g.node("BatchNormalization", [conv, *stats], epsilon=float(self.p["epsilon"]))

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        t.no_weight_inputs(inputs)
        state = self.torch_conv_state(t, "0.")
        state |= {"1.weight": t.weight("bn_scale"), "1.bias": t.weight("bn_bias"), "1.running_mean": t.weight("bn_mean"),
                  "1.running_var": t.weight("bn_variance")}
        conv = conv_torch_module(self.p, self.input_dims[0].c)
        bn_code = f"nn.BatchNorm2d({self.p['num_output_channels']}, eps={float(self.p['epsilon'])!r})"
        return f"{t.module(f'nn.Sequential({conv}, {bn_code})', state)}({torch_padded_input(self.p, inputs[0])})"


REPLAYABLE_FORWARDS.add(ConvBN.forward)
LAYER = ConvBN
