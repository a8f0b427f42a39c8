"""linear_blend: weight_a * a + weight_b * b + bias, with live-editable weights."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, InputKind, LayerDesc, ParamDesc
from engine.tensor import Dims
from plugins.analysis._options import OptionsLayer, OptionSpec, broadcast_dims

LIMIT = 1e6


def linear_blend(a: Any, b: Any | None, weight_a: float, weight_b: float, bias: float) -> Any:
    """``weight_a * a + weight_b * b + bias`` on logical arrays (``b`` None: ``weight_a * a + bias``)."""
    y = weight_a * a + bias
    return y if b is None else y + weight_b * b


DESC = LayerDesc(
    name="linear_blend",
    display_name="Linear Blend",
    summary="weight_a * a + weight_b * b + bias, with weights editable live during analysis.",
    categories=(Category.ANALYSIS,),
    documentation=(
        "<p>A weighted sum of two tensors plus a constant: "
        "<code>y = weight_a * a + weight_b * b + bias</code>. With <b>b</b> unconnected it is "
        "<code>weight_a * a + bias</code> (brightness and contrast of an image). All parameters are "
        "<b>runtime options</b>, changed live in the Parameter Editor during analysis.</p>"
        "<ul><li><b>a</b> (primary), <b>b</b> (secondary, optional): same dimensions, or a dimension "
        "of size 1 broadcast.</li>"
        f"<li><b>weight_a</b>: default 0.5; <b>weight_b</b>: default 0.5; <b>bias</b>: default 0; "
        f"each in [-{LIMIT:g}, {LIMIT:g}].</li></ul>"
    ),
    inputs=(InputDesc("a", doc="first tensor"), InputDesc("b", InputKind.SECONDARY, doc="second tensor (optional)")),
    params=(
        ParamDesc("weight_a", "float", 0.5, "multiplies a", min=-LIMIT, max=LIMIT, main=True),
        ParamDesc("weight_b", "float", 0.5, "multiplies b", min=-LIMIT, max=LIMIT, main=True),
        ParamDesc("bias", "float", 0.0, "added to the sum", min=-LIMIT, max=LIMIT),
    ),
)


class LinearBlend(OptionsLayer):
    desc = DESC
    OPTIONS = (
        OptionSpec("weight_a", "Weight of a", step=0.05),
        OptionSpec("weight_b", "Weight of b", step=0.05),
        OptionSpec("bias", "Bias", step=0.05),
    )

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        assert inputs[0] is not None
        return broadcast_dims(self, inputs[0], inputs[1] if len(inputs) > 1 else None)

    def forward(self, inputs: list[Any], out: Any) -> None:
        b = inputs[1] if len(inputs) > 1 and inputs[1] is not None else None
        y = linear_blend(self.nchw(inputs[0]), self.nchw(b) if b is not None else None,
                         self.p["weight_a"], self.p["weight_b"], self.p["bias"])
        self.store(out, self.activate(y))


LAYER = LinearBlend
