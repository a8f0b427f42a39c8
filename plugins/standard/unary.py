"""unary: one element-wise function of a tensor of any rank (erf, pow, sqrt, reciprocal, exp, log, abs, neg,
trigonometric and hyperbolic functions, rounding, sign, softsign)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims
from plugins.activations.gelu import erfc_nonnegative

#: the functions that NumPy, CuPy and PyTorch name alike: LayerLab operation -> (ONNX operator, array function)
_MATHS = {"cos": ("Cos", "cos"), "tan": ("Tan", "tan"), "asin": ("Asin", "arcsin"), "acos": ("Acos", "arccos"),
          "atan": ("Atan", "arctan"), "sinh": ("Sinh", "sinh"), "cosh": ("Cosh", "cosh"), "asinh": ("Asinh", "arcsinh"),
          "acosh": ("Acosh", "arccosh"), "atanh": ("Atanh", "arctanh"), "ceil": ("Ceil", "ceil"),
          "floor": ("Floor", "floor"), "round": ("Round", "rint"), "sign": ("Sign", "sign")}
OPERATIONS = ("erf", "pow", "sqrt", "reciprocal", "exp", "log", "abs", "neg", "identity", *_MATHS, "softsign", "not")
_ONNX = {"erf": "Erf", "sqrt": "Sqrt", "reciprocal": "Reciprocal", "exp": "Exp", "log": "Log", "abs": "Abs",
         "neg": "Neg", "identity": "Identity", "softsign": "Softsign", "not": "Not"} | {k: v[0] for k, v in _MATHS.items()}
_TORCH = {"erf": "torch.erf({})", "sqrt": "torch.sqrt({})", "reciprocal": "torch.reciprocal({})",
          "exp": "torch.exp({})", "log": "torch.log({})", "abs": "torch.abs({})", "neg": "-({})", "identity": "{}",
          "softsign": "torch.nn.functional.softsign({})", "round": "torch.round({})",
          "not": "({0} == 0).to({0}.dtype)"} | \
    {k: f"torch.{k}({{}})" for k in _MATHS if k != "round"}


def erf(xp: Any, x: Any) -> Any:
    """The error function to float32 precision (from erfc of |x|, odd)."""
    return xp.sign(x) * (1 - erfc_nonnegative(xp, xp.abs(x)))


def unary(xp: Any, x: Any, operation: str, exponent: float = 1.0) -> Any:
    """``operation`` of every value of ``x`` (float32 arithmetic, the result in ``x``'s dtype); ``pow`` raises to
    ``exponent``."""
    xf = x.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        if operation == "erf":
            y = erf(xp, xf)
        elif operation == "pow":
            y = xf * xf if exponent == 2.0 else xp.power(xf, np.float32(exponent))
        elif operation == "reciprocal":
            y = 1 / xf
        elif operation == "neg":
            y = -xf
        elif operation == "identity":
            y = xf
        elif operation == "not":
            y = (xf == 0).astype(np.float32)
        elif operation == "softsign":
            y = xf / (1 + xp.abs(xf))
        elif operation in _MATHS:
            y = getattr(xp, _MATHS[operation][1])(xf)
        else:
            y = getattr(xp, operation)(xf)
    return y.astype(x.dtype, copy=False)


DESC = LayerDesc(
    name="unary",
    display_name="Unary maths",
    summary="One element-wise function of a tensor of any rank: erf, pow, sqrt, reciprocal, exp, log, abs, neg, "
            "trigonometry, rounding, sign, softsign.",
    categories=(Category.ARITHMETIC,),
    documentation=(
        "<p>Applies <b>operation</b> to every value: <code>erf</code>, <code>pow</code> (x to the power "
        "<b>exponent</b>), <code>sqrt</code>, <code>reciprocal</code> (1/x), <code>exp</code>, <code>log</code>, "
        "<code>abs</code>, <code>neg</code> (-x), <code>identity</code>, <code>cos</code>, <code>tan</code>, "
        "<code>asin</code>, <code>acos</code>, <code>atan</code>, <code>sinh</code>, <code>cosh</code>, "
        "<code>asinh</code>, <code>acosh</code>, <code>atanh</code>, <code>ceil</code>, <code>floor</code>, "
        "<code>round</code> (halves to even), <code>sign</code>, <code>softsign</code> (x / (1 + |x|)) or "
        "<code>not</code> (1 where x is 0, else 0: "
        "the logical not of a mask), in float32 "
        "arithmetic. Out of their domain the values are those of IEEE arithmetic (log(0) = -inf, sqrt(-1) = NaN), as "
        "the ONNX operators of the same names (Erf, Pow, Sqrt, Reciprocal, Exp, Log, Abs, Neg, Cos, Asin...).</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), a tensor of any rank.</p>"
    ),
    inputs=(InputDesc("input"),),
    params=(
        ParamDesc("operation", "enum", "erf", "the function", enum_values=OPERATIONS, main=True),
        ParamDesc("exponent", "float", 2.0, "the power (operation pow)"),
    ),
    ranks=ANY_RANK,
)


class Unary(Layer):
    desc = DESC
    layout_role = "follow"

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        return self.primary(inputs)

    def forward(self, inputs: list[Any], out: Any) -> None:
        y = unary(self.xp, self.physical(inputs[0]), self.p["operation"], float(self.p["exponent"]))
        self.store_physical(out, self.activate_physical(y))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        if self.p["operation"] == "not":
            y = g.node("Not", [g.node("Cast", [inputs[0]], "mask", to=9)], "not")  # BOOL
            return g.node("Cast", [y], to=g.elem_type)  # the network's float type
        if self.p["operation"] == "pow":
            return g.node("Pow", [inputs[0], g.const("exponent", np.float32(self.p["exponent"]))])
        return g.node(_ONNX[self.p["operation"]], [inputs[0]])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        if self.p["operation"] == "pow":
            return f"torch.pow({inputs[0]}, {float(self.p['exponent'])!r})"
        return _TORCH[self.p["operation"]].format(inputs[0])


LAYER = Unary
