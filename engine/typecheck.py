"""Type checking: diagnostics for a Model without running tensors (shapes only, fast)."""
from __future__ import annotations

from dataclasses import dataclass

from engine.backends import NumpyBackend
from engine.custom.scope import scoped
from engine.descriptors import LayerDesc, is_identifier
from engine.errors import LayerLabError
from engine.graph import execution_order, find_cycle
from engine.layer import Layer
from engine.model import Model
from engine.network import build_layer
from engine.registry import Registry
from engine.templates import expand, find_desc, template_name
from engine.tensor import FP32_NCHW, Dims

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


def check(model: Model, registry: Registry) -> list[Diagnostic]:
    """Every problem found in ``model``: names, types, parameters, links, cycles and shapes.

    A template instance is checked as one layer (its inputs and exposed parameters) and through its expanded
    layers, whose problems are reported on the instance, prefixed by the inner layer's name."""
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
        if template_name(spec.type) is None:
            continue  # a plugin layer's links are checked with its shapes
        problems = _link_problems(desc, spec.inputs)
        if problems and desc.unconnected_inputs(spec.inputs):
            incomplete.add(name)
        diags += [Diagnostic(ERROR, name, p) for p in problems]

    cycle = find_cycle(model)
    if cycle:
        for n in sorted(set(cycle)):
            diags.append(Diagnostic(ERROR, n, "is part of a cycle: " + " -> ".join(cycle)))
        return diags

    exp = expand(model, registry, strict=False)
    for name, reason in exp.failed.items():
        diags.append(Diagnostic(ERROR, name, _strip_template(reason, model.layers[name].type)))
    for d in _check_built(exp.model, registry, set(exp.failed)):
        if d.layer in exp.origin:
            inst, inner = exp.origin[d.layer]
            if d.message.startswith("These mandatory inputs") and inst in incomplete:
                continue  # the instance's own missing input says it
            diags.append(Diagnostic(d.severity, inst, f"{inner}: {d.message}"))
        else:
            diags.append(d)
    return diags


def _check_built(model: Model, registry: Registry, skip: set[str]) -> list[Diagnostic]:
    """Types, parameters, links and shapes of a model without template instances (``skip``: layers to leave
    out, their outputs unknown)."""
    diags: list[Diagnostic] = []
    err = lambda layer, msg: diags.append(Diagnostic(ERROR, layer, msg))  # noqa: E731
    backend = NumpyBackend()
    layers: dict[str, Layer] = {}
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
        try:
            layers[name] = build_layer(name, spec.type, spec.params, spec.activation, spec.act_coefs,
                                       registry, FP32_NCHW, backend)
        except LayerLabError as exc:
            err(name, _strip(str(exc), spec.type, name))

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
        try:
            out = layer.output_dims(ins)
            shapes = layer.weight_shapes(ins)
            for w, shape in shapes.items():
                idx = layer.weight_input(w)
                if idx is not None and idx < len(ins) and ins[idx] is not None:
                    problem = layer.weight_input_problem(w, spec.inputs[idx], ins[idx], tuple(shape))  # type: ignore[arg-type]
                    if problem:
                        err(name, problem)
            dims[name] = out
            if layer.not_runnable:
                err(name, layer.not_runnable)
        except LayerLabError as exc:
            err(name, _strip(str(exc), spec.type, name))
            dims[name] = None
        except Exception as exc:  # a plugin bug must show up as a diagnostic, not crash the checker
            err(name, f"shape inference failed inside the layer ({type(exc).__name__}: {exc})")
            dims[name] = None
    return diags


def _link_problems(desc: LayerDesc, links: list[str | None]) -> list[str]:
    """Mandatory inputs left unconnected, and links beyond the inputs the layer takes."""
    problems = []
    missing = desc.unconnected_inputs(links)
    if missing:
        problems.append("These mandatory inputs are not connected: " + ", ".join(map(str, missing)))
    if len(links) > len(desc.inputs) and not desc.infinite_input and any(links[len(desc.inputs):]):
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


def output_shapes(model: Model, registry: Registry) -> dict[str, Dims]:
    """Output dimensions of every layer whose shape can be inferred (for the canvas); a template instance's
    are those of its output layer."""
    registry = scoped(model, registry)
    backend = NumpyBackend()
    dims: dict[str, Dims] = {}
    exp = expand(model, registry, strict=False)
    built = exp.model
    try:
        order = execution_order(built)
    except LayerLabError:
        return {}
    for name in order:
        spec = built.layers[name]
        try:
            layer = build_layer(name, spec.type, spec.params, spec.activation, spec.act_coefs, registry, FP32_NCHW, backend)
            ins = [dims[s] if s else None for s in spec.inputs]
            dims[name] = layer.output_dims(ins)
        except Exception:  # shown as unknown; check() reports the reason
            continue
    out = {n: dims[n] for n in model.layers if n in dims}
    for inst, layer in exp.output_of.items():
        if layer in dims:
            out[inst] = dims[layer]
    return out


def _strip(message: str, ltype: str, name: str) -> str:
    """Messages already prefixed by 'type name: ' lose the prefix (the list shows the layer)."""
    for prefix in (f"{ltype} {name}: ", f"layer {name}: "):
        if message.startswith(prefix):
            return message[len(prefix):]
    return message


def errors(diags: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diags if d.severity == ERROR]
