"""Editing a template in place: its definition as a model of its own, and that model saved back as the definition.

``definition_model`` makes a standalone Model of template ``name``: an ``input`` layer per template input (named
after it; its dimensions those of what feeds the first instance, when known), the template's layers, and an
``output`` layer reading the template's output. ``apply_definition`` writes such a model back as the definition of
``name`` in a model (one undo step): the inputs are the model's input layers (instances keep their links by input
name), the exposed parameters are kept where their layer and parameter still exist (the others are dropped, and
the instances' values of them too); it returns the dropped ones so the designer can list them."""
from __future__ import annotations

import copy

from engine.descriptors import is_identifier
from engine.errors import LayerLabError
from engine.model import LayerSpec, Model
from engine.registry import Registry
from engine.templates.checking import check_template
from engine.templates.commands import model_as_template
from engine.templates.descriptors import find_desc
from engine.templates.format import Exposed, get_template, parse_template, template_xml
from engine.templates.names import instances_of


def _free(name: str, taken: set[str]) -> str:
    base = name if is_identifier(name) else "layer"
    out, k = base, 1
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    return out


def definition_model(model: Model, name: str, registry: Registry, dims: dict[str, str] | None = None) -> Model:
    """Template ``name`` of ``model`` as a model of its own (see the module documentation). ``dims``: input name ->
    dimensions text for its input layer (default: the input layer's default)."""
    defn = get_template(model, name)
    out = Model(name, model.version)
    out.templates = dict(model.templates)
    out.templates.pop(name, None)
    out.custom_layers = dict(model.custom_layers)  # its custom layers resolve in the tab as in the model
    taken = set(defn.layers)
    xs = [s.position[0] for s in defn.layers.values()] or [0.0]
    ys = [s.position[1] for s in defn.layers.values()] or [0.0]
    input_names: dict[str, str] = {}
    for i, n in enumerate(defn.inputs):
        layer = _free(n, taken)
        taken.add(layer)
        input_names[n] = layer
        params = {"dimensions": dims[n]} if dims and n in dims else {}
        out.layers[layer] = LayerSpec(layer, "input", params, position=(min(xs) - 260.0, min(ys) + 120.0 * i))
    for n, spec in defn.layers.items():
        s = copy.deepcopy(spec)
        s.inputs = [input_names[x[1:]] if x and x.startswith("$") else x for x in s.inputs]
        out.layers[n] = s
    output = _free("output", taken)
    out.layers[output] = LayerSpec(output, "output", inputs=[defn.output],
                                   position=(max(xs) + 260.0, defn.layers[defn.output].position[1]))
    out.clear_undo()
    return out


def instance_dims(model: Model, name: str, shapes: dict[str, object]) -> dict[str, str]:
    """Dimensions of what feeds each input of template ``name``'s first instance whose inputs are known (for
    ``definition_model``), from ``shapes`` (layer -> Dims, e.g. ``engine.typecheck.output_shapes``)."""
    defn = get_template(model, name)
    for inst in instances_of(model, name):
        links = model.layers[inst].inputs
        found = {n: shapes.get(links[i]) for i, n in enumerate(defn.inputs) if i < len(links) and links[i]}
        if found and all(v is not None for v in found.values()):
            return {n: str(v) for n, v in found.items()}
    return {}


def apply_definition(model: Model, name: str, edited: Model, registry: Registry) -> list[str]:
    """Make ``edited`` (a model like ``definition_model``'s) the definition of template ``name`` of ``model``, as one
    undo step; every instance follows. Returns the exposed parameters (``layer.param``) that were dropped because
    their layer or parameter is gone. Raises LayerLabError (the model unchanged) when ``edited`` cannot be a
    template of ``model``."""
    old = get_template(model, name)
    text = model_as_template(edited, name, registry, model)
    fresh = parse_template(text)
    kept: list[Exposed] = []
    dropped: list[str] = []
    for e in old.exposed:
        spec = fresh.layers.get(e.layer)
        desc = find_desc(model, registry, spec.type) if spec is not None else None
        if desc is not None and desc.canonical_param_name(e.param) is not None:
            kept.append(e)
        else:
            dropped.append(e.key)
    text = template_xml(name, fresh.inputs, fresh.layers.values(), fresh.output, kept)
    probe = Model(model.name)
    probe.templates = {**model.templates, name: text}
    probe.custom_layers = dict(model.custom_layers)
    try:
        check_template(parse_template(text), probe, registry)
    except LayerLabError as exc:
        raise LayerLabError(f"template {name} cannot be saved: {exc}") from None
    if text == model.templates[name]:
        return dropped
    with model.macro(f"Edit template {name}"):
        links: dict[str, dict[str, str | None]] = {}
        for inst in instances_of(model, name):
            spec = model.layers[inst]
            links[inst] = dict(zip(old.inputs, spec.inputs))
            for key in [k for k in spec.params if k in dropped]:
                model.set_param(inst, key, None)
            for i in reversed(range(len(spec.inputs))):
                if spec.inputs[i] is not None:
                    model.disconnect(inst, i)
        model.set_template(name, text)
        for inst, by_name in links.items():
            for i, n in enumerate(fresh.inputs):
                source = by_name.get(n)
                if source:
                    model.connect(source, inst, i)
    return dropped


__all__ = ["apply_definition", "definition_model", "instance_dims"]
