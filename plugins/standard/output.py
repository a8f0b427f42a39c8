"""output: marks a network output."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc
from engine.layer import Layer
from engine.tensor import Dims

DESC = LayerDesc(
    name="output",
    display_name="Output",
    summary="Network output: its input is a result of the network.",
    categories=(Category.INPUT_OUTPUT,),
    documentation=(
        "<p>Marks its input as an output of the network. It passes the input through without a copy "
        "(bypass); with an activation it applies it into its own buffer.</p>"
        "<ul><li><b>input</b> (primary): the tensor to output.</li></ul>"
    ),
    inputs=(InputDesc("input"),),
    ranks=ANY_RANK,
)


class OutputLayer(Layer):
    desc = DESC
    fused_activations = frozenset()  # forward copies its input; the network applies the activation
    is_network_output = True

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        return inputs[0]  # type: ignore[return-value]

    def bypass_input(self) -> int | None:
        return 0

    def forward(self, inputs: list[Any], out: Any) -> None:
        out[...] = inputs[0]

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return inputs[0]  # type: ignore[return-value]

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return inputs[0]  # type: ignore[return-value]


LAYER = OutputLayer
