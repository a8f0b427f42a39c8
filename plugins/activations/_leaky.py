"""What the activations ``f(x) + alpha*x`` share: the leak's coefficient, the maths, the description, the ONNX graph
and the PyTorch expression."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from engine.descriptors import ActivationDesc, CoefDesc
from engine.layer import Activation

#: the slope of the linear leak
LEAK = CoefDesc("alpha", 0.01, "slope of the linear leak", min=0.0, max=1.0)


def leaky(f: Callable[[Any, Any], Any], xp: Any, x: Any, alpha: float) -> Any:
    """``f(x)`` plus a linear leak ``alpha * x`` (slope never below ``alpha`` where ``f`` saturates)."""
    return f(xp, x) + x * x.dtype.type(alpha)


def leaky_desc(fn: str, onnx_op: str, saturating: str, definition: str = "") -> ActivationDesc:
    """The description of ``leaky_<fn>``: ``fn(x) + alpha*x``; ``saturating`` names ``fn`` in the sentence on where
    it saturates, ``definition`` follows the formula."""
    return ActivationDesc(
        f"leaky_{fn}", f"Leaky {fn}", f"{fn.capitalize()} plus a linear leak: {fn}(x) + alpha*x.",
        coefficients=(LEAK,),
        documentation=(
            f"<p><code>y = {fn}(x) + alpha*x</code>{definition}.</p>"
            f"<p>The leak keeps a gradient of at least <b>alpha</b> where {saturating} saturates; "
            f"<b>alpha</b> = 0 gives the plain {fn}.</p>"
            "<ul><li><b>alpha</b>: slope of the leak, default 0.01, in [0, 1].</li></ul>"
            f"<p>ONNX: <code>Add({onnx_op}(x), Mul(x, alpha))</code>.</p>"
        ),
    )


class LeakyActivation(Activation):
    """``f(x) + alpha*x``, f being the plain function ``saturating``, the ONNX operator ``onnx_op`` and the PyTorch
    function ``torch_fn``."""

    saturating: ClassVar[Callable[[Any, Any], Any]]
    onnx_op: ClassVar[str]
    torch_fn: ClassVar[str]
    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def apply(cls, xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return leaky(cls.saturating, xp, x, coefs["alpha"])

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        leak = g.node("Mul", [x, g.value("act_alpha", coefs["alpha"])], "act_leak")
        return g.node("Add", [g.node(cls.onnx_op, [x], f"act_{cls.onnx_op.lower()}"), leak], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"({cls.torch_fn}({x}) + {float(coefs['alpha'])!r} * {x})"
