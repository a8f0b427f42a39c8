"""input: where tensors enter the network."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims, copy_into

#: how scale and shift apply to image values: LayerLab's order, then the vendor designer's
ORDERS = ("scale_shift", "shift_scale")

DESC = LayerDesc(
    name="input",
    display_name="Input",
    summary="Network input: receives an image, video frame or tensor.",
    categories=(Category.INPUT_OUTPUT,),
    documentation=(
        "<p>Feeds a tensor into the network. Its size comes from the data given at run time "
        "(image, video frame or NPY tensor); <b>dimensions</b> is the size used for type checking "
        "and for random inputs when no data is given.</p>"
        "<p>Images are read as RGB in 0..1, then each value becomes <code>value*scale + shift</code> "
        "(with <b>order</b> <code>shift_scale</code>, the vendor designer's: <code>(value + shift)*scale</code>); "
        "an RGBA image keeps its alpha channel unless <b>use_alpha</b> is false (the vendor's default: zeroed), "
        "channels are zero-padded up to <b>min_channels</b>, and H and W are zero-padded on the "
        "bottom/right up to a multiple of <b>tiling</b>. NPY tensors are passed as they are.</p>"
        "<ul><li><b>dimensions</b>: NxCxHxW, default 1x3x64x64 (or the sizes of a tensor of another rank, 1 to 6 "
        "of them: <code>1x49x96</code>)</li>"
        "<li><b>scale</b>: default 1</li><li><b>shift</b>: default 0</li>"
        "<li><b>min_channels</b>: default 0 (no padding)</li><li><b>tiling</b>: default 1, range 1..4096</li>"
        "<li><b>order</b>: scale_shift (default) or shift_scale</li><li><b>use_alpha</b>: default true</li></ul>"
    ),
    inputs=(),
    params=(
        ParamDesc("dimensions", "dimension", Dims(1, 3, 64, 64), "size for type checking and random inputs", main=True,
                  any_rank=True),
        ParamDesc("scale", "float", 1.0, "image values are multiplied by this"),
        ParamDesc("shift", "float", 0.0, "then this is added"),
        ParamDesc("min_channels", "uint", 0, "images are zero-padded to at least this many channels", max=4096),
        ParamDesc("tiling", "uint", 1, "H and W of images are zero-padded to a multiple of this", min=1, max=4096),
        ParamDesc("order", "enum", "scale_shift", "scale_shift: value*scale + shift; shift_scale (the vendor's): "
                  "(value + shift)*scale", enum_values=ORDERS),
        ParamDesc("use_alpha", "bool", True, "keep the alpha channel of RGBA images (false, the vendor's default: "
                  "it is zeroed)", legacy_names=("images_use_alpha",)),
    ),
)


class InputLayer(Layer):
    desc = DESC
    is_network_input = True
    data: Any = None
    requested_dims: Dims | None = None

    def validate(self) -> None:
        d = self.p["dimensions"]
        if min(d) < 1:
            raise self.param_error("dimensions", f"{d} has a zero size; every dimension must be at least 1")

    def default_dims(self) -> Dims:
        return self.p["dimensions"]

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        return self.requested_dims or self.p["dimensions"]

    def forward(self, inputs: list[Any], out: Any) -> None:
        if self.activation is None:
            copy_into(out, self.data)
        else:
            self.store(out, self.activate(self.nchw(self.data)))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.graph_input()

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return t.forward_input()


LAYER = InputLayer
