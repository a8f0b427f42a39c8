"""The one place where a batch run turns its settings into a network. Every engine (local threads, local
processes, Ray actors) calls :func:`open_network_for`, a thin call of the engine's shared run path
(``engine.run.open_network``), so nothing in this package builds a backend, a weights source or a network."""
from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any, TextIO

from engine.errors import InputError
from engine.io import ImageOptions


@dataclass(frozen=True)
class NetworkSpec:
    """What a worker needs to open the same network anywhere (picklable: the model travels as XML text)."""

    model_text: str
    model_path: str = "<batch>"
    backend: str = "auto"
    format: str = "auto"  # 'fp16 nhwc', 'fp32 nchw'... or 'auto' (engine.run.DEFAULT_FORMATS)
    weights: str | None = None
    seed: int = 0
    fusing: str = "on"
    plugins: tuple[str, ...] = ()


def _registry(spec: NetworkSpec) -> Any:
    from engine.plugins import load_plugins

    return load_plugins(list(spec.plugins))


def _model(spec: NetworkSpec, registry: Any) -> Any:
    from engine.modelfile import loads

    return loads(spec.model_text, spec.model_path, registry)


def with_model_weights(spec: NetworkSpec) -> NetworkSpec:
    """``spec``, or when it names no weights, a copy naming the weights its model names (its ``weights`` setting,
    relative to the model file): what ``layerlab infer`` runs the model with (``engine.run.with_model_weights``)."""
    if spec.weights:
        return spec
    from engine.run import model_weights

    own = model_weights(_model(spec, _registry(spec)))
    return replace(spec, weights=own) if own else spec


def open_network_for(spec: NetworkSpec, notice: TextIO | None = sys.stderr, graph_capture: bool = True) -> Any:
    """A ready :class:`engine.network.Network` for ``spec`` (backend, format, weights, seed, fusing rules).

    It has run once on the input layer's declared dimensions, so its weights are loaded for the declared
    channel count: every network of a run (threads, processes, Ray actors) then accepts and refuses the same
    inputs, whatever input it happens to see first. ``graph_capture=False`` keeps the GPU network eager (for
    several networks sharing one GPU from several threads: a capture must not see the other's copies)."""
    from engine.run import RunSpec, open_network

    registry = _registry(spec)
    model = _model(spec, registry)
    run_spec = RunSpec(backend=spec.backend, format=spec.format.strip() or "auto", weights=spec.weights, seed=spec.seed,
                       fusing=spec.fusing, plugins=spec.plugins)
    net = open_network(model, run_spec, registry, notice=notice, graph_capture=graph_capture)
    net.run()
    return net


@dataclass(frozen=True)
class NetworkIO:
    """The single input layer of a network, how images become its tensors, its output layers, and the rank of the
    tensors the input takes (4: N x C x H x W, what images give; another rank: tokens or matrices from .npy files)."""

    input_name: str
    image_options: ImageOptions
    output_names: tuple[str, ...]
    input_rank: int = 4


def network_io(spec: NetworkSpec) -> NetworkIO:
    """Input name, image options and output names, read without computing anything (no weights, no backend)."""
    from engine.network import Network
    from engine.run import image_options

    registry = _registry(spec)
    probe = Network(_model(spec, registry), registry, fusing="off")
    if len(probe.input_names) != 1:
        raise InputError(f"network {probe.model_name} has {len(probe.input_names)} input layers "
                         f"({', '.join(probe.input_names) or 'none'}): a batch run feeds exactly one")
    name = probe.input_names[0]
    rank = len(probe.layer(name).default_dims())  # type: ignore[attr-defined]
    return NetworkIO(name, image_options(probe, name), tuple(probe.output_names), rank)
