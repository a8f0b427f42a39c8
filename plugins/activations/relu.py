"""relu: max(x, 0)."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc

from ._operator import OperatorActivation


def relu(xp: Any, x: Any) -> Any:
    """``max(x, 0)``."""
    return xp.maximum(x, 0)


class Relu(OperatorActivation):
    onnx_op = "Relu"
    function = staticmethod(relu)
    torch_function = "F.relu"
    desc = ActivationDesc("relu", "ReLU", "Rectified linear unit: max(x, 0).",
                          documentation="<p><code>y = max(x, 0)</code>. ONNX: Relu.</p>", epilogue="relu")

    @classmethod
    def apply_inplace(cls, xp: Any, x: Any, coefs: dict[str, float]) -> None:
        xp.maximum(x, 0, out=x)  # exact in every dtype: no float32 round trip, no temporary


ACTIVATION = Relu
