"""sine: sin(x)."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc

from ._operator import OperatorActivation


def sine(xp: Any, x: Any) -> Any:
    """Sine of ``x`` in radians."""
    return xp.sin(x)


class Sine(OperatorActivation):
    onnx_op = "Sin"
    function = staticmethod(sine)
    torch_function = "torch.sin"
    desc = ActivationDesc(
        "sine", "Sine", "Sine of the input (radians), as in SIREN networks.",
        documentation="<p><code>y = sin(x)</code>, x in radians. ONNX: <code>Sin(x)</code>.</p>",
    )


ACTIVATION = Sine
