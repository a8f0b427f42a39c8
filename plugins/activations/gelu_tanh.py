"""gelu_tanh: the tanh approximation of GELU."""
from __future__ import annotations

import math
from typing import Any

from engine.descriptors import ActivationDesc
from engine.layer import Activation

from ._precision import widen

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
#: beyond |x| = 10 the tanh argument exceeds 43 and tanh is +-1 in float32: clamping there changes
#: nothing and keeps x**3 finite for any input
_X_LIMIT = 10.0


def gelu_tanh(xp: Any, x: Any) -> Any:
    """``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``; float16 input is evaluated in float32."""
    xf = widen(x)
    xc = xp.clip(xf, -_X_LIMIT, _X_LIMIT)
    inner = xp.tanh(_SQRT_2_OVER_PI * (xc + 0.044715 * (xc * xc * xc)))
    inner += 1.0
    return (0.5 * xf * inner).astype(x.dtype, copy=False)


class GeluTanh(Activation):
    desc = ActivationDesc(
        "gelu_tanh", "GELU (tanh approximation)",
        "GELU approximated with tanh: 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))).",
        documentation=(
            "<p><code>y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x<sup>3</sup>)))</code>.</p>"
            "<p>The approximation of GELU used by GPT-2, BERT and PyTorch's "
            "<code>gelu(approximate='tanh')</code>; it differs from the exact <b>gelu</b> by less than 5e-4.</p>"
            "<p>ONNX: <code>Gelu(x, approximate=\"tanh\")</code> (opset 20).</p>"
        ),
        epilogue="gelu_tanh",
    )

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return gelu_tanh(xp, x)

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
        cube = g.node("Mul", [g.node("Mul", [x, x], "act_square"), x], "act_cube")
        inner = g.node("Add", [x, g.node("Mul", [cube, g.value("act_c", 0.044715)], "act_cubic")], "act_inner")
        tanh = g.node("Tanh", [g.node("Mul", [inner, g.value("act_k", _SQRT_2_OVER_PI)], "act_arg")], "act_tanh")
        half_x = g.node("Mul", [x, g.value("act_half", 0.5)], "act_half_x")
        return g.node("Mul", [half_x, g.node("Add", [tanh, g.value("act_one", 1.0)], "act_gate")], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"F.gelu({x}, approximate='tanh')"


ACTIVATION = GeluTanh
