"""silu: x * sigmoid(x) (also called swish)."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc
from engine.layer import Activation

from .sigmoid import sigmoid


def silu(xp: Any, x: Any) -> Any:
    """Sigmoid-weighted linear unit, using the overflow-free sigmoid."""
    return x * sigmoid(xp, x)


class Silu(Activation):
    desc = ActivationDesc(
        "silu", "SiLU (swish)", "Sigmoid-weighted linear unit x*sigmoid(x).",
        documentation=(
            "<p><code>y = x * sigmoid(x) = x / (1 + exp(-x))</code>; also called swish (with beta = 1).</p>"
            "<p>ONNX: <code>Mul(x, Sigmoid(x))</code>.</p>"
        ),
        epilogue="silu",
    )

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return silu(xp, x)

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        return g.node("Mul", [x, g.node("Sigmoid", [x], "act_sigmoid")], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"F.silu({x})"


ACTIVATION = Silu
