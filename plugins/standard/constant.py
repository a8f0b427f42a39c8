"""constant: a tensor of fixed values held as the layer's weights (a bias table, an attention mask, a scale of any
shape that an ONNX graph combines with a computed tensor)."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims

DESC = LayerDesc(
    name="constant",
    display_name="Constant",
    summary="A tensor of fixed values (its weights), of any rank: a bias table, a mask, a scale of any shape.",
    categories=(Category.TENSOR,),
    documentation=(
        "<p>Outputs the weight <b>value</b>, of the sizes <b>dimensions</b> (any rank 1 to 6: <code>1x3x49x49</code>), "
        "the same at every run. An element-wise layer combines it with computed tensors (ONNX initializers read by "
        "Add, Mul..., a relative-position bias, an attention mask).</p>"
        "<p>No inputs.</p><p><b>Weights</b>: value.</p>"
    ),
    inputs=(),
    params=(ParamDesc("dimensions", "dimension", Dims(1, 1, 1, 1), "the sizes of the tensor", main=True, any_rank=True),),
    weights=("value",),
)


class Constant(Layer):
    desc = DESC

    def validate(self) -> None:
        if min(self.p["dimensions"]) < 1:
            raise self.param_error("dimensions", f"{self.p['dimensions']} has a zero size; every size must be at least 1")

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        return self.p["dimensions"]

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        return {"value": tuple(self.p["dimensions"])}

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.store(out, self.activate(self.weights["value"].astype(self.cdtype, copy=False)))

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return 0

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("Identity", [g.weight("value")])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        ref = t.params({"value": t.weight("value")}, trainable=False)
        return f'{ref}["value"]'


LAYER = Constant
