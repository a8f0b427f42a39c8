"""selu: gamma * (x for x > 0, alpha * (exp(x) - 1) otherwise)."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc, CoefDesc

from ._operator import OperatorActivation
from .elu import elu

#: ONNX Selu's default coefficients (the self-normalising constants, rounded to float32)
SELU_ALPHA = 1.67326319217681884765625
SELU_GAMMA = 1.05070102214813232421875


def selu(xp: Any, x: Any, alpha: float, gamma: float) -> Any:
    """Scaled exponential linear unit: ``gamma * elu(x, alpha)``."""
    return elu(xp, x, alpha) * x.dtype.type(gamma)


class Selu(OperatorActivation):
    onnx_op = "Selu"
    function = staticmethod(selu)
    desc = ActivationDesc(
        "selu", "SELU", "Scaled ELU: gamma * (x above zero, alpha*(exp(x) - 1) below).",
        coefficients=(
            CoefDesc("alpha", SELU_ALPHA, "value approached for very negative x is -alpha*gamma", min=0.0),
            CoefDesc("gamma", SELU_GAMMA, "scale of the whole function", min=0.0),
        ),
        documentation=(
            "<p><code>y = gamma * (x if x &gt; 0 else alpha * (exp(x) - 1))</code> (self-normalising "
            "networks).</p>"
            "<ul><li><b>alpha</b>: default 1.67326319217681884765625, at least 0.</li>"
            "<li><b>gamma</b>: default 1.05070102214813232421875, at least 0.</li></ul>"
            "<p>Since gamma &gt; 1, float16 outputs overflow to infinity for inputs above about 62340.</p>"
            "<p>ONNX: <code>Selu(x, alpha, gamma)</code> (these defaults are ONNX's and PyTorch's).</p>"
        ),
    )

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"{float(coefs['gamma'])!r} * F.elu({x}, alpha={float(coefs['alpha'])!r})"


ACTIVATION = Selu
