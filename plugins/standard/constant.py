"""constant: a tensor of fixed values of any rank (its weight), for the constants an imported graph computes with."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import ANY_RANK, LayerDesc, ParamDesc
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import Dims

DESC = LayerDesc(
    name="constant",
    display_name="Constant",
    summary="A tensor of fixed values of any rank, read from the weights (an ONNX constant or initializer).",
    categories=(Category.TENSOR,),
    documentation=(
        "<p>Outputs its weight <b>value</b>, a tensor of <b>dimensions</b> (1 to 6 sizes, e.g. <code>1x1x4x4</code> "
        "or <code>5</code>), the same at every run: a mask, a position table, a constant operand of an element-wise "
        "layer or of a matrix product, a constant graph output of an imported model. Without weights it is all "
        "zeros. ONNX: Constant (or an initializer) read as a tensor.</p><p><b>Inputs</b>: none.</p>"
    ),
    inputs=(),
    params=(ParamDesc("dimensions", "dimension", Dims(1, 1, 1, 1), "the sizes of the tensor", main=True,
                      any_rank=True),),
    weights=("value",),
    ranks=ANY_RANK,
)


class Constant(Layer):
    desc = DESC
    layout_role = "follow"

    def validate(self) -> None:
        if min(self.p["dimensions"]) < 1:
            raise self.param_error("dimensions", f"{self.p['dimensions']} has a zero size; every size must be at least 1")

    def default_dims(self) -> Dims:
        return self.p["dimensions"]

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        return self.p["dimensions"]

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        return {"value": tuple(self.p["dimensions"])}

    def init_weight(self, weight: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Zeros: a constant has no meaningful random value."""
        return np.zeros(shape, dtype=np.float32)

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return 0

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.offer_replay(None)
        value = self.weights["value"].reshape(tuple(self.out_dims)).astype(self.cdtype, copy=False)
        self.store_view(out, self.activate(value), self.weights["value"])

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("Identity", [g.weight("value", shape=tuple(self.p["dimensions"]))])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        ref = t.params({"value": t.weight("value").reshape(tuple(self.p["dimensions"]))}, trainable=False)
        return f'{ref}["value"]'


LAYER = Constant


REPLAYABLE_FORWARDS.add(Constant.forward)  # one copy between the network's buffers, where it offers it
