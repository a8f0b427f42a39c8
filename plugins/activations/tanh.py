"""tanh: hyperbolic tangent."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc
from engine.layer import Activation


class Tanh(Activation):
    desc = ActivationDesc("tanh", "Tanh", "Hyperbolic tangent.",
                          documentation="<p><code>y = tanh(x)</code>. ONNX: Tanh.</p>", epilogue="tanh")

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return xp.tanh(x)

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        return g.node("Tanh", [x], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"torch.tanh({x})"


ACTIVATION = Tanh
