"""softmax: exp(x) normalised over the channels of each pixel."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc
from engine.layer import Activation

from ._precision import widen


def softmax(xp: Any, x: Any, axis: int = 1) -> Any:
    """Softmax along ``axis`` (channels of a logical NCHW array).

    The maximum along ``axis`` is subtracted first, so ``exp`` only sees values <= 0 and never
    overflows; float16 input is evaluated in float32."""
    xf = widen(x)
    e = xf - xf.max(axis=axis, keepdims=True)
    xp.exp(e, out=e)
    e /= e.sum(axis=axis, keepdims=True)
    return e.astype(x.dtype, copy=False)


class Softmax(Activation):
    desc = ActivationDesc(
        "softmax", "Softmax", "Softmax over the channels of each pixel.",
        documentation=(
            "<p><code>y[n,c,h,w] = exp(x[n,c,h,w]) / sum over k of exp(x[n,k,h,w])</code>: "
            "at every pixel the channels become positive and sum to 1 (per-pixel class probabilities).</p>"
            "<p>Computed as <code>exp(x - max_c x) / sum exp(x - max_c x)</code>, which is the same "
            "function but cannot overflow. Unlike the other activations it mixes channels, so it is "
            "not element-wise.</p>"
            "<p>ONNX: <code>Softmax(x, axis=1)</code> (opset 13 or later).</p>"
        ),
    )

    elementwise = False  # mixes the channels of each pixel: always given a logical N, C, H, W view

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return softmax(xp, x, axis=1)

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        return g.node("Softmax", [x], "act", axis=1)

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"torch.softmax({x}, dim=1)"


ACTIVATION = Softmax
