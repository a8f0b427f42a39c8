"""snapshot: passes its input through, or freezes it on demand and keeps showing the frozen tensor."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.tensor import Dims
from plugins.analysis._options import OptionsLayer, OptionSpec

DESC = LayerDesc(
    name="snapshot",
    display_name="Snapshot",
    summary="Passes its input through, or holds a frozen copy of it on demand.",
    categories=(Category.ANALYSIS,),
    documentation=(
        "<p>Freezes a tensor to compare it with later ones: while <b>hold</b> is false the output "
        "is the input, and the layer keeps a copy of every input it sees; when <b>hold</b> becomes "
        "true the output stays the last input seen before, whatever arrives after (new video "
        "frames, changed options upstream). Feed it and the live tensor into a <b>mix</b> layer to "
        "compare before and after. <b>hold</b> is a <b>runtime option</b>, switched live during "
        "analysis.</p>"
        "<ul><li><b>input</b> (primary): any tensor.</li>"
        "<li><b>hold</b>: default false. A change of the input's size releases the hold (the "
        "frozen tensor no longer fits).</li></ul>"
    ),
    inputs=(InputDesc("input", doc="tensor to pass through or freeze"),),
    params=(ParamDesc("hold", "bool", False, "freeze the output on the last input seen", main=True),),
)


class Snapshot(OptionsLayer):
    desc = DESC
    fused_activations = frozenset()  # forward copies its input; the network applies the activation
    OPTIONS = (OptionSpec("hold", "Hold (freeze the output)"),)
    held: Any = None  # the frozen (or latest) input, in the network's format
    _filled = False

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        assert inputs[0] is not None
        return inputs[0]

    def reshape(self, inputs: list[Dims | None], output: Dims) -> None:
        if self.held is not None and self.fmt.dims_of(self.held) == output:
            return
        if self.held is not None:  # the frozen tensor no longer fits: release the hold
            self.p = {**self.p, "hold": False}
        self.held = self.backend.empty(self.fmt.shape(output), self.fmt.dtype)  # allocated here, not in forward
        self._filled = False

    def forward(self, inputs: list[Any], out: Any) -> None:
        if self.held is None:
            self.reshape([], self.fmt.dims_of(out))
        if not self.p["hold"] or not self._filled:
            self.held[...] = inputs[0]
            self._filled = True
        out[...] = self.held


LAYER = Snapshot
