"""The one place where a batch run turns its settings into a network. Every engine (local threads, local
processes, Ray actors) calls :func:`open_network_for`; it is meant to become a thin call of the engine's
shared run path (``engine/run.py``) once that exists, so nothing else in this package builds a backend,
a weights source or a network."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, TextIO

from engine.errors import InputError
from engine.io import ImageOptions


@dataclass(frozen=True)
class NetworkSpec:
    """What a worker needs to open the same network anywhere (picklable: the model travels as XML text)."""

    model_text: str
    model_path: str = "<batch>"
    backend: str = "auto"
    format: str = "auto"  # 'fp16 nhwc', 'fp32 nchw'... or 'auto' (fp16 NHWC on CuPy, fp32 NCHW on NumPy)
    weights: str | None = None
    seed: int = 0
    fusing: str = "on"
    plugins: tuple[str, ...] = ()


def default_format(backend_name: str) -> str:
    """The tensor format 'auto' means on a backend (the same rule as ``layerlab infer``)."""
    return "fp16 nhwc" if backend_name == "cupy" else "fp32 nchw"


def _registry(spec: NetworkSpec) -> Any:
    from engine.plugins import load_plugins

    return load_plugins(list(spec.plugins))


def _model(spec: NetworkSpec, registry: Any) -> Any:
    from engine.modelfile import loads

    return loads(spec.model_text, spec.model_path, registry)


def open_network_for(spec: NetworkSpec, notice: TextIO | None = sys.stderr, graph_capture: bool = True) -> Any:
    """A ready :class:`engine.network.Network` for ``spec`` (backend, format, weights, seed, fusing rules).

    It has run once on the input layer's declared dimensions, so its weights are loaded for the declared
    channel count: every network of a run (threads, processes, Ray actors) then accepts and refuses the same
    inputs, whatever input it happens to see first. ``graph_capture=False`` keeps the GPU network eager (for
    several networks sharing one GPU from several threads: a capture must not see the other's copies)."""
    from engine.backends import get_backend
    from engine.network import Network
    from engine.tensor import TensorFormat
    from engine.weights import RandomWeights, WeightsFolder

    registry = _registry(spec)
    model = _model(spec, registry)
    backend = get_backend(spec.backend, notice=notice)
    text = spec.format.strip()
    fmt = TensorFormat.parse(default_format(backend.name) if text in ("", "auto") else text)
    weights = WeightsFolder(spec.weights) if spec.weights else RandomWeights(spec.seed)
    net = Network(model, registry, backend, fmt, weights=weights, seed=spec.seed, fusing=spec.fusing,
                  graph_capture=graph_capture)
    net.run()
    return net


@dataclass(frozen=True)
class NetworkIO:
    """The single input layer of a network, how images become its tensors, and its output layers."""

    input_name: str
    image_options: ImageOptions
    output_names: tuple[str, ...]


def network_io(spec: NetworkSpec) -> NetworkIO:
    """Input name, image options and output names, read without computing anything (no weights, no backend)."""
    from engine.network import Network

    registry = _registry(spec)
    probe = Network(_model(spec, registry), registry, fusing="off")
    if len(probe.input_names) != 1:
        raise InputError(f"network {probe.model_name} has {len(probe.input_names)} input layers "
                         f"({', '.join(probe.input_names) or 'none'}): a batch run feeds exactly one")
    name = probe.input_names[0]
    p = probe.layer(name).p
    return NetworkIO(name, ImageOptions(p["scale"], p["shift"], p["min_channels"], p["tiling"]),
                     tuple(probe.output_names))
