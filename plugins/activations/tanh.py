"""tanh: hyperbolic tangent."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc

from ._operator import OperatorActivation


def tanh(xp: Any, x: Any) -> Any:
    """Hyperbolic tangent."""
    return xp.tanh(x)


class Tanh(OperatorActivation):
    onnx_op = "Tanh"
    function = staticmethod(tanh)
    torch_function = "torch.tanh"
    desc = ActivationDesc("tanh", "Tanh", "Hyperbolic tangent.",
                          documentation="<p><code>y = tanh(x)</code>. ONNX: Tanh.</p>", epilogue="tanh")


ACTIVATION = Tanh
