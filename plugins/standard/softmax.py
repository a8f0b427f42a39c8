"""softmax: softmax, log-softmax or hardmax along any axis of a tensor of any rank (ONNX Softmax, LogSoftmax, Hardmax,
opset 13)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims, nchw_view
from plugins.activations.softmax import softmax
from plugins.standard._common_rank import axis_index

OPERATIONS = ("softmax", "log_softmax", "hardmax")
_ONNX = {"softmax": "Softmax", "log_softmax": "LogSoftmax", "hardmax": "Hardmax"}


def normalized(xp: Any, x: Any, operation: str, axis: int) -> Any:
    """``operation`` of the logical array ``x`` along ``axis``: softmax, its logarithm (computed as
    ``x - max - log(sum(exp(x - max)))``, finite where softmax underflows) or hardmax (1 at the first largest
    value, 0 elsewhere)."""
    if operation == "softmax":
        return softmax(xp, x, axis=axis)
    xf = x.astype(np.float32, copy=False)
    if operation == "log_softmax":
        shifted = xf - xp.max(xf, axis=axis, keepdims=True)
        return (shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))).astype(x.dtype)
    first = xp.expand_dims(xp.argmax(xf, axis=axis), axis)
    positions = xp.arange(x.shape[axis]).reshape([-1 if i == axis else 1 for i in range(x.ndim)])
    return (positions == first).astype(x.dtype)

DESC = LayerDesc(
    name="softmax",
    display_name="Softmax",
    summary="Softmax, log-softmax or hardmax along any axis of a tensor of any rank (ONNX Softmax, LogSoftmax, "
            "Hardmax).",
    categories=(Category.ACTIVATION,),
    documentation=(
        "<p><code>exp(x) / sum(exp(x))</code> along <b>axis</b> (negative: from the end; default -1, the last), "
        "as ONNX Softmax (opset 13) and torch.softmax. The softmax activation is the same along the channels of "
        "N x C x H x W. <b>operation</b> <code>log_softmax</code> gives its logarithm (ONNX LogSoftmax, "
        "torch.log_softmax), <code>hardmax</code> 1 at the first largest value along the axis and 0 elsewhere "
        "(ONNX Hardmax).</p><p><b>Inputs</b>: <b>input</b> (primary), a tensor of any rank.</p>"
    ),
    inputs=(InputDesc("input"),),
    params=(ParamDesc("axis", "int", -1, "axis the values sum to 1 along; negative: from the end", min=-6, max=5,
                      main=True),
            ParamDesc("operation", "enum", "softmax", "softmax, its logarithm, or hardmax", enum_values=OPERATIONS)),
    ranks=ANY_RANK,
)


class Softmax(Layer):
    desc = DESC
    layout_role = "follow"

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        try:
            axis_index(self.p["axis"], len(x))
        except ValueError as exc:
            raise self.shape_error(str(exc)) from None
        return x

    def forward(self, inputs: list[Any], out: Any) -> None:
        x = self.nchw(inputs[0])
        if self._rows_kernel(x, out):
            return
        y = normalized(self.xp, x, self.p["operation"], axis_index(self.p["axis"], x.ndim))
        self.store(out, self.activate(y))

    def _rows_kernel(self, x: Any, out: Any) -> bool:
        """The softmax along the last axis of float32 rows by the CPU's one-pass kernel (rows shared over the
        cores), straight into the output buffer; False where it does not apply."""
        if self.xp is not np or self.activation is not None or self.p["operation"] != "softmax" or \
                axis_index(self.p["axis"], x.ndim) != x.ndim - 1:
            return False
        y = nchw_view(out, self.fmt)
        if not (x.dtype == y.dtype == np.float32 and x.flags.c_contiguous and y.flags.c_contiguous):
            return False
        kernel = self.backend.kernel("softmax_rows")
        return kernel is not None and kernel(x, y) is not None

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return output.elements * 5

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node(_ONNX[self.p["operation"]], [inputs[0]], axis=int(self.p["axis"]))

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        x, axis = inputs[0], int(self.p["axis"])
        if self.p["operation"] == "hardmax":
            n = self.input_dims[0][axis]
            return f"torch.nn.functional.one_hot(torch.argmax({x}, {axis}), {n}).movedim(-1, {axis}).to({x}.dtype)"
        return f"torch.{self.p['operation']}({x}, {axis})"


LAYER = Softmax
