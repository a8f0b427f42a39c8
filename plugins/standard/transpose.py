"""transpose: permute the axes of a tensor of any rank (ONNX Transpose, torch.permute)."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims
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
        "<p><b>Inputs</b>: <b>input</b> (primary), a tensor of any rank 1 to 6.</p>"
        "<ul><li><b>perm</b>: the axes of the input in output order, comma separated.</li></ul>"
    ),
    inputs=(InputDesc("input"),),
    params=(ParamDesc("perm", "string", "0,2,3,1", "input axes in output order, e.g. 0,2,3,1 (empty: reversed)",
                      main=True),),
    ranks=ANY_RANK,
)


class Transpose(Layer):
    desc = DESC

    def validate(self) -> None:
        try:
            self._perm = tuple(int_list(self.p["perm"]))
        except ValueError:
            raise self.param_error("perm", f"{self.p['perm']!r} is not a list of axes like 0,2,3,1") from None
        if self._perm and sorted(self._perm) != list(range(len(self._perm))):
            raise self.param_error("perm", f"{self.p['perm']!r} is not a permutation of 0..{len(self._perm) - 1}")

    def perm(self, rank: int) -> tuple[int, ...]:
        return self._perm or tuple(range(rank - 1, -1, -1))

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        perm = self.perm(len(x))
        if len(perm) != len(x):
            raise self.shape_error(f"perm {','.join(map(str, perm))} has {len(perm)} axes, the input {x} has {len(x)}")
        return Dims(*(x[a] for a in perm))

    def forward(self, inputs: list[Any], out: Any) -> None:
        x = self.nchw(inputs[0])
        self.store(out, self.activate(transpose(self.xp, x, self.perm(x.ndim))))

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return 0

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("Transpose", [inputs[0]], perm=list(self.perm(len(self.input_dims[0]))))

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return f"{inputs[0]}.permute{tuple(self.perm(len(self.input_dims[0])))}"


LAYER = Transpose
