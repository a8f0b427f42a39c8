"""mish: x * tanh(softplus(x))."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc
from engine.layer import Activation

from ._precision import widen
from .softplus import softplus


def mish(xp: Any, x: Any) -> Any:
    """Self-regularised non-monotonic activation; float16 input is evaluated in float32."""
    xf = widen(x)
    return (xf * xp.tanh(softplus(xp, xf))).astype(x.dtype, copy=False)


class Mish(Activation):
    desc = ActivationDesc(
        "mish", "Mish", "x * tanh(softplus(x)).",
        documentation=(
            "<p><code>y = x * tanh(log(1 + exp(x)))</code>: like SiLU, smooth and slightly negative for "
            "negative x (minimum about -0.31 near x = -1.19), close to x for large x (YOLOv4).</p>"
            "<p>ONNX: <code>Mish(x)</code> (opset 18); the exporter (opset 17) writes "
            "<code>Mul(x, Tanh(Softplus(x)))</code>. PyTorch: <code>F.mish(x)</code>.</p>"
        ),
        epilogue="mish",
    )

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return mish(xp, x)

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        gate = g.node("Tanh", [g.node("Softplus", [x], "act_softplus")], "act_tanh")
        return g.node("Mul", [x, gate], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"F.mish({x})"


ACTIVATION = Mish
