"""unary: one element-wise function of a tensor of any rank (erf, pow, sqrt, reciprocal, exp, log, abs, neg)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims
from plugins.activations.gelu import erfc_nonnegative

OPERATIONS = ("erf", "pow", "sqrt", "reciprocal", "exp", "log", "abs", "neg", "identity")
_ONNX = {"erf": "Erf", "sqrt": "Sqrt", "reciprocal": "Reciprocal", "exp": "Exp", "log": "Log", "abs": "Abs",
         "neg": "Neg", "identity": "Identity"}
_TORCH = {"erf": "torch.erf({})", "sqrt": "torch.sqrt({})", "reciprocal": "torch.reciprocal({})",
          "exp": "torch.exp({})", "log": "torch.log({})", "abs": "torch.abs({})", "neg": "-({})", "identity": "{}"}


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
        else:
            y = getattr(xp, operation)(xf)
    return y.astype(x.dtype, copy=False)


DESC = LayerDesc(
    name="unary",
    display_name="Unary maths",
    summary="One element-wise function of a tensor of any rank: erf, pow, sqrt, reciprocal, exp, log, abs, neg.",
    categories=(Category.ARITHMETIC,),
    documentation=(
        "<p>Applies <b>operation</b> to every value: <code>erf</code>, <code>pow</code> (x to the power "
        "<b>exponent</b>), <code>sqrt</code>, <code>reciprocal</code> (1/x), <code>exp</code>, <code>log</code>, "
        "<code>abs</code>, <code>neg</code> (-x) or <code>identity</code>, in float32 arithmetic. Out of their "
        "domain the values are those of IEEE arithmetic (log(0) = -inf, sqrt(-1) = NaN), as ONNX Erf, Pow, Sqrt, "
        "Reciprocal, Exp, Log, Abs, Neg.</p><p><b>Inputs</b>: <b>input</b> (primary), a tensor of any rank.</p>"
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

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        return self.primary(inputs)

    def forward(self, inputs: list[Any], out: Any) -> None:
        y = unary(self.xp, self.physical(inputs[0]), self.p["operation"], float(self.p["exponent"]))
        self.store_physical(out, self.activate_physical(y))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        if self.p["operation"] == "pow":
            return g.node("Pow", [inputs[0], g.const("exponent", np.float32(self.p["exponent"]))])
        return g.node(_ONNX[self.p["operation"]], [inputs[0]])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        if self.p["operation"] == "pow":
            return f"torch.pow({inputs[0]}, {float(self.p['exponent'])!r})"
        return _TORCH[self.p["operation"]].format(inputs[0])


LAYER = Unary
