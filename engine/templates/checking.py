"""Checking a template definition against the plugins and the model's other templates."""
from __future__ import annotations

import copy

from engine.errors import TemplateError
from engine.layer_xml import check_layer
from engine.limits import MAX_TEMPLATE_DEPTH
from engine.model import Model
from engine.registry import Registry
from engine.templates.descriptors import COMPOSITE_DESCS, find_desc
from engine.templates.format import TemplateDef, get_template
from engine.templates.names import template_name


def check_template(defn: TemplateDef, model: Model, registry: Registry, warnings: list[str] | None = None,
                   _stack: tuple[str, ...] = (), _checked: dict[str, int] | None = None) -> None:
    """Check what needs the plugins and the model's other templates: every layer type is known (a nested
    template exists and does not instantiate the template itself, directly or through nesting), parameter
    values and activations are valid, no input or output layer is inside, and every exposed parameter
    exists. Raises TemplateError; unknown parameters only add warnings. Each definition is checked once
    (``_checked``: name -> nesting depth of the definitions checked already), so nesting costs what the file
    describes, not a walk of every path through it; nesting deeper than ``MAX_TEMPLATE_DEPTH`` is refused."""
    stack = (*_stack, defn.name)
    checked = _checked if _checked is not None else {}
    if len(stack) > MAX_TEMPLATE_DEPTH:
        raise defn.error("output", f"templates are nested more than {MAX_TEMPLATE_DEPTH} levels deep "
                                   f"({' -> '.join(stack[:2])} -> ... -> {stack[-1]})")
    depth = 1
    for name, spec in defn.layers.items():
        where = f"layer:{name}"
        nested = template_name(spec.type)
        if nested is not None:
            if nested in stack:
                chain = " -> ".join((*stack, nested))
                raise defn.error(where, f"layer {name}: the template instantiates itself ({chain})")
            if nested not in model.templates:
                raise defn.error(where, f"layer {name}: unknown template {nested!r} "
                                        f"(templates of network {model.name}: {', '.join(model.templates) or 'none'})")
            if nested not in checked:
                check_template(get_template(model, nested), model, registry, warnings, stack, checked)
            depth = max(depth, checked[nested] + 1)
            if depth > MAX_TEMPLATE_DEPTH:
                raise defn.error(where, f"layer {name}: templates are nested more than {MAX_TEMPLATE_DEPTH} levels "
                                        f"deep ({defn.name} -> {nested} -> ...)")
        if spec.type.startswith(tuple(COMPOSITE_DESCS)):
            continue  # a network layer: its file is checked by the type check (a missing one is no load error)
        cls = registry.layer_class(spec.type) if nested is None else None
        if getattr(cls, "is_network_input", False) or getattr(cls, "is_network_output", False):
            raise defn.error(where, f"layer {name}: a template cannot contain {spec.type} layers "
                                    "(its inputs are <inputs>, its output is <output>)")
        desc = find_desc(model, registry, spec.type, _stack=stack)

        def fail(_elem: object, reason: str, where: str = where) -> TemplateError:
            return defn.error(where, reason)

        def warn(_elem: object, reason: str) -> None:
            if warnings is not None:
                warnings.append(f"template {defn.name}: {reason}")

        check_layer(copy.deepcopy(spec), desc, registry, None, fail, warn, rename=False)
    for e in defn.exposed:
        desc = find_desc(model, registry, defn.layers[e.layer].type, _stack=stack)
        if desc is not None and desc.canonical_param_name(e.param) is None:
            have = ", ".join(p.name for p in desc.params) or "none"
            raise defn.error(f"exposed:{e.key}", f"exposed parameter {e.key}: {desc.name} has no parameter "
                                                 f"{e.param!r} (it has: {have})")
    checked[defn.name] = depth
