"""elu: x for x > 0, alpha * (exp(x) - 1) otherwise."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc, CoefDesc

from ._operator import OperatorActivation


def elu(xp: Any, x: Any, alpha: float) -> Any:
    """Exponential linear unit; ``expm1`` only sees values <= 0, so it never overflows."""
    return xp.where(x > 0, x, x.dtype.type(alpha) * xp.expm1(xp.minimum(x, 0)))


class Elu(OperatorActivation):
    onnx_op = "Elu"
    function = staticmethod(elu)
    torch_function = "F.elu"
    desc = ActivationDesc(
        "elu", "ELU", "Exponential linear unit: x above zero, alpha*(exp(x) - 1) below.",
        coefficients=(CoefDesc("alpha", 1.0, "value approached for very negative x is -alpha", min=0.0),),
        documentation=(
            "<p><code>y = x if x &gt; 0 else alpha * (exp(x) - 1)</code>.</p>"
            "<ul><li><b>alpha</b>: default 1.0, at least 0; outputs never go below -alpha.</li></ul>"
            "<p>ONNX: <code>Elu(x, alpha)</code>.</p>"
        ),
        epilogue="elu",
    )


ACTIVATION = Elu
