"""tanh: hyperbolic tangent."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc
from engine.layer import Activation


class Tanh(Activation):
    desc = ActivationDesc("tanh", "Tanh", "Hyperbolic tangent.",
                          documentation="<p><code>y = tanh(x)</code>. ONNX: Tanh.</p>")

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return xp.tanh(x)


ACTIVATION = Tanh
