"""What the activations ``f(x) + alpha*x`` share: the leak's coefficient, the ONNX graph and the PyTorch expression."""
from __future__ import annotations

from typing import Any, ClassVar

from engine.descriptors import CoefDesc
from engine.layer import Activation

#: the slope of the linear leak
LEAK = CoefDesc("alpha", 0.01, "slope of the linear leak", min=0.0, max=1.0)


class LeakyActivation(Activation):
    """``f(x) + alpha*x``, f being the ONNX operator ``onnx_op`` and the PyTorch function ``torch_fn``."""

    onnx_op: ClassVar[str]
    torch_fn: ClassVar[str]
    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        leak = g.node("Mul", [x, g.value("act_alpha", coefs["alpha"])], "act_leak")
        return g.node("Add", [g.node(cls.onnx_op, [x], f"act_{cls.onnx_op.lower()}"), leak], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"({cls.torch_fn}({x}) + {float(coefs['alpha'])!r} * {x})"
