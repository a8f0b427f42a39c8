"""leaky_relu: x for x >= 0, alpha * x otherwise."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc, CoefDesc

from ._operator import OperatorActivation


def leaky_relu(xp: Any, x: Any, alpha: float) -> Any:
    """x where x >= 0, ``alpha * x`` below."""
    return xp.where(x >= 0, x, x * x.dtype.type(alpha))


class LeakyRelu(OperatorActivation):
    onnx_op = "LeakyRelu"
    function = staticmethod(leaky_relu)
    desc = ActivationDesc(
        "leaky_relu", "Leaky ReLU", "x for x >= 0, alpha*x below zero.",
        coefficients=(CoefDesc("alpha", 0.01, "slope below zero"),),
        documentation="<p><code>y = x if x &gt;= 0 else alpha*x</code>; <b>alpha</b> default 0.01. ONNX: LeakyRelu.</p>",
        epilogue="leaky_relu",
    )

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"F.leaky_relu({x}, {float(coefs['alpha'])!r})"


ACTIVATION = LeakyRelu
