"""affine: scale * x + shift, with one scale/shift for the whole tensor or one per channel."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.backends.base import derived
from engine.categories import Category
from engine.descriptors import InputDesc, InputKind, LayerDesc, ParamDesc
from engine.tensor import Dims, Layout
from plugins.standard._common_norm import ScaleShiftBase

MODES = ("per_tensor", "per_channel")


def affine(x: Any, scale: Any, shift: Any) -> Any:
    """Logical NCHW ``scale * x + shift``; scale and shift are numbers, (1,) arrays or (C,) arrays."""
    if getattr(scale, "ndim", 0) == 1 and scale.shape[0] > 1:
        scale = scale.reshape(1, -1, 1, 1)
    if getattr(shift, "ndim", 0) == 1 and shift.shape[0] > 1:
        shift = shift.reshape(1, -1, 1, 1)
    return x * scale + shift


DESC = LayerDesc(
    name="affine",
    display_name="Affine",
    summary="scale * x + shift, for the whole tensor or per channel.",
    categories=(Category.ARITHMETIC,),
    documentation=(
        "<p>Computes <code>y = scale * x + shift</code>.</p>"
        "<ul><li><b>input</b> (primary): N x C x H x W.</li>"
        "<li><b>scale</b>, <b>shift</b> (secondary): replace the scale or shift. In per_channel mode "
        "they hold C values (any dimensions with C elements); in per_tensor mode one value "
        "(e.g. a 1x1x1x1 tensor) that replaces the parameter of the same name.</li>"
        "<li><b>mode</b>: <code>per_tensor</code> (one scale and shift, the parameters below) or "
        "<code>per_channel</code> (weights <code>scale</code> and <code>shift</code> of shape (C,): "
        "<code>y[n,c] = scale[c] * x[n,c] + shift[c]</code>); default per_tensor.</li>"
        "<li><b>scale</b>: multiplier in per_tensor mode, any number, default 1.</li>"
        "<li><b>shift</b>: added in per_tensor mode, any number, default 0.</li></ul>"
        "<p>Weights files (per_channel): <code>NAME_scale.npy</code> and <code>NAME_shift.npy</code>, "
        "shape (C,). Random weights: scale in [0.5, 1.5], shift in [-0.5, 0.5].</p>"
    ),
    inputs=(
        InputDesc("input", doc="N x C x H x W tensor"),
        InputDesc("scale", InputKind.SECONDARY, doc="replaces the scale", weight="scale"),
        InputDesc("shift", InputKind.SECONDARY, doc="replaces the shift", weight="shift"),
    ),
    params=(
        ParamDesc("mode", "enum", "per_tensor", "one scale/shift or one per channel", enum_values=MODES, main=True),
        ParamDesc("scale", "float", 1.0, "multiplier (per_tensor mode)"),
        ParamDesc("shift", "float", 0.0, "added after scaling (per_tensor mode)"),
    ),
    weights=("scale", "shift"),
)


class Affine(ScaleShiftBase):
    desc = DESC

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        x = self.primary(inputs)
        if self.p["mode"] == "per_channel":
            return {"scale": (x.c,), "shift": (x.c,)}
        # per tensor: only a connected input replaces a parameter (the network loads nothing for it)
        return {w: (1,) for i, w in ((1, "scale"), (2, "shift")) if len(inputs) > i and inputs[i] is not None}

    def init_weight(self, weight: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        lo, hi = (0.5, 1.5) if weight == "scale" else (-0.5, 0.5)
        return rng.uniform(lo, hi, size=shape).astype(np.float32)

    def _value(self, name: str, inputs: list[Any]) -> Any:
        if self.p["mode"] == "per_channel":
            return self.weight(name, inputs)
        idx = self.weight_input(name)
        if idx is not None and idx < len(inputs) and inputs[idx] is not None:
            return self.weight(name, inputs)
        return self.p[name]

    def _backend_scale_shift(self, inputs: list[Any], out: Any) -> bool:
        """Per channel on the GPU: the backend's one-pass ``scale_shift`` over the physical arrays, the activation
        fused where it has an epilogue."""
        act = self.activation
        kernel = self.backend.kernel("scale_shift") if self.p["mode"] == "per_channel" else None
        if kernel is None or (act is not None and act.epilogue is None):
            return False
        x = inputs[0]
        if x.ndim != 4 or x.dtype != out.dtype or x.shape != out.shape:
            return False
        cache = None if self.weights_from_inputs(inputs) else self.__dict__.setdefault("_derived", {})
        scale, shift = (derived(cache, name, w, lambda w=w: self.xp.ascontiguousarray(w.reshape(-1), dtype=np.float32))
                        for name, w in (("scale", self._value("scale", inputs)), ("shift", self._value("shift", inputs))))
        return kernel(x, scale, shift, out, self.fmt.layout is Layout.NHWC, act.epilogue if act is not None else None,
                      act.coefs if act is not None else {}) is not None

    def forward(self, inputs: list[Any], out: Any) -> None:
        if self.xp is not np and self._backend_scale_shift(inputs, out):
            return
        y = affine(self.nchw(inputs[0]), self._value("scale", inputs), self._value("shift", inputs))
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "partial: scale and shift from secondary inputs are not exported"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        c = self.input_dims[0].c
        values = []
        for name in ("scale", "shift"):
            idx = self.weight_input(name)
            if self.p["mode"] == "per_channel":
                values.append(g.weight(name, inputs, shape=(1, c, 1, 1)))
            elif idx is not None and idx < len(inputs) and inputs[idx] is not None:
                values.append(g.weight(name, inputs))
            else:
                values.append(g.value(name, self.p[name]))
        return g.node("Add", [g.node("Mul", [inputs[0], values[0]], "scale"), values[1]])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        t.no_weight_inputs(inputs)
        if self.p["mode"] == "per_tensor":
            return f"{inputs[0]} * {float(self.p['scale'])!r} + {float(self.p['shift'])!r}"
        ref = t.params({"scale": t.weight("scale"), "shift": t.weight("shift")})
        return f'{inputs[0]} * {ref}["scale"].view(1, -1, 1, 1) + {ref}["shift"].view(1, -1, 1, 1)'


LAYER = Affine
