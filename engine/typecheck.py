"""Type checking: diagnostics for a Model without running tensors (shapes only, fast)."""
from __future__ import annotations

from dataclasses import dataclass

from engine.backends import NumpyBackend
from engine.descriptors import InputKind, is_identifier
from engine.errors import LayerLabError
from engine.graph import find_cycle
from engine.layer import Layer
from engine.model import Model
from engine.network import build_layer
from engine.registry import Registry
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
    """Every problem found in ``model``: names, types, parameters, links, cycles and shapes."""
    diags: list[Diagnostic] = []
    err = lambda layer, msg: diags.append(Diagnostic(ERROR, layer, msg))  # noqa: E731
    backend = NumpyBackend()
    layers: dict[str, Layer] = {}
    incomplete: set[str] = set()
    for name, spec in model.layers.items():
        if not is_identifier(name):
            err(name, f"{name!r} is not a valid layer name (letters, digits and '_', not starting with a digit)")
        cls = registry.layer_class(spec.type)
        if cls is None:
            err(name, f"unknown layer type {spec.type!r} ({registry.suggest_layer(spec.type)})")
            continue
        desc = cls.desc
        for key in spec.params:
            if desc.canonical_param_name(key) is None:
                diags.append(Diagnostic(WARNING, name, f"unknown parameter {key!r} is ignored"))
        missing = []
        for i, inp in enumerate(desc.inputs):
            src = spec.inputs[i] if i < len(spec.inputs) else None
            if inp.kind is InputKind.PRIMARY and src is None:
                missing.append(i)
            elif inp.kind is InputKind.PRIMARY_INFINITE and not any(s for s in spec.inputs[i:]):
                missing.append(i)
        if missing:
            incomplete.add(name)
            err(name, "These mandatory inputs are not connected: " + ", ".join(map(str, missing)))
        if len(spec.inputs) > len(desc.inputs) and not desc.infinite_input and any(spec.inputs[len(desc.inputs):]):
            err(name, f"has links on inputs beyond the {len(desc.inputs)} it takes")
        try:
            layers[name] = build_layer(name, spec.type, spec.params, spec.activation, spec.act_coefs,
                                       registry, FP32_NCHW, backend)
        except LayerLabError as exc:
            err(name, _strip(str(exc), spec.type, name))

    cycle = find_cycle(model)
    if cycle:
        for n in sorted(set(cycle)):
            err(n, "is part of a cycle: " + " -> ".join(cycle))
        return diags

    # shapes, in execution order; a layer whose inputs are unknown is skipped silently
    from engine.graph import execution_order

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
        except LayerLabError as exc:
            err(name, _strip(str(exc), spec.type, name))
            dims[name] = None
        except Exception as exc:  # a plugin bug must show up as a diagnostic, not crash the checker
            err(name, f"shape inference failed inside the layer ({type(exc).__name__}: {exc})")
            dims[name] = None
    return diags


def output_shapes(model: Model, registry: Registry) -> dict[str, Dims]:
    """Output dimensions of every layer whose shape can be inferred (for the canvas)."""
    from engine.graph import execution_order

    backend = NumpyBackend()
    dims: dict[str, Dims] = {}
    try:
        order = execution_order(model)
    except LayerLabError:
        return dims
    for name in order:
        spec = model.layers[name]
        try:
            layer = build_layer(name, spec.type, spec.params, spec.activation, spec.act_coefs, registry, FP32_NCHW, backend)
            ins = [dims[s] if s else None for s in spec.inputs]
            dims[name] = layer.output_dims(ins)
        except Exception:  # shown as unknown; check() reports the reason
            continue
    return dims


def _strip(message: str, ltype: str, name: str) -> str:
    """Messages already prefixed by 'type name: ' lose the prefix (the list shows the layer)."""
    for prefix in (f"{ltype} {name}: ", f"layer {name}: "):
        if message.startswith(prefix):
            return message[len(prefix):]
    return message


def errors(diags: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diags if d.severity == ERROR]
