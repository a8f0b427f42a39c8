"""celu: x for x > 0, alpha * (exp(x / alpha) - 1) otherwise."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc, CoefDesc

from ._operator import OperatorActivation

#: smallest alpha accepted (alpha divides x; 0 is undefined)
CELU_MIN_ALPHA = 1e-6


def celu(xp: Any, x: Any, alpha: float) -> Any:
    """Continuously differentiable ELU; ``expm1`` only sees values <= 0, so it never overflows.

    Negative x are first limited to ``-30*alpha`` (where ``exp(x/alpha)`` is below 1e-13, so nothing
    changes) so that ``x/alpha`` cannot overflow float16 for small alpha."""
    t = x.dtype.type
    low = t(-min(30.0 * alpha, 60000.0))
    return xp.where(x > 0, x, t(alpha) * xp.expm1(xp.clip(x, low, t(0)) / t(alpha)))


class Celu(OperatorActivation):
    onnx_op = "Celu"
    function = staticmethod(celu)
    torch_function = "F.celu"
    desc = ActivationDesc(
        "celu", "CELU", "Continuously differentiable ELU: x above zero, alpha*(exp(x/alpha) - 1) below.",
        coefficients=(CoefDesc("alpha", 1.0, "value approached for very negative x is -alpha",
                               min=CELU_MIN_ALPHA),),
        documentation=(
            "<p><code>y = max(0, x) + min(0, alpha * (exp(x / alpha) - 1))</code>; with alpha = 1 it equals "
            "elu.</p>"
            "<ul><li><b>alpha</b>: default 1.0, greater than 0 (at least 1e-6).</li></ul>"
            "<p>ONNX: <code>Celu(x, alpha)</code> (opset 12).</p>"
        ),
    )


ACTIVATION = Celu
