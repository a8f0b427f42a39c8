"""hard_sigmoid: max(0, min(1, alpha * x + beta))."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc, CoefDesc

from ._operator import OperatorActivation


def hard_sigmoid(xp: Any, x: Any, alpha: float, beta: float) -> Any:
    """Piecewise-linear sigmoid (ONNX HardSigmoid)."""
    t = x.dtype.type
    return xp.clip(x * t(alpha) + t(beta), t(0), t(1))


class HardSigmoid(OperatorActivation):
    onnx_op = "HardSigmoid"
    function = staticmethod(hard_sigmoid)
    desc = ActivationDesc(
        "hard_sigmoid", "Hard sigmoid", "Piecewise-linear sigmoid: max(0, min(1, alpha*x + beta)).",
        coefficients=(CoefDesc("alpha", 0.2, "slope of the linear part"),
                      CoefDesc("beta", 0.5, "value at x = 0")),
        documentation=(
            "<p><code>y = max(0, min(1, alpha * x + beta))</code>, as ONNX HardSigmoid.</p>"
            "<ul><li><b>alpha</b>: default 0.2 (ONNX's default; PyTorch's <code>hardsigmoid</code> and "
            "MobileNetV3 use 1/6).</li>"
            "<li><b>beta</b>: default 0.5.</li></ul>"
            "<p>ONNX: <code>HardSigmoid(x, alpha, beta)</code>.</p>"
        ),
        epilogue="hard_sigmoid",
    )

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"torch.clamp(({x}) * {float(coefs['alpha'])!r} + {float(coefs['beta'])!r}, 0.0, 1.0)"


ACTIVATION = HardSigmoid
