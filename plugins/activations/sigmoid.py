"""sigmoid: 1 / (1 + exp(-x))."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc

from ._operator import OperatorActivation


def sigmoid(xp: Any, x: Any) -> Any:
    """Numerically stable logistic function (no overflow for large |x|)."""
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


class Sigmoid(OperatorActivation):
    onnx_op = "Sigmoid"
    function = staticmethod(sigmoid)
    torch_function = "torch.sigmoid"
    desc = ActivationDesc("sigmoid", "Sigmoid", "Logistic function 1/(1+exp(-x)).",
                          documentation="<p><code>y = 1 / (1 + exp(-x))</code>. ONNX: Sigmoid.</p>", epilogue="sigmoid")


ACTIVATION = Sigmoid
