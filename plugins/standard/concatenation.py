"""concatenation: stacks any number of inputs along the channel axis, or along any axis of tensors of any rank."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, InputKind, LayerDesc, ParamDesc
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import Dims, nchw_view
from plugins.standard._common_rank import axis_index


def concatenate_channels(dest: Any, arrays: Iterable[Any], axis: int = 1, skip: int = 0) -> None:
    """Write arrays (equal N, H, W) one after another along the channel ``axis`` of ``dest`` (1 for
    NCHW, 3 for NHWC): each goes straight into its channel slice, with no temporary for the joined tensor. The
    first ``skip`` arrays are already in place (their channels are passed over)."""
    channel_copies(dest, arrays, axis, skip)()


def channel_copies(dest: Any, arrays: Iterable[Any], axis: int = 1, skip: int = 0) -> Callable[[], None]:
    """:func:`concatenate_channels` as a call that makes the copies, each slice of ``dest`` taken once: run again, it
    copies the same arrays into the same slices (a layer's replay)."""
    start, pairs = 0, []
    for i, a in enumerate(arrays):
        c = a.shape[axis]
        if i >= skip:
            index = [slice(None)] * dest.ndim
            index[axis] = slice(start, start + c)
            pairs.append((dest[tuple(index)], a))
        start += c

    def copy() -> None:
        for d, a in pairs:
            d[...] = a
    return copy


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
        "<p><b>axis</b> (default 1, the channels) joins along another axis, of tensors of any rank 1 to 6 (negative: "
        "from the end; ONNX Concat, torch.cat): the inputs have the same rank and equal sizes on every other axis.</p>"
    ),
    inputs=(InputDesc("inputs", InputKind.PRIMARY_INFINITE, doc="tensors to join along C (or along axis)"),),
    params=(ParamDesc("axis", "int", 1, "the axis joined along (1: channels; negative: from the end)", min=-6, max=5),),
    legacy_names=("concat",),
    ranks=ANY_RANK,
)


class Concatenation(Layer):
    desc = DESC
    layout_role = "follow"

    def _channels(self, rank: int) -> bool:
        """True for the N x C x H x W form (joined along C, in the memory layout)."""
        return rank == 4 and self.p["axis"] in (1, -3)

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        present = [(i, d) for i, d in enumerate(inputs) if d is not None]
        first_i, first = present[0]
        if not all(self._channels(len(d)) for _, d in present):
            return self._any_axis(present)
        for i, d in present[1:]:
            bad = [f"{axis} ({getattr(d, axis.lower())} vs {getattr(first, axis.lower())})"
                   for axis in ("N", "H", "W") if getattr(d, axis.lower()) != getattr(first, axis.lower())]
            if bad:
                raise self.shape_error(
                    f"input {i} ({d}) differs from input {first_i} ({first}) in " + ", ".join(bad)
                    + "; inputs are joined along C, so N, H and W must be equal")
        return Dims(first.n, sum(d.c for _, d in present), first.h, first.w)

    def _any_axis(self, present: list[tuple[int, Dims]]) -> Dims:
        first_i, first = present[0]
        try:
            axis = axis_index(self.p["axis"], len(first))
        except ValueError as exc:
            raise self.shape_error(str(exc)) from None
        for i, d in present[1:]:
            if len(d) != len(first) or any(a != b for k, (a, b) in enumerate(zip(d, first)) if k != axis):
                raise self.shape_error(f"input {i} ({d}) and input {first_i} ({first}) differ on an axis other than "
                                       f"{axis}, the one they are joined along")
        return Dims(*(sum(d[axis] for _, d in present) if k == axis else s for k, s in enumerate(first)))

    def joins_channels(self) -> bool:
        return (self.out_dims is not None and self._channels(len(self.out_dims)) and self.activation is None
                and None not in self.input_dims)

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.offer_replay(None)
        if not self._channels(out.ndim):
            present = [x for x in inputs if x is not None]
            arrays = [self.nchw(x) for x in present]
            copies = channel_copies(nchw_view(out, self.fmt), arrays, axis_index(self.p["axis"], out.ndim))
            copies()
            self.activate_inplace(out)
            if self.activation is None and all(a.dtype == x.dtype for a, x in zip(arrays, present)):
                self.offer_replay(copies)  # views of the inputs copied into the output: the same on every run
            return
        given = [x for x in inputs if x is not None]
        present = [self.physical(x) for x in given]
        act = self.activation
        if act is None:
            copies = channel_copies(out, present, self.channel_axis, self.in_place_inputs)
            copies()
            if all(p is x for p, x in zip(present, given)):  # the same copies between the network's buffers
                self.offer_replay(copies)
        elif act.impl.elementwise:  # applied to each input on its way into the output
            concatenate_channels(out, (self.activate_physical(x) for x in present), self.channel_axis)
        else:  # e.g. softmax: over the joined channels, not once per input
            concatenate_channels(out, present, self.channel_axis)
            self.activate_inplace(out)

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("Concat", [x for x in inputs if x is not None], axis=int(self.p["axis"]))

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return f"torch.cat([{', '.join(x for x in inputs if x is not None)}], dim={int(self.p['axis'])})"


LAYER = Concatenation


REPLAYABLE_FORWARDS.add(Concatenation.forward)  # the copies of its inputs into their slices, where it offers them
