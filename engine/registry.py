"""The registry: what the loaded plugins provide (layers, activations, fusing rules)."""
from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from engine.descriptor_checks import activation_desc_problems, layer_desc_problems
from engine.descriptors import ActivationDesc, LayerDesc
from engine.errors import LayerLabError, PluginError
from engine.format_conversion import ENGINE_LAYERS
from engine.layer import Activation, Layer
from engine.limits import cut


@dataclass(frozen=True)
class PluginMeta:
    """Metadata every plugin (collection) declares as ``PLUGIN`` next to its ``register`` function."""

    name: str
    version: str
    author: str
    description: str


@dataclass
class PluginInfo:
    meta: PluginMeta
    source: str  # module name or file path
    layers: list[str] = field(default_factory=list)
    activations: list[str] = field(default_factory=list)
    fusing_rules: list[str] = field(default_factory=list)


@dataclass
class PluginFailure:
    """A plugin that could not be loaded, and why."""

    source: str
    reason: str

    def __str__(self) -> str:
        return f"plugin {self.source} failed to load: {self.reason}"


@dataclass
class RegisteredRule:
    collection: str
    text: str
    enabled: bool = True


class Registrar:
    """What a plugin's ``register(registrar)`` function receives."""

    def __init__(self, registry: Registry, info: PluginInfo) -> None:
        self._registry = registry
        self._info = info

    def layer(self, cls: type[Layer]) -> None:
        self._registry._add_layer(cls, self._info)

    def activation(self, cls: type[Activation]) -> None:
        self._registry._add_activation(cls, self._info)

    def fusing_rule(self, text: str, enabled: bool = True) -> None:
        if not isinstance(text, str):
            raise PluginError(f"plugin {self._info.meta.name}: fusing rule {cut(text)} is not text")
        self._registry.fusing_rules.append(RegisteredRule(self._info.meta.name, text, enabled))
        self._info.fusing_rules.append(text)


class Registry:
    def __init__(self) -> None:
        self.plugins: dict[str, PluginInfo] = {}
        self.failures: list[PluginFailure] = []
        self._layers: dict[str, type[Layer]] = {}
        self._activations: dict[str, type[Activation]] = {}
        self._layer_alias: dict[str, str] = {}
        self._act_alias: dict[str, str] = {}
        self.fusing_rules: list[RegisteredRule] = []

    # ---- registration ----------------------------------------------------------------------------
    def register_plugin(self, meta: PluginMeta, register: object, source: str) -> PluginInfo:
        """Run a plugin's registration; on failure nothing of it stays registered."""
        for f in ("name", "version", "author", "description"):
            if not isinstance(getattr(meta, f), str) or (f == "name" and not getattr(meta, f).strip()):
                raise PluginError(f"plugin {source}: PLUGIN.{f} {cut(getattr(meta, f))} is not "
                                  + ("a name" if f == "name" else "text"))
        if meta.name in self.plugins:
            raise LayerLabError(f"a plugin named {meta.name!r} is already loaded (from {self.plugins[meta.name].source})")
        info = PluginInfo(meta, source)
        try:
            register(Registrar(self, info))  # type: ignore[operator]
        except BaseException:  # SystemExit and KeyboardInterrupt of a plugin too: nothing of it stays
            self._drop(info)
            raise
        self.plugins[meta.name] = info
        return info

    def _add_layer(self, cls: type[Layer], info: PluginInfo) -> None:
        desc = _checked_desc(cls, info, Layer, LayerDesc, "layer", layer_desc_problems)
        if desc.name in self._layers:
            raise LayerLabError(f"layer type {desc.name!r} is already registered by {self._layers[desc.name].desc.collection}")
        self._layers[desc.name] = _claim(cls, desc, info, self._layer_alias, info.layers)

    def _add_activation(self, cls: type[Activation], info: PluginInfo) -> None:
        desc = _checked_desc(cls, info, Activation, ActivationDesc, "activation", activation_desc_problems)
        if desc.name in self._activations or desc.name == "none":
            raise LayerLabError(f"activation {desc.name!r} is already registered")
        self._activations[desc.name] = _claim(cls, desc, info, self._act_alias, info.activations)

    def _drop(self, info: PluginInfo) -> None:
        for n in info.layers:
            self._layers.pop(n, None)
        for n in info.activations:
            self._activations.pop(n, None)
        self._layer_alias = {k: v for k, v in self._layer_alias.items() if v in self._layers}
        self._act_alias = {k: v for k, v in self._act_alias.items() if v in self._activations}
        self.fusing_rules = [r for r in self.fusing_rules if r.collection != info.meta.name]

    def unload(self, collection: str) -> None:
        """Remove a collection and everything it registered."""
        info = self.plugins.pop(collection, None)
        if info is None:
            raise LayerLabError(f"no plugin named {collection!r} is loaded")
        self._drop(info)

    # ---- queries ---------------------------------------------------------------------------------
    @property
    def layer_names(self) -> list[str]:
        return sorted(self._layers)

    @property
    def activation_names(self) -> list[str]:
        return sorted(self._activations)

    def find_layer(self, name: str) -> LayerDesc | None:
        cls = self.layer_class(name)
        return cls.desc if cls else None

    def layer_class(self, name: str) -> type[Layer] | None:
        """The class of layer type ``name`` (a legacy name works too), also of the engine's own layers (format
        conversions, which no collection lists), or None."""
        return self._layers.get(self._layer_alias.get(name, name)) or ENGINE_LAYERS.get(name)

    def layer_descs(self) -> list[LayerDesc]:
        return [self._layers[n].desc for n in self.layer_names]

    def find_activation(self, name: str) -> ActivationDesc | None:
        cls = self.activation_class(name)
        return cls.desc if cls else None

    def activation_class(self, name: str) -> type[Activation] | None:
        return self._activations.get(self._act_alias.get(name, name))

    def activation_descs(self) -> list[ActivationDesc]:
        return [self._activations[n].desc for n in self.activation_names]

    def suggest_layer(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self._layers) + list(self._layer_alias), n=3)
        if close:
            return "did you mean " + " or ".join(close) + "?"
        names = self.layer_names
        if len(names) <= 20:
            return "known layer types: " + ", ".join(names)
        return f"known layer types: {', '.join(names[:20])}... ({len(names)} in all: see `layerlab layers`)"


def _checked_desc(cls: type, info: PluginInfo, base: type, desc_type: type, kind: str,
                  problems_of: Callable[[Any], list[str]]) -> Any:
    """The ``desc`` of a class a plugin registers as a ``kind`` (layer or activation), once the class is a ``base``
    with a ``desc_type`` descriptor free of problems; else one PluginError naming the plugin, the class and the
    first problem."""
    plugin = f"plugin {info.meta.name}"
    if not isinstance(cls, type) or not issubclass(cls, base):
        article = "an" if base.__name__[0] in "AEIOU" else "a"
        raise PluginError(f"{plugin}: {cut(cls)} is not {article} {base.__name__} class")
    desc = getattr(cls, "desc", None)
    if not isinstance(desc, desc_type):
        raise PluginError(f"{plugin}: {kind} class {cls.__name__} has no {desc_type.__name__} 'desc'")
    problems = problems_of(desc)
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise PluginError(f"{plugin}: {kind} {cut(desc.name)} ({cls.__name__}): {problems[0]}{more}")
    return desc


def _claim(cls: type, desc: Any, info: PluginInfo, aliases: dict[str, str], names: list[str]) -> type:
    """``cls`` with its descriptor marked as the plugin's, its legacy names added to ``aliases`` and its name to the
    plugin's ``names``."""
    cls.desc = replace(desc, collection=info.meta.name)  # type: ignore[attr-defined]
    for legacy in desc.legacy_names:
        aliases[legacy] = desc.name
    names.append(desc.name)
    return cls


def registering(package: str, layers: Sequence[str] = (), activations: Sequence[str] = (),
                rules: Sequence[str] = ()) -> Callable[[Registrar], None]:
    """A collection's ``register(registrar)``: the ``LAYER`` of each module named in ``layers`` and the ``ACTIVATION``
    of each named in ``activations`` (modules of ``package``, imported when the collection registers, in order), then
    the fusing ``rules``."""

    def register(registrar: Registrar) -> None:
        for name in layers:
            registrar.layer(importlib.import_module(f"{package}.{name}").LAYER)
        for name in activations:
            registrar.activation(importlib.import_module(f"{package}.{name}").ACTIVATION)
        for rule in rules:
            registrar.fusing_rule(rule)

    return register
