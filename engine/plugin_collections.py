"""Collections (plugins) loaded and unloaded while the program runs: what Tools > Manage Collections shows.

A ``CollectionManager`` sits over a registry. It lists every collection it knows (loaded, or unloaded by it), with
its metadata, where it was loaded from and what it provides; it unloads one (``Registry.unload``; what it registered
is kept, so loading it again registers the same classes and rules without importing anything again), loads one back,
and adds a plugin folder (``engine.plugins.load_plugin_dir``: the folder's collections are loaded, the failures are in
``registry.failures``); ``accept``, when set, is asked about each plugin of a folder before it is imported (the
designer tries new plugins in a separate process first, ``engine.plugin_probe``). Which collections are unloaded and
which folders were added is the caller's to remember (``choices`` / ``apply``: the designer keeps them in its
settings). Qt-free."""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import LayerLabError
from engine.layer import Activation, Layer
from engine.log import get_logger
from engine.plugins import BUILTIN_MODULES, load_plugin_dir
from engine.registry import PluginFailure, PluginInfo, PluginMeta, Registrar, Registry

log = get_logger(__name__)


@dataclass(frozen=True)
class Collection:
    """One collection as the dialog lists it."""

    meta: PluginMeta
    source: str  # module name or path, as the loader recorded it
    location: str  # the file it was loaded from (a module's file, or the plugin's path)
    kind: str  # "built-in", "installed" or "folder"
    loaded: bool
    layers: tuple[str, ...] = ()
    activations: tuple[str, ...] = ()
    fusing_rules: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass
class _Kept:
    """What an unloaded collection registered, to register it again."""

    info: PluginInfo
    layers: list[type[Layer]] = field(default_factory=list)
    activations: list[type[Activation]] = field(default_factory=list)
    rules: list[tuple[str, bool]] = field(default_factory=list)

    def register(self, registrar: Registrar) -> None:
        for cls in self.layers:
            registrar.layer(cls)
        for act in self.activations:
            registrar.activation(act)
        for text, enabled in self.rules:
            registrar.fusing_rule(text, enabled)


def _location(source: str) -> str:
    if os.sep in source or "/" in source or source.endswith(".py"):
        return str(Path(source).resolve())
    module = sys.modules.get(source)
    return str(getattr(module, "__file__", None) or source)


def _kind(source: str) -> str:
    if source in BUILTIN_MODULES:
        return "built-in"
    if os.sep in source or "/" in source or source.endswith(".py"):
        return "folder"
    return "installed"


class CollectionManager:
    """Loads and unloads the collections of ``registry`` (see the module documentation)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._kept: dict[str, _Kept] = {}
        self.folders: list[str] = []
        #: asked about each plugin of a folder before it is imported: a reason refuses it, None lets it load
        self.accept: Callable[[Path], str | None] | None = None

    @property
    def failures(self) -> list[PluginFailure]:
        """Collections that failed to load (at start or from an added folder), with the reason."""
        return list(self.registry.failures)

    def collections(self) -> list[Collection]:
        """Every known collection, loaded or not, by name."""
        out = []
        infos = [(i, True) for i in self.registry.plugins.values()] + [(k.info, False) for k in self._kept.values()]
        for info, loaded in infos:
            out.append(Collection(info.meta, info.source, _location(info.source), _kind(info.source), loaded,
                                  tuple(info.layers), tuple(info.activations), tuple(info.fusing_rules)))
        return sorted(out, key=lambda c: c.name.lower())

    def collection(self, name: str) -> Collection:
        for c in self.collections():
            if c.name == name:
                return c
        raise LayerLabError(f"no collection named {name!r} (known: {', '.join(c.name for c in self.collections())})")

    def is_loaded(self, name: str) -> bool:
        return name in self.registry.plugins

    def unload(self, name: str) -> Collection:
        """Unload collection ``name`` (its layers, activations and fusing rules leave the registry)."""
        info = self.registry.plugins.get(name)
        if info is None:
            raise LayerLabError(f"collection {name!r} is not loaded")
        kept = _Kept(info)
        kept.layers = [c for n in info.layers if (c := self.registry.layer_class(n)) is not None]
        kept.activations = [a for n in info.activations if (a := self.registry.activation_class(n)) is not None]
        kept.rules = [(r.text, r.enabled) for r in self.registry.fusing_rules if r.collection == name]
        self.registry.unload(name)
        self._kept[name] = kept
        log.info("unloaded collection %s", name)
        return self.collection(name)

    def load(self, name: str) -> Collection:
        """Load collection ``name`` again (one this manager unloaded)."""
        if name in self.registry.plugins:
            return self.collection(name)
        kept = self._kept.get(name)
        if kept is None:
            raise LayerLabError(f"collection {name!r} is not known here (add its plugin folder)")
        self.registry.register_plugin(kept.info.meta, kept.register, kept.info.source)
        del self._kept[name]
        log.info("loaded collection %s again", name)
        return self.collection(name)

    def set_loaded(self, name: str, loaded: bool) -> Collection:
        return self.load(name) if loaded else self.unload(name)

    def add_folder(self, folder: str | os.PathLike[str]) -> list[str]:
        """Load the collections of a plugin folder; returns the names of those it added (failures are recorded in
        ``failures``). A folder added before is not loaded twice."""
        path = str(Path(folder).resolve())
        if path in self.folders:
            return []
        before = set(self.registry.plugins) | set(self._kept)
        failed = len(self.registry.failures)
        load_plugin_dir(self.registry, path, self.accept)
        self.folders.append(path)
        added = sorted(set(self.registry.plugins) - before)
        for name in added:
            log.info("loaded collection %s from %s", name, path)
        for failure in self.registry.failures[failed:]:
            log.warning("%s", failure)
        return added

    def choices(self) -> tuple[list[str], list[str]]:
        """What to remember: the unloaded collections' names and the added folders."""
        return sorted(self._kept), list(self.folders)

    def apply(self, unloaded: Iterable[str] = (), folders: Iterable[str] = ()) -> list[str]:
        """Restore remembered choices: add ``folders`` (missing ones are failures), then unload the collections named
        in ``unloaded`` that are loaded. Returns notes on what could not be restored."""
        notes = []
        for folder in folders:
            self.add_folder(folder)
        for name in unloaded:
            if name in self.registry.plugins:
                self.unload(name)
            elif name not in self._kept:
                notes.append(f"collection {name} was unloaded last time, and is not there now")
        return notes


__all__ = ["Collection", "CollectionManager"]
