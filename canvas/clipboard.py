"""Copy/paste of layers as plain data (JSON text); pasted layers get new unique names and keep internal links.
The definitions of the templates and custom layers that copied instances use travel with them."""
from __future__ import annotations

import copy
import json
import re

from engine.custom.scope import custom_layers_used
from engine.descriptors import is_identifier
from engine.model import LayerSpec, Model
from engine.templates import templates_used

MIME_TYPE = "application/x-layerlab-layers"


def copy_layers(model: Model, names: list[str]) -> str:
    """JSON text of the layers ``names`` (in model order), with their parameters, links and positions."""
    wanted = set(names)
    specs = [copy.deepcopy(s.__dict__) for n, s in model.layers.items() if n in wanted]
    data = {"layerlab-layers": 1, "layers": specs}
    used = templates_used(model, [s["type"] for s in specs])
    if used:
        data["templates"] = used
    custom = custom_layers_used(model, [s["type"] for s in specs], used.values())
    if custom:
        data["custom-layers"] = custom
    return json.dumps(data)


def clipboard_templates(text: str, key: str = "templates") -> dict[str, str]:
    """Template definitions (name -> XML text) carried by clipboard ``text`` (empty when none or not ours);
    ``key="custom-layers"``: the custom layer definitions."""
    try:
        data = json.loads(text)
    except (ValueError, TypeError):
        return {}
    found = data.get(key) if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def _fresh_name(base: str, taken: set[str]) -> str:
    stem = re.sub(r"_\d+$", "", base) or "layer"
    stem = stem if is_identifier(stem) else "layer"
    n = 1
    while f"{stem}_{n}" in taken:
        n += 1
    return f"{stem}_{n}"


def paste_specs(model: Model, text: str, offset: tuple[float, float] = (40.0, 40.0)) -> list[LayerSpec]:
    """Layers to insert for clipboard ``text``: renamed uniquely, internal links kept, external links dropped.

    Raises ValueError when ``text`` is not LayerLab clipboard data."""
    data = json.loads(text)
    if not isinstance(data, dict) or "layers" not in data:
        raise ValueError("the clipboard holds no LayerLab layers")
    raw = [LayerSpec(**{**d, "position": tuple(d.get("position", (0.0, 0.0)))}) for d in data["layers"]]
    taken = set(model.layers)
    renames: dict[str, str] = {}
    for spec in raw:
        new = _fresh_name(spec.name, taken)
        taken.add(new)
        renames[spec.name] = new
    out = []
    for spec in raw:
        spec.name = renames[spec.name]
        spec.inputs = [renames.get(s) if s is not None else None for s in spec.inputs]
        while spec.inputs and spec.inputs[-1] is None:
            spec.inputs.pop()
        spec.position = (spec.position[0] + offset[0], spec.position[1] + offset[1])
        out.append(spec)
    return out
