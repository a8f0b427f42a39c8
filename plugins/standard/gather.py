"""gather: pick entries of one axis by constant indices (ONNX Gather with constant indices, torch.index_select,
``x[:, 2]``)."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import Dims, Layout, nchw_view
from plugins.standard._common_rank import axis_index


def gather(xp: Any, x: Any, axis: int, indices: list[int], drop_axis: bool = False) -> Any:
    """Entries ``indices`` (negative: from the end) of axis ``axis`` of the logical array ``x``, in that order;
    ``drop_axis`` (one index) removes the axis, as a scalar index does."""
    if drop_axis:
        index: list[Any] = [slice(None)] * x.ndim
        index[axis] = indices[0]
        return x[tuple(index)]
    return xp.take(x, xp.asarray(np.asarray(indices, dtype=np.int64)), axis=axis)


DESC = LayerDesc(
    name="gather",
    display_name="Gather",
    summary="Pick entries of one axis by constant indices (ONNX Gather, torch.index_select, x[:, 2]).",
    categories=(Category.TENSOR,),
    documentation=(
        "<p>Keeps the entries <b>indices</b> of axis <b>axis</b>, in the order given (repeats allowed; a negative "
        "index counts from the end, -1 is the last). The output has the input's sizes, with the axis's size the "
        "number of indices; with <b>drop_axis</b> (one index only) the axis is removed, as ONNX Gather with a scalar "
        "index or <code>qkv[0]</code> in PyTorch.</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), a tensor of any rank 1 to 6.</p>"
        "<ul><li><b>axis</b>: the axis (negative: from the end).</li>"
        "<li><b>indices</b>: comma separated integers, or runs <code>start:end</code> (end excluded: "
        "<code>3:56,0:3</code> is a roll by 3 of an axis of 56, as an imported torch.roll is written).</li>"
        "<li><b>drop_axis</b>: remove the axis (exactly one index).</li></ul>"
    ),
    inputs=(InputDesc("input"),),
    params=(
        ParamDesc("axis", "int", 0, "the axis picked from; negative: from the end", min=-6, max=5, main=True),
        ParamDesc("indices", "string", "0", "the entries kept, comma separated (negative: from the end); runs "
                  "start:end", main=True),
        ParamDesc("drop_axis", "bool", False, "remove the axis (one index, as a scalar index)"),
    ),
    ranks=ANY_RANK,
)


#: the most entries one gather layer picks (its parameter is text in the model file)
MAX_INDICES = 1 << 16


def index_list(text: str) -> list[int]:
    """The indices of ``text``: comma separated integers or runs ``start:end`` (``end`` excluded, both not negative,
    ``3:6`` is 3,4,5). ValueError for anything else or more than MAX_INDICES entries."""
    out: list[int] = []
    for part in str(text).replace(" ", "").strip("[]()").split(","):
        if ":" in part:
            a, b = part.split(":")
            start, end = int(a), int(b)
            if start < 0 or end < start or len(out) + end - start > MAX_INDICES:
                raise ValueError(f"run {part!r}")
            out.extend(range(start, end))
        elif part:
            out.append(int(part))
        if len(out) > MAX_INDICES:
            raise ValueError("too many indices")
    return out


class Gather(Layer):
    desc = DESC
    layout_role = "follow"

    def validate(self) -> None:
        try:
            self._indices = index_list(self.p["indices"])
        except ValueError:
            raise self.param_error("indices", f"{str(self.p['indices'])[:80]!r} is not a list of integers or runs like "
                                              f"0,2,-1 or 3:56,0:3 (at most {MAX_INDICES} entries)") from None
        if not self._indices:
            raise self.param_error("indices", "no index given; at least one is needed")
        self._device_indices: tuple[int | None, Any] = (None, None)  # (axis size, the indices on the device)
        if self.p["drop_axis"] and len(self._indices) != 1:
            raise self.param_error("drop_axis", f"removes the axis of one index, but indices has {len(self._indices)}")

    def _axis(self, rank: int) -> int:
        try:
            return axis_index(self.p["axis"], rank)
        except ValueError as exc:
            raise self.shape_error(str(exc)) from None

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        axis = self._axis(len(x))
        bad = [i for i in self._indices if not -x[axis] <= i < x[axis]]
        if bad:
            raise self.shape_error(f"indices {','.join(map(str, bad))} are outside axis {axis} of the input {x} "
                                   f"(-{x[axis]}..{x[axis] - 1})")
        if self.p["drop_axis"]:
            if len(x) == 1:
                raise self.shape_error("drop_axis would leave a tensor of rank 0 (LayerLab tensors have rank 1 to 6)")
            return Dims(*(x[:axis] + x[axis + 1:]))
        return Dims(*(x[:axis] + (len(self._indices),) + x[axis + 1:]))

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.offer_replay(None)
        x = self.nchw(inputs[0])
        y = nchw_view(out, self.fmt)
        if not self.p["drop_axis"] and self.activation is None and y.flags.c_contiguous and y.dtype == x.dtype:
            # the entries taken straight into the output buffer, by indices kept on the device: one copy
            axis = self._axis(x.ndim)
            size, index = self._device_indices
            if size != x.shape[axis]:
                size = x.shape[axis]
                index = self.xp.asarray(np.asarray(self._indices, dtype=np.int64) % size)
                self._device_indices = (size, index)
            self.xp.take(x, index, axis=axis, out=y)
            if self.xp is np and np.may_share_memory(x, inputs[0]):  # the same entries taken on every run
                self.offer_replay(functools.partial(np.take, x, index, axis=axis, out=y))
            return
        y = gather(self.xp, x, self._axis(x.ndim), self._indices, bool(self.p["drop_axis"]))
        self.store_view(out, self.activate(y), inputs[0])  # one index is a view: its copy replayable

    def input_view(self) -> Callable[[Any], Any] | None:
        """One index with ``drop_axis``, in logical order: ``x[..., i]`` along the axis is a view (a ``qkv[0]``)."""
        x = self.input_dims[0] if self.input_dims else None
        if not self.p["drop_axis"] or x is None or (Layout.NHWC is self.fmt.layout and 4 in (len(x), len(x) - 1)):
            return None
        axis = self._axis(len(x))
        index = (slice(None),) * axis + (self._indices[0] % x[axis],)
        return lambda a: a[index]

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return 0

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        idx = g.const("indices", self._indices[0] if self.p["drop_axis"] else self._indices, np.int64)
        return g.node("Gather", [inputs[0], idx], axis=int(self.p["axis"]))

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        axis = int(self.p["axis"])
        if self.p["drop_axis"]:
            return f"{inputs[0]}.select({axis}, {self._indices[0]})"
        return f"{inputs[0]}.index_select({axis}, torch.tensor({self._indices!r}, device={inputs[0]}.device) % " \
               f"{inputs[0]}.shape[{axis}])"


LAYER = Gather


REPLAYABLE_FORWARDS.add(Gather.forward)  # one copy between the network's buffers, where it offers it
