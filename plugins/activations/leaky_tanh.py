"""leaky_tanh: tanh(x) + alpha * x."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc

from ._leaky import LEAK, LeakyActivation


def leaky_tanh(xp: Any, x: Any, alpha: float) -> Any:
    """Hyperbolic tangent plus a linear leak ``alpha * x`` (slope never below ``alpha``)."""
    return xp.tanh(x) + x * x.dtype.type(alpha)


class LeakyTanh(LeakyActivation):
    onnx_op = "Tanh"
    torch_fn = "torch.tanh"
    desc = ActivationDesc(
        "leaky_tanh", "Leaky tanh", "Tanh plus a linear leak: tanh(x) + alpha*x.",
        coefficients=(LEAK,),
        documentation=(
            "<p><code>y = tanh(x) + alpha*x</code>.</p>"
            "<p>The leak keeps a gradient of at least <b>alpha</b> where tanh saturates; "
            "<b>alpha</b> = 0 gives the plain tanh.</p>"
            "<ul><li><b>alpha</b>: slope of the leak, default 0.01, in [0, 1].</li></ul>"
            "<p>ONNX: <code>Add(Tanh(x), Mul(x, alpha))</code>.</p>"
        ),
    )

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return leaky_tanh(xp, x, coefs["alpha"])


ACTIVATION = LeakyTanh
