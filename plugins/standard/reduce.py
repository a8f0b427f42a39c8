"""reduce: mean, sum, max or min over any axes of a tensor of any rank (ONNX ReduceMean, ReduceSum...)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims
from plugins.standard._common_rank import axis_index, int_list

OPERATIONS = ("mean", "sum", "max", "min")
_ONNX = {"mean": "ReduceMean", "sum": "ReduceSum", "max": "ReduceMax", "min": "ReduceMin"}
_TORCH = {"mean": "torch.mean", "sum": "torch.sum", "max": "torch.amax", "min": "torch.amin"}


def reduce(xp: Any, x: Any, operation: str, axes: tuple[int, ...], keepdims: bool) -> Any:
    """``operation`` of the logical array ``x`` over ``axes`` (sums in float32)."""
    if operation in ("mean", "sum"):
        fn = xp.mean if operation == "mean" else xp.sum
        return fn(x, axis=axes, keepdims=keepdims, dtype=np.float32).astype(x.dtype)
    return (xp.max if operation == "max" else xp.min)(x, axis=axes, keepdims=keepdims)


DESC = LayerDesc(
    name="reduce",
    display_name="Reduce",
    summary="Mean, sum, max or min over any axes of a tensor of any rank (ONNX ReduceMean, ReduceSum...).",
    categories=(Category.ARITHMETIC,),
    documentation=(
        "<p>Combines the values along <b>axes</b> (comma separated, negative from the end; empty: every axis) "
        "with <b>operation</b> mean, sum, max or min. With <b>keepdims</b> the reduced axes stay, of size 1; "
        "without, they go. ONNX ReduceMean, ReduceSum, ReduceMax, ReduceMin.</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), a tensor of any rank.</p>"
    ),
    inputs=(InputDesc("input"),),
    params=(
        ParamDesc("operation", "enum", "mean", "how the values combine", enum_values=OPERATIONS, main=True),
        ParamDesc("axes", "string", "-1", "reduced axes, comma separated (empty: all)", main=True),
        ParamDesc("keepdims", "bool", True, "keep the reduced axes (size 1)"),
    ),
    ranks=ANY_RANK,
)


class Reduce(Layer):
    desc = DESC

    def validate(self) -> None:
        try:
            self._axes = int_list(self.p["axes"])
        except ValueError:
            raise self.param_error("axes", f"{self.p['axes']!r} is not a list of axes like 2,3") from None

    def axes(self, rank: int) -> tuple[int, ...]:
        try:
            return tuple(sorted({axis_index(a, rank) for a in self._axes})) if self._axes else tuple(range(rank))
        except ValueError as exc:
            raise self.shape_error(str(exc)) from None

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        axes = self.axes(len(x))
        if self.p["keepdims"]:
            return Dims(*(1 if i in axes else s for i, s in enumerate(x)))
        kept = [s for i, s in enumerate(x) if i not in axes]
        return Dims(*(kept or [1]))

    def forward(self, inputs: list[Any], out: Any) -> None:
        x = self.nchw(inputs[0])
        y = reduce(self.xp, x, self.p["operation"], self.axes(x.ndim), True)
        self.store(out, self.activate(y.reshape(self.out_dims)))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        axes = list(self.axes(len(self.input_dims[0])))
        every = len(axes) == len(self.input_dims[0])
        keep = int(bool(self.p["keepdims"]) or every)
        op = _ONNX[self.p["operation"]]
        last = "" if self.p["keepdims"] or not every else "reduce"
        if op == "ReduceSum":  # axes as an input from opset 13, an attribute for the others until opset 18
            y = g.node(op, [inputs[0], g.ints("axes", axes)], last, keepdims=keep)
        else:
            y = g.node(op, [inputs[0]], last, axes=axes, keepdims=keep)
        return g.node("Reshape", [y, g.ints("shape", [1])]) if last else y  # all reduced: one value of rank 1

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        axes = self.axes(len(self.input_dims[0]))
        y = f"{_TORCH[self.p['operation']]}({inputs[0]}, dim={axes}, keepdim={bool(self.p['keepdims'])})"
        return f"{y}.reshape(1)" if not self.p["keepdims"] and len(axes) == len(self.input_dims[0]) else y


LAYER = Reduce
