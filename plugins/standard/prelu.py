"""prelu: x for x >= 0, slope * x below zero, with a learned slope per channel (ONNX PRelu, torch.nn.PReLU)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import InputDesc, InputKind, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims

#: PyTorch's initial slope (nn.PReLU(init=0.25)), used when no weights are given
DEFAULT_SLOPE = 0.25


def prelu(xp: Any, x: Any, slope: Any) -> Any:
    """Logical NCHW ``x`` with its negative values multiplied by ``slope`` (C values, or one for all)."""
    s = slope.astype(x.dtype, copy=False).reshape(1, -1, 1, 1)
    return xp.where(x >= 0, x, x * s)


DESC = LayerDesc(
    name="prelu",
    display_name="PReLU",
    summary="Parametric ReLU: x above zero, a learned per-channel slope times x below.",
    categories=(Category.ACTIVATION,),
    documentation=(
        "<p><code>y[n,c,h,w] = x if x &gt;= 0 else slope[c] * x</code>, as ONNX PRelu with a per-channel slope and "
        "<code>torch.nn.PReLU(num_parameters=C)</code>. The output has the input's dimensions.</p>"
        "<p><b>Inputs</b></p><ul>"
        "<li><b>input</b> (primary): N x C x H x W.</li>"
        "<li><b>slope</b> (secondary): replaces the loaded slope; C values (1 with shared_slope).</li></ul>"
        "<p><b>Parameters</b></p><ul>"
        "<li><b>shared_slope</b>: one slope for every channel (<code>nn.PReLU()</code>, an ONNX slope of one "
        "element), default false.</li></ul>"
        "<p>Weights file: <code>NAME_slope.npy</code> of shape (C,), or (1,) with shared_slope. "
        "Without weights every slope is 0.25 (PyTorch's initial value).</p>"
        "<p>Example: with slope 0.1, <code>[-2, 3]</code> becomes <code>[-0.2, 3]</code>.</p>"
    ),
    inputs=(
        InputDesc("input"),
        InputDesc("slope", InputKind.SECONDARY, "replaces the slope weight (C values, or 1)", weight="slope"),
    ),
    params=(ParamDesc("shared_slope", "bool", False, "one slope for all channels"),),
    weights=("slope",),
)


class PRelu(Layer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        return x

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        x = self.primary(inputs)
        return {"slope": (1,) if self.p["shared_slope"] else (x.c,)}

    def init_weight(self, weight: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Every slope 0.25, like PyTorch's initialisation."""
        return np.full(shape, DEFAULT_SLOPE, dtype=np.float32)

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return output.elements * (2 + int(self.activation is not None))

    def forward(self, inputs: list[Any], out: Any) -> None:
        y = prelu(self.xp, self.nchw(inputs[0]), self.weight("slope", inputs))
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "partial: a slope from the secondary input is not exported"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        shape = (1,) if self.p["shared_slope"] else (1, self.input_dims[0].c, 1, 1)
        return g.node("PRelu", [inputs[0], g.weight("slope", inputs, shape=shape)])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        t.no_weight_inputs(inputs)
        count = 1 if self.p["shared_slope"] else self.input_dims[0].c
        return f"{t.module(f'nn.PReLU(num_parameters={count})', {'weight': t.weight('slope')})}({inputs[0]})"


LAYER = PRelu
