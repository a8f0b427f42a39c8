"""mix: blend two tensors with a mix factor and a blend function, or show them side by side (split view)."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.tensor import Dims
from plugins.analysis._options import OptionsLayer, OptionSpec, broadcast_dims

BLENDS = ("linear", "difference", "multiply", "screen", "split")
ORIENTATIONS = ("vertical", "horizontal")


def blend(xp: Any, a: Any, b: Any, mode: str) -> Any:
    """The blend function B(a, b) of two logical arrays (broadcasting)."""
    if mode == "difference":
        return xp.abs(a - b)
    if mode == "multiply":
        return a * b
    if mode == "screen":
        return 1 - (1 - a) * (1 - b)
    return b  # linear


def mix(xp: Any, a: Any, b: Any, factor: float, mode: str, divider: float = 0.5,
        orientation: str = "vertical", line: bool = True) -> Any:
    """``(1 - factor) * a + factor * B(a, b)`` for the blend functions; for ``split``: ``a`` before the
    divider (at ``divider`` times the width, or the height when horizontal), ``b`` from it on, and a
    one-pixel line of value 1 at the divider when ``line``."""
    if mode != "split":
        return (1 - factor) * a + factor * blend(xp, a, b, mode)
    a, b = xp.broadcast_arrays(a, b)
    axis = 3 if orientation == "vertical" else 2
    size = a.shape[axis]
    cut = min(max(int(round(divider * size)), 0), size)
    pos = xp.arange(size).reshape((1, 1, 1, size) if axis == 3 else (1, 1, size, 1))
    out = xp.where(pos < cut, a, b)
    if line and 0 < cut < size:
        out = xp.where(pos == cut, xp.ones((), dtype=out.dtype), out)
    return out


DESC = LayerDesc(
    name="mix",
    display_name="Mix",
    summary="Blend two inputs with a mix factor and a blend function, or a split view with a divider.",
    categories=(Category.ANALYSIS,),
    documentation=(
        "<p>Compares two tensors, typically a network's input and its output (a denoiser's noisy input "
        "against its result). All parameters are <b>runtime options</b>: during analysis they are "
        "changed live in the Parameter Editor and the network reruns from this layer on.</p>"
        "<ul><li><b>a</b> (primary), <b>b</b> (primary): tensors of the same dimensions; a dimension "
        "of size 1 is broadcast (a 1-channel map against an RGB image).</li>"
        "<li><b>blend</b>: how <code>B(a, b)</code> is formed: <code>linear</code> (b), "
        "<code>difference</code> (|a - b|), <code>multiply</code> (a * b), <code>screen</code> "
        "(1 - (1 - a)(1 - b)); the output is <code>(1 - factor) * a + factor * B(a, b)</code>. "
        "<code>split</code> shows a before the divider and b after it. Default linear.</li>"
        "<li><b>factor</b>: 0 (only a) to 1 (only B(a, b)), default 0.5; unused by split.</li>"
        "<li><b>divider</b>: position of the split, 0 to 1 of the width (or height), default 0.5.</li>"
        "<li><b>orientation</b>: <code>vertical</code> divider (left a, right b) or "
        "<code>horizontal</code> (top a, bottom b).</li>"
        "<li><b>divider_line</b>: draw a one-pixel line of value 1 at the divider, default true.</li></ul>"
    ),
    inputs=(InputDesc("a", doc="first tensor (shown where factor = 0)"),
            InputDesc("b", doc="second tensor")),
    params=(
        ParamDesc("blend", "enum", "linear", "blend function", enum_values=BLENDS, main=True),
        ParamDesc("factor", "float", 0.5, "0 = only a, 1 = only the blend of a and b", min=0.0, max=1.0, main=True),
        ParamDesc("divider", "float", 0.5, "split position as a fraction of the width or height", min=0.0, max=1.0),
        ParamDesc("orientation", "enum", "vertical", "direction of the split divider", enum_values=ORIENTATIONS),
        ParamDesc("divider_line", "bool", True, "draw a line at the split divider"),
    ),
)


class Mix(OptionsLayer):
    desc = DESC
    OPTIONS = (
        OptionSpec("blend", "Blend function"),
        OptionSpec("factor", "Mix factor", step=0.01, extras={"slider": True}),
        OptionSpec("divider", "Split divider", step=0.01, extras={"slider": True}),
        OptionSpec("orientation", "Split orientation"),
        OptionSpec("divider_line", "Divider line"),
    )

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        assert inputs[0] is not None and inputs[1] is not None
        return broadcast_dims(self, inputs[0], inputs[1])

    def forward(self, inputs: list[Any], out: Any) -> None:
        p = self.p
        y = mix(self.xp, self.nchw(inputs[0]), self.nchw(inputs[1]), p["factor"], p["blend"], p["divider"],
                p["orientation"], p["divider_line"])
        self.store(out, self.activate(y))


LAYER = Mix
