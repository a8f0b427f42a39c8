"""reshape: the same values under other dimensions, of any rank (ONNX Reshape, Flatten, Squeeze, Unsqueeze)."""
from __future__ import annotations

import math
from typing import Any

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import MAX_RANK, Dims
from plugins.standard._common_rank import int_list


def reshaped_dims(dims: tuple[int, ...], shape: list[int]) -> tuple[int, ...]:
    """The dimensions ``shape`` gives a tensor of ``dims`` as ONNX Reshape does: 0 copies the input's size of that
    axis, one -1 takes what is left. ValueError when the sizes do not hold the same number of values."""
    out = [dims[i] if s == 0 and i < len(dims) else s for i, s in enumerate(shape)]
    if any(s == 0 for s in shape[len(dims):]):
        raise ValueError("a 0 beyond the input's rank")
    if out.count(-1) > 1 or any(s < -1 for s in out):
        raise ValueError("more than one -1, or a size below -1")
    total, known = math.prod(dims), math.prod(s for s in out if s != -1)
    if -1 in out:
        if known == 0 or total % known:
            raise ValueError(f"{total} values do not divide into sizes of {known}")
        out[out.index(-1)] = total // known
    if math.prod(out) != total:
        raise ValueError(f"{total} values do not make {'x'.join(map(str, out))}")
    return tuple(out)


DESC = LayerDesc(
    name="reshape",
    display_name="Reshape",
    summary="The same values under other dimensions of any rank (ONNX Reshape, Flatten, Squeeze, Unsqueeze).",
    categories=(Category.TENSOR,),
    documentation=(
        "<p>Keeps the values in their logical order (N, C, H, W for rank 4, row-major) and gives them the "
        "dimensions <b>shape</b>, as ONNX Reshape: a <code>0</code> keeps the input's size of that axis, one "
        "<code>-1</code> takes what is left. <code>0,2,-1,0,0</code> splits 1x48x28x28 into 1x2x24x28x28 (ShuffleNet's "
        "channel shuffle, with a transpose and a reshape back); <code>0,-1</code> flattens to N x K.</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), a tensor of any rank 1 to 6.</p>"
        "<ul><li><b>shape</b>: the output's sizes, comma separated (1 to 6 of them).</li></ul>"
    ),
    inputs=(InputDesc("input"),),
    params=(ParamDesc("shape", "string", "0,-1", "output sizes; 0 = the input's, -1 = the rest", main=True),),
    ranks=ANY_RANK,
)


class Reshape(Layer):
    desc = DESC
    layout_role = "follow"
    fused_activations = frozenset()  # a view: the network applies an activation into its own buffer

    def validate(self) -> None:
        try:
            self._shape = int_list(self.p["shape"])
        except ValueError:
            self._shape = []
        if not 1 <= len(self._shape) <= MAX_RANK:
            raise self.param_error("shape", f"{self.p['shape']!r} is not 1 to {MAX_RANK} sizes like 0,-1")

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        try:
            return Dims(*reshaped_dims(tuple(x), self._shape))
        except ValueError as exc:
            raise self.shape_error(f"shape {self.p['shape']} does not fit the input {x}: {exc}") from None

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.offer_replay(None)
        self.store_view(out, self.xp.ascontiguousarray(self.nchw(inputs[0])).reshape(self.out_dims), inputs[0])

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return 0

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        # the layer's own shape: its 0 and -1 read as ONNX Reshape's (allowzero 0), so a file with symbolic sizes
        # keeps the batch and the sizes that follow the input
        return g.node("Reshape", [inputs[0], g.ints("shape", self._shape)])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        sizes = ", ".join(["-1" if i == 0 else str(s) for i, s in enumerate(self.out_dims)])
        return f"{inputs[0]}.reshape({sizes})"


LAYER = Reshape


REPLAYABLE_FORWARDS.add(Reshape.forward)  # one copy between the network's buffers, where it offers it
