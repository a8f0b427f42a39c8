"""sigmoid: 1 / (1 + exp(-x))."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc
from engine.layer import Activation


def sigmoid(xp: Any, x: Any) -> Any:
    """Numerically stable logistic function (no overflow for large |x|)."""
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


class Sigmoid(Activation):
    desc = ActivationDesc("sigmoid", "Sigmoid", "Logistic function 1/(1+exp(-x)).",
                          documentation="<p><code>y = 1 / (1 + exp(-x))</code>. ONNX: Sigmoid.</p>", epilogue="sigmoid")

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return sigmoid(xp, x)

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        return g.node("Sigmoid", [x], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"torch.sigmoid({x})"


ACTIVATION = Sigmoid
