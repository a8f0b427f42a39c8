"""The state of one import: the cleaned ONNX graph (constants, static shapes, consumers) and the LayerLab
layers made so far. Operator mappings (``ops_*.py``) read ONNX nodes through it and add layers with it."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np

from engine.errors import LayerLabError
from engine.model import LayerSpec
from engine.registry import Registry
from engine.tensor import Dims


class Unsupported(Exception):
    """Raised by a mapping: this node (or this attribute/shape of it) has no exact LayerLab equivalent."""


class OnnxImportError(LayerLabError):
    """A model that cannot be imported (bad file, unsupported nodes without placeholders, bad option)."""


class RefusedNodes(OnnxImportError):
    """Nodes without a LayerLab equivalent, import without placeholders: ``refused`` lists them (the designer
    shows them grouped by operator)."""

    def __init__(self, message: str, refused: list[Refusal]) -> None:
        super().__init__(message)
        self.refused = list(refused)


@dataclass(frozen=True)
class Refusal:
    """A node that could not be mapped: operator, node name and why."""

    op: str
    node: str
    reason: str

    def __str__(self) -> str:
        return f"{self.op} node {self.node!r}: {self.reason}"


@dataclass
class Source:
    """What an ONNX tensor is in LayerLab: the output of ``layer``. ``flat`` marks an ONNX tensor of rank 2
    (N x K) standing for the layer's N x C x H x W output flattened (K = C*H*W; when H = W = 1 it is the
    same values as the 4-D tensor, as a fully connected layer's output)."""

    layer: str
    flat: bool = False


def identifier(text: str, fallback: str = "layer") -> str:
    """A LayerLab identifier made from an ONNX name (``/layer1/conv1/Conv`` -> ``layer1_conv1_Conv``)."""
    name = re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_")
    name = re.sub(r"_+", "_", name)
    if not name:
        name = fallback
    if name[0].isdigit():
        name = f"{fallback}_{name}"
    return name


def attributes(node: Any) -> dict[str, Any]:
    """A node's attributes as Python values (ints, floats, strings, lists; tensors as arrays)."""
    import onnx  # noqa: PLC0415

    out = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode("utf-8", "replace") for x in v]
        elif isinstance(v, onnx.TensorProto):
            v = onnx.numpy_helper.to_array(v)
        out[a.name] = v
    return out


class _Sources(dict):
    """ONNX tensor -> :class:`Source`, with the tensors bound to each layer kept at hand (so asking what a layer
    computes does not read every tensor of the graph)."""

    def __init__(self) -> None:
        super().__init__()
        self.of_layer: dict[str, dict[str, None]] = {}

    def __setitem__(self, tensor: str, source: Source) -> None:
        if tensor in self:
            self.of_layer[self[tensor].layer].pop(tensor, None)
        super().__setitem__(tensor, source)
        self.of_layer.setdefault(source.layer, {})[tensor] = None

    def __delitem__(self, tensor: str) -> None:
        self.of_layer[self[tensor].layer].pop(tensor, None)
        super().__delitem__(tensor)


class _Marks(dict):
    """An ordered set of node ids (what was added last can be taken back)."""

    def add(self, key: int) -> None:
        self[key] = None

    def update(self, keys: Any) -> None:  # type: ignore[override]
        for k in keys:
            self[k] = None


def _newest(d: dict, before: int) -> list[Any]:
    """The keys added to ``d`` since it had ``before`` keys (dicts keep their insertion order)."""
    return list(islice(reversed(d), max(len(d) - before, 0)))[::-1]


@dataclass
class Context:
    """One import in progress (see the module documentation)."""

    graph: Any
    opset: int
    registry: Registry
    consts: dict[str, np.ndarray]
    shapes: dict[str, tuple[int, ...]]
    layers: dict[str, LayerSpec] = field(default_factory=dict)
    weights: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    sources: dict[str, Source] = field(default_factory=_Sources)
    consumers: dict[str, list[Any]] = field(default_factory=dict)
    graph_outputs: set[str] = field(default_factory=set)
    consumed: _Marks = field(default_factory=_Marks)  # id() of nodes a pattern has taken
    folded: list[str] = field(default_factory=list)
    mapped: list[tuple[str, str, str]] = field(default_factory=list)  # (op, node, layer)
    node: Any = None  # the node being mapped
    where: str = ""  # the file, for messages
    notes: dict[str, str] = field(default_factory=dict)  # layer -> the ONNX node it came from
    scopes: dict[str, str] = field(default_factory=dict)  # layer -> its ONNX node's name (module scopes)
    notices: list[str] = field(default_factory=list)  # for the user (layout changes...)
    _dims: dict[str, Dims] = field(default_factory=dict)  # layer -> its output dimensions
    _next: dict[str, int] = field(default_factory=dict)  # base name -> the next suffix to try
    _views: dict[tuple[str, tuple[int, ...]], str] = field(default_factory=dict)  # (tensor, dims) -> its reshape

    def __post_init__(self) -> None:
        for n in self.graph.node:
            for t in n.input:
                if t:
                    self.consumers.setdefault(t, []).append(n)
        self.graph_outputs = {o.name for o in self.graph.output}

    # ---- reading the ONNX graph -------------------------------------------------------------------------
    @property
    def node_name(self) -> str:
        return self.node.name or f"{self.node.op_type}({', '.join(self.node.output)})"

    def attrs(self, node: Any = None) -> dict[str, Any]:
        return attributes(node if node is not None else self.node)

    def shape(self, tensor: str) -> tuple[int, ...]:
        """The static shape of a tensor (known for every tensor once the inputs' sizes are fixed)."""
        if tensor in self.consts:
            return tuple(self.consts[tensor].shape)
        try:
            return self.shapes[tensor]
        except KeyError:
            raise Unsupported(f"the shape of tensor {tensor!r} is unknown after shape inference") from None

    def is_const(self, tensor: str) -> bool:
        return tensor in self.consts

    def const(self, tensor: str, what: str = "input") -> np.ndarray:
        """The value of a constant input; Unsupported when it is computed at run time."""
        if tensor not in self.consts:
            raise Unsupported(f"{what} {tensor!r} is computed at run time (LayerLab needs a constant)")
        return self.consts[tensor]

    def input(self, index: int) -> str | None:
        """Name of the node's input ``index`` (None when absent or empty)."""
        ins = self.node.input
        return ins[index] if index < len(ins) and ins[index] else None

    def optional_const(self, index: int) -> np.ndarray | None:
        t = self.input(index)
        return None if t is None else self.const(t, f"input {index}")

    def readers(self, tensor: str) -> list[Any]:
        return self.consumers.get(tensor, [])

    def only_reader(self, tensor: str) -> Any | None:
        """The single node reading ``tensor`` when it is read once and is no graph output."""
        r = self.readers(tensor)
        return r[0] if len(r) == 1 and tensor not in self.graph_outputs else None

    def source(self, tensor: str) -> Source:
        try:
            return self.sources[tensor]
        except KeyError:
            if tensor in self.consts:
                raise Unsupported(f"input {tensor!r} is a constant where LayerLab needs a tensor computed by a layer "
                                  f"(shape {tuple(self.consts[tensor].shape)})") from None
            raise Unsupported(f"input {tensor!r} comes from a node that was not imported") from None

    def rank(self, tensor: str) -> int:
        return len(self.shape(tensor))

    def dims(self, tensor: str) -> Dims:
        """LayerLab dimensions of a tensor: rank 4 as is, rank 2 (N x K) as N x K x 1 x 1."""
        s = self.shape(tensor)
        if len(s) == 4:
            return Dims(*s)
        if len(s) == 2:
            return Dims(s[0], s[1], 1, 1)
        raise Unsupported(f"tensor {tensor!r} has rank {len(s)} (shape {s}); LayerLab tensors are N x C x H x W")

    def full_dims(self, tensor: str) -> Dims:
        """The dimensions of a tensor as they are, of any rank 1 to 6 (what the layers of any rank read)."""
        s = self.shape(tensor)
        if not 1 <= len(s) <= 6:
            raise Unsupported(f"tensor {tensor!r} has rank {len(s)} (shape {s}); LayerLab tensors have rank 1 to 6")
        return Dims(*s)

    def ranked(self, tensor: str) -> str:
        """The layer computing an ONNX tensor with its own dimensions (any rank): the producing layer, or a reshape
        of it where LayerLab holds the values under other dimensions (N x K as N x K x 1 x 1, a flattened view)."""
        want = self.full_dims(tensor)
        src = self.source(tensor)
        if not src.flat and self.layer_dims(src.layer) == want:
            return src.layer
        return self._reshaped(tensor, src.layer, want)

    def _reshaped(self, tensor: str, layer: str, dims: Dims) -> str:
        """A reshape layer giving ``layer``'s values the dimensions ``dims`` (made once per tensor and dimensions)."""
        key = (tensor, tuple(dims))
        made = self._views.get(key)
        if made is not None and made in self.layers:
            return made
        made = self.add("reshape", {"shape": ",".join(map(str, dims))}, [layer], dims=dims, name=f"{layer}_view")
        self._views[key] = made
        return made

    def tensor(self, tensor: str) -> str:
        """The layer computing an ONNX tensor of rank 4, or of rank 2 whose LayerLab layer holds the same
        values as N x K x 1 x 1 (any element-wise work may read it)."""
        self.dims(tensor)
        src = self.source(tensor)
        if len(self.layer_dims(src.layer)) != 4:  # a layer of another rank: its values seen as N x C x H x W
            return self._reshaped(tensor, src.layer, self.dims(tensor))
        if src.flat and self.layer_dims(src.layer) != self.dims(tensor):
            raise Unsupported(f"tensor {tensor!r} is a flattened N x C x H x W tensor; only fully connected layers "
                              "read those")
        return src.layer

    def layer_dims(self, layer: str) -> Dims:
        return self._dims[layer]

    def channel_axis(self, tensor: str, axis: int) -> bool:
        """True when ``axis`` of ``tensor`` is LayerLab's channel axis (1 of rank 4, 1 of rank 2)."""
        r = self.rank(tensor)
        return r in (2, 4) and axis % r == 1

    def spatial_axes(self, tensor: str, axes: list[int]) -> bool:
        return self.rank(tensor) == 4 and sorted(a % 4 for a in axes) == [2, 3]

    # ---- what the registry offers -------------------------------------------------------------------------
    def has_layer(self, layer_type: str) -> bool:
        return self.registry.find_layer(layer_type) is not None

    def has_param(self, layer_type: str, param: str, value: str | None = None) -> bool:
        """True when the layer type exists with ``param`` (and, for an enum, with ``value``)."""
        desc = self.registry.find_layer(layer_type)
        if desc is None or desc.canonical_param_name(param) is None:
            return False
        p = desc.param(param)
        return value is None or p.type != "enum" or value in p.enum_values

    def require_layer(self, layer_type: str) -> None:
        if not self.has_layer(layer_type):
            raise Unsupported(f"the loaded collections have no {layer_type} layer")

    def require_param(self, layer_type: str, param: str, value: str | None = None, why: str = "") -> None:
        if not self.has_param(layer_type, param, value):
            what = f"{param}={value}" if value is not None else f"parameter {param}"
            raise Unsupported(f"{why}{': ' if why else ''}the {layer_type} layer has no {what}")

    def has_activation(self, name: str) -> bool:
        return self.registry.find_activation(name) is not None

    # ---- making layers ---------------------------------------------------------------------------------
    def unique(self, base: str) -> str:
        """``base``, or ``base_2``, ``base_3``... the first not taken (each base remembers where it got to, so
        thousands of nodes of one name cost no more than thousands of names)."""
        if base not in self.layers:
            return base
        k = self._next.get(base, 2)
        while f"{base}_{k}" in self.layers:
            k += 1
        self._next[base] = k
        return f"{base}_{k}"

    # ---- taking back a mapping that failed half-way -----------------------------------------------------
    def mark(self) -> tuple[int, int, int, int]:
        """Where the import stands (see :meth:`rollback`)."""
        return len(self.layers), len(self.sources), len(self.folded), len(self.consumed)

    def added_layers(self, mark: tuple[int, int, int, int]) -> list[str]:
        """Layers made since ``mark``, in order."""
        return _newest(self.layers, mark[0])

    def rollback(self, mark: tuple[int, int, int, int]) -> None:
        """Remove the layers, tensor bindings, folds and taken nodes added since ``mark``."""
        added = self.added_layers(mark)
        for name in added:
            del self.layers[name]
            self.weights.pop(name, None)
        if added:
            self._next.clear()  # names were freed: search again from the start
        for t in _newest(self.sources, mark[1]):
            del self.sources[t]
        del self.folded[mark[2]:]
        for k in _newest(self.consumed, mark[3]):
            del self.consumed[k]

    def add(self, layer_type: str, params: dict[str, Any], inputs: list[str | None], output: str | None = None,
            weights: dict[str, np.ndarray] | None = None, activation: tuple[str, dict[str, float]] | None = None,
            name: str | None = None, dims: Dims | None = None, suffix: str = "") -> str:
        """Add a layer of ``layer_type`` reading the layers ``inputs``; parameters as typed values (formatted
        by the descriptor). ``output``: the ONNX tensor it computes (bound to it; its LayerLab dimensions
        come from that tensor's shape unless ``dims``). Returns the layer name."""
        desc = self.registry.find_layer(layer_type)
        if desc is None:
            raise Unsupported(f"the loaded collections have no {layer_type} layer")
        node = self.node
        fallback = node.op_type.lower() if node is not None else "layer"
        base = identifier(name or (node.name if node is not None and node.name else output) or fallback, fallback)
        lname = self.unique(f"{base}_{suffix}" if suffix else base)
        text = {k: desc.param(k).format(v) for k, v in params.items()}
        spec = LayerSpec(lname, layer_type, text, inputs=list(inputs))
        if activation is not None:
            spec.activation = activation[0]
            spec.act_coefs = {k: _num(v) for k, v in activation[1].items()}
        self.layers[lname] = spec
        if self.node is not None:
            self.notes[lname] = f"ONNX {self.node.op_type} node {self.node_name}"
            self.scopes[lname] = self.node.name
        if weights:
            self.weights[lname] = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in weights.items()}
        if dims is None and output is not None:
            dims = self.dims(output) if self.rank(output) in (2, 4) else self.full_dims(output)
        if dims is not None:
            self._dims[lname] = dims
        if output is not None:
            self.bind(output, lname)
        return lname

    def update(self, layer: str, params: dict[str, Any], weights: dict[str, np.ndarray] | None = None) -> None:
        """Replace the parameters (typed values) and weights of a layer made earlier in this import."""
        spec = self.layers[layer]
        desc = self.registry.find_layer(spec.type)
        assert desc is not None
        spec.params = {k: desc.param(k).format(v) for k, v in params.items()}
        if weights:
            self.weights[layer] = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in weights.items()}
        else:
            self.weights.pop(layer, None)

    def bind(self, tensor: str, layer: str, flat: bool = False) -> None:
        """``tensor`` is computed by ``layer`` (``flat``: as its flattened output)."""
        self.sources[tensor] = Source(layer, flat)

    def alias(self, tensor: str, of: str) -> None:
        """``tensor`` holds the same values as tensor ``of`` (Identity, a reshape that is a view...)."""
        src = self.source(of)
        flat = self.rank(tensor) == 2 and self.layer_dims(src.layer) != self.dims(tensor)
        self.sources[tensor] = Source(src.layer, flat)

    def set_activation(self, tensor: str, output: str, name: str, coefs: dict[str, float],
                       pattern: tuple[Any, ...] = ()) -> str:
        """Apply activation ``name`` to ``tensor`` and bind ``output``: fused into the producing layer when
        that layer has no activation yet and nothing else reads its output, else an identity affine layer
        carrying it. ``pattern``: further nodes of a recognised pattern, which may read the tensor too.
        Returns the layer name."""
        if not self.has_activation(name):
            raise Unsupported(f"the loaded collections have no {name} activation")
        if self.rank(tensor) in (2, 4):
            self.tensor(tensor)
        else:
            self.ranked(tensor)
        src = self.source(tensor)
        spec = self.layers[src.layer]
        fusable = (spec.type not in ("input", "placeholder") and spec.activation == "none"
                   and self.single_use(src.layer, tensor, {id(self.node), *map(id, pattern)}))
        if fusable:
            spec.activation = name
            spec.act_coefs = {k: _num(v) for k, v in coefs.items()}
            self.bind(output, src.layer, src.flat)
            ops = "+".join(n.op_type for n in (self.node, *pattern))
            self.folded.append(f"{ops} {self.node_name} -> activation {name} of layer {src.layer}")
            return src.layer
        if self.rank(tensor) not in (2, 4) or len(self.layer_dims(src.layer)) != 4:
            return self.add("unary", {"operation": "identity"}, [self.ranked(tensor)], output, activation=(name, coefs),
                            dims=self.full_dims(output))
        return self.add("affine", {"mode": "per_tensor", "scale": 1.0, "shift": 0.0}, [src.layer], output,
                        activation=(name, coefs))

    def single_use(self, layer: str, tensor: str, mine: set[int]) -> bool:
        """True when the nodes ``mine`` (ids) and nodes already absorbed into ``layer`` are the only readers of
        every tensor bound to ``layer`` and none of them is a graph output (so the current node may join it)."""
        def absorbed(node: Any) -> bool:
            return all(o in self.sources and self.sources[o].layer == layer for o in node.output if o)

        for t in list(self.sources.of_layer.get(layer, ())):
            if t in self.graph_outputs or any(id(r) not in mine and not absorbed(r) for r in self.readers(t)):
                return False
        return True


def _num(v: float) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)
