"""What every exporter shares: the result record, the export error, and the network the exporters read
(layers, output sizes and weights of the model as it runs: fp32 NCHW on NumPy, fusing rules applied)."""
from __future__ import annotations

import keyword
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.errors import LayerLabError
from engine.layer import Layer
from engine.model import Model
from engine.network import Network
from engine.registry import Registry
from engine.run import RunSpec, open_network
from engine.tensor import FP32_NCHW, Dims, TensorFormat
from engine.weights import WeightsSource


class ExportError(LayerLabError):
    """An export cannot be done as asked: names every layer (or option) at fault and what to do."""


@dataclass
class ExportResult:
    """What an exporter wrote: the main path, every file, and warnings for the user."""

    kind: str
    path: Path
    files: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    summary: str = ""


class LayerWriter:
    """What every exporter's writer shows the layer it is exporting (``layer``): the network it reads and the
    layer's input and output sizes."""

    def __init__(self, net: Network) -> None:
        self.net = net
        self.layer: Layer | None = None

    @property
    def input_dims(self) -> list[Dims | None]:
        """The sizes of the current layer's inputs (None where one is unconnected)."""
        assert self.layer is not None
        return list(self.layer.input_dims)

    @property
    def output_dims(self) -> Dims:
        """The size of the current layer's output."""
        assert self.layer is not None
        return self.net.dims(self.layer.name)

    def each_layer(self, exported: dict[str, str]) -> Iterator[tuple[str, Layer, list[str | None]]]:
        """Each layer of the network in execution order, made the current one, with what its inputs were exported
        as: ``exported`` maps a layer to the name of its output in the export, which the exporter fills as it goes
        (None: an unconnected input)."""
        for name in self.net.order:
            self.layer = self.net.layer(name)
            yield name, self.layer, [exported[s] if s is not None else None for s in self.net.nodes[name].inputs]


@dataclass(frozen=True)
class Unsupported:
    """A layer or activation an exporter has no equivalent for."""

    layer: str
    type: str
    reason: str
    activation: bool = False

    def __str__(self) -> str:
        what = f"activation {self.type} of layer {self.layer}" if self.activation else f"{self.layer} ({self.type})"
        return f"{what}: {self.reason}"


def unsupported_message(target: str, items: list[Unsupported], hint: str) -> str:
    """One message listing every unsupported layer and activation."""
    n = len(items)
    listing = "; ".join(str(u) for u in items)
    return f"cannot export to {target}: {n} layer(s) or activation(s) have no {target} equivalent: {listing}. {hint}"


def reason_of(exc: NotImplementedError, layer: str, type_name: str) -> str:
    """The reason a layer gave, without the ``type name:`` prefix ``export_unsupported`` adds."""
    text = str(exc) or "not supported"
    prefix = f"{type_name} {layer}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def build_network(model: Model, registry: Registry, weights: WeightsSource | None = None, seed: int = 0,
                  fusing: str = "on", fmt: TensorFormat = FP32_NCHW) -> Network:
    """The network the exporters read: NumPy backend, planned at the input layers' dimensions (so every
    layer knows its sizes) and with its weights loaded from ``weights`` (default: seeded random)."""
    spec = RunSpec(backend="numpy", format=str(fmt), seed=seed, fusing=fusing)
    net = open_network(model, spec, registry, weights=weights, graph_capture=False)
    for name in net.order:
        net.dims(name)
    return net


def host_weights(net: Network, layer: str) -> dict[str, np.ndarray]:
    """Host float32 copies of one layer's loaded weights."""
    lay = net.layer(layer)
    return {k: np.asarray(net.backend.to_host(v), dtype=np.float32) for k, v in lay.weights.items()}


def probe_dims(net: Network, factor: int = 2) -> tuple[dict[str, Dims] | None, bool]:
    """Output dimensions of every layer when every input's H and W are ``factor`` times larger (shape
    inference only; None when the network does not accept such inputs; an input of another rank than 4 has no
    H and W and keeps its sizes), and whether some weight's
    shape depends on the input size (a fully connected layer): then the network only runs at its
    input layers' sizes. Comparing the dimensions with ``net.dims`` tells which sizes follow the input
    resolution."""
    dims: dict[str, Dims] = {}
    fixed = False
    try:
        for name in net.order:
            nd = net.nodes[name]
            if name in net.input_names:
                d = net.dims(name)
                dims[name] = Dims(d.n, d.c, d.h * factor, d.w * factor) if len(d) == 4 else d
                continue
            ins = [dims[s] if s is not None else None for s in nd.inputs]
            dims[name] = nd.layer.output_dims(ins)
            fixed = fixed or nd.layer.weight_shapes(ins) != nd.layer.weight_shapes(list(nd.layer.input_dims))
    except (LayerLabError, ArithmeticError, AssertionError):
        return None, fixed
    return dims, fixed


def python_identifier(name: str) -> bool:
    """True for a name usable as a Python module, package or function name."""
    return name.isidentifier() and not keyword.iskeyword(name)
