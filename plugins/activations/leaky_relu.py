"""leaky_relu: x for x >= 0, alpha * x otherwise."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc, CoefDesc
from engine.layer import Activation


class LeakyRelu(Activation):
    desc = ActivationDesc(
        "leaky_relu", "Leaky ReLU", "x for x >= 0, alpha*x below zero.",
        coefficients=(CoefDesc("alpha", 0.01, "slope below zero"),),
        documentation="<p><code>y = x if x &gt;= 0 else alpha*x</code>; <b>alpha</b> default 0.01. ONNX: LeakyRelu.</p>",
        epilogue="leaky_relu",
    )

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return xp.where(x >= 0, x, x * x.dtype.type(coefs["alpha"]))

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        return g.node("LeakyRelu", [x], "act", alpha=float(coefs["alpha"]))

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"F.leaky_relu({x}, {float(coefs['alpha'])!r})"


ACTIVATION = LeakyRelu
