"""sample_gain_pair: outer_gain * (gain * x), what the sample collection's fusing rule makes of two gains."""
from __future__ import annotations

from typing import Any

from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims


class SampleGainPair(Layer):
    """Two gains in one pass over the tensor."""

    desc = LayerDesc(
        name="sample_gain_pair", display_name="Sample Gain Pair", summary="outer_gain * gain * x in one layer.",
        categories=("Sample",),
        documentation="<p><code>y = outer_gain * gain * x</code>: two <code>sample_gain</code> layers fused.</p>",
        inputs=(InputDesc("x", doc="any tensor"),),
        params=(ParamDesc("gain", "float", 1.0, "the first gain"),
                ParamDesc("outer_gain", "float", 1.0, "the second gain")),
    )

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        return self.primary(inputs)

    def forward(self, inputs: list[Any], out: Any) -> None:
        x = self.nchw(self.primary(inputs))
        self.store(out, self.activate(x * (self.p["gain"] * self.p["outer_gain"])))
