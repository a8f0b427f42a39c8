"""where: values of one tensor where a mask is nonzero and of another elsewhere (ONNX Where), any rank."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc
from engine.layer import Layer
from engine.tensor import Dims, broadcast_dims


def where(xp: Any, condition: Any, x: Any, y: Any) -> Any:
    """``x`` where ``condition`` is nonzero, ``y`` elsewhere (NumPy broadcasting)."""
    return xp.where(condition != 0, x, y)


DESC = LayerDesc(
    name="where",
    display_name="Where",
    summary="Values of x where the condition is nonzero, of y elsewhere (ONNX Where), tensors of any rank.",
    categories=(Category.ARITHMETIC,),
    documentation=(
        "<p>Selects value by value: <b>x</b> where <b>condition</b> is nonzero (a mask of 0 and 1, from a compare "
        "layer or a constant), <b>y</b> elsewhere. The three tensors broadcast as in ONNX (sizes aligned from the "
        "last axis, equal or 1). ONNX Where, with the boolean condition held as 0 and 1.</p>"
        "<p><b>Inputs</b>: <b>condition</b>, <b>x</b>, <b>y</b> (primary).</p>"
    ),
    inputs=(InputDesc("condition"), InputDesc("x"), InputDesc("y")),
    ranks=ANY_RANK,
)


class Where(Layer):
    desc = DESC
    layout_role = "follow"

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        if any(d is None for d in inputs[:3]) or len(inputs) < 3:
            raise self.shape_error("where needs its three inputs condition, x and y")
        try:
            return broadcast_dims(list(inputs[:3]))
        except ValueError:
            raise self.shape_error("inputs of dimensions " + ", ".join(map(str, inputs[:3])) + " do not broadcast "
                                   "(sizes aligned from the last axis must be equal or 1)") from None

    def forward(self, inputs: list[Any], out: Any) -> None:
        c, x, y = (self.nchw(t) for t in inputs[:3])
        self.store(out, self.activate(where(self.xp, c, x, y).astype(self.cdtype, copy=False)))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("Where", [g.node("Cast", [inputs[0]], "condition", to=9), inputs[1], inputs[2]])  # to BOOL

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return f"torch.where({inputs[0]} != 0, {inputs[1]}, {inputs[2]})"


LAYER = Where
