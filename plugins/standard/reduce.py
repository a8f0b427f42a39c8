"""reduce: mean, sum, max, min, norms, products, log-sums over any axes of a tensor of any rank, or the index of the
largest or smallest value along one axis (ONNX ReduceMean, ReduceSum, ReduceL2..., ArgMax, ArgMin)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims
from plugins.standard._common_rank import axis_index, int_list

OPERATIONS = ("mean", "sum", "max", "min", "l1", "l2", "sum_square", "log_sum", "log_sum_exp", "prod", "argmax",
              "argmin")
#: the operations that give the index of a value along one axis (as a float, exact up to 2**24)
ARG = ("argmax", "argmin")
_ONNX = {"mean": "ReduceMean", "sum": "ReduceSum", "max": "ReduceMax", "min": "ReduceMin", "l1": "ReduceL1",
         "l2": "ReduceL2", "sum_square": "ReduceSumSquare", "log_sum": "ReduceLogSum", "log_sum_exp": "ReduceLogSumExp",
         "prod": "ReduceProd"}
#: PyTorch expressions of ``x`` reduced over ``dim`` (a tuple) keeping the axes ``keep``
_TORCH = {"mean": "torch.mean({x}, dim={dim}, keepdim={keep})", "sum": "torch.sum({x}, dim={dim}, keepdim={keep})",
          "max": "torch.amax({x}, dim={dim}, keepdim={keep})", "min": "torch.amin({x}, dim={dim}, keepdim={keep})",
          "l1": "torch.sum(torch.abs({x}), dim={dim}, keepdim={keep})",
          "l2": "torch.sqrt(torch.sum({x} * {x}, dim={dim}, keepdim={keep}))",
          "sum_square": "torch.sum({x} * {x}, dim={dim}, keepdim={keep})",
          "log_sum": "torch.log(torch.sum({x}, dim={dim}, keepdim={keep}))",
          "log_sum_exp": "torch.logsumexp({x}, dim={dim}, keepdim={keep})"}


def reduce(xp: Any, x: Any, operation: str, axes: tuple[int, ...], keepdims: bool, last_index: bool = False) -> Any:
    """``operation`` of the logical array ``x`` over ``axes`` (in float32); for argmax and argmin, over the one axis
    ``axes[0]``, the first index of the extreme value (the last with ``last_index``) as a float."""
    xf = x.astype(np.float32, copy=False)
    if operation in ARG:
        axis = axes[0]
        fn = xp.argmax if operation == "argmax" else xp.argmin
        if last_index:
            idx = (x.shape[axis] - 1) - fn(xp.flip(xf, axis=axis), axis=axis)
        else:
            idx = fn(xf, axis=axis)
        idx = idx.astype(x.dtype)
        return xp.expand_dims(idx, axis) if keepdims else idx
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if operation in ("mean", "sum"):
            fn = xp.mean if operation == "mean" else xp.sum
            y = fn(xf, axis=axes, keepdims=keepdims, dtype=np.float32)
        elif operation in ("max", "min"):
            y = (xp.max if operation == "max" else xp.min)(xf, axis=axes, keepdims=keepdims)
        elif operation == "l1":
            y = xp.sum(xp.abs(xf), axis=axes, keepdims=keepdims)
        elif operation in ("l2", "sum_square"):
            y = xp.sum(xf * xf, axis=axes, keepdims=keepdims)
            y = xp.sqrt(y) if operation == "l2" else y
        elif operation == "log_sum":
            y = xp.log(xp.sum(xf, axis=axes, keepdims=keepdims))
        elif operation == "log_sum_exp":
            top = xp.max(xf, axis=axes, keepdims=True)
            top = xp.where(xp.isfinite(top), top, np.float32(0))
            y = xp.log(xp.sum(xp.exp(xf - top), axis=axes, keepdims=True)) + top
            y = y if keepdims else xp.squeeze(y, axis=axes)
        else:
            y = xp.prod(xf, axis=axes, keepdims=keepdims)
    return y.astype(x.dtype)


DESC = LayerDesc(
    name="reduce",
    display_name="Reduce",
    summary="Mean, sum, max, min, norms, product or log-sums over any axes of a tensor of any rank, or the index of "
            "the largest or smallest value (ONNX ReduceMean, ReduceSum..., ArgMax, ArgMin).",
    categories=(Category.ARITHMETIC,),
    documentation=(
        "<p>Combines the values along <b>axes</b> (comma separated, negative from the end; empty: every axis) "
        "with <b>operation</b> mean, sum, max, min, <code>l1</code> (sum of absolute values), <code>l2</code> (square "
        "root of the sum of squares), <code>sum_square</code>, <code>log_sum</code> (log of the sum), "
        "<code>log_sum_exp</code> or <code>prod</code>, in float32. <code>argmax</code> and <code>argmin</code> "
        "take one axis and give the index of the first largest or smallest value along it (the last with "
        "<b>last_index</b>), as a float. With <b>keepdims</b> the reduced axes stay, of size 1; without, they go. "
        "ONNX ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, "
        "ReduceLogSumExp, ReduceProd, ArgMax, ArgMin (whose int64 indices LayerLab holds as floats).</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), a tensor of any rank.</p>"
    ),
    inputs=(InputDesc("input"),),
    params=(
        ParamDesc("operation", "enum", "mean", "how the values combine", enum_values=OPERATIONS, main=True),
        ParamDesc("axes", "string", "-1", "reduced axes, comma separated (empty: all)", main=True),
        ParamDesc("keepdims", "bool", True, "keep the reduced axes (size 1)"),
        ParamDesc("last_index", "bool", False, "argmax and argmin: the last index of the extreme value, not the first"),
    ),
    ranks=ANY_RANK,
)


class Reduce(Layer):
    desc = DESC
    layout_role = "follow"

    def validate(self) -> None:
        try:
            self._axes = int_list(self.p["axes"])
        except ValueError:
            raise self.param_error("axes", f"{self.p['axes']!r} is not a list of axes like 2,3") from None
        if self.p["operation"] in ARG and len(self._axes) != 1:
            raise self.param_error("axes", f"{self.p['operation']} takes exactly one axis (got {self.p['axes']!r})")

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
        y = reduce(self.xp, x, self.p["operation"], self.axes(x.ndim), True, bool(self.p["last_index"]))
        self.store(out, self.activate(y.reshape(self.out_dims)))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        axes = list(self.axes(len(self.input_dims[0])))
        if self.p["operation"] in ARG:
            idx = g.node("ArgMax" if self.p["operation"] == "argmax" else "ArgMin", [inputs[0]], "index", axis=axes[0],
                         keepdims=int(bool(self.p["keepdims"])), select_last_index=int(bool(self.p["last_index"])))
            return g.node("Cast", [idx], to=g.elem_type)  # LayerLab holds the indices as floats
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
        keep, op = bool(self.p["keepdims"]), self.p["operation"]
        if op in ARG:
            x, n = inputs[0], self.input_dims[0][axes[0]]
            fn = f"torch.{op}"
            if self.p["last_index"]:
                return f"({n - 1} - {fn}(torch.flip({x}, ({axes[0]},)), dim={axes[0]}, keepdim={keep})).float()"
            return f"{fn}({x}, dim={axes[0]}, keepdim={keep}).float()"
        if op == "prod":  # torch.prod takes one axis: the last first, so the others keep their numbers
            y = inputs[0]
            for axis in sorted(axes, reverse=True):
                y = f"torch.prod({y}, dim={axis}, keepdim={keep})"
        else:
            y = _TORCH[op].format(x=inputs[0], dim=axes, keep=keep)
        return f"{y}.reshape(1)" if not self.p["keepdims"] and len(axes) == len(self.input_dims[0]) else y


LAYER = Reduce
