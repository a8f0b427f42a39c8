"""The template definition format: the XML text a model keeps per template, parsed into a ``TemplateDef``."""
from __future__ import annotations

import functools
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from engine.descriptors import is_identifier
from engine.errors import ModelFileError, TemplateError
from engine.graph import find_cycle
from engine.layer_xml import canonical_xml, parse_xml, read_layer, write_layer
from engine.model import LayerSpec, Model


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
