"""ONNX export: every layer and activation with an ONNX equivalent becomes standard operators.

Layers describe themselves (``Layer.to_onnx`` / ``Activation.to_onnx``, next to their maths); this
module walks the network in execution order and gives each an ``OnnxGraph`` to add nodes to. Node and
tensor names follow the layer: ``conv3`` for the main node, ``conv3__bias``, ``conv3__act``... Graph
inputs and outputs are named after the input and output layers.

Options:
* ``allow_placeholders``: a layer (or activation) without an ONNX equivalent becomes one node of the
  ``layerlab.placeholders`` domain, op type = the layer type, its parameters as attributes and its
  weights as extra inputs; without it, export fails with a message listing every such layer.
* ``fp16``: the graph computes as the engine does in fp16: inputs, outputs, weight initializers and every
  layer's tensors are FLOAT16, except the layers that run in fp32 in an fp16 network (pinned to fp32, or not
  implementing fp16: ``engine.formats``), whose tensors and weights are FLOAT. The engine's format conversions
  are explicit Cast nodes: to FLOAT before each such layer, back to FLOAT16 after it (an input read only by
  fp32 layers is cast once after the graph input; an fp32 network output is cast to FLOAT16).
* ``fp32_compute`` (with ``fp16``): FLOAT16 inputs, outputs and weight initializers, but the graph computes in
  float: Casts to float right after the inputs and weights and back before the outputs, and each conversion
  to fp16 inside the network written as the rounding it does (a Cast to FLOAT16 and back). For a runtime without
  float16 kernels. (ONNX Runtime 1.32 on the CPU runs the fp16 graph too: it wraps the operators that have no
  float16 CPU kernel, Conv and BatchNormalization among them, in float32 casts of its own and keeps runs of such
  operators in float32, so there an fp16 graph rounds less often than the engine.)
* ``explicit_sizes``: inputs, outputs and every layer output carry their sizes at the input layers'
  dimensions; otherwise N, H and W are dimension variables (``N``, ``<input>_height``...) and the
  graph stays resolution-independent (sizes that do not follow the input resolution stay explicit).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.atomic import atomic_write, check_output_file, refuse_overwrite
from engine.descriptors import ParamDesc
from engine.export.common import (
    ExportError,
    ExportResult,
    LayerWriter,
    Unsupported,
    build_network,
    probe_dims,
    reason_of,
    unsupported_message,
)
from engine.model import Model
from engine.network import Network
from engine.registry import Registry
from engine.tensor import FP32_NCHW, Layout, Precision, TensorFormat
from engine.weights import WeightsSource

FP16_NCHW = TensorFormat(Precision.FP16, Layout.NCHW)

OPSET = 17
PLACEHOLDER_DOMAIN = "layerlab.placeholders"
IR_VERSION = 8  # ONNX 1.10+: readable by every maintained runtime


@dataclass(frozen=True)
class OnnxOptions:
    """How the graph is written (see the module documentation)."""

    allow_placeholders: bool = False
    fp16: bool = False
    explicit_sizes: bool = False
    fp32_compute: bool = False

    @property
    def fp16_tensors(self) -> bool:
        """True when layers' tensors are FLOAT16 inside the graph (``fp16`` without ``fp32_compute``)."""
        return self.fp16 and not self.fp32_compute


def _onnx() -> Any:
    try:
        import onnx  # noqa: PLC0415 - only the ONNX exporter needs it
    except ImportError as exc:
        raise ExportError("exporting to ONNX needs the onnx package (pip install onnx)") from exc
    return onnx


class OnnxGraph(LayerWriter):
    """The graph being written, as a layer's ``to_onnx`` sees it.

    ``layer`` is the layer being exported. ``node`` adds an operator, ``weight`` a weight of the layer
    (initializer, or the connected secondary input reshaped), ``const``/``ints`` constants, ``shape``
    the run-time sizes of a tensor (for sizes that follow the input resolution), ``activation`` the
    layer's own activation (for layers whose activation sits inside them)."""

    def __init__(self, net: Network, options: OnnxOptions) -> None:
        super().__init__(net)
        self.onnx = _onnx()
        self.options = options
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.inputs: list[Any] = []
        self.outputs: list[Any] = []
        self.value_info: list[Any] = []
        self._tensor_names: set[str] = set()
        self._node_names: set[str] = set()
        self._producer: dict[str, Any] = {}
        self.uses_placeholders = False
        self.custom_domains: set[str] = set()  # custom-layer operator domains used
        self.warnings: list[str] = []  # for the user: constants and weights float16 cannot hold
        self._probe, self._fixed_size = (None, True) if options.explicit_sizes else probe_dims(net)

    # ---- names ------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        assert self.layer is not None
        return self.layer.name

    def _fresh(self, base: str) -> str:
        name, k = base, 2
        while name in self._tensor_names or name in self._node_names:
            name = f"{base}_{k}"
            k += 1
        return name

    def _label(self, suffix: str) -> str:
        return self._fresh(f"{self.name}__{suffix}" if suffix else self.name)

    # ---- what layers call -----------------------------------------------------------------------------
    def node(self, op: str, inputs: list[str | None], suffix: str = "", domain: str = "", **attrs: Any) -> str:
        """Add operator ``op`` named ``<layer>`` (or ``<layer>__<suffix>``) with one output tensor of the
        same name; ``None`` inputs are written as empty (optional, absent). Returns the output name."""
        typed = self._float_only(op, domain) if self.dtype == np.float16 else None
        if typed is not None:  # an operator without float16 in ONNX (Celu...): computed in float between Casts
            return self._in_float(op, inputs, suffix, typed, attrs)
        name = self._label(suffix)
        attrs = {k: v for k, v in attrs.items() if v is not None}
        node = self.onnx.helper.make_node(op, ["" if i is None else i for i in inputs], [name], name=name,
                                          domain=domain or None, **attrs)
        self.nodes.append(node)
        self._node_names.add(name)
        self._tensor_names.add(name)
        self._producer[name] = node
        return name

    def _float_only(self, op: str, domain: str) -> str | None:
        """The type parameter of ``op``'s first input when ONNX allows float but not float16 there (else None)."""
        if domain:
            return None
        try:
            schema = self.onnx.defs.get_schema(op, OPSET)
        except self.onnx.defs.SchemaError:
            return None
        if not schema.inputs:
            return None
        param = schema.inputs[0].type_str
        allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}.get(param, set())
        return param if "tensor(float)" in allowed and "tensor(float16)" not in allowed else None

    def _in_float(self, op: str, inputs: list[str | None], suffix: str, param: str, attrs: dict[str, Any]) -> str:
        """``op`` on float copies of its float16 inputs (those of type ``param``), its result cast back to float16."""
        schema = self.onnx.defs.get_schema(op, OPSET)
        formal = [schema.inputs[min(i, len(schema.inputs) - 1)].type_str for i in range(len(inputs))]
        base = f"{suffix}_" if suffix else ""
        ins = [self.node("Cast", [x], f"{base}in{i}_f32", to=self.onnx.TensorProto.FLOAT)
               if x is not None and formal[i] == param else x for i, x in enumerate(inputs)]
        name = self._label(f"{base}f32")
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(self.onnx.helper.make_node(op, ["" if i is None else i for i in ins], [name], name=name,
                                                     **attrs))
        self._node_names.add(name)
        self._tensor_names.add(name)
        self._producer[name] = self.nodes[-1]
        return self.node("Cast", [name], suffix, to=self.onnx.TensorProto.FLOAT16)

    def _initializer(self, name: str, array: np.ndarray) -> None:
        self.initializers.append(self.onnx.numpy_helper.from_array(array, name))
        self._tensor_names.add(name)

    def const(self, suffix: str, value: Any, dtype: Any = np.float32) -> str:
        """A constant initializer ``<layer>__<suffix>`` (float32 unless ``dtype``; never converted to fp16)."""
        name = self._label(suffix)
        self._initializer(name, np.asarray(value, dtype=dtype))
        return name

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the current layer's tensors in the graph: float16 for a layer computing in fp16 in an
        fp16 graph (``OnnxOptions.fp16_tensors``), else float32."""
        assert self.layer is not None
        return self.tensor_dtype(self.name)

    @property
    def elem_type(self) -> int:
        """The ONNX element type (``TensorProto.FLOAT16`` or ``FLOAT``) of the current layer's tensors."""
        return self._elem(self.dtype)

    def tensor_dtype(self, layer: str) -> np.dtype:
        """The NumPy dtype of layer ``layer``'s output tensor in the graph (see ``dtype``)."""
        if self.options.fp16_tensors:
            return self.net.fmt_of(layer).dtype
        return np.dtype(np.float32)

    def _elem(self, dtype: Any) -> int:
        return self.onnx.TensorProto.FLOAT16 if np.dtype(dtype) == np.float16 else self.onnx.TensorProto.FLOAT

    def value(self, suffix: str, value: Any) -> str:
        """A float constant combined with the layer's tensors (a coefficient, a matrix): in their dtype."""
        return self.const(suffix, self._fit(suffix, value, self.dtype), self.dtype)

    def _fit(self, what: str, value: Any, dtype: Any) -> np.ndarray:
        """``value`` as ``dtype``; a value beyond float16's range (infinite in float16, as on an fp16 GPU layer) is
        noted in ``warnings``, naming the layer, so that the user can pin it to fp32."""
        array = np.asarray(value, dtype=np.float32)
        if np.dtype(dtype) == np.float16:
            finite = array[np.isfinite(array)]
            if finite.size and float(np.abs(finite).max()) > float(np.finfo(np.float16).max):
                self.warnings.append(f"layer {self.name}: {what} holds {float(np.abs(finite).max()):g}, beyond the "
                                     "float16 range: infinite in the fp16 graph (pin the layer to fp32)")
            with np.errstate(over="ignore"):
                return array.astype(np.float16)
        return array.astype(dtype, copy=False)

    def ints(self, suffix: str, values: Any) -> str:
        """An int64 1-D constant (shapes, axes, pads...)."""
        return self.const(suffix, np.asarray(values, dtype=np.int64).reshape(-1), np.int64)

    def weight_array(self, weight: str) -> np.ndarray:
        """Host float32 copy of a loaded weight of the current layer."""
        assert self.layer is not None
        return np.asarray(self.net.backend.to_host(self.layer.weights[weight]), dtype=np.float32)

    def weight_data(self, suffix: str, array: np.ndarray) -> str:
        """A float tensor of weight data: in the layer's dtype (fp16 graph: FLOAT16, FLOAT for an fp32 layer), or
        FLOAT16 followed by a Cast to float (``fp32_compute``)."""
        name = self._label(suffix)
        array = np.ascontiguousarray(array, dtype=np.float32)
        if not self.options.fp16 or self.options.fp16_tensors:
            self._initializer(name, self._fit(suffix, array, self.dtype))
            return name
        self._initializer(name, self._fit(suffix, array, np.float16))
        return self.node("Cast", [name], f"{name[len(self.name) + 2:]}_f32", to=self.onnx.TensorProto.FLOAT)

    def weight(self, weight: str, inputs: list[str | None] | None = None, shape: tuple[int, ...] | None = None) -> str:
        """Tensor name of the current layer's ``weight``: the connected secondary input that replaces it
        (reshaped to the weight's shape), else an initializer ``<layer>__<weight>`` of the loaded values.
        ``shape`` reshapes the initializer (e.g. (1, C, 1, 1) for broadcasting)."""
        layer = self.layer
        assert layer is not None
        idx = layer.weight_input(weight)
        if inputs is not None and idx is not None and idx < len(inputs) and inputs[idx] is not None:
            target = shape or layer.weight_shapes(layer.input_dims)[weight]
            return self.node("Reshape", [inputs[idx], self.ints(f"{weight}_shape", target)], f"{weight}_from_input")
        data = self.weight_array(weight)
        return self.weight_data(weight, data.reshape(shape) if shape is not None else data)

    def shape(self, x: str, start: int, end: int, suffix: str = "shape") -> str:
        """int64 tensor of the run-time sizes of axes ``start:end`` of tensor ``x``."""
        return self.node("Shape", [x], suffix, start=start, end=end)

    def activation(self, x: str) -> str:
        """The current layer's activation applied to ``x`` (for layers with ``exports_activation``)."""
        assert self.layer is not None
        act = self.layer.activation
        if act is None:
            return x
        return act.impl.to_onnx(self, x, act.coefs)

    # ---- what the exporter calls ----------------------------------------------------------------------
    def _type(self, dims: list[Any], fp16: bool) -> Any:
        return self.onnx.helper.make_tensor_type_proto(self._elem(np.float16 if fp16 else np.float32), dims)

    def _symbolic(self, name: str, role: str) -> list[Any]:
        """Dimensions written for a graph input/output or a layer output."""
        d = self.net.dims(name)
        if self.options.explicit_sizes or len(d) != 4:  # a tensor of another rank: its sizes as they are
            return list(d)
        if role == "input":  # weights that depend on the input size fix it
            return ["N", d.c, d.h, d.w] if self._fixed_size else ["N", d.c, f"{name}_height", f"{name}_width"]
        other = self._probe.get(name) if self._probe else None
        h = d.h if other is not None and other.h == d.h else f"{name}_height"
        w = d.w if other is not None and other.w == d.w else f"{name}_width"
        n = d.n if other is not None and other.n == d.n and role != "output" else "N"
        return [n, d.c, h, w]

    def graph_input(self) -> str:
        """Declare the current (input) layer as a graph input; returns the tensor to compute on (the input, or its
        Cast to the input layer's dtype)."""
        name = self.name
        self._tensor_names.add(name)
        self.inputs.append(self.onnx.helper.make_value_info(name, self._type(self._symbolic(name, "input"),
                                                                             self.options.fp16)))
        if self.options.fp16 and self.dtype != np.float16:
            return self.node("Cast", [name], "cast", to=self.onnx.TensorProto.FLOAT)
        return name

    def _rename(self, old: str, new: str) -> None:
        for node in self.nodes:
            for seq in (node.input, node.output):
                for i, t in enumerate(seq):
                    if t == old:
                        seq[i] = new
        self._tensor_names.discard(old)
        self._tensor_names.add(new)

    def graph_output(self, layer: str, tensor: str) -> None:
        """Make ``tensor`` the graph output named ``layer`` (through an Identity, or a Cast to float16)."""
        cast = self.options.fp16 and self.tensor_dtype(layer) != np.float16
        if tensor != layer or cast:
            if layer in self._tensor_names:  # an inner tensor holds the output's name: rename it
                inner = self._fresh(f"{layer}__main")
                self._rename(layer, inner)
                tensor = inner if tensor == layer else tensor
            op, attrs = ("Cast", {"to": self.onnx.TensorProto.FLOAT16}) if cast else ("Identity", {})
            node_name = self._fresh(f"{layer}__output") if layer in self._node_names else layer
            self.nodes.append(self.onnx.helper.make_node(op, [tensor], [layer], name=node_name, **attrs))
            self._node_names.add(node_name)
            self._tensor_names.add(layer)
        self.outputs.append(self.onnx.helper.make_value_info(layer, self._type(self._symbolic(layer, "output"),
                                                                               self.options.fp16)))

    def describe(self, layer: str, tensor: str) -> None:
        """Record the explicit size of a layer's output tensor (explicit-size mode)."""
        if self.options.explicit_sizes and tensor in self._producer:
            dims, fp16 = list(self.net.dims(layer)), self.tensor_dtype(layer) == np.float16
            self.value_info.append(self.onnx.helper.make_value_info(tensor, self._type(dims, fp16)))

    def placeholder(self, inputs: list[str | None], op: str | None = None, domain: str = "") -> str:
        """A ``layerlab.placeholders`` node standing for the current layer: op type = the layer type,
        attributes = its parameters, inputs = its inputs then its weights (attribute ``weight_names``).
        ``op`` and ``domain`` write it as another custom-domain operator (custom layers)."""
        layer = self.layer
        assert layer is not None
        if domain and domain != PLACEHOLDER_DOMAIN:
            self.custom_domains.add(domain)
        else:
            self.uses_placeholders = True
        attrs = {p.name: _attribute(p, layer.p[p.name]) for p in layer.desc.params}
        weights = sorted(layer.weights)
        ins = list(inputs) + [self.weight(w) for w in weights]
        if weights:
            attrs["weight_names"] = weights
        out = self.node(op or layer.desc.name, ins, "", domain=domain or PLACEHOLDER_DOMAIN, **attrs)
        fp16 = self.dtype == np.float16
        self.value_info.append(self.onnx.helper.make_value_info(out, self._type(self._symbolic(layer.name, "layer"), fp16)))
        return out

    def activation_placeholder(self, x: str) -> str:
        assert self.layer is not None and self.layer.activation is not None
        self.uses_placeholders = True
        act = self.layer.activation
        return self.node(act.name, [x], "act", domain=PLACEHOLDER_DOMAIN, **{k: float(v) for k, v in act.coefs.items()})

    def model(self, graph_name: str, doc: str) -> Any:
        h = self.onnx.helper
        graph = h.make_graph(self.nodes, graph_name, self.inputs, self.outputs, self.initializers,
                             value_info=self.value_info)
        opsets = [h.make_opsetid("", OPSET)]
        if self.uses_placeholders:
            opsets.append(h.make_opsetid(PLACEHOLDER_DOMAIN, 1))
        opsets += [h.make_opsetid(d, 1) for d in sorted(self.custom_domains)]
        model = h.make_model(graph, opset_imports=opsets, producer_name="LayerLab", doc_string=doc)
        model.ir_version = IR_VERSION
        return model


def _attribute(p: ParamDesc, value: Any) -> Any:
    """A parameter value as an ONNX attribute value (dimensions as their 4 integers)."""
    if p.type == "bool":
        return int(bool(value))
    if p.type in ("uint", "int"):
        return int(value)
    if p.type == "float":
        return float(value)
    if p.type == "dimension":
        return [int(v) for v in value]
    return str(value)


def build_onnx(net: Network, options: OnnxOptions = OnnxOptions(),
               warnings: list[str] | None = None) -> tuple[Any, list[Unsupported]]:
    """The ONNX ModelProto of a planned network, and what became placeholders; ``warnings`` receives what the user
    should know (a weight or constant beyond the float16 range in an fp16 graph).

    Raises ExportError listing every unsupported layer and activation when placeholders are off."""
    g = OnnxGraph(net, options)
    tensor: dict[str, str] = {}
    missing: list[Unsupported] = []
    for name, layer, ins in g.each_layer(tensor):
        try:
            out = layer.to_onnx(g, ins)
        except NotImplementedError as exc:
            missing.append(Unsupported(name, layer.desc.name, reason_of(exc, name, layer.desc.name)))
            out = g.placeholder(ins)
        act = layer.activation
        if act is not None and not layer.exports_activation:
            try:
                out = act.impl.to_onnx(g, out, act.coefs)
            except NotImplementedError as exc:
                missing.append(Unsupported(name, act.name, str(exc) or "no ONNX equivalent", activation=True))
                out = g.activation_placeholder(out)
        tensor[name] = out
        if name not in net.output_names:
            g.describe(name, out)
    if missing and not options.allow_placeholders:
        raise ExportError(unsupported_message("ONNX", missing, "Allow placeholder operators (--placeholders) to "
                                              f"write them as {PLACEHOLDER_DOMAIN} nodes, or replace them."))
    for name in net.output_names:
        g.layer = net.layer(name)
        g.graph_output(name, tensor[name])
    if warnings is not None:
        warnings.extend(g.warnings)
    doc = f"LayerLab network {net.model.name} {getattr(net.model, 'version', '')}".strip()
    return g.model(net.model.name, doc), missing


def _precision_note(options: OnnxOptions, net: Network) -> str:
    """What the summary says of the graph's precision."""
    if not options.fp16:
        return ""
    if options.fp32_compute:
        return ", fp16 tensors computed in float32"
    fp32 = sorted(n for n, f in net.pinned.items() if f.precision is Precision.FP32 and n not in net.input_names
                  and n not in net.output_names and n not in {c[0] for c in net.conversions})
    return ", fp16 tensors computed in fp16" + (f" (in fp32: {', '.join(fp32)})" if fp32 else "")


def check_onnx(model: Any) -> Any:
    """Run the ONNX checker (full check) and strict shape inference; returns the inferred model."""
    onnx = _onnx()
    try:
        onnx.checker.check_model(model, full_check=True)
        return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise ExportError(f"the exported ONNX model does not pass the ONNX checker: {exc}") from None


def export_onnx(model: Model, registry: Registry, path: str | Path, options: OnnxOptions = OnnxOptions(),
                weights: WeightsSource | None = None, seed: int = 0, fusing: str | list[Any] = "on") -> ExportResult:
    """Write ``model`` as an ONNX file at ``path`` (initializers from ``weights``, default the seeded
    random weights of ``seed``; fusing rules as ``fusing``: 'on', 'off' or a rules file)."""
    onnx = _onnx()
    out = Path(path)
    check_output_file(out, "ONNX file")
    refuse_overwrite(out, [model.path])
    # fp16: built in fp16, so that the layers pinned to fp32 (engine.formats) run in fp32 behind their conversions,
    # written as Casts
    net = build_network(model, registry, weights, seed, fusing, FP16_NCHW if options.fp16 else FP32_NCHW)
    notes: list[str] = []
    proto, missing = build_onnx(net, options, notes)
    check_onnx(proto)
    atomic_write(out, lambda tmp: onnx.save(proto, str(tmp)), "ONNX file")
    warnings = [f"placeholder written for {u}" for u in missing] + notes
    n_layers = len(net.order)
    summary = (f"wrote {out} ({n_layers} layers, {len(proto.graph.node)} ONNX nodes, opset {OPSET}"
               f"{_precision_note(options, net)}, "
               f"{'explicit sizes' if options.explicit_sizes else 'symbolic sizes'})")
    return ExportResult("onnx", out, [out], warnings, summary)

