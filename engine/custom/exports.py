"""How custom layers export.

* ONNX: a node of the ``layerlab.custom`` domain (opset version 1) whose operator type is the definition's
  name and whose attributes are the layer's parameters (numbers as ints/floats, dimensions as 4 ints, enums
  and strings as strings), with the layer's inputs in order. It is a placeholder: ONNX runtimes do not know
  it; implement the operator (e.g. an onnxruntime custom op) or replace the node.
* PyTorch: with Python code, a module that runs that code on NumPy arrays (results as float32 tensors on the
  input's device; not differentiable, a TODO says so); without, the layer is listed as unsupported and, with
  stubs on, gets the usual stub class with a TODO."""
from __future__ import annotations

import keyword
import textwrap
from typing import TYPE_CHECKING, Any

from engine.export.codegen import camel_case, py_literal
from engine.export.codegen import plain_value as _plain

if TYPE_CHECKING:
    from engine.custom.definition import CustomLayerDef
    from engine.layer import Layer

CUSTOM_DOMAIN = "layerlab.custom"


def onnx_node(defn: CustomLayerDef, g: Any, inputs: list[str | None]) -> str:
    """The ``layerlab.custom`` node of a layer of custom layer ``defn`` (through the exporter's OnnxGraph ``g``)."""
    return g.placeholder(inputs, op=defn.name, domain=CUSTOM_DOMAIN)


_TORCH = '''def custom_{name}_code():
    """The Python code of LayerLab custom layer {name!r}, as written in the designer: forward(xp, inputs, params)."""
{code}
    return forward


class {cls}(nn.Module):
    """LayerLab custom layer {name!r}: runs its Python code on NumPy arrays.

    TODO: it is not differentiable and copies through the host: rewrite forward with torch operations to
    train through it or to run it on the GPU."""

    def __init__(self, **params) -> None:
        super().__init__()
        self.params = params
        self.code = custom_{name}_code()

    def forward(self, *inputs: torch.Tensor | None) -> torch.Tensor:
        arrays = [None if x is None else x.detach().cpu().numpy().astype(np.float32) for x in inputs]
        y = self.code(np, arrays, dict(self.params))
        device = next(x for x in inputs if x is not None).device
        return torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32)).to(device)'''


def torch_module(layer: Layer, defn: CustomLayerDef, t: Any, inputs: list[str | None]) -> str:
    """A module running the Python code of ``layer``, a layer of custom layer ``defn`` (through the exporter's
    TorchModuleWriter ``t``)."""
    if not defn.python.strip():
        raise layer.export_unsupported("custom layer without Python code: write the module yourself (a stub has a TODO)")
    cls = f"Custom{camel_case(defn.name)}"
    t.helper(f"custom_{defn.name}_code", _TORCH.format(name=defn.name, cls=cls,
                                                         code=textwrap.indent(defn.python.rstrip("\n"), "    ")))
    args = ", ".join(f"{p.name}={py_literal(_plain(layer.p[p.name]))}" for p in layer.desc.params
                     if not keyword.iskeyword(p.name))
    ref = t.module(f"{cls}({args})")
    while inputs and inputs[-1] is None:
        inputs = inputs[:-1]
    return f"{ref}({', '.join('None' if i is None else i for i in inputs)})"



def custom_layer_lines(model: Any) -> list[str]:
    """Lines of a standalone project's ``build_model()`` that carry the model's custom layer definitions and
    give consent to run them (the project is the exported network's own code)."""
    if not model.custom_layers:
        return []
    lines = [f"    m.custom_layers[{name!r}] = {text!r}" for name, text in model.custom_layers.items()]
    lines += ["    from engine.custom import CONSENT, definitions  # the project's own custom layers: consented",
              "    CONSENT.grant(definitions(m).values())"]
    return lines
