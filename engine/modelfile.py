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
Template definitions (``engine.templates``) are checked on load like layers: with a registry, their
layer types, parameters and exposed parameters too; errors name the file and the line.
"""
from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

from engine.custom.scope import read_definition, scoped
from engine.errors import ModelFileError, TemplateError
from engine.layer_xml import canonical_xml, check_layer, parse_xml, read_layer, write_layer
from engine.model import FILE_FORMAT_VERSION, FusingRuleSpec, Model
from engine.templates.checking import check_template
from engine.templates.commands import add_model_as_template
from engine.templates.descriptors import find_desc
from engine.templates.format import parse_template
from engine.templates.names import template_name

if TYPE_CHECKING:
    from engine.registry import Registry


def loads(text: str | bytes, path: str = "<string>", registry: Registry | None = None) -> Model:
    """Parse model XML. With a registry, layer types and parameter values are validated too."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    root, lines = parse_xml(data, path)
    warnings: list[str] = []

    def fail(elem: ET.Element | None, reason: str) -> ModelFileError:
        return ModelFileError(path, lines.get(id(elem)) if elem is not None else None, reason)

    def warn(elem: ET.Element, reason: str) -> None:
        warnings.append(f"{path}:{lines.get(id(elem))}: {reason}")

    if root.tag != "network":
        raise fail(root, f"root element is <{root.tag}>, expected <network>")
    ver = root.get("format-version", "1")
    if not ver.isdigit() or int(ver) > FILE_FORMAT_VERSION:
        raise fail(root, f"format-version {ver!r} is not supported (this LayerLab reads up to {FILE_FORMAT_VERSION})")
    model = Model(root.get("name", "network"), root.get("version", "1.0"))
    model.path = path

    for s in root.iterfind("settings/setting"):
        if s.get("name") is None:
            raise fail(s, "<setting> needs a name attribute")
        model.settings[s.get("name", "")] = s.get("value", "")
    for r in root.iterfind("fusing-rules/rule"):
        model.fusing_rules.append(FusingRuleSpec((r.text or "").strip(), r.get("enabled", "true") == "true"))
    defs = []
    for t in root.iterfind("templates/template"):
        defn = parse_template(t, path, lines, warnings)  # structure; line numbers of this file
        if defn.name in model.templates:
            raise fail(t, f"duplicate template name {defn.name!r}")
        defs.append(defn)
        model.templates[defn.name] = canonical_xml(t)
    for c in root.iterfind("custom-layers/custom-layer"):
        cname = read_definition(c, fail)  # structure checked; code never run
        if cname in model.custom_layers:
            raise fail(c, f"duplicate custom layer name {cname!r}")
        model.custom_layers[cname] = canonical_xml(c)
    if registry is not None:
        registry = scoped(model, registry)
        for defn in defs:
            try:
                check_template(defn, model, registry, warnings)
            except TemplateError as exc:
                if exc.path:
                    raise
                raise TemplateError(exc.template, exc.reason.partition(": ")[2], path, None) from None

    layers_elem = root.find("layers")
    for le in (layers_elem if layers_elem is not None else []):
        if le.tag != "layer":
            raise fail(le, f"unexpected element <{le.tag}> in <layers>, expected <layer>")
        spec = read_layer(le, fail, warn)
        if spec.name in model.layers:
            raise fail(le, f"duplicate layer name {spec.name!r}")
        if registry is not None:
            desc = find_desc(model, registry, spec.type)
            tname = template_name(spec.type)
            if desc is None and tname is not None:
                raise fail(le, f"layer {spec.name}: unknown layer type {spec.type!r} (no template named {tname!r} in "
                               f"this file; its templates: {', '.join(model.templates) or 'none'})")
            check_layer(spec, desc, registry, le, fail, warn)
        model.layers[spec.name] = spec

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
        write_layer(layers, spec)
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


def import_model_as_template(model: Model, path: str | os.PathLike[str], registry: Registry,
                             name: str | None = None) -> str:
    """Add the network saved at ``path`` to ``model`` as a template (``engine.templates.add_model_as_template``),
    with the templates it uses; one undo step. ``name`` defaults to the network's name, else the file's stem
    (made unique). Returns the template's name."""
    return add_model_as_template(model, load(path, registry), registry, name, Path(path).stem, Path(path).name)
