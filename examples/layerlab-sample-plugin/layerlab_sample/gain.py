"""sample_gain: y = gain * x + offset; ``gain`` is a runtime option (changed live in analysis mode)."""
from __future__ import annotations

from typing import Any

from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims

LIMIT = 1e6


def gain(x: Any, g: float, offset: float) -> Any:
    """``g * x + offset`` (any array module)."""
    return g * x + offset


class SampleGain(Layer):
    """A gain and an offset; the gain can be changed while the network runs."""

    desc = LayerDesc(
        name="sample_gain", display_name="Sample Gain", summary="gain * x + offset, the gain editable live.",
        categories=("Sample",),
        documentation="<p><code>y = gain * x + offset</code>. <b>gain</b> is a runtime option: the Parameter "
                      "Editor changes it live in analysis mode. A gain of 0 is allowed and warned about.</p>",
        inputs=(InputDesc("x", doc="any tensor"),),
        params=(ParamDesc("gain", "float", 1.0, "multiplies the input", min=-LIMIT, max=LIMIT, main=True),
                ParamDesc("offset", "float", 0.0, "added after the gain", min=-LIMIT, max=LIMIT)),
    )

    def validate(self) -> None:
        if self.p["gain"] == 0:
            self.log.warning("gain 0 makes the output constant (%g)", self.p["offset"])

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        return self.primary(inputs)

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.store(out, self.activate(gain(self.nchw(self.primary(inputs)), self.p["gain"], self.p["offset"])))

    def runtime_options(self) -> list[dict[str, Any]]:
        return [{"name": "gain", "text": "Gain", "type": "float", "value": self.p["gain"], "min": -LIMIT,
                 "max": LIMIT, "step": 0.1}]

    def set_runtime_option(self, name: str, value: Any) -> bool:
        if name != "gain":
            return super().set_runtime_option(name, value)
        try:
            self.p["gain"] = self.desc.param("gain").parse(value)
        except ValueError as exc:
            raise self.param_error(name, str(exc)) from None
        return False
