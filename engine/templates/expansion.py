"""Expansion (the preprocessor's first step): every template instance replaced by its layers."""
from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.errors import LayerLabError, TemplateError
from engine.model import LayerSpec, Model
from engine.registry import Registry
from engine.templates.format import TemplateDef, get_template
from engine.templates.names import SEP, template_name


@dataclass
class Expansion:
    """The result of ``expand``.

    ``model``: the network with every instance replaced by its layers (no templates left).
    ``origin``: expanded layer -> (the model layer it comes from, its name inside, e.g. ``c1`` or ``b__c1``).
    ``output_of``: instance -> the expanded layer giving its output.
    ``failed``: instance -> why it could not be expanded (only with ``strict=False``; it is left as it was)."""

    model: Model
    origin: dict[str, tuple[str, str]] = field(default_factory=dict)
    output_of: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def instantiate(inst: LayerSpec, defn: TemplateDef, rename: Mapping[str, str]) -> tuple[dict[str, LayerSpec], str]:
    """One level: the layers of ``defn`` for instance ``inst``, renamed by ``rename``, with the instance's
    exposed parameters applied, ``$inputs`` wired to its sources, positions offset by its position, and its
    activation and permanent flag moved to the output layer. Returns (layers, name of the output layer)."""
    layers = {n: copy.deepcopy(s) for n, s in defn.layers.items()}
    for key, value in inst.params.items():
        e = defn.exposed_param(key)
        if e is not None:  # others are not exposed: ignored (the type checker warns)
            layers[e.layer].params[e.param] = value
    sources = {n: (inst.inputs[i] if i < len(inst.inputs) else None) for i, n in enumerate(defn.inputs)}
    out: dict[str, LayerSpec] = {}
    for n, s in layers.items():
        s.name = rename[n]
        s.inputs = [None if x is None else sources[x[1:]] if x.startswith("$") else rename[x] for x in s.inputs]
        while s.inputs and s.inputs[-1] is None:
            s.inputs.pop()
        s.position = (inst.position[0] + s.position[0], inst.position[1] + s.position[1])
        out[s.name] = s
    target = out[rename[defn.output]]
    if inst.activation and inst.activation != "none":
        if target.activation != "none":
            raise TemplateError(defn.name, f"instance {inst.name} has activation {inst.activation}, but the output layer "
                                           f"{defn.output} already has activation {target.activation}")
        target.activation, target.act_coefs = inst.activation, dict(inst.act_coefs)
    if inst.permanent:
        target.permanent = True
    return out, target.name


def _expand_scope(layers: Mapping[str, LayerSpec], model: Model, stack: tuple[str, ...],
                  failed: dict[str, str] | None) -> tuple[dict[str, LayerSpec], dict[str, str], dict[str, tuple[str, str]]]:
    """Expand every instance among ``layers`` (recursively). Returns the layers, instance -> output layer,
    and expanded layer -> (instance, inner path). Sources not in ``layers`` (outer names) pass through."""
    out: dict[str, LayerSpec] = {}
    alias: dict[str, str] = {}
    origin: dict[str, tuple[str, str]] = {}
    for name, spec in layers.items():
        tname = template_name(spec.type)
        if tname is None:
            out[name] = copy.deepcopy(spec)
            continue
        try:
            if tname in stack:
                raise TemplateError(tname, f"the template instantiates itself ({' -> '.join((*stack, tname))})")
            defn = get_template(model, tname)
            sub, sub_out = instantiate(spec, defn, {n: f"{name}{SEP}{n}" for n in defn.layers})
            flat, sub_alias, _ = _expand_scope(sub, model, (*stack, tname), None)
            clash = [n for n in (*sub, *flat) if n in layers or n in out]
            if clash:
                raise TemplateError(tname, f"expanding instance {name}: its layer would be named {clash[0]}, which is "
                                           "already the name of another layer; rename that layer or the instance")
        except LayerLabError as exc:
            if failed is None:
                raise
            failed[name] = str(exc)
            out[name] = copy.deepcopy(spec)
            continue
        out.update(flat)
        alias[name] = sub_alias.get(sub_out, sub_out)
        for n in flat:
            origin[n] = (name, n[len(name) + len(SEP):])
    for s in out.values():
        s.inputs = [alias.get(x, x) if x else x for x in s.inputs]
    return out, alias, origin


def expand(model: Model, registry: Registry | None = None, strict: bool = True) -> Expansion:
    """Replace every template instance of ``model`` by its layers (see the module documentation); ``model``
    is unchanged. ``strict``: raise TemplateError for an instance that cannot be expanded (else record it in
    ``failed`` and leave it as it is). ``registry`` is not needed to expand; ``check_template`` uses it."""
    failed: dict[str, str] | None = None if strict else {}
    layers, alias, origin = _expand_scope(model.layers, model, (), failed)
    out = model.copy()
    out.layers = layers
    out.templates = {}
    return Expansion(out, origin, alias, failed or {})


def expand_templates(model: Model, registry: Registry | None = None) -> Model:
    """A new Model in which every template instance is replaced by its layers, and no templates remain."""
    return expand(model, registry).model
