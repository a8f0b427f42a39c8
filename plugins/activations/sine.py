"""sine: sin(x)."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc
from engine.layer import Activation


class Sine(Activation):
    desc = ActivationDesc(
        "sine", "Sine", "Sine of the input (radians), as in SIREN networks.",
        documentation="<p><code>y = sin(x)</code>, x in radians. ONNX: <code>Sin(x)</code>.</p>",
    )

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return xp.sin(x)

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        return g.node("Sin", [x], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"torch.sin({x})"


ACTIVATION = Sine
