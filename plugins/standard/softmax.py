"""softmax: softmax along any axis of a tensor of any rank (ONNX Softmax, opset 13)."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims
from plugins.activations.softmax import softmax
from plugins.standard._common_rank import axis_index

DESC = LayerDesc(
    name="softmax",
    display_name="Softmax",
    summary="Softmax along any axis of a tensor of any rank (ONNX Softmax).",
    categories=(Category.ACTIVATION,),
    documentation=(
        "<p><code>exp(x) / sum(exp(x))</code> along <b>axis</b> (negative: from the end; default -1, the last), "
        "as ONNX Softmax (opset 13) and torch.softmax. The softmax activation is the same along the channels of "
        "N x C x H x W.</p><p><b>Inputs</b>: <b>input</b> (primary), a tensor of any rank.</p>"
    ),
    inputs=(InputDesc("input"),),
    params=(ParamDesc("axis", "int", -1, "axis the values sum to 1 along; negative: from the end", min=-6, max=5,
                      main=True),),
    ranks=ANY_RANK,
)


class Softmax(Layer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        try:
            axis_index(self.p["axis"], len(x))
        except ValueError as exc:
            raise self.shape_error(str(exc)) from None
        return x

    def forward(self, inputs: list[Any], out: Any) -> None:
        x = self.nchw(inputs[0])
        y = softmax(self.xp, x, axis=axis_index(self.p["axis"], x.ndim))
        self.store(out, self.activate(y))

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return output.elements * 5

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("Softmax", [inputs[0]], axis=int(self.p["axis"]))

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return f"torch.softmax({inputs[0]}, {int(self.p['axis'])})"


LAYER = Softmax
