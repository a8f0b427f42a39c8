"""Templates: a group of layers stored in the model and used as one layer.

A template definition is the XML text kept in ``Model.templates[name]`` (and inside ``<templates>`` of the
``.lnet`` file)::

    <template name="resblock">
      <inputs><input name="x"/><input name="skip"/></inputs>
      <layers>
        <layer name="c1" type="convolution" x="0" y="0">
          <param name="num_output_channels" value="16"/>
          <input index="0" source="$x"/>
        </layer>
        <layer name="add1" type="element_wise" x="220" y="0">
          <input index="0" source="c1"/><input index="1" source="$skip"/>
        </layer>
      </layers>
      <output source="add1"/>
      <exposed><param layer="c1" name="num_output_channels"/></exposed>
    </template>

* ``<inputs>`` are ordered: input ``i`` of an instance feeds every source ``$NAME`` of the ``i``-th input.
  Input 0 is primary (mandatory), the others are secondary (optional) like a weighted layer's extra inputs.
* ``<layers>`` uses the model file's ``<layer>`` syntax; positions are relative to the instance's position.
  A layer may itself be an instance of another template (nesting), never of its own template.
* ``<output>`` names the layer whose output is the instance's output. Every other layer must be read by
  some layer of the template.
* ``<exposed>`` lists the inner parameters an instance can set. They are instance parameters named
  ``<layer>.<param>`` (text, like every parameter); one an instance does not set keeps the definition's
  value. All instances of a template expose the same parameters.

An instance is an ordinary layer of type ``template:NAME``. ``template_desc`` describes it like a plugin
layer (inputs, exposed parameters, documentation) so the type checker, canvas, palette and parameter window
treat it as one; ``find_desc`` is the one lookup of a model layer's descriptor, template or not.

The preprocessor (``expand_templates``; ``Network`` calls it before the fusing rules) replaces every
instance by its layers, named ``<instance>__<layer>`` (``<outer>__<inner>__<layer>`` when nested), wires
the template inputs to the instance's sources and every reader of the instance to the output layer. An
activation set on an instance applies to the output layer; a permanent instance makes it permanent.
Weights of expanded layers are read under their expanded names.

Editing: ``group`` turns selected layers into a template and one instance, ``ungroup`` puts an instance's
layers back, ``import_model_as_template`` makes a saved model a template, ``set_exposed`` chooses the
exposed parameters, ``rename_template`` renames a template and its instances. Each is one undoable step on
the model."""
from __future__ import annotations

import copy
import functools
import html
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from engine.descriptors import InputDesc, InputKind, LayerDesc, ParamDesc, is_identifier
from engine.errors import LayerLabError, ModelFileError, TemplateError
from engine.graph import find_cycle
from engine.layer_xml import canonical_xml, check_layer, parse_xml, read_layer, write_layer
from engine.model import LayerSpec, Model
from engine.registry import Registry
from engine.tensor import FORMATS

TEMPLATE_PREFIX = "template:"
#: separator of expanded names: ``<instance>__<layer>``
SEP = "__"
CATEGORY = "Templates"


def template_type(name: str) -> str:
    """The layer type of an instance of template ``name``."""
    return TEMPLATE_PREFIX + name


def template_name(layer_type: str) -> str | None:
    """The template an instance of ``layer_type`` uses (None for a plugin layer type)."""
    return layer_type[len(TEMPLATE_PREFIX):] if layer_type.startswith(TEMPLATE_PREFIX) else None


def has_instances(model: Model) -> bool:
    return any(s.type.startswith(TEMPLATE_PREFIX) for s in model.layers.values())


def instances_of(model: Model, name: str) -> list[str]:
    """Layers of ``model`` that are instances of template ``name``."""
    t = template_type(name)
    return [n for n, s in model.layers.items() if s.type == t]


# ---- the definition --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Exposed:
    """An inner parameter an instance can set, as instance parameter ``<layer>.<param>``."""

    layer: str
    param: str

    @property
    def key(self) -> str:
        return f"{self.layer}.{self.param}"


@dataclass
class TemplateDef:
    """A parsed template. Sources of ``layers`` are inner layer names or ``$input``. Treat it as read-only
    (parsed definitions are cached): copy the layers before changing them."""

    name: str
    inputs: list[str]
    layers: dict[str, LayerSpec]
    output: str
    exposed: list[Exposed] = field(default_factory=list)
    path: str | None = None
    lines: dict[str, int | None] = field(default_factory=dict)  # "layer:NAME", "output", "exposed:KEY" -> line

    def error(self, where: str, reason: str) -> TemplateError:
        """A TemplateError about the element ``where`` (its line when the definition came from a file)."""
        return TemplateError(self.name, reason, self.path, self.lines.get(where) if self.path else None)

    def exposed_param(self, key: str) -> Exposed | None:
        return next((e for e in self.exposed if e.key == key), None)

    def to_xml(self) -> str:
        """The canonical XML text (what ``Model.templates`` stores)."""
        return template_xml(self.name, self.inputs, self.layers.values(), self.output, self.exposed)


def template_xml(name: str, inputs: Iterable[str], layers: Iterable[LayerSpec], output: str,
                 exposed: Iterable[Exposed] = ()) -> str:
    """Canonical XML text of a template definition."""
    root = ET.Element("template", {"name": name})
    ins = ET.SubElement(root, "inputs")
    for n in inputs:
        ET.SubElement(ins, "input", {"name": n})
    le = ET.SubElement(root, "layers")
    for spec in layers:
        write_layer(le, spec)
    ET.SubElement(root, "output", {"source": output})
    exp = list(exposed)
    if exp:
        ee = ET.SubElement(root, "exposed")
        for e in exp:
            ET.SubElement(ee, "param", {"layer": e.layer, "name": e.param})
    return canonical_xml(root)


def parse_template(source: str | bytes | ET.Element, path: str | None = None,
                   lines: Mapping[int, int] | None = None, warnings: list[str] | None = None) -> TemplateDef:
    """Read a definition (text, or an element of a model file with ``path`` and the element ``lines``) and
    check its structure: names, ``$inputs``, sources, output, unused layers, cycles and exposed layers.
    Raises TemplateError naming the template, the element (and line) and the problem. Types and parameter
    values need a registry: see ``check_template``."""
    if isinstance(source, ET.Element):
        root, line_map = source, dict(lines or {})
    else:
        data = source.encode("utf-8") if isinstance(source, str) else source
        try:
            root, line_map = parse_xml(data, path or "<template>")
        except ModelFileError as exc:
            raise TemplateError("(unreadable)", exc.reason, path, exc.line) from None
    name = root.get("name") or ""

    def fail(elem: ET.Element | None, reason: str) -> TemplateError:
        line = line_map.get(id(elem)) if elem is not None else None
        return TemplateError(name or "(unnamed)", reason, path, line if path else None)

    def warn(elem: ET.Element, reason: str) -> None:
        if warnings is not None:
            line = line_map.get(id(elem))
            where = f"{path}:{line}: " if path and line else ""
            warnings.append(f"{where}template {name}: {reason}")

    if root.tag != "template":
        raise fail(root, f"root element is <{root.tag}>, expected <template>")
    if not is_identifier(name):
        raise fail(root, f"<template> needs a name that is an identifier (letters, digits, '_'), got {name!r}")
    inputs: list[str] = []
    for ie in root.iterfind("inputs/input"):
        n = ie.get("name") or ""
        if not is_identifier(n):
            raise fail(ie, f"<input> name {n!r} is not an identifier")
        if n in inputs:
            raise fail(ie, f"duplicate <input> name {n!r}")
        inputs.append(n)
    layers: dict[str, LayerSpec] = {}
    elems: dict[str, ET.Element] = {}
    layers_elem = root.find("layers")
    for le in (layers_elem if layers_elem is not None else []):
        spec = read_layer(le, fail, warn)
        if spec.name in layers:
            raise fail(le, f"duplicate layer name {spec.name!r}")
        layers[spec.name] = spec
        elems[spec.name] = le
    if not layers:
        raise fail(root, "<layers> is empty: a template needs at least one layer")
    for spec in layers.values():
        for i, src in enumerate(spec.inputs):
            if src is None:
                continue
            if src.startswith("$"):
                if src[1:] not in inputs:
                    known = ", ".join("$" + n for n in inputs) or "none"
                    raise fail(elems[spec.name], f"layer {spec.name}: input {i} reads unknown template input {src!r} "
                                                 f"(the template's inputs: {known})")
            elif src not in layers:
                raise fail(elems[spec.name], f"layer {spec.name}: input {i} reads {src!r}, which is not a layer of the "
                                             "template (a template input is written $NAME)")
    outs = root.findall("output")
    if not outs:
        raise fail(root, "no <output source=\"LAYER\"/>: name the layer whose output is the template's output")
    if len(outs) > 1:
        raise fail(outs[1], "several <output> elements: a template has one output")
    output = outs[0].get("source") or ""
    if output not in layers:
        what = "a template input" if output.startswith("$") else "not a layer of the template"
        raise fail(outs[0], f"<output> source {output!r} is {what}: it must name one of the layers "
                            f"({', '.join(layers)})")
    read = {s for spec in layers.values() for s in spec.inputs if s}
    unused = [n for n in layers if n not in read and n != output]
    if unused:
        raise fail(elems[unused[0]], f"layer {unused[0]}: its output is not used (only the output layer {output} "
                                     "may be left unread)")
    probe = Model(name)
    probe.layers = layers
    cycle = find_cycle(probe)  # template inputs ($x) are not layers of the probe: they never close a cycle
    if cycle:
        raise fail(elems[cycle[0]], "the layers form a cycle: " + " -> ".join(cycle))
    exposed: list[Exposed] = []
    exp_lines: dict[str, int | None] = {}
    for pe in root.iterfind("exposed/param"):
        layer, pname = pe.get("layer") or "", pe.get("name") or ""
        if layer not in layers:
            raise fail(pe, f"<exposed> parameter {layer}.{pname}: {layer!r} is not a layer of the template")
        if not pname:
            raise fail(pe, f"<exposed> parameter of layer {layer} needs a name attribute")
        e = Exposed(layer, pname)
        if any(x.key == e.key for x in exposed):
            raise fail(pe, f"<exposed> parameter {e.key} is listed twice")
        exposed.append(e)
        exp_lines[f"exposed:{e.key}"] = line_map.get(id(pe))
    line_of: dict[str, int | None] = {f"layer:{n}": line_map.get(id(e)) for n, e in elems.items()}
    line_of["output"] = line_map.get(id(outs[0]))
    line_of.update(exp_lines)
    return TemplateDef(name, inputs, layers, output, exposed, path, line_of)


@functools.lru_cache(maxsize=512)
def _parsed(text: str) -> TemplateDef:
    return parse_template(text)


def get_template(model: Model, name: str) -> TemplateDef:
    """The parsed definition of template ``name`` of ``model`` (cached by text; do not modify it)."""
    text = model.templates.get(name)
    if text is None:
        known = ", ".join(model.templates) or "none"
        raise TemplateError(name, f"no such template in network {model.name} (its templates: {known})")
    defn = _parsed(text)
    if defn.name != name:
        defn = replace(defn, name=name)
    return defn


def check_template(defn: TemplateDef, model: Model, registry: Registry, warnings: list[str] | None = None,
                   _stack: tuple[str, ...] = ()) -> None:
    """Check what needs the plugins and the model's other templates: every layer type is known (a nested
    template exists and does not instantiate the template itself, directly or through nesting), parameter
    values and activations are valid, no input or output layer is inside, and every exposed parameter
    exists. Raises TemplateError; unknown parameters only add warnings."""
    stack = (*_stack, defn.name)
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
            check_template(get_template(model, nested), model, registry, warnings, stack)
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


# ---- descriptors -----------------------------------------------------------------------------------

def find_desc(model: Model, registry: Registry, layer_type: str, _stack: tuple[str, ...] = ()) -> LayerDesc | None:
    """The descriptor of a model layer's type: a plugin layer's, or a template instance's (None when unknown,
    or when the template is broken: ``check_template`` says why)."""
    name = template_name(layer_type)
    if name is None:
        return registry.find_layer(layer_type)
    if name not in model.templates or name in _stack:
        return None
    try:
        return template_desc(name, model, registry, _stack)
    except LayerLabError:
        return None


def template_desc(name: str, model: Model, registry: Registry, _stack: tuple[str, ...] = ()) -> LayerDesc:
    """A LayerDesc for instances of template ``name``: its inputs (the first primary, the others secondary),
    its exposed parameters typed like the inner ones (default: the definition's value), the formats every
    inner layer supports, and documentation listing its layers."""
    defn = get_template(model, name)
    stack = (*_stack, name)
    descs: dict[str, LayerDesc | None] = {}
    for n, spec in defn.layers.items():
        nested = template_name(spec.type)
        if nested is not None and nested in stack:
            raise TemplateError(name, f"layer {n}: the template instantiates itself ({' -> '.join((*stack, nested))})")
        descs[n] = find_desc(model, registry, spec.type, stack)
    params = []
    for e in defn.exposed:
        inner = descs.get(e.layer)
        if inner is None:
            continue
        try:
            p = inner.param(e.param)
        except KeyError:
            continue
        spec = defn.layers[e.layer]
        text = next((spec.params[k] for k in (p.name, *p.legacy_names) if k in spec.params), None)
        try:
            default = p.parse(text) if text is not None else p.default
        except ValueError:
            default = p.default
        doc = f"{p.name} of layer {e.layer} ({inner.display_name})" + (f": {p.doc}" if p.doc else "")
        params.append(replace(p, name=e.key, default=default, doc=doc, main=True,
                              legacy_names=tuple(f"{e.layer}.{k}" for k in (*p.legacy_names, e.param) if k != p.name)))
    formats = None
    for d in descs.values():
        if d is not None:
            formats = [f for f in (formats if formats is not None else d.formats) if f in d.formats]
    inputs = tuple(InputDesc(n, InputKind.PRIMARY if i == 0 else InputKind.SECONDARY,
                             f"template input ${n}, read by {', '.join(readers_of(defn, '$' + n)) or 'no layer'}")
                   for i, n in enumerate(defn.inputs))
    types = sorted({s.type for s in defn.layers.values()})
    summary = f"Template of {len(defn.layers)} layer(s) ({', '.join(types)}); output from {defn.output}."
    return LayerDesc(
        name=template_type(name), display_name=name, summary=summary, categories=(CATEGORY,),
        documentation=_documentation(defn, descs), inputs=inputs, params=tuple(params),
        formats=tuple(formats) if formats is not None else FORMATS,
        collection=f"network {model.name}")


def template_descs(model: Model, registry: Registry) -> list[LayerDesc]:
    """Descriptors of the model's usable templates (for the palette and the documentation)."""
    return [d for d in (find_desc(model, registry, template_type(n)) for n in model.templates) if d is not None]


def readers_of(defn: TemplateDef, source: str) -> list[str]:
    return [f"{n}:{i}" for n, s in defn.layers.items() for i, src in enumerate(s.inputs) if src == source]


def _documentation(defn: TemplateDef, descs: Mapping[str, LayerDesc | None]) -> str:
    rows = []
    for n, spec in defn.layers.items():
        d = descs.get(n)
        kind = html.escape(d.display_name if d else spec.type)
        links = ", ".join(html.escape(s) if s else "—" for s in spec.inputs) or "—"
        act = f" + {html.escape(spec.activation)}" if spec.activation != "none" else ""
        mark = " <i>(output)</i>" if n == defn.output else ""
        rows.append(f"<tr><td><b>{html.escape(n)}</b>{mark}</td><td>{kind}{act}</td><td>{links}</td></tr>")
    exposed = ", ".join(f"<code>{html.escape(e.key)}</code>" for e in defn.exposed) or "<i>none</i>"
    return ("<p>A template: a group of layers of this network used as one layer. The preprocessor replaces "
            "each instance by these layers, named <code>&lt;instance&gt;__&lt;layer&gt;</code>.</p>"
            "<table border=1 cellspacing=0 cellpadding=4><tr><th>Layer</th><th>Type</th><th>Reads</th></tr>"
            + "".join(rows) + f"</table><p>Exposed parameters: {exposed}</p>")


# ---- expansion -------------------------------------------------------------------------------------

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


def _instantiate(inst: LayerSpec, defn: TemplateDef, rename: Mapping[str, str]) -> tuple[dict[str, LayerSpec], str]:
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
            sub, sub_out = _instantiate(spec, defn, {n: f"{name}{SEP}{n}" for n in defn.layers})
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


# ---- editing commands ------------------------------------------------------------------------------

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
    layers, output = _instantiate(spec, defn, rename)
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


def import_model_as_template(model: Model, path: str | os.PathLike[str], registry: Registry,
                             name: str | None = None) -> str:
    """Add the network saved at ``path`` to ``model`` as a template (see ``model_as_template``), with the
    templates it uses; one undo step. ``name`` defaults to the network's name (made unique). Returns the
    template's name."""
    from engine.modelfile import load  # noqa: PLC0415 - the model file reads templates through this module

    source = load(path, registry)
    if name is None:
        base = source.name if is_identifier(source.name) else Path(path).stem
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
    with model.macro(f"Import {Path(path).name} as template {name}"):
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
