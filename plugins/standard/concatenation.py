"""concatenation: stacks any number of inputs along the channel axis."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, InputKind, LayerDesc
from engine.layer import Layer
from engine.tensor import Dims


def concatenate_channels(dest: Any, arrays: Iterable[Any], axis: int = 1) -> None:
    """Write arrays (equal N, H, W) one after another along the channel ``axis`` of ``dest`` (1 for
    NCHW, 3 for NHWC): each goes straight into its channel slice, with no temporary for the joined tensor."""
    start = 0
    for a in arrays:
        c = a.shape[axis]
        index = [slice(None)] * dest.ndim
        index[axis] = slice(start, start + c)
        dest[tuple(index)] = a
        start += c


DESC = LayerDesc(
    name="concatenation",
    display_name="Concatenation",
    summary="Joins any number of inputs along the channel axis.",
    categories=(Category.TENSOR,),
    documentation=(
        "<p>Stacks its inputs along the channel axis, in input order (like ONNX Concat with axis 1): "
        "the output has the inputs' N, H and W and the sum of their channels. Input 0 fills channels "
        "0..C0-1, input 1 the next C1 channels, and so on.</p>"
        "<ul><li><b>inputs</b> (primary, any number, at least one): N x C_i x H x W; N, H and W must "
        "be equal for all inputs.</li></ul>"
        "<p>No parameters.</p>"
    ),
    inputs=(InputDesc("inputs", InputKind.PRIMARY_INFINITE, doc="tensors to join along C"),),
    legacy_names=("concat",),
)


class Concatenation(Layer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        present = [(i, d) for i, d in enumerate(inputs) if d is not None]
        first_i, first = present[0]
        for i, d in present[1:]:
            bad = [f"{axis} ({getattr(d, axis.lower())} vs {getattr(first, axis.lower())})"
                   for axis in ("N", "H", "W") if getattr(d, axis.lower()) != getattr(first, axis.lower())]
            if bad:
                raise self.shape_error(
                    f"input {i} ({d}) differs from input {first_i} ({first}) in " + ", ".join(bad)
                    + "; inputs are joined along C, so N, H and W must be equal")
        return Dims(first.n, sum(d.c for _, d in present), first.h, first.w)

    def forward(self, inputs: list[Any], out: Any) -> None:
        present = (x for x in inputs if x is not None)
        arrays = (self.activate_physical(self.physical(x)) for x in present)
        concatenate_channels(out, arrays, self.channel_axis)

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("Concat", [x for x in inputs if x is not None], axis=1)

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return f"torch.cat([{', '.join(x for x in inputs if x is not None)}], dim=1)"


LAYER = Concatenation
