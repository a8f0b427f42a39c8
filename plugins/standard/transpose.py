"""transpose: permute the axes of a tensor of any rank (ONNX Transpose, torch.permute), optionally read under other
sizes first and given other sizes after (a Reshape -> Transpose -> Reshape chain, such as a window partition, as one
layer that copies once)."""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import MAX_RANK, Dims, nchw_view
from plugins.standard._common_rank import int_list


def transpose(xp: Any, x: Any, perm: tuple[int, ...]) -> Any:
    """Axis ``i`` of the result is axis ``perm[i]`` of the logical array ``x`` (a view)."""
    return x.transpose(perm)


DESC = LayerDesc(
    name="transpose",
    display_name="Transpose",
    summary="Permute the axes of a tensor of any rank (ONNX Transpose, torch.permute).",
    categories=(Category.TENSOR,),
    documentation=(
        "<p>Axis <i>i</i> of the output is axis <code>perm[i]</code> of the input: <code>0,2,3,1</code> turns "
        "N x C x H x W into N x H x W x C (channels last, as ConvNeXt's blocks compute), <code>0,3,1,2</code> turns "
        "it back. Empty <b>perm</b> reverses the axes (ONNX's default).</p>"
        "<p>With <b>input_shape</b> the values are first read under those sizes (a reshape, in their logical order), "
        "with <b>shape</b> the permuted values are given those sizes: <code>1,8,7,8,7,96</code>, "
        "<code>0,1,3,2,4,5</code>, <code>64,49,96</code> cuts 1 x 56 x 56 x 96 into 64 windows of 49 tokens in one "
        "copy (the ONNX importer folds chains of Reshape, Transpose, Flatten, Squeeze and Unsqueeze into this).</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), a tensor of any rank 1 to 6.</p>"
        "<ul><li><b>perm</b>: the axes of the input in output order, comma separated.</li>"
        "<li><b>input_shape</b>: sizes to read the input as before permuting (empty: its own).</li>"
        "<li><b>shape</b>: sizes of the output (empty: the permuted sizes).</li></ul>"
    ),
    inputs=(InputDesc("input"),),
    params=(ParamDesc("perm", "string", "0,2,3,1", "input axes in output order, e.g. 0,2,3,1 (empty: reversed)",
                      main=True),
            ParamDesc("input_shape", "string", "", "sizes the input is read as before permuting (empty: its own)"),
            ParamDesc("shape", "string", "", "sizes of the output (empty: the permuted sizes)")),
    ranks=ANY_RANK,
)


class Transpose(Layer):
    desc = DESC
    layout_role = "follow"

    def validate(self) -> None:
        try:
            self._perm = tuple(int_list(self.p["perm"]))
        except ValueError:
            raise self.param_error("perm", f"{self.p['perm']!r} is not a list of axes like 0,2,3,1") from None
        if self._perm and sorted(self._perm) != list(range(len(self._perm))):
            raise self.param_error("perm", f"{self.p['perm']!r} is not a permutation of 0..{len(self._perm) - 1}")
        for key in ("input_shape", "shape"):
            try:
                sizes = tuple(int_list(self.p.get(key, "")))
            except ValueError:
                sizes = (0,)
            if len(sizes) > MAX_RANK or any(v < 1 for v in sizes):
                raise self.param_error(key, f"{self.p[key]!r} is not empty or 1 to {MAX_RANK} sizes like 64,49,96")
            setattr(self, f"_{key}", sizes)

    def perm(self, rank: int) -> tuple[int, ...]:
        return self._perm or tuple(range(rank - 1, -1, -1))

    def _viewed(self, x: tuple[int, ...]) -> tuple[int, ...]:
        if not self._input_shape:
            return x
        if math.prod(self._input_shape) != math.prod(x):
            raise self.shape_error(f"input_shape {self.p['input_shape']} does not hold the input {Dims(*x)}")
        return self._input_shape

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self._viewed(tuple(self.primary(inputs)))
        perm = self.perm(len(x))
        if len(perm) != len(x):
            raise self.shape_error(f"perm {','.join(map(str, perm))} has {len(perm)} axes, the input {Dims(*x)} has "
                                   f"{len(x)}")
        if self._shape:
            if math.prod(self._shape) != math.prod(x):
                raise self.shape_error(f"shape {self.p['shape']} does not hold the input {Dims(*x)}")
            return Dims(*self._shape)
        return Dims(*(x[a] for a in perm))

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.offer_replay(None)
        x = self.nchw(inputs[0])
        if self._input_shape:
            x = x.reshape(self._input_shape)
        y = transpose(self.xp, x, self.perm(x.ndim))
        if not self._shape:
            self.store_view(out, self.activate(y), inputs[0])
            return
        logical = nchw_view(out, self.fmt)
        if logical.flags.c_contiguous:  # the output's buffer seen under the permuted sizes: one copy
            dest = logical.reshape(y.shape)
            dest[...] = self.activate(y)
            if self.activation is None and self.xp is np and np.may_share_memory(y, inputs[0]):
                self.offer_replay(functools.partial(np.copyto, dest, y))  # the same copy on every run
        else:
            self.store(out, self.activate(y).reshape(self._shape))

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return 0

    onnx_support = "yes"
    torch_support = "yes"

    def _rank(self) -> int:
        return len(self._input_shape or self.input_dims[0])

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        x = inputs[0]
        if self._input_shape:
            x = g.node("Reshape", [x, g.ints("input_shape", self._input_shape)], suffix="view")
        if not self._shape:
            return g.node("Transpose", [x], perm=list(self.perm(self._rank())))
        y = g.node("Transpose", [x], suffix="perm", perm=list(self.perm(self._rank())))
        return g.node("Reshape", [y, g.ints("shape", self._shape)])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        x = inputs[0]
        if self._input_shape:
            x = f"{x}.reshape({', '.join(map(str, self._input_shape))})"
        y = f"{x}.permute{tuple(self.perm(self._rank()))}"
        return f"{y}.reshape({', '.join(map(str, self._shape))})" if self._shape else y


LAYER = Transpose


REPLAYABLE_FORWARDS.add(Transpose.forward)  # one copy between the network's buffers, where it offers it
