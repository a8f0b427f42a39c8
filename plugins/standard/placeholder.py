"""placeholder: an imported ONNX node LayerLab cannot compute, kept with its operator, attributes, inputs and
output size so the whole graph can be looked at, edited and exported back; it does not run."""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, InputKind, LayerDesc, ParamDesc
from engine.errors import LayerLabError
from engine.layer import Layer
from engine.tensor import Dims

DESC = LayerDesc(
    name="placeholder",
    display_name="Placeholder",
    summary="An imported operator LayerLab cannot run, kept with its attributes and exported back unchanged.",
    categories=(Category.INPUT_OUTPUT,),
    documentation=(
        "<p>Made by <code>layerlab import --placeholders</code> for an ONNX node that has no LayerLab equivalent. "
        "It keeps the node so the imported graph stays whole: the canvas shows it with its inputs, type checking "
        "uses its recorded output size for the layers after it and reports it as not runnable, and ONNX export "
        "writes the original node again. Replace it by layers (or a custom layer) to run the network.</p>"
        "<ul><li><b>inputs</b> (primary, any number): the node's tensor inputs, in order.</li>"
        "<li><b>op_type</b>, <b>domain</b>: the ONNX operator (domain empty = the standard one).</li>"
        "<li><b>attributes</b>: the node's attributes as JSON.</li>"
        "<li><b>onnx_inputs</b>: the node's input list: <code>t</code> = the next linked input, <code>c</code> = "
        "the next constant, empty = an absent optional input (comma separated).</li>"
        "<li><b>constants</b>: the constant inputs, <code>NAME:DTYPE:SHAPE</code> separated by <code>;</code>; "
        "float values are weights of that NAME (stored as float32), integer ones follow inline "
        "(<code>NAME:int64:2:0,3</code>).</li>"
        "<li><b>output_index</b>: which output of the node this layer stands for.</li>"
        "<li><b>output_dimensions</b>: N x C x H x W of that output, as ONNX shape inference gave it "
        "(N x K outputs as N x K x 1 x 1).</li></ul>"
    ),
    inputs=(InputDesc("inputs", InputKind.PRIMARY_INFINITE, doc="the node's tensor inputs"),),
    ranks=ANY_RANK,
    params=(
        ParamDesc("op_type", "string", "Identity", "ONNX operator", main=True),
        ParamDesc("domain", "string", "", "ONNX operator domain (empty: standard)"),
        ParamDesc("attributes", "string", "{}", "attributes as JSON"),
        ParamDesc("onnx_inputs", "string", "t", "input list: t = link, c = constant, empty = absent"),
        ParamDesc("constants", "string", "", "constant inputs NAME:DTYPE:SHAPE;..."),
        ParamDesc("output_index", "uint", 0, "output of the node", max=1024),
        ParamDesc("output_dimensions", "dimension", Dims(1, 3, 1, 1), "recorded output size N x C x H x W"),
    ),
)


def parse_constants(text: str) -> list[tuple[str, str, tuple[int, ...], np.ndarray | None]]:
    """``NAME:DTYPE:SHAPE[:V,V,...];...`` -> [(name, dtype, shape, inline values or None for a weight)]
    (SHAPE ``AxB``, empty for a scalar)."""
    out = []
    for item in filter(None, (p.strip() for p in text.split(";"))):
        name, dtype, shape, *values = item.split(":")
        dims = tuple(int(v) for v in shape.split("x") if v)
        inline = None
        if values:
            inline = np.asarray([int(v) for v in values[0].split(",") if v], dtype=np.dtype(dtype)).reshape(dims)
        out.append((name, dtype, dims, inline))
    return out


class Placeholder(Layer):
    desc = DESC
    #: the type checker reports this reason as an error on every placeholder
    not_runnable = "placeholder of an ONNX operator LayerLab cannot compute: it does not run (replace it to run the network)"

    def validate(self) -> None:
        try:
            attrs = json.loads(self.p["attributes"])
        except ValueError as exc:
            raise self.param_error("attributes", f"not JSON: {exc}") from None
        if not isinstance(attrs, dict):
            raise self.param_error("attributes", "must be a JSON object")
        try:
            self._constants = parse_constants(self.p["constants"])
            [np.dtype(d) for _, d, _, _ in self._constants]
        except (ValueError, TypeError) as exc:
            raise self.param_error("constants", f"{self.p['constants']!r} is not NAME:DTYPE:SHAPE;... ({exc})") from None
        self._attrs = attrs

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        return self.p["output_dimensions"]

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        return {name: shape for name, _, shape, inline in self._constants if inline is None}

    def forward(self, inputs: list[Any], out: Any) -> None:
        raise LayerLabError(f"placeholder {self.name} (ONNX {self.p['op_type']}) cannot run: replace it by layers")

    onnx_support = "partial: standard-domain operators with one output are written back as they were imported"
    torch_support = "no"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        if self.p["domain"] not in ("", "ai.onnx"):
            raise self.export_unsupported(f"operator domain {self.p['domain']!r} is not written back")
        if self.p["output_index"] != 0:
            raise self.export_unsupported("only the first output of a multi-output operator is written back")
        links, consts = iter(inputs), iter(self._constants)
        names: list[str | None] = []
        for kind in self.p["onnx_inputs"].split(","):
            if kind == "t":
                names.append(next(links, None))
            elif kind == "c":
                cname, dtype, shape, inline = next(consts)
                if inline is not None:
                    names.append(g.const(cname, inline, dtype=inline.dtype))
                else:
                    names.append(g.weight_data(cname, g.weight_array(cname).reshape(shape)))
            else:
                names.append(None)
        while names and names[-1] is None:
            names.pop()
        return g.node(self.p["op_type"], names, **{k: _attribute(v) for k, v in self._attrs.items()})


def _attribute(value: Any) -> Any:
    """A JSON attribute value back as an ONNX attribute value (``{"tensor": ...}`` as a TensorProto)."""
    if isinstance(value, dict) and "tensor" in value:
        import onnx  # noqa: PLC0415 - only the ONNX exporter calls this

        return onnx.numpy_helper.from_array(np.asarray(value["tensor"], dtype=value["dtype"]).reshape(value["shape"]))
    return value


LAYER = Placeholder
