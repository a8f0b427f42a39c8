"""The Network: a Model built for execution on one backend in one tensor format.

* Execution order is topological; a cycle is an error naming its layers.
* Input sizes may change between runs: the next run re-infers shapes, calls ``reshape`` on the layers
  whose sizes changed and re-plans memory, without rebuilding layers or reloading weights.
* A run evaluates only affected layers and their dependents; an unchanged re-run does no layer work.
* Intermediate buffers are carved from a pool and reused by liveness: a buffer is recycled after its
  last reader unless its layer is permanent, an input or a network output.
* A layer may pass an input through unchanged (bypass): its output aliases that input, no copy.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.backends import NumpyBackend
from engine.backends.base import Backend
from engine.descriptors import parse_activation_text
from engine.device_errors import device_errors
from engine.device_errors import translate as translate_device_error
from engine.errors import GraphError, InputError, LayerLabError, ParameterError, ShapeError, WeightsError
from engine.format_conversion import CONVERSION_TYPE, fused_conversions
from engine.graph import execution_order
from engine.input_tensors import hold_input_in_place, image_tensor, input_tensor, stage_input
from engine.io import ImageOptions, tensors_to_images
from engine.layer import BoundActivation, Layer
from engine.limits import check_allocation, check_layer_memory, host_memory_bytes
from engine.log import get_logger
from engine.memory_plan import assign_slots, buffer_roots, evaluation_set, holds_output, join_chains
from engine.model import Model
from engine.plugin_guard import plugin_code
from engine.preprocess import preprocess
from engine.registry import Registry
from engine.replay import Replayer
from engine.tensor import FP32_NCHW, Dims, Layout, TensorFormat, convert, nchw_view
from engine.weights import RandomWeights, WeightsSource

log = get_logger(__name__)
LayerHook = Callable[["Network", str, Any], None]
NetHook = Callable[["Network"], None]


@dataclass
class Hooks:
    """Debugger/profiler callbacks. Layer hooks receive (network, layer name, output array)."""

    before_inference: list[NetHook] = field(default_factory=list)
    after_inference: list[NetHook] = field(default_factory=list)
    before_layer: list[LayerHook] = field(default_factory=list)
    after_layer: list[LayerHook] = field(default_factory=list)
    #: called with a layer's name as soon as it is computed, on every run path but a CUDA graph's replay (which runs
    #: no Python per layer); unlike the layer hooks these leave the replay of recorded kernel calls on (the profile's
    #: clock: the timed runs take the plain run's path)
    layer_done: list[Callable[[str], None]] = field(default_factory=list)
    #: called with a layer's name and the host clock (``time.perf_counter``) when it ended, after it is computed, on
    #: every run path but a CUDA graph's replay; unlike ``layer_done`` these leave the replay's call sequences on (a
    #: sequence notes each call's end and reports them when it is done): the profile's clock on the CPU, whose timed
    #: runs then take the plain run's path
    layer_ended: list[Callable[[str, float], None]] = field(default_factory=list)


@dataclass
class _Node:
    name: str
    layer: Layer
    inputs: list[str | None]
    permanent: bool


def build_layer(spec_name: str, spec_type: str, params: dict[str, str], activation: str,
                act_coefs: dict[str, str], registry: Registry, fmt: TensorFormat, backend: Backend) -> Layer:
    """Instantiate one layer from its model description (parameters parsed and validated)."""
    cls = registry.layer_class(spec_type)
    if cls is None:
        raise GraphError(f"layer {spec_name}: unknown layer type {spec_type!r} ({registry.suggest_layer(spec_type)})")
    values, _ = cls.desc.parse_params(spec_name, params)
    bound = bound_activation(spec_name, activation, act_coefs, registry)
    if fmt not in cls.desc.formats:
        raise LayerLabError(f"{spec_type} {spec_name} does not support tensor format {fmt}")
    layer = cls(spec_name, values, bound, fmt, backend)
    if cls.desc.inner_activation:  # a second activation, inside the layer (a fused pair's inner one)
        where = f"layer {spec_name} parameter {cls.desc.inner_activation}"
        name, coefs = parse_activation_text(values[cls.desc.inner_activation], where)
        layer.inner_activation = bound_activation(spec_name, name, coefs, registry, where)
    return layer


def bound_activation(spec_name: str, activation: str, act_coefs: dict[str, str], registry: Registry,
                     where: str = "") -> BoundActivation | None:
    """Activation ``activation`` (None for none) with its coefficients, as layer ``spec_name`` applies it (``where``:
    how its errors name it, default the layer)."""
    if not activation or activation == "none":
        return None
    where = where or f"layer {spec_name}"
    act = registry.activation_class(activation)
    if act is None:
        raise ParameterError(f"{where}: unknown activation {activation!r} "
                             f"(known: {', '.join(registry.activation_names)})")
    return BoundActivation(act, act.desc.coefficient_values(act_coefs, where))


def random_input(dims: Dims, seed: int = 0, what: str = "random input") -> np.ndarray:
    """The seeded random input (uniform in [0, 1), fp32 NCHW) used when no input data is given; refused
    (LimitError naming ``what`` and the size) before allocating when it does not fit in the host's memory."""
    shape = tuple(int(d) for d in dims)
    check_allocation(f"{what} {'x'.join(map(str, shape))}", math.prod(shape) * 4, host_memory_bytes(), "the host")
    return np.random.default_rng(seed).random(shape, dtype=np.float32)


def build_nodes(model: Model, order: list[str], registry: Registry, fmt_of: Callable[[str], TensorFormat],
                backend: Backend, fused: set[str], tf32: bool) -> dict[str, _Node]:
    """The layers of ``model`` in execution ``order``, each built in its format (``fmt_of``) with its links checked;
    ``fused``: the layers made by fusing rules."""
    nodes = {}
    for name in order:
        spec = model.layers[name]
        layer = build_layer(name, spec.type, spec.params, spec.activation, spec.act_coefs, registry, fmt_of(name),
                            backend)
        layer.fused = name in fused
        layer.tf32 = tf32
        log.debug("layer %s: %s%s", name, spec.type, " (fused)" if layer.fused else "")
        nodes[name] = _Node(name, layer, list(spec.inputs), spec.permanent)
        check_inputs_connected(name, layer, nodes[name].inputs)
    return nodes


def check_inputs_connected(name: str, layer: Layer, inputs: list[str | None]) -> None:
    """A GraphError naming layer ``name`` when a mandatory input is unconnected or a link goes beyond its inputs."""
    desc = layer.desc
    missing = desc.unconnected_inputs(inputs)
    if missing:
        raise GraphError(f"{desc.name} {name}: these mandatory inputs are not connected: " + ", ".join(map(str, missing)))
    beyond = desc.links_beyond_inputs(inputs)
    if beyond:
        raise GraphError(f"{desc.name} {name}: input {beyond[0]} is linked to {inputs[beyond[0]]}, but "
                         f"{desc.name} takes {len(desc.inputs)} input(s)")


def readers_of(order: list[str], inputs: dict[str, list[str | None]]) -> dict[str, list[str]]:
    """The layers reading each layer's output, in execution order, each once."""
    readers: dict[str, list[str]] = {n: [] for n in order}
    for n in order:
        for s in inputs[n]:
            if s is not None and n not in readers[s]:
                readers[s].append(n)
    return readers


def infer_dims(order: list[str], nodes: dict[str, _Node],
               input_dims: dict[str, Dims]) -> tuple[dict[str, Dims], dict[str, list[Dims | None]]]:
    """Every layer's output dimensions and input dimensions, given the network inputs' (a ShapeError naming the
    first layer whose inputs do not fit)."""
    dims: dict[str, Dims] = {}
    in_dims: dict[str, list[Dims | None]] = {}
    for name in order:
        nd = nodes[name]
        ins = [dims[s] if s is not None else None for s in nd.inputs]
        if name in input_dims:
            nd.layer.requested_dims = input_dims[name]  # type: ignore[attr-defined]
        problem = nd.layer.desc.rank_problem(ins, nd.inputs)
        if problem:
            raise ShapeError(f"{nd.layer.desc.name} {name}: {problem}")
        with plugin_code(name, nd.layer, "output size"):
            out = nd.layer.output_dims(ins)
        dims[name], in_dims[name] = out, ins
    return dims, in_dims


def needed_weights(nd: _Node, ins: list[Dims | None]) -> dict[str, tuple[int, ...]]:
    """The shapes of the weights layer ``nd`` loads for inputs of dimensions ``ins``: those no connected input
    provides (a connected one's dimensions are checked, as the type checker does)."""
    shapes = nd.layer.weight_shapes(ins)
    out = {}
    for w, s in shapes.items():
        idx = nd.layer.weight_input(w)
        if idx is not None and idx < len(nd.inputs) and nd.inputs[idx] is not None:
            got = ins[idx]
            problem = nd.layer.weight_input_problem(w, nd.inputs[idx], got, tuple(s)) if got else None
            if problem:  # the same message as the type checker
                raise ShapeError(f"{nd.layer.desc.name} {nd.name}: {problem}")
            continue  # a connected secondary input provides it
        out[w] = tuple(int(x) for x in s)
    return out


def load_weights(order: list[str], nodes: dict[str, _Node], in_dims: dict[str, list[Dims | None]],
                 source: WeightsSource, loaded_shapes: dict[str, dict[str, tuple[int, ...]]]) -> int:
    """Give each layer its weights for ``in_dims``: loaded from ``source`` once (``loaded_shapes`` records what each
    layer got); a later plan only checks that the loaded ones still fit. Returns how many layers loaded weights."""
    loads = 0
    for name in order:
        layer = nodes[name].layer
        shapes = needed_weights(nodes[name], in_dims[name])
        old = loaded_shapes.get(name)
        if old is None:
            loaded = {w: source.get(layer, w, s) for w, s in shapes.items()}
            layer.set_weights(loaded)
            loads += bool(loaded)
            loaded_shapes[name] = dict(shapes)
        elif old != shapes:
            raise weights_changed_error(name, old, shapes)
    return loads


def weights_changed_error(name: str, loaded: dict[str, tuple[int, ...]],
                          needed: dict[str, tuple[int, ...]]) -> WeightsError:
    """Layer ``name``'s new input sizes need weights of other shapes than the ``loaded`` ones (weights load once)."""
    changed = [w for w in needed if loaded.get(w) != needed[w]]
    w = changed[0] if changed else next(iter(loaded))
    return WeightsError(f"layer {name}: the new input sizes need weight {w!r} of shape "
                        f"{needed.get(w)}, but the loaded weight has shape {loaded.get(w)}")


def no_layer_error(network: str, name: str, merged: str | None, expanded: str | None) -> LayerLabError:
    """Why ``network`` has no layer ``name``: it is a template instance (``expanded``: its output layer), it was
    fused into layer ``merged``, or no layer has that name."""
    if expanded:
        return LayerLabError(f"layer {name} is a template instance: the network runs its layers "
                             f"({name}__...); its output is layer {expanded}")
    if merged:
        return LayerLabError(f"layer {name} was fused into {merged} by a fusing rule: build the network with "
                             f"fusing rules off (or protect {name}) to read it")
    return LayerLabError(f"network {network} has no layer {name!r}")



def joins_sharing_buffers(enabled: bool, order: list[str], inputs: dict[str, list[str | None]],
                          layers: dict[str, Layer], excluded: set[str], storage_format: Callable[[str], TensorFormat],
                          ) -> dict[str, tuple[str, str | None, int]]:
    """Joins of channels that share one buffer (``engine.memory_plan.join_chains``), where ``enabled`` (the backend
    reads a join's leading channels as a view: ``Backend.views_joins``): the layers that join channels
    (``Layer.joins_channels``) and write a buffer of their own (not ``excluded``), in chains of one storage format.
    Every layer's count of inputs in place is reset first (a join of an earlier plan's chain copies every input)."""
    for layer in layers.values():
        layer.in_place_inputs = 0
    if not enabled:
        return {}
    joins = {n for n in order if n not in excluded and layers[n].joins_channels()}
    chains = join_chains(order, inputs, joins)
    formats: dict[str, set[TensorFormat]] = {}
    for n, (head, _, _) in chains.items():
        formats.setdefault(head, set()).add(storage_format(n))
    return {n: c for n, c in chains.items() if len(formats[c[0]]) == 1}


def writes_over_inputs(net: Network, roots: dict[str, str], own: set[str]) -> dict[str, list[str]]:
    """The layers that may write their output over an input's buffer (``Layer.overwritable_inputs``, on a backend whose
    kernels read such an input where they write: ``Backend.overwrites_inputs``): that input's layer, where both write
    buffers of their own (``own``: no alias, view or shared join), of the same dimensions and storage format, and no
    other input of the layer reads that buffer (a sum of a convolution of x and x itself keeps its buffer), in the
    layer's order of preference. The memory plan gives the layer the first of those buffers it reads last
    (``engine.memory_plan.assign_slots``)."""
    if not net.backend.overwrites_inputs:
        return {}
    found: dict[str, list[str]] = {}
    for name in net.order:
        nd = net.nodes[name]
        for i in nd.layer.overwritable_inputs if name in own else ():
            if i >= len(nd.inputs) or (src := nd.inputs[i]) is None or src not in own:
                continue
            others = {roots[s] for j, s in enumerate(nd.inputs) if j != i and s is not None}
            if (src not in others and net._dims[src] == net._dims[name]
                    and net.storage_format(src) == net.storage_format(name)):
                found.setdefault(name, []).append(src)
    return found


def leading_channels(memory: Any, fmt: TensorFormat, full: Dims, channels: int | None) -> Any:
    """The first ``channels`` channels (None: the whole tensor) of a tensor of dimensions ``full`` in ``fmt`` held by
    ``memory`` (bytes): a strided view in NHWC (and in NCHW beyond one image)."""
    whole = memory.view(fmt.dtype).reshape(fmt.shape(full))
    if channels is None:
        return whole
    axis = 3 if fmt.layout is Layout.NHWC else 1
    return whole[(slice(None),) * axis + (slice(0, channels),)]


def apply_activation(act: BoundActivation, backend: Backend, out: Any, fmt: TensorFormat) -> None:
    """A layer's activation applied to its output ``out`` (in ``fmt``) in place, by the backend's one-pass kernel
    where it is element-wise."""
    if act.impl.elementwise:
        act.apply_inplace(backend, out)
    else:
        act.impl.apply_inplace(backend.xp, nchw_view(out, fmt), act.coefs)


def buffers_label(model_name: str, sizes: dict[str, int], dims: dict[str, Dims]) -> str:
    """How an error about a network's tensor buffers names them: with the largest tensor, the one to shrink first."""
    if not sizes:
        return f"network {model_name}: its tensor buffers"
    big = max(sizes, key=sizes.__getitem__)
    return f"network {model_name}: its tensor buffers (the largest: {big}'s output, {dims[big]})"

class Network:
    """A runnable network. See the module documentation for its guarantees."""

    def __init__(self, model: Model, registry: Registry, backend: Backend | None = None,
                 fmt: TensorFormat = FP32_NCHW, weights: WeightsSource | None = None, seed: int = 0,
                 reuse_buffers: bool = True, fusing: str | list[Any] = "on",
                 protected: set[str] | frozenset[str] = frozenset(), graph_capture: bool = True,
                 tf32: bool = False, layer_formats: dict[str, str] | None = None,
                 fuse_conversions: bool = True) -> None:
        """``fusing``: 'on' (the registry's and the model's enabled rules), 'off', a rules file, or a
        list of parsed FusingRule. ``protected`` layers (breakpoints) keep their own outputs. ``tf32``: fp32
        convolutions on the GPU may use TF32 tensor cores (off: strict float32, as on the CPU). ``layer_formats``:
        per-layer format settings (layer name -> ``fp32``, ``nhwc``, ``fp32 nchw``...) over the model's own.

        Each layer runs in its own format (``formats``: the network's ``fmt`` unless the layer or the run sets
        another, or its type does not implement it); the preprocessor inserted a ``format_conversion`` layer on
        every link between layers of different formats, and memory is planned per layer format. With
        ``fuse_conversions`` the precision conversions a neighbouring layer can do are fused into it
        (``engine.format_conversion.fused_conversions``; ``fused_conversions`` says which, into what): a conversion to fp16 into
        its producer, which then keeps its own output in fp16 (unless it is an output, permanent, protected, or the
        network keeps every output: ``reuse_buffers`` off), a conversion to fp32 into its readers.

        The model is preprocessed first (``engine.preprocess``: template instances expanded, then fusing
        rules applied), so the network, its reports and its weights use the expanded names
        (``<instance>__<layer>``) and fusing rules apply across them."""
        self.model_name = model.name
        from engine.custom.scope import scoped  # noqa: PLC0415

        registry = scoped(model, registry)  # the model's custom layers (custom:NAME) resolve too
        compute = backend.compute_format(fmt, tf32) if backend is not None else fmt
        self.preprocessed = preprocess(model, registry, fmt, fusing, protected, layer_formats=layer_formats,
                                       compute=compute)
        self.expansion = self.preprocessed.expansion
        self.fused = self.preprocessed.fused
        model = self.preprocessed.model
        self.backend = backend or NumpyBackend()
        self.backend.activate()  # its device is current for what the build allocates (weights, plans)
        self.xp = self.backend.xp
        self.fmt = fmt
        conversions = self.preprocessed.conversions
        #: every layer's tensor format (conversions included); ``fmt`` for all when nothing is pinned
        self.formats: dict[str, TensorFormat] = dict(conversions.formats) if conversions is not None else {}
        #: (conversion layer, source layer, source format, destination format) of every inserted conversion
        self.conversions = list(conversions.inserted) if conversions is not None else []
        #: layers running in another format than ``fmt`` (pinned, or not implementing ``fmt``), with their format
        self.pinned: dict[str, TensorFormat] = dict(conversions.pinned) if conversions is not None else {}
        self.tf32 = bool(tf32)
        base_weights = self.preprocessed.weights(weights or RandomWeights(seed), registry)
        self.model = model  # the model actually built (after fusing rules)
        self.weights_source = base_weights
        self.seed = seed
        self.reuse_buffers = reuse_buffers
        self.hooks = Hooks()
        if not model.layers:
            raise GraphError(f"network {model.name} has no layers")
        self.order = execution_order(model)
        fused_names = {a[3] for a in self.fused.applied} if self.fused is not None else set()
        self.nodes = build_nodes(model, self.order, registry, self.fmt_of, self.backend, fused_names, self.tf32)
        log.info("built network %s: %d layers, backend %s, format %s", self.model_name, len(self.order),
                 self.backend.name, fmt)
        self.input_names = [n for n in self.order if getattr(self.nodes[n].layer, "is_network_input", False)]
        outs = [n for n in self.order if getattr(self.nodes[n].layer, "is_network_output", False)]
        if not outs:  # no output layers: every layer nobody reads is an output
            read = {s for nd in self.nodes.values() for s in nd.inputs if s}
            outs = [n for n in self.order if n not in read]
        self.output_names = outs
        self._inputs = {n: nd.inputs for n, nd in self.nodes.items()}
        self._readers = readers_of(self.order, self._inputs)
        keep = set(self.order) if not reuse_buffers else (
            set(self.output_names) | set(protected) | {n for n, nd in self.nodes.items() if nd.permanent})
        #: conversion layer -> ("write", (producer,)) or ("read", (readers...)): the conversions fused into a
        #: neighbouring layer (they compute nothing; their output is the buffer that layer writes or reads)
        inserted = {c[0] for c in self.conversions}
        explicit = [(n, nd.inputs[0], self.fmt_of(nd.inputs[0]), self.fmt_of(n)) for n, nd in self.nodes.items()
                    if nd.layer.desc.name == CONVERSION_TYPE and n not in inserted and nd.inputs and nd.inputs[0]]
        # the inserted conversions and those a preprocessed model holds (written by the preprocessed export)
        self.fused_conversions = fused_conversions(
            [*self.conversions, *explicit], {n: nd.layer for n, nd in self.nodes.items()}, self._readers,
            keep) if fuse_conversions else {}
        #: a producer writing its readers' precision: its buffer's format
        self._storage = {src: TensorFormat(self.fmt_of(conv).precision, self.fmt_of(src).layout)
                         for conv, (kind, (src, *_)) in self.fused_conversions.items() if kind == "write"}
        for conv, (kind, into) in self.fused_conversions.items():
            log.debug("format conversion %s: fused into %s (%s)", conv, ", ".join(into), kind)
        self._pending_inputs: dict[str, Any] = {}
        self._dims: dict[str, Dims] = {}
        self._in_dims: dict[str, list[Dims | None]] = {}
        self._weight_shapes: dict[str, dict[str, tuple[int, ...]]] = {}
        self._planned = False
        self._dirty: set[str] = set(self.order)
        self._slot_of: dict[str, int] = {}
        self._slots: list[Any] = []
        self._owner: list[str | None] = []
        self._views: dict[str, Any] = {}
        self._roots: dict[str, str] = {}
        self._run_sets: dict[tuple[frozenset[str], tuple[str | None, ...]], tuple[set[str], tuple[str, ...]]] = {}
        self._view_fns: dict[str, Callable[[Any], Any]] = {}  # layers whose output is a view of their input's
        self._extends: dict[str, tuple[str, int]] = {}  # a join in a chain -> (the join it extends, inputs in place)
        self._running: set[str] = set()  # the layers the current run computes
        self.peak_memory_bytes = 0
        #: the captured CUDA graph, or (where the backend captures none: the CPU) the recorded kernel calls
        self.replayer = Replayer(self.backend, {n: nd.layer for n, nd in self.nodes.items()}, self.hooks.layer_done,
                                 graph_capture, self.hooks.layer_ended)
        self.weights_loads = 0  # how many times weights were read from the source
        self.last_executed: list[str] = []  # layers computed by the latest run

    @property
    def graph_capture(self) -> bool:
        """Whether runs are captured as a CUDA graph and replayed (asked for, and the backend can)."""
        return self.replayer.graph_capture

    @property
    def graph_status(self) -> str:
        """The CUDA graph's state: ``off``, ``not captured yet``, ``captured (N layers)`` or ``failed at layer ...``."""
        return self.replayer.graph_status

    @property
    def replay_calls(self) -> bool:
        """Whether runs replay the recorded kernel calls of the previous run (where no graph is captured)."""
        return self.replayer.replay_calls

    @replay_calls.setter
    def replay_calls(self, on: bool) -> None:
        self.replayer.replay_calls = on

    # ---- structure -------------------------------------------------------------------------------
    def fmt_of(self, name: str) -> TensorFormat:
        """The tensor format layer ``name`` runs in (its output buffer's format, but see ``storage_format``)."""
        return self.formats.get(name, self.fmt)

    def storage_format(self, name: str) -> TensorFormat:
        """The format of the buffer holding layer ``name``'s output: ``fmt_of(name)``, except for a producer whose
        conversion to fp16 is fused into it (it writes fp16), and for a fused conversion (its source's buffer)."""
        if name in self.fused_conversions:
            return self.storage_format(self.nodes[name].inputs[0])  # type: ignore[arg-type]
        return self._storage.get(name) or self.fmt_of(name)

    def layer(self, name: str) -> Layer:
        """Layer ``name`` (a LayerLabError saying why a name of the model has no layer of its own here)."""
        try:
            return self.nodes[name].layer
        except KeyError:
            merged = self.fused.merged.get(name) if self.fused is not None else None
            expanded = self.expansion.output_of.get(name) if self.expansion is not None else None
            raise no_layer_error(self.model_name, name, merged, expanded) from None

    def dims(self, name: str) -> Dims:
        """Output dimensions of a layer (after planning)."""
        self._ensure_planned()
        return self._dims[name]

    # ---- inputs ----------------------------------------------------------------------------------
    def set_input(self, name: str, array: Any, fmt: TensorFormat | None = None) -> None:
        """Give input layer ``name`` a tensor (4-D in ``fmt``, default fp32 NCHW, or of another rank 1 to 6): a host array,
        or an array already on the network's device (e.g. a frame converted there)."""
        self._check_input(name)
        self.backend.activate()  # the upload and conversion go on the network's stream, ordered with its kernels
        with device_errors(f"input {name}", "x".join(map(str, getattr(array, "shape", ())))):
            self._pending_inputs[name] = input_tensor(name, array, fmt or FP32_NCHW, self.fmt_of(name), self.backend)

    def set_input_images(self, name: str, images: Any, opts: ImageOptions | None = None) -> None:
        """Give input layer ``name`` a batch of decoded images: a sequence of N arrays of one shape and type (H x W
        gray, or H x W x C in RGB/RGBA order; 8- or 16-bit, or float) or one N x H x W (x C) array. They are
        uploaded as they are (an 8-bit image is a quarter of the bytes of its float32 tensor) and made into the
        input tensor on the backend's device by :func:`engine.io.images_to_tensor` with ``opts`` (default: plain
        0..1 values; the input layer's own are ``engine.run.image_options``): the same values as converting on the
        host."""
        self._check_input(name)
        self.backend.activate()  # the uploads and the conversion go on the network's stream, ordered with its kernels
        with device_errors(f"input {name}", f"{len(images)} images"):
            self._pending_inputs[name] = image_tensor(name, images, opts or ImageOptions(), self.fmt_of(name),
                                                      self.backend)

    def _check_input(self, name: str) -> None:
        if name not in self.input_names:
            raise InputError(f"network {self.model_name} has no input layer {name!r} "
                             f"(inputs: {', '.join(self.input_names) or 'none'})")

    def input_dims(self, name: str) -> Dims:
        self._ensure_planned()
        return self._dims[name]

    def mark_affected(self, name: str) -> None:
        """Make the next run re-evaluate this layer and everything downstream of it."""
        self.layer(name)
        self._dirty.add(name)

    def runtime_options(self) -> dict[str, list[dict[str, Any]]]:
        """Runtime options of every layer that has any, by layer name."""
        return {n: opts for n in self.order if (opts := self.nodes[n].layer.runtime_options())}

    def set_runtime_option(self, layer: str, name: str, value: Any) -> None:
        """Change a layer's runtime option: validated by the layer, which becomes affected; a change of
        its output size reshapes the network on the next run."""
        if self.layer(layer).set_runtime_option(name, value):
            self._planned = False
        self.replayer.drop()
        self._dirty.add(layer)

    # ---- planning: shapes, reshape, weights, memory ----------------------------------------------
    def _current_input_dims(self, name: str) -> Dims:
        pending = self._pending_inputs.get(name)
        if pending is not None:
            return self.fmt_of(name).dims_of(pending)
        if name in self._dims:
            return self._dims[name]
        return self.nodes[name].layer.default_dims()  # type: ignore[attr-defined]

    def _ensure_planned(self) -> None:
        wanted = {n: self._current_input_dims(n) for n in self.input_names}
        if self._planned and all(self._dims.get(n) == d for n, d in wanted.items()):
            return
        self._plan(wanted)

    def _plan(self, input_dims: dict[str, Dims]) -> None:
        dims, in_dims = infer_dims(self.order, self.nodes, input_dims)
        # checked before any tensor or weight is allocated; the buffers held now are freed by the new plan
        available = self.backend.available_memory() + sum(int(s.nbytes) for s in self._slots)
        for name in self.order:
            layer = self.nodes[name].layer
            check_layer_memory(f"{layer.desc.name} {name}", dims[name], layer.weight_shapes(in_dims[name]),
                               self.fmt_of(name).itemsize, available, self.backend.device_name)
        self.weights_loads += load_weights(self.order, self.nodes, in_dims, self.weights_source, self._weight_shapes)
        for name in self.order:
            nd = self.nodes[name]
            if self._in_dims.get(name) != in_dims[name] or self._dims.get(name) != dims[name]:
                nd.layer.input_dims, nd.layer.out_dims = in_dims[name], dims[name]
                with plugin_code(name, nd.layer, "reshape"):
                    nd.layer.reshape(in_dims[name], dims[name])
                nd.layer.reshape_count += 1
        self._dims, self._in_dims = dims, in_dims
        self._plan_memory()
        for name in self.input_names:  # the tensors given before, into the new buffers
            hold_input_in_place(self.nodes[name].layer, self._views[name])
        self.replayer.new_plan(self._roots)
        self._planned = True
        self._dirty = set(self.order)

    def _plan_memory(self) -> None:
        """Slots for the layers' outputs (``engine.memory_plan``), allocated, and each layer's view of its own."""
        self._view_fns = {n: fn for n in self.order if (fn := view_of(self, n)) is not None}
        aliased = {n: aliased_input(self, n) for n in self.order}
        roots = buffer_roots(self.order, self._inputs, aliased)
        keep = set(self.input_names) | set(self.output_names) | {n for n, nd in self.nodes.items() if nd.permanent}
        sizes = {n: self._dims[n].elements * self.storage_format(n).itemsize for n in self.order if roots[n] == n}
        chains = joins_sharing_buffers(self.backend.views_joins, self.order, self._inputs, {
            n: nd.layer for n, nd in self.nodes.items()}, set(self.fused_conversions) | set(roots) - set(sizes),
            self.storage_format)
        last = {head: n for n, (head, _, _) in chains.items()}  # each chain's longest join
        sizes.update({head: sizes[n] for head, n in last.items()})
        shared = {n: head for n, (head, _, _) in chains.items()}
        self._extends = {n: (prev, k) for n, (_, prev, k) in chains.items() if prev is not None}
        capacity, slot_of = assign_slots(self.order, roots, self._readers, keep, sizes, self.reuse_buffers, shared,
                                         writes_over_inputs(self, roots, set(sizes) - set(shared)))
        held = sum(int(s.nbytes) for s in self._slots)
        what = buffers_label(self.model_name, sizes, self._dims)
        check_allocation(what, sum(capacity), self.backend.available_memory() + held, self.backend.device_name)
        self._slots = []  # the old buffers go before the new ones come
        with device_errors(what, f"{sum(capacity):,} bytes"):
            self._slots = [self.backend.alloc_bytes(c) for c in capacity]
        self._owner, self._slot_of, self._roots = [None] * len(capacity), slot_of, roots
        self._run_sets = {}
        fmts = {n: self.storage_format(n) for n in sizes}  # each root's view of the start of its slot
        own = {n: leading_channels(self._slots[slot_of[h]][:sizes[h]], fmts[n], self._dims[last.get(h, n)],
                                   self._dims[n].c if n in chains else None) for n, h in (
            (n, shared.get(n, n)) for n in sizes)}  # a join of a chain: the leading channels of its buffer
        self._views = {}
        for n in self.order:  # a root's own view; a bypass its input's; a view layer a view of its input's
            src = self._inputs[n][aliased[n]] if roots[n] != n else None  # type: ignore[index]
            self._views[n] = own[n] if src is None else self._view_fns[n](self._views[src]) \
                if n in self._view_fns else self._views[src]
        self.peak_memory_bytes, self.slot_count = int(sum(capacity)), len(capacity)

    # ---- execution -------------------------------------------------------------------------------
    def _evaluation_set(self, wanted: set[str], downstream: bool = True) -> set[str]:
        """Layers to compute (``engine.memory_plan.evaluation_set``) with the buffers as they are now."""
        return evaluation_set(wanted, self.order, self._inputs, self._readers, self._roots, self._slot_of, self._owner,
                              downstream)

    def run(self) -> list[str]:
        """One inference. Returns the names of the layers actually computed."""
        self.backend.activate()
        self._ensure_planned()
        for name, data in self._pending_inputs.items():
            self._stage_input(name, data)
        self._pending_inputs.clear()
        for name in self.input_names:
            if getattr(self.nodes[name].layer, "data", None) is None:  # no input given: seeded random tensor
                data = random_input(self._dims[name], self.seed, f"input layer {name}: its random input")
                self._stage_input(name, self.backend.to_device(convert(data, FP32_NCHW, self.fmt_of(name))))
        todo, key = run_set(self)
        for cb in self.hooks.before_inference:
            cb(self)
        self._running = todo
        with self.backend.running():
            self.replayer.run(key, self._execute, self._own, eager=bool(self.hooks.before_layer or self.hooks.after_layer))
        self._dirty.clear()
        for cb in self.hooks.after_inference:
            cb(self)
        self.last_executed = list(key)
        return list(key)

    def _stage_input(self, name: str, data: Any) -> None:
        """``engine.input_tensors.stage_input``: held in the input's own buffer once planned; a new size gets a new
        array (and the network is re-planned anyway)."""
        if stage_input(self.nodes[name].layer, data, self._views.get(name) if self._planned else None):
            self.replayer.drop()
        self._dirty.add(name)

    def _own(self, name: str) -> None:
        """Note that root layer ``name``'s buffer holds its output (computed, or replayed)."""
        self._owner[self._slot_of[name]] = name

    def _execute(self, name: str) -> None:
        nd = self.nodes[name]
        out = self._views[name]
        for cb in self.hooks.before_layer:
            cb(self, name, out)
        if self._roots[name] == name:
            ins = [self._views[s] if s is not None else None for s in nd.inputs]
            extends = self._extends.get(name)
            if extends is not None:  # its leading inputs are in place where the join it extends ran in this run
                nd.layer.in_place_inputs = extends[1] if extends[0] in self._running else 0
            try:  # plugin_code's handling, inline: this runs for every layer of every inference
                nd.layer.forward(ins, out)
            except Exception as exc:
                gpu = translate_device_error(exc, f"layer {name}", "x".join(map(str, out.shape)))
                if gpu is not None:
                    raise gpu from None
                with plugin_code(name, nd.layer, "forward"):
                    raise
            act = nd.layer.activation
            if act is not None and not nd.layer.fuses_activation:
                apply_activation(act, self.backend, out, self.fmt_of(name))
            self._own(name)
        for done in self.hooks.layer_done:
            done(name)
        for ended in self.hooks.layer_ended:
            ended(name, time.perf_counter())
        for cb in self.hooks.after_layer:
            cb(self, name, out)

    def output(self, name: str, fmt: TensorFormat | None = None, pinned: bool = False) -> np.ndarray:
        """Host copy of any layer's output, in ``fmt`` (default fp32 NCHW). ``pinned``: into page-locked memory on
        a GPU (a faster download; the memory comes from a pool and is held while the array lives).

        A layer whose buffer was recycled is recomputed (mark it permanent to keep its output). The name of
        a template instance gives the output of its expanded output layer."""
        name = self._computed(name)
        self.backend.activate()  # converted and downloaded on the network's stream, after its kernels
        with device_errors(f"output of {name}", str(self._dims[name])):  # the conversion may copy on the GPU
            return self.backend.to_host(convert(self._views[name], self.fmt_of(name), fmt or FP32_NCHW, self.xp), pinned)

    def output_images(self, name: str) -> np.ndarray:
        """Host copy of a layer's output as 8-bit images (N x H x W, or N x H x W x C in RGB/RGBA order), made where
        the output lives by :func:`engine.io.tensors_to_images` and downloaded in one copy (into page-locked
        memory on the GPU): a quarter of the bytes of ``output``'s float32, and the same values as
        ``tensors_to_images(output(name))``."""
        out = self.device_output(name)
        self.backend.activate()  # converted and downloaded on the network's stream, after its kernels
        with device_errors(f"output of {name}", "x".join(map(str, out.shape))):
            return self.backend.to_host(tensors_to_images(out, self.xp), pinned=True)

    def device_output(self, name: str) -> Any:
        """A layer's output where it lives (a device array on the GPU), seen in logical N x C x H x W order in the
        layer's own precision: a view of the layer's buffer, no copy, valid until the next run (a copy in the layer's
        precision where a fused conversion keeps its output in another one). Recomputed like ``output`` when its
        buffer was recycled."""
        name = self._computed(name)
        view = nchw_view(self._views[name], self.fmt_of(name))
        dtype = self.fmt_of(name).dtype
        return view if view.dtype == dtype else view.astype(dtype)

    def _computed(self, name: str) -> str:
        """The layer whose buffer holds ``name``'s output, computed (see ``output``)."""
        if self.expansion is not None and name not in self.nodes:
            name = self.expansion.output_of.get(name, name)
        self.layer(name)
        if not self._planned or not self._views:
            self.run()
        if not holds_output(name, self._roots, self._slot_of, self._owner):
            todo = self._evaluation_set({self._roots[name]}, downstream=False)
            self._running = todo
            for n in self.order:
                if n in todo:
                    self._execute(n)
        return name

    def outputs(self, fmt: TensorFormat | None = None) -> dict[str, np.ndarray]:
        """Host copies of every network output."""
        return {n: self.output(n, fmt) for n in self.output_names}

    def infer(self, inputs: dict[str, np.ndarray] | None = None, fmt: TensorFormat | None = None) -> dict[str, np.ndarray]:
        """Set inputs (host arrays in ``fmt``), run, and return the outputs in ``fmt``."""
        for k, v in (inputs or {}).items():
            self.set_input(k, v, fmt)
        self.run()
        return self.outputs(fmt)


def run_set(net: Network) -> tuple[set[str], tuple[str, ...]]:
    """The layers the next run of ``net`` computes (``_evaluation_set`` of the affected layers) and their execution
    order, remembered per affected set and slot owners until the next plan: a replayed CUDA graph waits for this
    host work before it starts, and it took 0.2-0.75 ms a run for a network of 300 layers."""
    memo = (frozenset(net._dirty), tuple(net._owner))
    hit = net._run_sets.get(memo)
    if hit is None:
        todo = net._evaluation_set(net._dirty) if net._dirty else set()
        hit = net._run_sets[memo] = (todo, tuple(n for n in net.order if n in todo))
        if len(net._run_sets) > 64:  # many partial runs (the designer's edits): keep the latest only
            net._run_sets = {memo: hit}
    return hit


def view_of(net: Network, name: str) -> Callable[[Any], Any] | None:
    """Layer ``name``'s view of its input (``Layer.input_view``) where the network takes it: no activation, input
    and output stored in logical order, and the view of a C-contiguous input C-contiguous of the output's shape
    (checked on an array of the input's strides over one element, no memory)."""
    nd = net.nodes[name]
    layer = nd.layer
    if layer.activation is not None or not nd.inputs or nd.inputs[0] is None or name in net.fused_conversions:
        return None
    fn = layer.input_view()
    if fn is None:
        return None
    src, out = net._dims[nd.inputs[0]], net._dims[name]
    if net.storage_format(nd.inputs[0]) != net.storage_format(name):
        return None
    strides, step = [], 1
    for size in reversed(tuple(src)):
        strides.append(step)
        step *= size
    probe = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), tuple(src), tuple(reversed(strides)))
    view = fn(probe)
    return fn if view.shape == tuple(out) and view.flags.c_contiguous else None


def aliased_input(net: Network, name: str) -> int | None:
    """The input whose buffer holds layer ``name``'s output: a fused conversion's source, or the input a layer
    passes through unchanged (unless an activation is applied after it); None for a layer writing its own."""
    if name in net.fused_conversions:
        return 0
    layer = net.nodes[name].layer
    if layer.activation is not None:
        return None
    if name in net._view_fns:
        return 0
    return layer.bypass_input()
