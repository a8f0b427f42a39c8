"""Type checking: diagnostics for a Model without running tensors (shapes only, fast)."""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

from engine.backends import NumpyBackend
from engine.custom.scope import scoped
from engine.descriptors import LayerDesc, is_identifier
from engine.errors import LayerLabError
from engine.graph import describe_cycle, execution_order, find_cycle
from engine.layer import Layer
from engine.log import collect
from engine.model import Model
from engine.netlayers import expand_all, network_file
from engine.network import build_layer
from engine.registry import Registry
from engine.templates import Expansion, find_desc, template_name
from engine.tensor import FP32_NCHW, Dims
from engine.weights import WeightsSource

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Diagnostic:
    severity: str  # "error" or "warning"
    layer: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.layer}: " if self.layer else ""
        return f"{self.severity}: {where}{self.message}"


@dataclass
class CheckMemo:
    """What earlier checks of the same model computed, reused while a layer, its links and its input shapes are
    unchanged: an edit re-checks only the layers it touches and their dependants (the designer keeps one per open
    model). Entries not used by the latest check are dropped, so it never outgrows the model."""

    layers: dict[tuple, Any] = field(default_factory=dict)  # layer key -> built Layer, or the build error (str)
    shapes: dict[tuple, tuple[Dims | None, tuple[str, ...]]] = field(default_factory=dict)
    shapes_out: dict[str, Dims] = field(default_factory=dict)  # output shapes found by the latest check


def check(model: Model, registry: Registry, memo: CheckMemo | None = None,
          weights: WeightsSource | None = None) -> list[Diagnostic]:
    """Every problem found in ``model``: names, types, parameters, links, cycles and shapes; with ``weights`` (the
    weights the model brings, ``engine.run.stored_weights``), stored weights whose shape the layer no longer
    takes (a channel count changed after training).

    A template instance is checked as one layer (its inputs and exposed parameters) and through its expanded
    layers, whose problems are reported on the instance, prefixed by the inner layer's name. With ``memo``,
    unchanged layers are not built or shape-inferred again, and ``memo.shapes_out`` receives the output shape
    of every layer (a template instance's: its output layer's) whose shape is known."""
    registry = scoped(model, registry)  # the model's custom layers resolve too
    diags: list[Diagnostic] = []
    incomplete: set[str] = set()
    for name, spec in model.layers.items():
        if not is_identifier(name):
            diags.append(Diagnostic(ERROR, name, f"{name!r} is not a valid layer name (letters, digits and '_', "
                                                 "not starting with a digit)"))
        desc = find_desc(model, registry, spec.type)
        if desc is None:
            continue  # reported below: unknown type, or the template's own problem
        for key in spec.params:
            if desc.canonical_param_name(key) is None:
                diags.append(Diagnostic(WARNING, name, f"unknown parameter {key!r} is ignored"))
        if template_name(spec.type) is None and network_file(spec.type) is None:
            continue  # a plugin layer's links are checked with its shapes
        problems = _link_problems(desc, spec.inputs)
        if problems and desc.unconnected_inputs(spec.inputs):
            incomplete.add(name)
        diags += [Diagnostic(ERROR, name, p) for p in problems]

    cycle = find_cycle(model)
    if memo is not None:
        memo.shapes_out = {}
    if cycle:
        for n in sorted(set(cycle)):
            diags.append(Diagnostic(ERROR, n, "is part of a cycle: " + describe_cycle(cycle)))
        return diags

    if any(template_name(s.type) is not None or network_file(s.type) is not None for s in model.layers.values()):
        exp = expand_all(model, registry, strict=False)
    else:  # nothing to expand: check the model itself (read only), without copying it
        exp = Expansion(model)
    for name, reason in exp.failed.items():
        diags.append(Diagnostic(ERROR, name, _strip_template(reason, model.layers[name].type)))
    unexpanded = {n for n, s in exp.model.layers.items() if network_file(s.type) is not None}  # reported in failed
    built_diags, dims = _check_built(exp.model, registry, set(exp.failed) | unexpanded, memo, weights)
    if memo is not None:
        memo.shapes_out = {n: d for n, d in dims.items() if d is not None and n in model.layers}
        memo.shapes_out.update((inst, dims[out]) for inst, out in exp.output_of.items() if dims.get(out) is not None)
    for d in built_diags:
        if d.layer in exp.origin:
            inst, inner = exp.origin[d.layer]
            if d.message.startswith("These mandatory inputs") and inst in incomplete:
                continue  # the instance's own missing input says it
            diags.append(Diagnostic(d.severity, inst, f"{inner}: {d.message}"))
        else:
            diags.append(d)
    return diags


def _layer_key(name: str, spec: Any) -> tuple:
    """Everything building a layer depends on (its name appears in messages)."""
    return (name, spec.type, tuple(sorted(spec.params.items())), spec.activation,
            tuple(sorted(spec.act_coefs.items())))


def _check_built(model: Model, registry: Registry, skip: set[str], memo: CheckMemo | None = None,
                 weights: WeightsSource | None = None) -> tuple[list[Diagnostic], dict[str, Dims | None]]:
    """Types, parameters, links and shapes of a model without template instances (``skip``: layers to leave
    out, their outputs unknown); returns the diagnostics and the output shapes (None: unknown)."""
    diags: list[Diagnostic] = []
    err = lambda layer, msg: diags.append(Diagnostic(ERROR, layer, msg))  # noqa: E731
    backend = NumpyBackend()
    layers: dict[str, Layer] = {}
    keys: dict[str, tuple] = {}
    built_before = memo.layers if memo is not None else {}
    built_now: dict[tuple, Any] = {}
    incomplete: set[str] = set()
    for name, spec in model.layers.items():
        if name in skip:
            continue
        cls = registry.layer_class(spec.type)
        if cls is None:
            err(name, f"unknown layer type {spec.type!r} ({_suggest(model, registry, spec.type)})")
            continue
        desc = cls.desc
        if desc.unconnected_inputs(spec.inputs):
            incomplete.add(name)
        for problem in _link_problems(desc, spec.inputs):
            err(name, problem)
        key = keys[name] = (cls, *_layer_key(name, spec))
        cached = built_before.get(key)
        if cached is None:
            with collect() as records:  # a plugin's warnings while building reach the layer's diagnostics
                try:
                    built = build_layer(name, spec.type, spec.params, spec.activation, spec.act_coefs,
                                        registry, FP32_NCHW, backend)
                except LayerLabError as exc:
                    built = _strip(str(exc), spec.type, name)
            cached = (built, tuple(_logged(records, name)))
        built_now[key] = cached
        built, logged = cached
        diags += logged
        if isinstance(built, str):
            err(name, built)
        else:
            layers[name] = built
    if memo is not None:
        memo.layers = built_now
    shapes_before = memo.shapes if memo is not None else {}
    shapes_now: dict[tuple, tuple[Dims | None, tuple[str, ...], tuple[Diagnostic, ...]]] = {}

    # shapes, in execution order; a layer whose inputs are unknown is skipped silently
    dims: dict[str, Dims | None] = {}
    for name in execution_order(model):
        spec = model.layers[name]
        layer = layers.get(name)
        ins = [dims.get(s) if s else None for s in spec.inputs]
        if layer is None or any(s is not None and dims.get(s) is None for s in spec.inputs):
            dims[name] = None
            continue
        if name in incomplete:
            dims[name] = None
            continue
        skey = (keys[name], tuple(spec.inputs), tuple(ins))
        found = shapes_before.get(skey) or shapes_now.get(skey) or _layer_shapes(layer, name, spec, ins)
        shapes_now[skey] = found
        dims[name] = found[0]
        for problem in found[1]:
            err(name, problem)
        diags += found[2]
        if weights is not None and found[0] is not None:
            for problem in _stored_weight_problems(layer, name, ins, weights):
                err(name, problem)
        if layer.not_runnable:  # a placeholder: on the canvas and exportable, never run
            err(name, layer.not_runnable)
    if memo is not None:
        memo.shapes = shapes_now
    return diags, dims


def _layer_shapes(layer: Layer, name: str, spec: Any,
                  ins: list[Dims | None]) -> tuple[Dims | None, tuple[str, ...], tuple[Diagnostic, ...]]:
    """One layer's output shape (None: unknown), its shape problems and what it logged, given its input shapes."""
    problems: list[str] = []
    out: Dims | None = None
    rank = layer.desc.rank_problem(ins, spec.inputs)
    if rank:
        return None, (rank,), ()
    with collect() as records:
        try:
            out = layer.output_dims(ins)
            shapes = layer.weight_shapes(ins)
            for w, shape in shapes.items():
                idx = layer.weight_input(w)
                if idx is not None and idx < len(ins) and ins[idx] is not None:
                    problem = layer.weight_input_problem(w, spec.inputs[idx], ins[idx], tuple(shape))  # type: ignore[arg-type]
                    if problem:
                        problems.append(problem)
        except LayerLabError as exc:
            out = None
            problems.append(_strip(str(exc), spec.type, name))
        except Exception as exc:  # a plugin bug must show up as a diagnostic, not crash the checker
            out = None
            problems.append(f"shape inference failed inside the layer ({type(exc).__name__}: {exc})")
    return out, tuple(problems), tuple(_logged(records, name))


def _stored_weight_problems(layer: Layer, name: str, ins: list[Dims | None], weights: WeightsSource) -> list[str]:
    """The stored weights of layer ``name`` whose shape is not the one the layer needs now."""
    problems = []
    for w, shape in layer.weight_shapes(ins).items():
        stored = weights.stored(name, w)
        if stored is not None and tuple(stored[0]) != tuple(shape):
            problems.append(f"weight {w!r} is stored with shape {tuple(stored[0])} in {stored[1]}, the layer now "
                            f"needs {tuple(shape)} (its parameters or inputs changed since the weights were saved)")
    return problems


def _logged(records: list[logging.LogRecord], name: str) -> list[Diagnostic]:
    """The warnings (and errors) a layer logged while it was built or asked for shapes, as diagnostics on it."""
    return [Diagnostic(ERROR if r.levelno >= logging.ERROR else WARNING, name, r.getMessage())
            for r in records if getattr(r, "layer", name) == name]


def _link_problems(desc: LayerDesc, links: list[str | None]) -> list[str]:
    """Mandatory inputs left unconnected, and links beyond the inputs the layer takes."""
    problems = []
    missing = desc.unconnected_inputs(links)
    if missing:
        problems.append("These mandatory inputs are not connected: " + ", ".join(map(str, missing)))
    if desc.links_beyond_inputs(links):
        problems.append(f"has links on inputs beyond the {len(desc.inputs)} it takes")
    return problems


def _suggest(model: Model, registry: Registry, layer_type: str) -> str:
    name = template_name(layer_type)
    if name is None:
        return registry.suggest_layer(layer_type)
    return f"no template named {name!r} in this network; its templates: {', '.join(model.templates) or 'none'}"


def _strip_template(reason: str, layer_type: str) -> str:
    """``template NAME: ...`` loses the prefix when the layer is an instance of NAME (the list shows the type)."""
    prefix = f"template {template_name(layer_type)}: "
    return reason[len(prefix):] if reason.startswith(prefix) else reason


def _shapes(model: Model, registry: Registry):
    """(expansion, iterator of (layer name, Layer, input dims, output dims)) over the expanded model in
    execution order; layers whose shape cannot be inferred are left out (check() reports why)."""
    registry = scoped(model, registry)
    backend = NumpyBackend()
    exp = expand_all(model, registry, strict=False)

    def walk():
        try:
            order = execution_order(exp.model)
        except LayerLabError:
            return
        dims: dict[str, Dims] = {}
        for name in order:
            spec = exp.model.layers[name]
            try:
                layer = build_layer(name, spec.type, spec.params, spec.activation, spec.act_coefs, registry,
                                    FP32_NCHW, backend)
                ins = [dims[s] if s else None for s in spec.inputs]
                if layer.desc.rank_problem(ins, spec.inputs):
                    continue
                dims[name] = layer.output_dims(ins)
            except Exception:  # noqa: BLE001 - shown as unknown; check() reports the reason
                continue
            yield name, layer, ins, dims[name]
    return exp, walk()


def output_shapes(model: Model, registry: Registry) -> dict[str, Dims]:
    """Output dimensions of every layer whose shape can be inferred (for the canvas); a template instance's
    are those of its output layer."""
    exp, layers = _shapes(model, registry)
    dims = {name: out for name, _layer, _ins, out in layers}
    out = {n: dims[n] for n in model.layers if n in dims}
    for inst, layer in exp.output_of.items():
        if layer in dims:
            out[inst] = dims[layer]
    return out


def layer_costs(model: Model, registry: Registry) -> dict[str, dict[str, int]]:
    """``params`` (weight values, secondary inputs that replace a weight left out) and ``flops`` (one forward pass)
    of every layer whose shape can be inferred, from shapes alone (no weights, no run): what a collapsed group on the
    canvas sums before any profile exists. A template instance's are the sums over its layers."""
    exp, layers = _shapes(model, registry)
    out: dict[str, dict[str, int]] = {}
    for name, layer, ins, dims in layers:
        params = 0
        for weight, shape in layer.weight_shapes(ins).items():
            idx = layer.weight_input(weight)
            if idx is None or idx >= len(ins) or ins[idx] is None:
                params += math.prod(shape)
        top = exp.origin[name][0] if name in exp.origin else name
        cost = out.setdefault(top, {"params": 0, "flops": 0})
        cost["params"] += int(params)
        cost["flops"] += int(layer.flops(ins, dims))
    return out


def memory_warnings(model: Model, registry: Registry, available: int | None = None) -> list[Diagnostic]:
    """Warnings for layers whose output tensor and weights (fp32) alone need more memory than ``available``
    (default: what the host can give now): the network will not fit."""
    from engine.limits import LimitError, check_layer_memory, host_memory_bytes  # noqa: PLC0415

    limit = host_memory_bytes() if available is None else available
    exp, layers = _shapes(model, registry)
    diags = []
    for name, layer, ins, out in layers:
        try:
            check_layer_memory(f"{layer.desc.name} {name}", out, layer.weight_shapes(ins), 4, limit, "this machine")
        except LimitError as exc:
            diags.append(Diagnostic(WARNING, exp.origin.get(name, (name, ""))[0], f"will not fit in memory: {exc}"))
        except Exception:  # noqa: BLE001 - check() reports problems of the layer itself
            continue
    return diags


def _strip(message: str, ltype: str, name: str) -> str:
    """Messages already prefixed by 'type name: ' lose the prefix (the list shows the layer)."""
    for prefix in (f"{ltype} {name}: ", f"layer {name}: "):
        if message.startswith(prefix):
            return message[len(prefix):]
    return message


def errors(diags: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diags if d.severity == ERROR]
