"""leaky_tanh: tanh(x) + alpha * x."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc, CoefDesc
from engine.layer import Activation


def leaky_tanh(xp: Any, x: Any, alpha: float) -> Any:
    """Hyperbolic tangent plus a linear leak ``alpha * x`` (slope never below ``alpha``)."""
    return xp.tanh(x) + x * x.dtype.type(alpha)


class LeakyTanh(Activation):
    desc = ActivationDesc(
        "leaky_tanh", "Leaky tanh", "Tanh plus a linear leak: tanh(x) + alpha*x.",
        coefficients=(CoefDesc("alpha", 0.01, "slope of the linear leak", min=0.0, max=1.0),),
        documentation=(
            "<p><code>y = tanh(x) + alpha*x</code>.</p>"
            "<p>The leak keeps a gradient of at least <b>alpha</b> where tanh saturates; "
            "<b>alpha</b> = 0 gives the plain tanh.</p>"
            "<ul><li><b>alpha</b>: slope of the leak, default 0.01, in [0, 1].</li></ul>"
            "<p>ONNX: <code>Add(Tanh(x), Mul(x, alpha))</code>.</p>"
        ),
    )

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return leaky_tanh(xp, x, coefs["alpha"])

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        leak = g.node("Mul", [x, g.value("act_alpha", coefs["alpha"])], "act_leak")
        return g.node("Add", [g.node("Tanh", [x], "act_tanh"), leak], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"(torch.tanh({x}) + {float(coefs['alpha'])!r} * {x})"


ACTIVATION = LeakyTanh
