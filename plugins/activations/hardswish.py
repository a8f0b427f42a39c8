"""hardswish: x * clip(x/6 + 1/2, 0, 1)."""
from __future__ import annotations

from typing import Any

from engine.descriptors import ActivationDesc

from ._operator import OperatorActivation


def hardswish(xp: Any, x: Any) -> Any:
    """Piecewise-linear swish. The gate is computed as ``x/6 + 1/2`` (not ``(x + 3) * x / 6``) so that
    no intermediate exceeds ``|x|``: float16 cannot overflow."""
    t = x.dtype.type
    return x * xp.clip(x * t(1.0 / 6.0) + t(0.5), t(0), t(1))


class HardSwish(OperatorActivation):
    onnx_op = "HardSwish"
    function = staticmethod(hardswish)
    torch_function = "F.hardswish"
    desc = ActivationDesc(
        "hardswish", "Hard swish", "Piecewise-linear swish: x * relu6(x + 3) / 6.",
        documentation=(
            "<p><code>y = x * max(0, min(1, x/6 + 1/2))</code> = <code>x * relu6(x + 3) / 6</code>: "
            "0 for x &lt;= -3, x for x &gt;= 3, a parabola between (MobileNetV3).</p>"
            "<p>ONNX: <code>HardSwish(x)</code> (opset 14).</p>"
        ),
        epilogue="hardswish",
    )


ACTIVATION = HardSwish
