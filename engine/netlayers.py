"""Network layers: a complete external ``.lnet`` model used as one layer of another model.

A network layer is a model layer of type ``network:PATH`` (``PATH``: the referenced model file, relative to the
folder of the model that holds the layer; ``/`` separators)::

    <layer name="enc" type="network:blocks/encoder.lnet" x="200" y="40">
      <param name="weights" value="blocks/encoder_weights"/>
      <input index="0" source="image"/>
    </layer>

* Its inputs are the referenced model's input layers, in file order (all mandatory); its output is the
  referenced model's output layer named by parameter ``output`` (default: the first; without output layers, the
  first layer nobody reads). A referenced model with several outputs gives one per network layer.
* ``weights``: the referenced model's own weights (a folder of ``NAME_WEIGHT.npy`` or a weights file, relative to
  the model holding the layer). Its layers' weights are read there under their names inside the referenced
  model; without ``weights`` they are read from the outer network's weights under the expanded names
  (``<layer>__<inner>``), so one weights folder can hold the whole design.
* The preprocessor's first pass (``expand_networks``, before templates) replaces every network layer by the
  referenced model's layers on the path to its output, named ``<layer>__<inner>``; the referenced model's own
  network layers and templates are expanded first. Its input and output layers disappear: readers of an input
  read the network layer's source, readers of the network layer read what its output layer reads.
* A template may hold network layers: they are expanded after the templates (``expand_all``; the preprocessor's
  templates pass does the same).
* The file is read again whenever it changed (size or modification time), so the next build and type check see
  the change. Within one expansion each file (by path and stamp) is read and expanded once, however often it is
  used, and the expanded size is counted from the files, bottom up, before expanding: a few small files using each
  other twice over are refused at once (LimitError naming the file and the size) instead of being expanded
  2**depth times. A missing or broken file, recursion (A uses B uses A) and an unknown output are errors naming the
  file; in the type check they are shown on the network layer.

``find_desc`` (``engine.templates``) describes a network layer through ``network_desc`` (registered here in
``COMPOSITE_DESCS``), so the type checker, canvas, palette and parameter window treat it as any layer."""
from __future__ import annotations

import copy
import functools
import html
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.descriptors import InputDesc, InputKind, LayerDesc, ParamDesc
from engine.errors import LayerLabError, WeightsError
from engine.graph import execution_order
from engine.layer import Layer
from engine.limits import MAX_TEMPLATE_DEPTH, LimitError
from engine.model import LayerSpec, Model
from engine.modelfile import load
from engine.registry import Registry
from engine.templates import SEP, Expansion, expand, has_instances
from engine.templates.descriptors import COMPOSITE_DESCS
from engine.templates.expansion import MAX_EXPANDED_LAYERS, expanded_size
from engine.tensor import FORMATS
from engine.weights import WeightsSource
from engine.weights import open_weights as open_weights_path

NETWORK_PREFIX = "network:"
#: the palette group of network layers
CATEGORY = "Networks"


class NetworkLayerError(LayerLabError):
    """A network layer cannot be used: its file is missing or broken, it uses itself, or its ports do not match
    (the message names the file)."""


def network_type(path: str | os.PathLike[str]) -> str:
    """The layer type of a network layer referencing ``path`` (relative, ``/`` separators)."""
    return NETWORK_PREFIX + Path(path).as_posix()


def network_file(layer_type: str) -> str | None:
    """The file a layer of ``layer_type`` references as written (None for other layer types)."""
    return layer_type[len(NETWORK_PREFIX):] if layer_type.startswith(NETWORK_PREFIX) else None


def has_network_layers(model: Model) -> bool:
    return any(s.type.startswith(NETWORK_PREFIX) for s in model.layers.values())


def base_folder(model: Model) -> Path:
    """The folder paths in ``model`` are relative to: its file's folder (a copy's: its original's; the working
    folder for a model never saved)."""
    if model.path and not model.path.startswith("<"):
        return Path(model.path).resolve().parent
    if model.folder:
        return Path(model.folder)
    return Path.cwd()


def relative_reference(model: Model, path: str | os.PathLike[str]) -> str:
    """``path`` written relative to ``model``'s folder (as a network layer references it)."""
    return Path(os.path.relpath(Path(path).resolve(), base_folder(model))).as_posix()


def resolve(model: Model, layer_type: str) -> Path:
    """The absolute path of the file a network layer of ``model`` references."""
    rel = network_file(layer_type)
    if rel is None:
        raise ValueError(f"{layer_type!r} is not a network layer type")
    return (base_folder(model) / rel).resolve()


@functools.lru_cache(maxsize=64)
def _read(path: str, stamp: tuple[int, int]) -> Model:
    del stamp  # part of the cache key: a changed file is read again
    return load(path)


def _referenced(model: Model, layer_type: str) -> tuple[Path, tuple[int, int], Model]:
    path = resolve(model, layer_type)
    try:
        st = path.stat()
    except OSError:
        raise NetworkLayerError(f"network file {network_file(layer_type)} not found (looked for {path})") from None
    stamp = (st.st_mtime_ns, st.st_size)
    try:
        return path, stamp, _read(str(path), stamp)
    except LayerLabError as exc:
        raise NetworkLayerError(f"network file {network_file(layer_type)} cannot be used: {exc}") from None


def referenced_model(model: Model, layer_type: str) -> tuple[Path, Model]:
    """The file and the model (do not change it: it is shared) a network layer of ``model`` references; read
    again when the file changed. Raises NetworkLayerError naming the file."""
    path, _, sub = _referenced(model, layer_type)
    return path, sub


def ports(model: Model, registry: Registry) -> tuple[list[str], list[str]]:
    """The input layers and the output layers of ``model`` (outputs: its output layers, else the layers nobody
    reads), in file order."""
    cls = registry.layer_class
    inputs = [n for n, s in model.layers.items() if getattr(cls(s.type), "is_network_input", False)]
    outputs = [n for n, s in model.layers.items() if getattr(cls(s.type), "is_network_output", False)]
    if not outputs:
        read = {x for s in model.layers.values() for x in s.inputs if x}
        outputs = [n for n in model.layers if n not in read and n not in inputs]
    return inputs, outputs


def _stack_key(path: Path) -> str:
    return NETWORK_PREFIX + str(path)


def _check_recursion(path: Path, stack: tuple[str, ...]) -> None:
    if len(stack) >= MAX_TEMPLATE_DEPTH:  # a chain of files, each using the next: bounded like templates
        raise NetworkLayerError(f"network file {path.name}: network layers and templates are nested more than "
                                f"{MAX_TEMPLATE_DEPTH} levels deep")
    if _stack_key(path) in stack:
        chain = [s[len(NETWORK_PREFIX):] for s in stack if s.startswith(NETWORK_PREFIX)] + [str(path)]
        raise NetworkLayerError(f"network file {path.name} uses itself: " + " -> ".join(Path(c).name for c in chain))


def network_desc(model: Model, registry: Registry, layer_type: str, stack: tuple[str, ...] = ()) -> LayerDesc:
    """A LayerDesc for a network layer: the referenced model's inputs as mandatory inputs, parameters
    ``output`` (which of its outputs) and ``weights`` (its own weights), and documentation listing its layers."""
    path, sub = referenced_model(model, layer_type)
    _check_recursion(path, stack)
    inputs, outputs = ports(sub, registry)
    if not outputs:
        raise NetworkLayerError(f"network file {network_file(layer_type)} has no output layer")
    rows = "".join(f"<tr><td>{html.escape(n)}</td><td>{html.escape(s.type)}</td></tr>" for n, s in sub.layers.items())
    doc = (f"<p>The network <b>{html.escape(sub.name)}</b> saved in <code>{html.escape(str(path))}</code>, used as one "
           "layer. The preprocessor replaces it by its layers, named <code>&lt;layer&gt;__&lt;inner&gt;</code>; its "
           "weights come from its own weights source (parameter <code>weights</code>).</p>"
           f"<table border=1 cellspacing=0 cellpadding=4><tr><th>Layer</th><th>Type</th></tr>{rows}</table>")
    params = (
        ParamDesc("output", "enum", outputs[0], "which output layer of the referenced network this layer gives",
                  enum_values=tuple(outputs), main=len(outputs) > 1),
        ParamDesc("weights", "string", "", "the referenced network's own weights: a folder of NAME_WEIGHT.npy files "
                  "or a weights file, relative to this model's file (empty: this network's weights, under the "
                  "expanded names)"),
    )
    return LayerDesc(
        name=layer_type, display_name=sub.name or path.stem,
        summary=f"Network {sub.name} ({path.name}): {len(sub.layers)} layer(s), inputs {', '.join(inputs) or 'none'}, "
                f"outputs {', '.join(outputs)}.",
        categories=(CATEGORY,), documentation=doc,
        inputs=tuple(InputDesc(n, InputKind.PRIMARY, f"input layer {n} of {path.name}") for n in inputs),
        params=params, formats=FORMATS, collection=f"network file {path}")


def _find_network_desc(model: Model, registry: Registry, layer_type: str, stack: tuple[str, ...]) -> LayerDesc | None:
    try:
        return network_desc(model, registry, layer_type, stack)
    except LayerLabError:
        return None  # the type check says why (expand_networks with strict=False)


COMPOSITE_DESCS[NETWORK_PREFIX] = _find_network_desc


@dataclass
class NetworkExpansion(Expansion):
    """What ``expand_networks`` did (see ``Expansion``), plus ``weights``: expanded-name prefix (``<layer>__``) ->
    the absolute path of that network layer's own weights, and ``files``: network layer -> its absolute file."""

    weights: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


def _ancestors(model: Model, target: str) -> set[str]:
    seen: set[str] = set()
    todo = [target]
    while todo:
        n = todo.pop()
        if n in seen or n not in model.layers:
            continue
        seen.add(n)
        todo += [x for x in model.layers[n].inputs if x]
    return seen


@dataclass
class _Expanded:
    """A referenced file with its network layers and templates expanded (shared: copy what you keep), its
    network layers' own weights, its ports and ``height``: how many levels of files it uses below it."""

    model: Model
    weights: dict[str, str]
    inputs: list[str]
    outputs: list[str]
    is_out: set[str]
    height: int


#: one expansion's memo: (resolved file, (mtime, size)) -> that file expanded; also ``size`` -> upper bounds
_Memo = dict[Any, Any]


def _expanded_file(path: Path, stamp: tuple[int, int], sub: Model, registry: Registry, stack: tuple[str, ...],
                   memo: _Memo) -> _Expanded:
    """``sub`` (the file ``path``) expanded once per expansion: a file used twice is not expanded twice (a few
    files using the next twice over would cost 2**depth). Under ``stack`` (the files using it)."""
    key = (str(path), stamp)
    hit = memo.get(key)
    if hit is not None and len(stack) + hit.height < MAX_TEMPLATE_DEPTH:
        return hit  # a file that expanded has no cycle; deeper than the cap: expanded again to say where
    inner_stack = (*stack, _stack_key(path))
    nested = expand_networks(sub, registry, True, inner_stack, _memo=memo)
    inner = nested.model
    if has_instances(inner):
        inner = expand(inner, registry).model
        if has_network_layers(inner):  # network layers its templates held
            held = expand_networks(inner, registry, True, inner_stack, _memo=memo)
            nested.weights.update(held.weights)
            nested.files.update(held.files)
            inner = held.model
    inputs, outputs = ports(inner, registry)
    is_out = {n for n, s in inner.layers.items() if getattr(registry.layer_class(s.type), "is_network_output", False)}
    height = 1 + max((memo.get(("height", f), 0) for f in nested.files.values()), default=0) if nested.files else 0
    entry = _Expanded(inner, nested.weights, inputs, outputs, is_out, height)
    memo[key] = entry
    memo[("height", str(path))] = height
    return entry


def _inline(model: Model, name: str, spec: LayerSpec, registry: Registry, stack: tuple[str, ...],
            taken: Mapping[str, Any], memo: _Memo) -> tuple[dict[str, LayerSpec], str | None, dict[str, str], Path]:
    """The layers replacing network layer ``name``; the layer readers of it read (None: nothing); the nested
    network layers' own weights (not yet re-prefixed); the file."""
    path, stamp, sub = _referenced(model, spec.type)
    _check_recursion(path, stack)
    where = f"network file {network_file(spec.type)}"
    done = _expanded_file(path, stamp, sub, registry, stack, memo)
    inner, inputs, outputs, is_out = done.model, done.inputs, done.outputs, done.is_out
    if not outputs:
        raise NetworkLayerError(f"{where} has no output layer")
    output = spec.params.get("output") or outputs[0]
    if output not in outputs:
        raise NetworkLayerError(f"{where} has no output layer {output!r} (its outputs: {', '.join(outputs)})")
    if len(spec.inputs) > len(inputs) and any(spec.inputs[len(inputs):]):
        raise NetworkLayerError(f"{where} has {len(inputs)} input(s) ({', '.join(inputs) or 'none'}), but "
                                f"{len(spec.inputs)} are connected")
    outer = {n: (spec.inputs[i] if i < len(spec.inputs) else None) for i, n in enumerate(inputs)}

    def source(x: str | None) -> str | None:
        if x is None:
            return None
        if x in outer:
            return outer[x]
        if x in is_out:
            ins = inner.layers[x].inputs
            return source(ins[0] if ins else None)
        return f"{name}{SEP}{x}"

    keep = _ancestors(inner, output) - set(inputs) - is_out
    out: dict[str, LayerSpec] = {}
    for n in execution_order(inner):
        if n not in keep:
            continue
        s = copy.deepcopy(inner.layers[n])
        s.name = f"{name}{SEP}{n}"
        if s.name in taken:
            raise NetworkLayerError(f"{where}: expanding layer {name}: its layer would be named {s.name}, which is "
                                    "already the name of another layer; rename that layer or the network layer")
        s.inputs = [source(x) for x in s.inputs]
        s.position = (spec.position[0] + s.position[0], spec.position[1] + s.position[1])
        out[s.name] = s
    target = source(output)
    if target in out:
        t = out[target]
        if spec.activation and spec.activation != "none":
            if t.activation != "none":
                raise NetworkLayerError(f"{where}: layer {name} has activation {spec.activation}, but the layer giving "
                                        f"its output ({target}) already has activation {t.activation}")
            t.activation, t.act_coefs = spec.activation, dict(spec.act_coefs)
        t.permanent = t.permanent or spec.permanent
    return out, target, done.weights, path


def _size(model: Model, registry: Registry, stack: tuple[str, ...], memo: _Memo) -> tuple[int, list[tuple[int, str]]]:
    """How many layers ``model`` has at most once expanded (each file counted once, bottom up: a network layer
    counts its file's layers but its input and output layers; a file that cannot be read, recursion or too deep:
    1, expanding says why), and (size, file as written) of its network layers."""
    refs: list[tuple[int, str]] = []
    for spec in model.layers.values():
        if network_file(spec.type) is None:
            continue
        try:
            path, stamp, sub = _referenced(model, spec.type)
            _check_recursion(path, stack)
        except LayerLabError:
            refs.append((1, network_file(spec.type) or ""))
            continue
        key = ("size", str(path), stamp)
        if key not in memo:
            inputs, outputs = ports(sub, registry)
            cls = registry.layer_class
            ends = len(inputs) + sum(1 for n in outputs if getattr(cls(sub.layers[n].type), "is_network_output", False))
            memo[key] = _size(sub, registry, (*stack, _stack_key(path)), memo)[0] - ends
        refs.append((memo[key], network_file(spec.type) or ""))
    return expanded_size(model) - len(refs) + sum(n for n, _ in refs), refs


def expand_networks(model: Model, registry: Registry, strict: bool = True,
                    _stack: tuple[str, ...] = (), _memo: _Memo | None = None) -> NetworkExpansion:
    """Replace every network layer of ``model`` (unchanged) by the referenced model's layers (see the module
    documentation). ``strict``: raise NetworkLayerError for a layer that cannot be expanded (else record it in
    ``failed`` and leave it as it is). Each file is read and expanded once (``_memo``: one expansion's, shared by
    ``expand_all``); an expansion larger than MAX_EXPANDED_LAYERS is refused before expanding (LimitError)."""
    result = NetworkExpansion(model)
    memo: _Memo = {} if _memo is None else _memo
    top = not _stack  # the model expanded, not a file it uses
    if not _stack and model.path and not model.path.startswith("<"):
        _stack = (_stack_key(Path(model.path).resolve()),)  # a model referencing its own file uses itself
    if top and has_network_layers(model):  # bounded before expanding
        size, refs = _size(model, registry, _stack, memo)
        if size > MAX_EXPANDED_LAYERS:
            big, file = max(refs)
            raise LimitError(f"network {model.name}: its network layers expand to {size} layers, more than "
                             f"{MAX_EXPANDED_LAYERS} (network file {file} alone expands to {big})")
    layers: dict[str, LayerSpec] = {}
    for name, spec in model.layers.items():
        if network_file(spec.type) is None:
            layers[name] = copy.deepcopy(spec)
            continue
        try:
            sub, target, weights, path = _inline(model, name, spec, registry, _stack, {**model.layers, **layers}, memo)
        except LayerLabError as exc:
            if strict:
                raise
            result.failed[name] = str(exc)
            layers[name] = copy.deepcopy(spec)
            continue
        layers.update(sub)
        result.files[name] = str(path)
        if target is not None:
            result.output_of[name] = target
        prefix = f"{name}{SEP}"
        for n in sub:
            result.origin[n] = (name, n[len(prefix):])
        for p, w in weights.items():
            result.weights[prefix + p] = w
        own = spec.params.get("weights", "").strip()
        if own:
            result.weights[prefix] = str(base_folder(model) / own)
        if len(layers) > MAX_EXPANDED_LAYERS:  # a few small files using each other twice over: exponential
            raise LimitError(f"network {model.name}: its network layers expand to more than {MAX_EXPANDED_LAYERS} "
                             "layers")
    for s in layers.values():
        s.inputs = [result.output_of.get(x, x) if x else x for x in s.inputs]
    out = model.copy(layers=False)
    out.layers = layers
    result.model = out
    return result


def expand_all(model: Model, registry: Registry, strict: bool = True) -> Expansion:
    """Network layers, then templates, then the network layers templates held, expanded (what the preprocessor's
    first two passes do) as one Expansion: origin and outputs name the layers of ``model``; ``failed`` holds every
    failure, on the layer of ``model`` it belongs to."""
    memo: _Memo = {}  # each file read and expanded once
    nets = expand_networks(model, registry, strict, _memo=memo)
    exp = merge(nets, expand(nets.model, registry, strict))
    if has_network_layers(exp.model):
        exp = merge(exp, expand_networks(exp.model, registry, strict, _memo=memo))
    return exp


def merge(first: Expansion, second: Expansion) -> Expansion:
    """``second`` applied after ``first``, as one Expansion in the names of ``first``'s source model."""
    origin = dict(first.origin)
    for n, (owner, inner) in second.origin.items():
        top, path = first.origin.get(owner, (owner, ""))
        origin[n] = (top, f"{path}{SEP}{inner}" if path else inner)
    output_of = {k: second.output_of.get(v, v) for k, v in first.output_of.items()}
    output_of.update({k: v for k, v in second.output_of.items() if k not in first.origin})
    failed = dict(first.failed)
    for layer, reason in second.failed.items():
        top, path = first.origin.get(layer, (layer, ""))
        failed.setdefault(top, f"{path}: {reason}" if path else reason)  # the first reason of a layer stays
    return Expansion(second.model, origin, output_of, failed)


class _Renamed:
    """A layer seen under another name (what a weights source is asked with)."""

    def __init__(self, layer: Layer, name: str) -> None:
        self._layer = layer
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._layer, attr)


class RoutedWeights(WeightsSource):
    """Weights of a network with network layers: a layer under a prefix that has its own weights source is asked
    there by its name inside (the longest prefix wins); the others are asked from ``base`` as they are."""

    def __init__(self, base: WeightsSource, routes: Mapping[str, str]) -> None:
        self.base = base
        self.routes = sorted(routes.items(), key=lambda kv: -len(kv[0]))
        self._open: dict[str, WeightsSource] = {}

    def get(self, layer: Layer, weight: str, shape: tuple[int, ...]) -> np.ndarray:
        for prefix, path in self.routes:
            if layer.name.startswith(prefix):
                if path not in self._open:
                    try:
                        self._open[path] = open_weights_path(path)
                    except WeightsError as exc:
                        raise WeightsError(f"network layer {prefix[:-len(SEP)]}: its weights: {exc}") from None
                return self._open[path].get(_Renamed(layer, layer.name[len(prefix):]), weight, shape)  # type: ignore[arg-type]
        return self.base.get(layer, weight, shape)


def routed_weights(base: WeightsSource, expansion: Expansion | None) -> WeightsSource:
    """``base`` read through the network layers' own weights sources (``base`` itself when there are none)."""
    routes = getattr(expansion, "weights", None)
    return RoutedWeights(base, routes) if routes else base


def referenced_files(model: Model) -> dict[str, Path]:
    """Network layer -> the absolute path of the file it references (the files the designer watches)."""
    return {n: resolve(model, s.type) for n, s in model.layers.items() if network_file(s.type) is not None}


__all__ = ["CATEGORY", "NETWORK_PREFIX", "NetworkExpansion", "NetworkLayerError", "RoutedWeights", "base_folder",
           "expand_all", "expand_networks", "has_network_layers", "merge", "network_desc", "network_file",
           "network_type", "ports", "referenced_files", "referenced_model", "relative_reference", "resolve",
           "routed_weights"]
