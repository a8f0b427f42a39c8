"""softplus: log(1 + exp(x)), a smooth ReLU."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc

from ._operator import OperatorActivation


def softplus(xp: Any, x: Any) -> Any:
    """``log(1 + exp(x))`` as ``max(x, 0) + log1p(exp(-|x|))``: exp never overflows, and large negative x
    keep their tiny positive value instead of rounding ``1 + exp(x)`` to 1."""
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


class Softplus(OperatorActivation):
    onnx_op = "Softplus"
    function = staticmethod(softplus)
    torch_function = "F.softplus"
    desc = ActivationDesc(
        "softplus", "Softplus", "Smooth ReLU: log(1 + exp(x)).",
        documentation=(
            "<p><code>y = log(1 + exp(x))</code>: close to 0 for very negative x, close to x for large x, "
            "always positive.</p>"
            "<p>ONNX: <code>Softplus(x)</code>. PyTorch: <code>F.softplus(x)</code>.</p>"
        ),
        epilogue="softplus",
    )


ACTIVATION = Softplus
