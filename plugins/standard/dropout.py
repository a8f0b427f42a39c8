"""dropout: identity at inference; the ratio is kept for export and training tools."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims


def dropout_inference(x: Any) -> Any:
    """Dropout at inference time is the identity (no scaling: inverted dropout scales while training)."""
    return x


DESC = LayerDesc(
    name="dropout",
    display_name="Dropout",
    summary="Identity at inference (the network passes its input through, no copy); ratio kept for export.",
    categories=(Category.TENSOR,),
    documentation=(
        "<p>At inference dropout does nothing: the output is the input. The network passes the "
        "input's buffer through without a copy (bypass). With an activation, the layer computes "
        "<code>activation(x)</code> into its own buffer.</p>"
        "<ul><li><b>input</b> (primary): N x C x H x W.</li>"
        "<li><b>ratio</b>: fraction of values dropped while training, default 0.5, in [0, 1). Only "
        "written to exported models (ONNX Dropout ratio, torch.nn.Dropout p).</li></ul>"
    ),
    inputs=(InputDesc("input", doc="N x C x H x W tensor, passed through"),),
    params=(ParamDesc("ratio", "float", 0.5, "drop probability while training (export only)", min=0.0, max=1.0,
                      legacy_names=("p", "probability")),),
)


class Dropout(Layer):
    desc = DESC
    layout_role = "follow"

    def validate(self) -> None:
        if self.p["ratio"] >= 1.0:
            raise self.param_error("ratio", f"{self.p['ratio']:g} must be smaller than 1 (in [0, 1))")

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        return x

    def bypass_input(self) -> int | None:
        return 0

    def forward(self, inputs: list[Any], out: Any) -> None:
        """Only runs when the layer has an activation (otherwise the network aliases the input)."""
        self.store(out, self.activate(dropout_inference(self.nchw(inputs[0]))))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        ratio = g.const("ratio", self.p["ratio"])
        return g.node("Dropout", [inputs[0], ratio])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        ref = t.module(f"nn.Dropout(p={float(self.p['ratio'])!r})")  # identity in eval() mode, as here
        return f"{ref}({inputs[0]})"


LAYER = Dropout
