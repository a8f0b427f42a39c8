"""leaky_sigmoid: sigmoid(x) + alpha * x."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc

from ._leaky import LEAK, LeakyActivation
from .sigmoid import sigmoid


def leaky_sigmoid(xp: Any, x: Any, alpha: float) -> Any:
    """Logistic function plus a linear leak ``alpha * x`` (slope never below ``alpha``)."""
    return sigmoid(xp, x) + x * x.dtype.type(alpha)


class LeakySigmoid(LeakyActivation):
    onnx_op = "Sigmoid"
    torch_fn = "torch.sigmoid"
    desc = ActivationDesc(
        "leaky_sigmoid", "Leaky sigmoid", "Sigmoid plus a linear leak: sigmoid(x) + alpha*x.",
        coefficients=(LEAK,),
        documentation=(
            "<p><code>y = sigmoid(x) + alpha*x</code>, where <code>sigmoid(x) = 1 / (1 + exp(-x))</code>.</p>"
            "<p>The leak keeps a gradient of at least <b>alpha</b> where the sigmoid saturates; "
            "<b>alpha</b> = 0 gives the plain sigmoid.</p>"
            "<ul><li><b>alpha</b>: slope of the leak, default 0.01, in [0, 1].</li></ul>"
            "<p>ONNX: <code>Add(Sigmoid(x), Mul(x, alpha))</code>.</p>"
        ),
    )

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return leaky_sigmoid(xp, x, coefs["alpha"])


ACTIVATION = LeakySigmoid
