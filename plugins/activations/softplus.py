"""softplus: log(1 + exp(x)), a smooth ReLU."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc
from engine.layer import Activation


def softplus(xp: Any, x: Any) -> Any:
    """``log(1 + exp(x))`` as ``max(x, 0) + log1p(exp(-|x|))``: exp never overflows, and large negative x
    keep their tiny positive value instead of rounding ``1 + exp(x)`` to 1."""
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


class Softplus(Activation):
    desc = ActivationDesc(
        "softplus", "Softplus", "Smooth ReLU: log(1 + exp(x)).",
        documentation=(
            "<p><code>y = log(1 + exp(x))</code>: close to 0 for very negative x, close to x for large x, "
            "always positive.</p>"
            "<p>ONNX: <code>Softplus(x)</code>. PyTorch: <code>F.softplus(x)</code>.</p>"
        ),
        epilogue="softplus",
    )

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return softplus(xp, x)

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        return g.node("Softplus", [x], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"F.softplus({x})"


ACTIVATION = Softplus
