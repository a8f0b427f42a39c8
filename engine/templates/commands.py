"""Template editing commands on a model; each is one undoable step."""
from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import replace

from engine.descriptors import ParamDesc, is_identifier
from engine.errors import LayerLabError
from engine.model import LayerSpec, Model
from engine.registry import Registry
from engine.templates.checking import check_template
from engine.templates.descriptors import find_desc
from engine.templates.expansion import instantiate
from engine.templates.format import Exposed, get_template, parse_template, template_xml
from engine.templates.names import instances_of, template_name, template_type


def _main_exposed(model: Model, registry: Registry, layers: Iterable[LayerSpec]) -> list[Exposed]:
    """The parameters exposed by default: the ones the canvas shows on each layer (``main``)."""
    out = []
    for spec in layers:
        desc = find_desc(model, registry, spec.type)
        for p in desc.params if desc else ():
            if p.main:
                out.append(Exposed(spec.name, p.name))
    return out


def _new_template_name(model: Model, name: str) -> None:
    if not is_identifier(name):
        raise LayerLabError(f"{name!r} is not a valid template name: use letters, digits and '_', not starting with a digit")
    if name in model.templates:
        raise LayerLabError(f"a template named {name!r} already exists")


def _relative(layers: Iterable[LayerSpec]) -> tuple[float, float]:
    specs = list(layers)
    return (min(s.position[0] for s in specs), min(s.position[1] for s in specs))


def _is_io(registry: Registry, layer_type: str) -> bool:
    cls = registry.layer_class(layer_type)
    return bool(getattr(cls, "is_network_input", False) or getattr(cls, "is_network_output", False))


def group(model: Model, layer_names: Iterable[str], template_name: str, registry: Registry) -> str:
    """Make the layers ``layer_names`` a template named ``template_name`` and replace them by one instance
    wired the same way; one undo step. Returns the instance's name.

    The template's inputs are the distinct layers outside the selection that feed it (in model order of
    their first reader, then input index); its output is the one selected layer read from outside the
    selection (or, when none is, the one nobody reads). Refused, before anything changes, when that is not
    exactly one layer, when the selection holds input or output layers, or when a layer outside lies between
    selected layers (the instance would read its own output)."""
    wanted = set(layer_names)
    unknown = sorted(wanted - set(model.layers))
    if unknown:
        raise LayerLabError(f"cannot group: no layer named {', '.join(map(repr, unknown))}")
    sel = [n for n in model.layers if n in wanted]
    if not sel:
        raise LayerLabError("cannot group: select the layers to make a template of")
    _new_template_name(model, template_name)
    io = [n for n in sel if _is_io(registry, model.layers[n].type)]
    if io:
        raise LayerLabError(f"cannot group {', '.join(io)}: input and output layers stay in the network "
                            "(a template's inputs and output are links); leave them out of the selection")
    external: list[str] = []
    for n in sel:
        for src in model.layers[n].inputs:
            if src and src not in wanted and src not in external:
                external.append(src)
    exits = {n: sorted({r for r, _ in model.readers(n) if r not in wanted}) for n in sel}
    outputs = [n for n in sel if exits[n]] or [n for n in sel if not model.readers(n)]
    if len(outputs) != 1:
        if not outputs:
            raise LayerLabError("cannot group: no selected layer gives an output (every one is read inside the selection)")
        listing = "; ".join(f"{n} (read by {', '.join(exits[n])})" if exits[n] else f"{n} (read by nobody)"
                            for n in outputs)
        raise LayerLabError(f"cannot group: a template has one output, but {len(outputs)} selected layers are "
                            f"read from outside the selection: {listing}. Add their readers to the selection or "
                            "leave some of them out")
    output = outputs[0]
    between = [s for s in external if any(model.depends_on(s, n) for n in sel)]
    if between:
        raise LayerLabError(f"cannot group: {between[0]} is outside the selection but lies between selected layers "
                            f"(it reads from them and feeds them); add it to the selection")
    ox, oy = _relative(model.layers[n] for n in sel)
    inner = []
    for n in sel:
        s = copy.deepcopy(model.layers[n])
        s.inputs = [None if x is None else x if x in wanted else "$" + x for x in s.inputs]
        s.position = (s.position[0] - ox, s.position[1] - oy)
        inner.append(s)
    text = template_xml(template_name, external, inner, output, _main_exposed(model, registry, inner))
    check_template(parse_template(text), model, registry)
    instance = model.unique_name(template_name)
    spec = LayerSpec(instance, template_type(template_name), inputs=list(external), position=(ox, oy))
    readers = [(r, i) for r, i in model.readers(output) if r not in wanted]
    order = list(model.layers)
    anchor = next((n for n in order[order.index(sel[0]):] if n not in wanted), None)
    with model.macro(f"Group {', '.join(sel)} as template {template_name}"):
        model.add_template(template_name, text)
        _replace(model, sel, [spec], instance, readers, anchor, f"Add {instance}")
    return instance


def _replace(model: Model, old: list[str], new: list[LayerSpec], output: str, readers: list[tuple[str, int]],
             anchor: str | None, text: str) -> None:
    """Inside a macro: remove layers ``old``, insert ``new`` before ``anchor`` (None: at the end) and link
    ``output`` to the inputs ``readers`` (reader, index) that ``old`` fed."""
    model.remove_layers(old)
    model.add_layers(new, text, before=anchor)
    for r, i in readers:
        model.connect(output, r, i)


def _after(model: Model, name: str) -> str | None:
    """The layer after ``name`` in the model's order (None for the last one)."""
    order = list(model.layers)
    at = order.index(name)
    return order[at + 1] if at + 1 < len(order) else None


def ungroup(model: Model, instance: str, registry: Registry | None = None) -> list[str]:
    """Replace instance ``instance`` by the layers of its template (one level: nested instances stay), with
    its exposed parameters, links and position; one undo step. A layer keeps its name inside the template
    when that name is free, else becomes ``<instance>_<layer>``. Returns the new layer names."""
    spec = model.layer(instance)
    tname = template_name(spec.type)
    if tname is None:
        raise LayerLabError(f"{instance} is a {spec.type} layer, not a template instance: there is nothing to ungroup")
    defn = get_template(model, tname)
    taken = set(model.layers) - {instance}
    rename: dict[str, str] = {}
    for n in defn.layers:
        cand, k = (n if n not in taken else f"{instance}_{n}"), 1
        while cand in taken:
            k += 1
            cand = f"{instance}_{n}_{k}"
        taken.add(cand)
        rename[n] = cand
    layers, output = instantiate(spec, defn, rename)
    with model.macro(f"Ungroup {instance}"):
        _replace(model, [instance], list(layers.values()), output, model.readers(instance), _after(model, instance),
                 f"Add the layers of {instance}")
    return list(layers)


def templates_used(model: Model, layer_types: Iterable[str]) -> dict[str, str]:
    """Definitions (name -> text) the given layer types need, nested ones included."""
    out: dict[str, str] = {}
    todo = [t for t in (template_name(x) for x in layer_types) if t]
    while todo:
        name = todo.pop()
        if name in out or name not in model.templates:
            continue
        out[name] = model.templates[name]
        todo += [t for t in (template_name(s.type) for s in get_template(model, name).layers.values()) if t]
    return out


def add_templates(model: Model, texts: Mapping[str, str], registry: Registry) -> list[str]:
    """Add definitions ``name -> text`` the model lacks (an identical one already there is kept; a different
    one with the same name is refused). Use inside a macro with the edit that needs them."""
    clash = [n for n, t in texts.items() if n in model.templates and model.templates[n] != t]
    if clash:
        raise LayerLabError(f"a different template named {clash[0]!r} already exists in network {model.name}: "
                            "rename one of them first")
    added = []
    for n, t in texts.items():
        if n not in model.templates:
            parse_template(t)
            model.add_template(n, t)
            added.append(n)
    return added


def model_as_template(source: Model, name: str, registry: Registry, target: Model | None = None) -> str:
    """The definition text of a whole network as a template: its input layers become the template's inputs
    (in model order), the source of its one output layer (or, without output layers, its one unread layer)
    the output. Refused when it has several outputs, none, or an input or output layer with an activation."""
    target = target or source
    inputs = [n for n, s in source.layers.items() if getattr(registry.layer_class(s.type), "is_network_input", False)]
    outputs = [n for n, s in source.layers.items() if getattr(registry.layer_class(s.type), "is_network_output", False)]
    where = f"network {source.name}" + (f" ({source.path})" if source.path else "")
    for n in inputs + outputs:
        if source.layers[n].activation != "none":
            raise LayerLabError(f"cannot import {where} as a template: {source.layers[n].type} layer {n} has an "
                                f"activation ({source.layers[n].activation}); move it to a layer inside first")
    inner_names = [n for n in source.layers if n not in inputs and n not in outputs]
    if not inner_names:
        raise LayerLabError(f"cannot import {where} as a template: it has no layers besides inputs and outputs")
    if len(outputs) > 1:
        raise LayerLabError(f"cannot import {where} as a template: it has {len(outputs)} output layers "
                            f"({', '.join(outputs)}), a template has one output; keep one output layer")
    if outputs:
        src = source.layers[outputs[0]].inputs[0] if source.layers[outputs[0]].inputs else None
        if src is None or src in inputs:
            raise LayerLabError(f"cannot import {where} as a template: its output layer {outputs[0]} must read a layer "
                                "that is not an input")
        output = src
    else:
        unread = [n for n in inner_names if not source.readers(n)]
        if len(unread) != 1:
            raise LayerLabError(f"cannot import {where} as a template: it has no output layer and {len(unread)} layers "
                                f"nobody reads ({', '.join(unread) or 'none'}); add one output layer")
        output = unread[0]
    ox, oy = _relative(source.layers[n] for n in inner_names)
    inner = []
    for n in inner_names:
        s = copy.deepcopy(source.layers[n])
        s.inputs = [None if x is None else "$" + x if x in inputs else x for x in s.inputs]
        s.position = (s.position[0] - ox, s.position[1] - oy)
        inner.append(s)
    used = sorted({s for n in inner_names for s in source.layers[n].inputs if s in inputs}, key=inputs.index)
    return template_xml(name, used, inner, output, _main_exposed(source, registry, inner))


def add_model_as_template(model: Model, source: Model, registry: Registry, name: str | None = None,
                          fallback_name: str = "template", label: str | None = None) -> str:
    """Add the network ``source`` to ``model`` as a template (see ``model_as_template``), with the templates
    it uses; one undo step (named after ``label``, e.g. the file it came from). ``name`` defaults to the
    network's name, else ``fallback_name`` (made unique). Returns the template's name."""
    if name is None:
        base = source.name if is_identifier(source.name) else fallback_name
        base = base if is_identifier(base) else "template"
        name, k = base, 1
        while name in model.templates:
            k += 1
            name = f"{base}_{k}"
    _new_template_name(model, name)
    text = model_as_template(source, name, registry)
    nested = templates_used(source, [s.type for s in source.layers.values()])
    probe = Model(model.name)
    probe.templates = {**model.templates, **nested, name: text}
    check_template(parse_template(text), probe, registry)
    with model.macro(f"Import {label or source.name} as template {name}"):
        add_templates(model, nested, registry)
        model.add_template(name, text)
    return name


def set_exposed(model: Model, name: str, keys: Iterable[str], registry: Registry) -> None:
    """Choose the exposed parameters of template ``name`` (``<layer>.<param>`` keys); instance values of
    parameters no longer exposed are dropped. One undo step."""
    defn = get_template(model, name)
    exposed = []
    for key in keys:
        layer, _, param = key.partition(".")
        exposed.append(Exposed(layer, param))
    text = template_xml(name, defn.inputs, defn.layers.values(), defn.output, exposed)
    check_template(parse_template(text), model, registry)
    keep = {e.key for e in exposed}
    if text == model.templates[name]:
        return
    with model.macro(f"Set the exposed parameters of {name}"):
        for inst in instances_of(model, name):
            for key in [k for k in model.layers[inst].params if k not in keep]:
                model.set_param(inst, key, None)
        model.set_template(name, text)


def rename_template(model: Model, old: str, new: str, registry: Registry) -> None:
    """Rename template ``old`` to ``new``: its definition, every instance (type ``template:new``, same name,
    parameters, links and position) and every template that nests it. One undo step."""
    defn = get_template(model, old)
    if new == old:
        return
    _new_template_name(model, new)
    if template_type(new) in {s.type for s in model.layers.values()}:
        raise LayerLabError(f"layers of type template:{new} already exist")
    old_marker, new_marker = f'type="{template_type(old)}"', f'type="{template_type(new)}"'
    text = template_xml(new, defn.inputs, defn.layers.values(), defn.output, defn.exposed)
    with model.macro(f"Rename template {old} to {new}"):
        model.add_template(new, text)
        for other, other_text in list(model.templates.items()):
            if other not in (old, new) and old_marker in other_text:
                model.set_template(other, other_text.replace(old_marker, new_marker))
        for inst in instances_of(model, old):
            spec = replace(model.layers[inst], type=template_type(new))
            _replace(model, [inst], [spec], inst, model.readers(inst), _after(model, inst), f"Retype {inst}")
        model.remove_template(old)
    check_template(parse_template(model.templates[new]), model, registry)


def exposable(model: Model, name: str, registry: Registry) -> list[tuple[str, ParamDesc]]:
    """Every inner parameter of template ``name`` that could be exposed: (``<layer>.<param>``, its descriptor)."""
    defn = get_template(model, name)
    out = []
    for n, spec in defn.layers.items():
        desc = find_desc(model, registry, spec.type)
        for p in desc.params if desc else ():
            out.append((f"{n}.{p.name}", p))
    return out
