"""clamp: min(max(x, min), max); relu6 is clamp with min = 0, max = 6."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.descriptors import ActivationDesc, CoefDesc
from engine.errors import ParameterError
from engine.layer import Activation


def clamp(xp: Any, x: Any, lo: float, hi: float) -> Any:
    """Clip ``x`` to [lo, hi]. Bounds outside the dtype's finite range are brought into it (no
    float16 overflow when casting them; finite values of ``x`` are unaffected)."""
    info = np.finfo(x.dtype)
    lo_t = x.dtype.type(min(max(lo, float(info.min)), float(info.max)))
    hi_t = x.dtype.type(min(max(hi, float(info.min)), float(info.max)))
    return xp.clip(x, lo_t, hi_t)


@dataclass(frozen=True)
class ClampDesc(ActivationDesc):
    """Clamp's descriptor: besides each coefficient's own checks, min must not exceed max."""

    def coefficient_values(self, given: dict[str, Any], owner: str = "") -> dict[str, float]:
        values = super().coefficient_values(given, owner)
        if values["min"] > values["max"]:
            where = f"{owner}: " if owner else ""
            shown = {k: given.get(k, f"{values[k]:g} (default)") for k in ("min", "max")}
            raise ParameterError(f"{where}activation {self.name} coefficient min={shown['min']} is greater than "
                                 f"coefficient max={shown['max']}; min must be <= max")
        return values


class Clamp(Activation):
    desc = ClampDesc(
        "clamp", "Clamp", "Clip values to [min, max]; min=0, max=6 (the default) is ReLU6.",
        coefficients=(CoefDesc("min", 0.0, "lower bound"), CoefDesc("max", 6.0, "upper bound, at least min")),
        documentation=(
            "<p><code>y = min(max(x, min), max)</code>.</p>"
            "<ul><li><b>min</b>: lower bound, default 0.</li>"
            "<li><b>max</b>: upper bound, default 6; must be at least <b>min</b>.</li></ul>"
            "<p>With the defaults this is ReLU6 (<code>min(max(x, 0), 6)</code>); models that name "
            "<code>relu6</code> or <code>clip</code> load as clamp.</p>"
            "<p>ONNX: <code>Clip(x, min, max)</code> (opset 11 or later, min and max as inputs).</p>"
        ),
        legacy_names=("relu6", "clip"),
        epilogue="clamp",
    )

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return clamp(xp, x, coefs["min"], coefs["max"])

    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        return g.node("Clip", [x, g.value("act_min", coefs["min"]), g.value("act_max", coefs["max"])], "act")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        return f"torch.clamp({x}, min={float(coefs['min'])!r}, max={float(coefs['max'])!r})"


ACTIVATION = Clamp
