"""compare: a comparison or logic operation of two tensors of any rank giving 1 where it holds and 0 elsewhere (ONNX
Less, Greater, Equal, LessOrEqual, GreaterOrEqual, And, Or, Xor, with masks held as float tensors)."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims, broadcast_dims

#: operation -> (ONNX operator, PyTorch function); the logic ones read any nonzero value as true
OPERATIONS = {"less": ("Less", "torch.lt"), "less_equal": ("LessOrEqual", "torch.le"),
              "greater": ("Greater", "torch.gt"), "greater_equal": ("GreaterOrEqual", "torch.ge"),
              "equal": ("Equal", "torch.eq"), "and": ("And", "torch.logical_and"), "or": ("Or", "torch.logical_or"),
              "xor": ("Xor", "torch.logical_xor")}
LOGIC = ("and", "or", "xor")


def compare(xp: Any, a: Any, b: Any, operation: str) -> Any:
    """1 where ``a operation b`` holds, 0 elsewhere (NumPy broadcasting), in ``a``'s dtype."""
    if operation in LOGIC:
        a, b = a != 0, b != 0
    fn = {"less": xp.less, "less_equal": xp.less_equal, "greater": xp.greater, "greater_equal": xp.greater_equal,
          "equal": xp.equal, "and": xp.logical_and, "or": xp.logical_or, "xor": xp.logical_xor}[operation]
    return fn(a, b)


DESC = LayerDesc(
    name="compare",
    display_name="Compare",
    summary="1 where a comparison or logic operation of two tensors holds, 0 elsewhere (ONNX Less, Equal, And...).",
    categories=(Category.ARITHMETIC,),
    documentation=(
        "<p>Compares <b>a</b> with <b>b</b> value by value and gives 1 where <b>operation</b> holds, 0 elsewhere: "
        "<code>less</code>, <code>less_equal</code>, <code>greater</code>, <code>greater_equal</code>, "
        "<code>equal</code>, or the logic <code>and</code>, <code>or</code>, <code>xor</code> (a nonzero value is "
        "true). A mask of 0 and 1 is what the where layer selects with. Tensors of any rank broadcast as in ONNX. "
        "ONNX Less, LessOrEqual, Greater, GreaterOrEqual, Equal, And, Or, Xor (their boolean results as 0 and 1).</p>"
        "<p><b>Inputs</b>: <b>a</b> and <b>b</b> (primary).</p>"
    ),
    inputs=(InputDesc("a"), InputDesc("b")),
    params=(ParamDesc("operation", "enum", "less", "the comparison", enum_values=tuple(OPERATIONS), main=True),),
    ranks=ANY_RANK,
)


class Compare(Layer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        a, b = inputs[0], inputs[1]
        if a is None or b is None:
            raise self.shape_error("compare needs both inputs a and b")
        try:
            return broadcast_dims([a, b])
        except ValueError:
            raise self.shape_error(f"inputs of dimensions {a} and {b} do not broadcast (sizes aligned from the last "
                                   "axis must be equal or 1)") from None

    def forward(self, inputs: list[Any], out: Any) -> None:
        y = compare(self.xp, self.nchw(inputs[0]), self.nchw(inputs[1]), self.p["operation"])
        self.store(out, self.activate(y.astype(self.cdtype)))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        a, b = inputs[0], inputs[1]
        if self.p["operation"] in LOGIC:
            a, b = (g.node("Cast", [x], f"{name}_bool", to=9) for x, name in ((a, "a"), (b, "b")))  # BOOL
        y = g.node(OPERATIONS[self.p["operation"]][0], [a, b], "mask")
        return g.node("Cast", [y], to=g.elem_type)  # the network's float type

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        a, b = inputs[0], inputs[1]
        return f"{OPERATIONS[self.p['operation']][1]}({a}, {b}).to({a}.dtype)"


LAYER = Compare
