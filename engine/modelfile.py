"""The `.lnet` model file: versioned XML, human-readable and diff-friendly.

Layout (format-version 1)::

    <network format-version="1" name="denoiser" version="1.0">
      <settings><setting name="backend" value="auto"/></settings>
      <layers>
        <layer name="conv1" type="convolution" x="120" y="40" permanent="false">
          <param name="num_output_channels" value="16"/>
          <activation type="leaky_relu"><coef name="alpha" value="0.1"/></activation>
          <input index="0" source="input"/>
        </layer>
      </layers>
      <fusing-rules><rule enabled="true">fp16|nhwc|conv_bn = ...</rule></fusing-rules>
      <templates><template name="...">...</template></templates>
      <custom-layers><custom-layer name="...">...</custom-layer></custom-layers>
    </network>

Parsed with defusedxml (entity expansion and external references are refused). Saving is atomic.
"""
from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any

import defusedxml
from defusedxml.ElementTree import DefusedXMLParser

from engine.descriptors import is_identifier
from engine.errors import ModelFileError, ParameterError
from engine.model import FILE_FORMAT_VERSION, FusingRuleSpec, LayerSpec, Model

if TYPE_CHECKING:
    from engine.registry import Registry


class _LineTarget(ET.TreeBuilder):
    """Tree builder that remembers the line of each element's start tag."""

    def __init__(self) -> None:
        super().__init__()
        self.parser: Any = None
        self.lines: dict[int, int] = {}

    def start(self, tag: str, attrs: dict[str, str]) -> ET.Element:  # type: ignore[override]
        elem = super().start(tag, attrs)
        self.lines[id(elem)] = self.parser.parser.CurrentLineNumber if self.parser else 0
        return elem


def _parse(text: bytes, path: str) -> tuple[ET.Element, dict[int, int]]:
    target = _LineTarget()
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
        raise ModelFileError(path, line, f"XML entities are not allowed (entity {exc.name!r})") from None
    except defusedxml.DefusedXmlException as exc:
        raise ModelFileError(path, None, f"refused unsafe XML: {exc}") from None
    return root, target.lines


def loads(text: str | bytes, path: str = "<string>", registry: Registry | None = None) -> Model:
    """Parse model XML. With a registry, layer types and parameter values are validated too."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    root, lines = _parse(data, path)

    def fail(elem: ET.Element | None, reason: str) -> ModelFileError:
        return ModelFileError(path, lines.get(id(elem)) if elem is not None else None, reason)

    if root.tag != "network":
        raise fail(root, f"root element is <{root.tag}>, expected <network>")
    ver = root.get("format-version", "1")
    if not ver.isdigit() or int(ver) > FILE_FORMAT_VERSION:
        raise fail(root, f"format-version {ver!r} is not supported (this LayerLab reads up to {FILE_FORMAT_VERSION})")
    model = Model(root.get("name", "network"), root.get("version", "1.0"))
    model.path = path
    warnings: list[str] = []

    for s in root.iterfind("settings/setting"):
        if s.get("name") is None:
            raise fail(s, "<setting> needs a name attribute")
        model.settings[s.get("name", "")] = s.get("value", "")
    for r in root.iterfind("fusing-rules/rule"):
        model.fusing_rules.append(FusingRuleSpec((r.text or "").strip(), r.get("enabled", "true") == "true"))
    for kind, store in (("templates/template", model.templates), ("custom-layers/custom-layer", model.custom_layers)):
        for t in root.iterfind(kind):
            store[t.get("name", "")] = _canonical_xml(t)

    layers_elem = root.find("layers")
    for le in (layers_elem if layers_elem is not None else []):
        if le.tag != "layer":
            raise fail(le, f"unexpected element <{le.tag}> in <layers>, expected <layer>")
        name, ltype = le.get("name"), le.get("type")
        if not name or not ltype:
            raise fail(le, "<layer> needs name and type attributes")
        if not is_identifier(name):
            raise fail(le, f"layer name {name!r} is not a valid identifier")
        if name in model.layers:
            raise fail(le, f"duplicate layer name {name!r}")
        try:
            pos = (float(le.get("x", "0")), float(le.get("y", "0")))
        except ValueError:
            raise fail(le, f"layer {name}: position x/y must be numbers") from None
        spec = LayerSpec(name, ltype, position=pos, permanent=le.get("permanent", "false") == "true")
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
            elif child.tag == "input":
                idx = child.get("index", "")
                if not idx.isdigit():
                    raise fail(child, f"layer {name}: input index {idx!r} is not a non-negative integer")
                i = int(idx)
                while len(spec.inputs) <= i:
                    spec.inputs.append(None)
                spec.inputs[i] = child.get("source") or None
            else:
                warnings.append(f"{path}:{lines.get(id(child))}: layer {name}: unknown element <{child.tag}> ignored")
        if registry is not None:
            desc = registry.find_layer(ltype)
            if desc is None:
                raise fail(le, f"layer {name}: unknown layer type {ltype!r} ({registry.suggest_layer(ltype)})")
            spec.type = desc.name  # legacy type names load as the current name
            try:
                _, warn = desc.parse_params(name, spec.params)
            except ParameterError as exc:
                raise fail(le, str(exc)) from None
            for w in warn:
                warnings.append(f"{path}:{lines.get(id(le))}: {w}")
            renamed = {}
            for k, v in spec.params.items():
                canon = desc.canonical_param_name(k)
                renamed[canon or k] = v
            spec.params = renamed
            if spec.activation != "none":
                act = registry.find_activation(spec.activation)
                if act is None:
                    raise fail(le, f"layer {name}: unknown activation {spec.activation!r}")
                spec.activation = act.name
                try:
                    act.coefficient_values(spec.act_coefs, f"layer {name}")
                except ParameterError as exc:
                    raise fail(le, str(exc)) from None
        model.layers[name] = spec

    for spec in model.layers.values():
        for i, src in enumerate(spec.inputs):
            if src is not None and src not in model.layers:
                raise ModelFileError(path, None, f"layer {spec.name}: input {i} refers to unknown layer {src!r}")
    model.load_warnings = warnings
    return model


def load(path: str | os.PathLike[str], registry: Registry | None = None) -> Model:
    """Read a `.lnet` file. Errors name the file, the line and the reason."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ModelFileError(str(p), None, "no such file") from None
    except OSError as exc:
        raise ModelFileError(str(p), None, f"cannot read: {exc.strerror}") from None
    if not data.strip():
        raise ModelFileError(str(p), None, "file is empty")
    model = loads(data, str(p), registry)
    model.path = str(p)
    return model


def dumps(model: Model) -> str:
    """The model as XML text (stable order, two-space indentation)."""
    root = ET.Element("network", {"format-version": str(FILE_FORMAT_VERSION), "name": model.name,
                                  "version": model.version})
    if model.settings:
        se = ET.SubElement(root, "settings")
        for k in sorted(model.settings):
            ET.SubElement(se, "setting", {"name": k, "value": model.settings[k]})
    layers = ET.SubElement(root, "layers")
    for spec in model.layers.values():
        attrs = {"name": spec.name, "type": spec.type, "x": _num(spec.position[0]), "y": _num(spec.position[1])}
        if spec.permanent:
            attrs["permanent"] = "true"
        le = ET.SubElement(layers, "layer", attrs)
        for k, v in spec.params.items():
            ET.SubElement(le, "param", {"name": k, "value": v})
        if spec.activation != "none" or spec.act_coefs:
            ae = ET.SubElement(le, "activation", {"type": spec.activation})
            for k, v in spec.act_coefs.items():
                ET.SubElement(ae, "coef", {"name": k, "value": v})
        for i, src in enumerate(spec.inputs):
            if src is not None:
                ET.SubElement(le, "input", {"index": str(i), "source": src})
    if model.fusing_rules:
        fe = ET.SubElement(root, "fusing-rules")
        for r in model.fusing_rules:
            ET.SubElement(fe, "rule", {"enabled": "true" if r.enabled else "false"}).text = r.text
    for tag, _child, store in (("templates", "template", model.templates),
                              ("custom-layers", "custom-layer", model.custom_layers)):
        if store:
            te = ET.SubElement(root, tag)
            for text in store.values():
                te.append(ET.fromstring(text))
    ET.indent(root, "  ")
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def save(model: Model, path: str | os.PathLike[str]) -> None:
    """Write atomically: a temporary file in the same folder, then a rename over the target."""
    p = Path(path)
    text = dumps(model)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent or "."))
    try:
        try:
            mode = p.stat().st_mode & 0o777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    model.path = str(p)
    model.mark_clean()


def _canonical_xml(elem: ET.Element) -> str:
    """XML text of an element without indentation whitespace (stable across save/load)."""
    for e in elem.iter():
        if e.text is not None and not e.text.strip():
            e.text = None
        if e.tail is not None and not e.tail.strip():
            e.tail = None
    elem.tail = None
    return ET.tostring(elem, encoding="unicode")


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))
