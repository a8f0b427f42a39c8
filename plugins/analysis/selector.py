"""selector: passes one of its inputs (input number ``index`` of n) to its output."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, InputKind, LayerDesc, ParamDesc
from engine.tensor import Dims
from plugins.analysis._options import OptionsLayer, OptionSpec

DESC = LayerDesc(
    name="selector",
    display_name="Selector",
    summary="Passes input number index of its n inputs to its output.",
    categories=(Category.ANALYSIS,),
    documentation=(
        "<p>Switches between alternatives: the output is a copy of input number <b>index</b> "
        "(counted from 0). Connect, for example, the raw input, a denoised and a sharpened version, "
        "and flip between them live during analysis (<b>index</b> is a <b>runtime option</b>). The "
        "inputs may have different dimensions: the output takes the selected one's, and the network "
        "reshapes when the selection changes its size.</p>"
        "<ul><li><b>inputs</b> (primary, any number, at least one).</li>"
        "<li><b>index</b>: 0 to n - 1, default 0.</li></ul>"
    ),
    inputs=(InputDesc("inputs", InputKind.PRIMARY_INFINITE, doc="the alternatives"),),
    params=(ParamDesc("index", "uint", 0, "which input is passed on (from 0)", max=4095, main=True),),
)


class Selector(OptionsLayer):
    desc = DESC
    fused_activations = frozenset()  # forward copies its input; the network applies the activation
    OPTIONS = (OptionSpec("index", "Selected input"),)

    def _count(self) -> int | None:
        return len(self.input_dims) if self.input_dims else None

    def runtime_options(self) -> list[dict[str, Any]]:
        opts = super().runtime_options()
        if self._count():
            opts[0]["max"] = self._count() - 1  # type: ignore[operator]
        return opts

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        i = self.p["index"]
        if i >= len(inputs) or inputs[i] is None:
            raise self.param_error("index", f"{i} selects no connected input (inputs 0..{len(inputs) - 1})")
        return inputs[i]  # type: ignore[return-value]

    def option_changed(self, name: str, old: Any) -> bool:
        n = self._count()
        new = self.p["index"]
        if n is not None and (new >= n or self.input_dims[new] is None):
            self.p = {**self.p, "index": old}
            raise self.param_error("index", f"{new} selects no connected input (inputs 0..{n - 1})")
        return n is not None and self.input_dims[new] != self.input_dims[old]

    def forward(self, inputs: list[Any], out: Any) -> None:
        out[...] = inputs[self.p["index"]]


LAYER = Selector
