"""relu: max(x, 0)."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc
from engine.layer import Activation


class Relu(Activation):
    desc = ActivationDesc("relu", "ReLU", "Rectified linear unit: max(x, 0).",
                          documentation="<p><code>y = max(x, 0)</code>. ONNX: Relu.</p>", epilogue="relu")

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return xp.maximum(x, 0)

    @classmethod
    def apply_inplace(cls, xp: Any, x: Any, coefs: dict[str, float]) -> None:
        xp.maximum(x, 0, out=x)  # exact in every dtype: no float32 round trip, no temporary

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        return g.node("Relu", [x], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"F.relu({x})"


ACTIVATION = Relu
