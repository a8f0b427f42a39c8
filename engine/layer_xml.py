"""XML pieces shared by the model file and template definitions: the safe parser (defusedxml, with the line
of every element), the ``<layer>`` element read and written the same way in both, and the checks of a
layer against its descriptor (type, parameters, activation)."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import defusedxml
from defusedxml.ElementTree import DefusedXMLParser

from engine.descriptors import LayerDesc, is_identifier
from engine.errors import ModelFileError, ParameterError
from engine.formats import LayerFormatError, canonical
from engine.groups import GroupError, check_path
from engine.limits import MAX_INPUT_INDEX, MAX_XML_DEPTH, cut
from engine.model import LayerSpec

if TYPE_CHECKING:
    from engine.registry import Registry

#: ``fail(element, reason)`` builds the exception to raise for a problem found at ``element`` (None: no element)
Fail = Callable[[ET.Element | None, str], Exception]


class _LineTarget(ET.TreeBuilder):
    """Tree builder that remembers the line of each element's start tag."""

    def __init__(self, path: str = "<string>") -> None:
        super().__init__()
        self.parser: Any = None
        self.lines: dict[int, int] = {}
        self.path = path
        self.depth = 0

    def start(self, tag: str, attrs: dict[str, str]) -> ET.Element:  # type: ignore[override]
        line = self.parser.parser.CurrentLineNumber if self.parser else 0
        self.depth += 1
        if self.depth > MAX_XML_DEPTH:  # the tree is walked recursively later (serialising, copying)
            raise ModelFileError(self.path, line, f"elements are nested more than {MAX_XML_DEPTH} levels deep")
        elem = super().start(tag, attrs)
        self.lines[id(elem)] = line
        return elem

    def end(self, tag: str) -> ET.Element:  # type: ignore[override]
        self.depth -= 1
        return super().end(tag)


def parse_xml(text: bytes, path: str) -> tuple[ET.Element, dict[int, int]]:
    """The root element and ``{id(element): line}``. Entities, external references and unsafe constructs
    are refused; every failure is a ModelFileError naming ``path`` (and the line where known)."""
    target = _LineTarget(path)
    parser = DefusedXMLParser(target=target, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    target.parser = parser
    try:
        parser.feed(text)
        root = parser.close()
    except ET.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else None
        msg = str(exc).split(":")[0]
        raise ModelFileError(path, line, f"malformed XML ({msg})") from None
    except defusedxml.DTDForbidden:
        raise ModelFileError(path, None, "document type declarations are not allowed") from None
    except defusedxml.EntitiesForbidden as exc:
        line = getattr(parser.parser, "CurrentLineNumber", None)
        raise ModelFileError(path, line, f"XML entities are not allowed (entity {cut(exc.name)})") from None
    except defusedxml.DefusedXmlException as exc:
        raise ModelFileError(path, None, f"refused unsafe XML: {exc}") from None
    return root, target.lines


def read_layer(le: ET.Element, fail: Fail, warn: Callable[[ET.Element, str], None]) -> LayerSpec:
    """The LayerSpec of a ``<layer>`` element (structure only: names, position, params, activation, links)."""
    if le.tag != "layer":
        raise fail(le, f"unexpected element <{le.tag}>, expected <layer>")
    name, ltype = le.get("name"), le.get("type")
    if not name or not ltype:
        raise fail(le, "<layer> needs name and type attributes")
    if not is_identifier(name):
        raise fail(le, f"layer name {cut(name)} is not a valid identifier")
    try:
        pos = (float(le.get("x", "0")), float(le.get("y", "0")))
    except ValueError:
        raise fail(le, f"layer {name}: position x/y must be numbers") from None
    spec = LayerSpec(name, ltype, position=pos, permanent=le.get("permanent", "false") == "true",
                     note=le.get("note", ""))
    if le.get("format"):
        try:
            spec.format = canonical(le.get("format"), f"layer {name}: format")
        except LayerFormatError as exc:
            raise fail(le, str(exc)) from None
    for child in le:
        if child.tag == "param":
            pname = child.get("name")
            if not pname:
                raise fail(child, f"layer {name}: <param> needs a name attribute")
            spec.params[pname] = child.get("value", "")
        elif child.tag == "activation":
            spec.activation = child.get("type", "none")
            for c in child.iterfind("coef"):
                spec.act_coefs[c.get("name", "")] = c.get("value", "")
        elif child.tag == "group":
            try:
                spec.group = check_path(child.get("path", ""))
            except GroupError as exc:
                raise fail(child, f"layer {name}: {exc}") from None
        elif child.tag == "input":
            idx = child.get("index", "")
            if not (idx.isascii() and idx.isdigit()):
                raise fail(child, f"layer {name}: input index {cut(idx)} is not a non-negative integer")
            i = int(idx) if len(idx) < 12 else MAX_INPUT_INDEX + 1
            if i > MAX_INPUT_INDEX:
                raise fail(child, f"layer {name}: input index {cut(idx)} is too large (at most {MAX_INPUT_INDEX})")
            while len(spec.inputs) <= i:
                spec.inputs.append(None)
            spec.inputs[i] = child.get("source") or None
        else:
            warn(child, f"layer {spec.name}: unknown element <{child.tag}> ignored")
    return spec


def check_layer(spec: LayerSpec, desc: LayerDesc | None, registry: Registry, le: ET.Element | None, fail: Fail,
                warn: Callable[[ET.Element | None, str], None], rename: bool = True) -> None:
    """Check a layer against its descriptor (``None``: unknown type): parameter values and the activation
    and its coefficients. With ``rename``, legacy type, parameter and activation names become current ones."""
    if desc is None:
        raise fail(le, f"layer {spec.name}: unknown layer type {cut(spec.type)} ({registry.suggest_layer(spec.type[:200])})")
    try:
        _, warnings = desc.parse_params(spec.name, spec.params)
    except ParameterError as exc:
        raise fail(le, str(exc)) from None
    for w in warnings:
        warn(le, w)
    act = registry.find_activation(spec.activation) if spec.activation != "none" else None
    if spec.activation != "none":
        if act is None:
            raise fail(le, f"layer {spec.name}: unknown activation {cut(spec.activation)}")
        try:
            act.coefficient_values(spec.act_coefs, f"layer {spec.name}")
        except ParameterError as exc:
            raise fail(le, str(exc)) from None
    if rename:
        spec.type = desc.name
        spec.params = {(desc.canonical_param_name(k) or k): v for k, v in spec.params.items()}
        if act is not None:
            spec.activation = act.name


def write_layer(parent: ET.Element, spec: LayerSpec) -> ET.Element:
    """Append the ``<layer>`` element of ``spec`` to ``parent`` (the inverse of ``read_layer``)."""
    attrs = {"name": spec.name, "type": spec.type, "x": number_text(spec.position[0]),
             "y": number_text(spec.position[1])}
    if spec.permanent:
        attrs["permanent"] = "true"
    if spec.note:
        attrs["note"] = spec.note
    if spec.format:
        attrs["format"] = spec.format
    le = ET.SubElement(parent, "layer", attrs)
    for k, v in spec.params.items():
        ET.SubElement(le, "param", {"name": k, "value": v})
    if spec.activation != "none" or spec.act_coefs:
        ae = ET.SubElement(le, "activation", {"type": spec.activation})
        for k, v in spec.act_coefs.items():
            ET.SubElement(ae, "coef", {"name": k, "value": v})
    for i, src in enumerate(spec.inputs):
        if src is not None:
            ET.SubElement(le, "input", {"index": str(i), "source": src})
    if spec.group:
        ET.SubElement(le, "group", {"path": spec.group})
    return le


def canonical_xml(elem: ET.Element) -> str:
    """XML text of an element without indentation whitespace (stable across save/load)."""
    for e in elem.iter():
        if e.text is not None and not e.text.strip():
            e.text = None
        if e.tail is not None and not e.tail.strip():
            e.tail = None
    elem.tail = None
    return ET.tostring(elem, encoding="unicode")


def number_text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))
