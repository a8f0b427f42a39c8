"""Where custom layers meet the rest of LayerLab: the registry a model sees (the plugins' layers plus the
model's custom layers, ``custom:NAME``), the definitions of a model, and the model command that changes
one (every instance follows, one undo step)."""
from __future__ import annotations

import functools
from typing import Any

from engine.custom.definition import CustomLayerDef, DefinitionError, custom_name, custom_type, parse_definition
from engine.custom.layer import layer_class
from engine.descriptors import LayerDesc
from engine.errors import LayerLabError
from engine.layer import Layer
from engine.model import Model
from engine.registry import Registry


class ScopedRegistry(Registry):
    """A live view of a registry for one model: ``custom:NAME`` layer types resolve to the model's custom
    layer definitions (as they are now); everything else is the base registry's."""

    def __init__(self, base: Registry, model: Model) -> None:  # noqa: D107 - no Registry state of its own
        self.base = base
        self.model = model

    def __getattr__(self, name: str) -> Any:
        if name in ("base", "model"):
            raise AttributeError(name)
        return getattr(self.base, name)

    def layer_class(self, name: str) -> type[Layer] | None:
        cname = custom_name(name)
        if cname is None:
            return self.base.layer_class(name)
        text = self.model.custom_layers.get(cname)
        if text is None:
            return None
        try:
            return layer_class(text)
        except LayerLabError:
            return None

    def suggest_layer(self, name: str) -> str:
        cname = custom_name(name)
        if cname is None:
            return self.base.suggest_layer(name)
        if cname in self.model.custom_layers:
            try:
                layer_class(self.model.custom_layers[cname])
            except LayerLabError as exc:
                return f"its definition is invalid: {exc}"
        known = ", ".join(self.model.custom_layers) or "none"
        return f"no custom layer named {cname!r} in this network; its custom layers: {known}"


def scoped(model: Model, registry: Registry, always: bool = False) -> Registry:
    """The registry ``model`` sees: ``registry`` itself when the model has no custom layers (unless
    ``always``: the designer's documents, which may get some later), else a ScopedRegistry."""
    if isinstance(registry, ScopedRegistry):
        if registry.model is model:
            return registry
        registry = registry.base
    if not always and not model.custom_layers:
        return registry
    return ScopedRegistry(registry, model)


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> CustomLayerDef:
    return parse_definition(text)


def definitions(model: Model) -> dict[str, CustomLayerDef]:
    """The model's valid custom layer definitions by name (malformed ones are left out: type checking
    reports them on their instances)."""
    out = {}
    for name, text in model.custom_layers.items():
        try:
            out[name] = _parsed(text)
        except LayerLabError:
            continue
    return out


def get_definition(model: Model, name: str) -> CustomLayerDef:
    """Custom layer ``name`` of ``model``; raises LayerLabError (unknown or malformed)."""
    if name not in model.custom_layers:
        raise LayerLabError(f"no custom layer named {name!r} in network {model.name}")
    return _parsed(model.custom_layers[name])


def custom_descs(model: Model) -> list[LayerDesc]:
    """Descriptors of the model's custom layers (palette, docs browser)."""
    out = []
    for text in model.custom_layers.values():
        try:
            out.append(layer_class(text).desc)
        except LayerLabError:
            continue
    return out


def instances(model: Model, name: str) -> list[str]:
    """Layers of ``model`` that are instances of custom layer ``name``."""
    t = custom_type(name)
    return [n for n, s in model.layers.items() if s.type == t]


def used_definitions(model: Model) -> list[CustomLayerDef]:
    """The custom layers the model's layers use (directly or inside its templates)."""
    defs = definitions(model)
    texts = "".join(model.templates.values())
    return [d for n, d in defs.items() if instances(model, n) or f'type="{custom_type(n)}"' in texts]


def set_definition(model: Model, defn: CustomLayerDef, old_name: str | None = None) -> None:
    """Add or replace a custom layer definition as one undo step; instances follow (parameters the new
    definition no longer has are removed from them). Raises DefinitionError for an invalid structure."""
    defn.validate_structure()
    if old_name is not None and old_name != defn.name:
        raise DefinitionError(f"custom layer {old_name}: a custom layer cannot be renamed (its instances refer to it)")
    if old_name is None and defn.name in model.custom_layers:
        raise DefinitionError(f"a custom layer named {defn.name!r} already exists in network {model.name}")
    text = defn.to_xml()
    keep = {p.name for p in defn.params}
    verb = "Add" if old_name is None else "Edit"
    with model.macro(f"{verb} custom layer {defn.name}"):
        model.set_custom_layer(defn.name, text)
        for layer in instances(model, defn.name):
            for param in [p for p in model.layers[layer].params if p not in keep]:
                model.set_param(layer, param, None)


def remove_definition(model: Model, name: str) -> None:
    """Delete custom layer ``name``; refused while layers use it."""
    users = instances(model, name)
    if users:
        raise LayerLabError(f"custom layer {name} is still used by {', '.join(users)}: delete those layers first")
    if name not in model.custom_layers:
        raise LayerLabError(f"no custom layer named {name!r} in network {model.name}")
    model.set_custom_layer(name, None)


def read_definition(elem: Any, fail: Any) -> str:
    """Check a ``<custom-layer>`` element of a model file (structure only; ``fail(elem, reason)`` builds the
    error naming the file and line); returns its name."""
    from engine.custom.definition import from_element  # noqa: PLC0415

    try:
        return from_element(elem).name
    except LayerLabError as exc:
        raise fail(elem, str(exc)) from None


def custom_layers_used(model: Model, layer_types: Any, template_texts: Any = ()) -> dict[str, str]:
    """Definitions (name -> XML text) of the custom layers among ``layer_types`` and inside the template
    definitions ``template_texts`` (what copied layers need in another model)."""
    texts = "".join(template_texts)
    return {n: t for n, t in model.custom_layers.items()
            if custom_type(n) in set(layer_types) or f'type="{custom_type(n)}"' in texts}
