"""gelu: x * Phi(x), Phi the standard normal distribution function (exact, erf form)."""
from __future__ import annotations

import math
from typing import Any

from engine.descriptors import ActivationDesc
from engine.layer import Activation

from ._precision import widen

#: Chebyshev fit of erfc (Numerical Recipes, "erfcc"): relative error below 1.2e-7 for every z >= 0
_ERFC_FIT = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
             0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)
#: erfc(12) ~ 1e-64 is 0 in float32, so clamping |z| there changes nothing and keeps z*z finite
_Z_LIMIT = 12.0


def erfc_nonnegative(xp: Any, z: Any) -> Any:
    """erfc(z) for z >= 0 to float32 precision (relative error < 1.2e-7, also deep in the tail)."""
    t = 1.0 / (1.0 + 0.5 * z)
    poly = t * _ERFC_FIT[-1]
    for c in reversed(_ERFC_FIT[1:-1]):
        poly += c
        poly *= t
    poly += _ERFC_FIT[0]
    poly -= z * z
    return t * xp.exp(poly)


def gelu(xp: Any, x: Any) -> Any:
    """GELU, erf form: ``x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))``.

    ``Phi(-|x|) = 0.5 * erfc(|x| / sqrt(2))`` is evaluated directly (no cancellation for negative x);
    float16 input is evaluated in float32."""
    xf = widen(x)
    z = xp.minimum(xp.abs(xf) * (1.0 / math.sqrt(2.0)), _Z_LIMIT)
    tail = 0.5 * erfc_nonnegative(xp, z)  # Phi(-|x|)
    phi = xp.where(xf >= 0, 1.0 - tail, tail)
    return (xf * phi).astype(x.dtype, copy=False)


class Gelu(Activation):
    desc = ActivationDesc(
        "gelu", "GELU (erf)", "Gaussian error linear unit, exact form 0.5*x*(1 + erf(x/sqrt(2))).",
        documentation=(
            "<p><code>y = x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))</code>, where Phi is the "
            "standard normal distribution function.</p>"
            "<p>erf is evaluated to float32 precision (relative error below 2e-7). For the cheaper "
            "tanh approximation used by some models, choose <b>gelu_tanh</b>.</p>"
            "<p>ONNX: <code>Gelu(x, approximate=\"none\")</code> (opset 20); before opset 20: "
            "<code>Mul(Mul(x, 0.5), Add(Erf(Div(x, sqrt(2))), 1))</code>.</p>"
        ),
        epilogue="gelu",
    )

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return gelu(xp, x)

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        # opset 17 has no Gelu: 0.5 * x * (1 + erf(x / sqrt(2)))
        erf = g.node("Erf", [g.node("Div", [x, g.value("act_sqrt2", math.sqrt(2.0))], "act_scaled")], "act_erf")
        half_x = g.node("Mul", [x, g.value("act_half", 0.5)], "act_half_x")
        return g.node("Mul", [half_x, g.node("Add", [erf, g.value("act_one", 1.0)], "act_gate")], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"F.gelu({x})"


ACTIVATION = Gelu
