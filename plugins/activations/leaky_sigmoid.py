"""leaky_sigmoid: sigmoid(x) + alpha * x."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc, CoefDesc
from engine.layer import Activation

from .sigmoid import sigmoid


def leaky_sigmoid(xp: Any, x: Any, alpha: float) -> Any:
    """Logistic function plus a linear leak ``alpha * x`` (slope never below ``alpha``)."""
    return sigmoid(xp, x) + x * x.dtype.type(alpha)


class LeakySigmoid(Activation):
    desc = ActivationDesc(
        "leaky_sigmoid", "Leaky sigmoid", "Sigmoid plus a linear leak: sigmoid(x) + alpha*x.",
        coefficients=(CoefDesc("alpha", 0.01, "slope of the linear leak", min=0.0, max=1.0),),
        documentation=(
            "<p><code>y = sigmoid(x) + alpha*x</code>, where <code>sigmoid(x) = 1 / (1 + exp(-x))</code>.</p>"
            "<p>The leak keeps a gradient of at least <b>alpha</b> where the sigmoid saturates; "
            "<b>alpha</b> = 0 gives the plain sigmoid.</p>"
            "<ul><li><b>alpha</b>: slope of the leak, default 0.01, in [0, 1].</li></ul>"
            "<p>ONNX: <code>Add(Sigmoid(x), Mul(x, alpha))</code>.</p>"
        ),
    )

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return leaky_sigmoid(xp, x, coefs["alpha"])

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        leak = g.node("Mul", [x, g.value("act_alpha", coefs["alpha"])], "act_leak")
        return g.node("Add", [g.node("Sigmoid", [x], "act_sigmoid"), leak], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"(torch.sigmoid({x}) + {float(coefs['alpha'])!r} * {x})"


ACTIVATION = LeakySigmoid
