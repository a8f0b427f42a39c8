"""Plugin discovery and loading.

A plugin is a Python module or package that defines ``PLUGIN = PluginMeta(...)`` and a function
``register(registrar)``. Built-in collections and third-party packages are both found through the
``layerlab.plugins`` entry-point group; extra folders (``--plugins DIR`` or ``LAYERLAB_PLUGIN_PATH``)
are scanned for ``*.py`` modules and packages. A plugin that fails is reported and the rest load."""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

from engine.limits import cut
from engine.log import get_logger
from engine.registry import PluginFailure, PluginMeta, Registry

log = get_logger(__name__)

ENTRY_POINT_GROUP = "layerlab.plugins"
#: built-in collections; used directly when LayerLab runs from a source tree that is not installed
BUILTIN_MODULES = ("plugins.standard", "plugins.activations", "plugins.analysis")


def _register_module(registry: Registry, module: ModuleType, source: str) -> None:
    meta = getattr(module, "PLUGIN", None)
    register = getattr(module, "register", None)
    if not isinstance(meta, PluginMeta):
        raise TypeError("it defines no PLUGIN = PluginMeta(name, version, author, description)")
    if not callable(register):
        raise TypeError("it defines no register(registrar) function")
    registry.register_plugin(meta, register, source)


def _reason(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" ({Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {cut(str(exc), 300)[1:-1]}{where}"


def load_module_plugin(registry: Registry, module_name: str) -> bool:
    """Import and register a plugin by module name; failures are recorded, never raised."""
    try:
        _register_module(registry, importlib.import_module(module_name), module_name)
        return True
    except BaseException as exc:  # noqa: BLE001 - a broken plugin (sys.exit included) must not stop the others
        registry.failures.append(PluginFailure(module_name, _reason(exc)))
        return False


def plugin_entries(folder: str | os.PathLike[str]) -> list[Path]:
    """The plugins of a plugin folder, in load order: its ``*.py`` modules and packages (folders with
    ``__init__.py``); names starting with ``_`` or ``.`` are skipped."""
    out = []
    for entry in sorted(Path(folder).iterdir()):
        if entry.name.startswith(("_", ".")):
            continue
        if (entry.is_dir() and (entry / "__init__.py").is_file()) or (entry.is_file() and entry.suffix == ".py"):
            out.append(entry)
    return out


def load_plugin_entry(registry: Registry, entry: str | os.PathLike[str]) -> None:
    """Import and register one plugin of a folder (a ``*.py`` module or a package); failures are recorded."""
    entry = Path(entry)
    file, search = (entry / "__init__.py", [str(entry)]) if entry.is_dir() else (entry, None)
    mod_name = f"layerlab_plugin_{abs(hash(str(entry.resolve())))}_{entry.stem}"
    try:
        spec = importlib.util.spec_from_file_location(mod_name, file, submodule_search_locations=search)
        if spec is None or spec.loader is None:
            raise ImportError("not an importable module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(mod_name, None)
            raise
        _register_module(registry, module, str(entry))
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt of a plugin too
        registry.failures.append(PluginFailure(str(entry), _reason(exc)))


def load_plugin_dir(registry: Registry, folder: str | os.PathLike[str],
                    accept: Callable[[Path], str | None] | None = None) -> None:
    """Load every ``*.py`` module and package (folder with ``__init__.py``) found in ``folder``. ``accept``, when
    given, is asked about each plugin before it is imported: a reason (text) refuses it (recorded as its failure),
    None lets it load (the designer checks new plugins in a separate process this way)."""
    root = Path(folder)
    if not root.is_dir():
        registry.failures.append(PluginFailure(str(root), "plugin folder does not exist"))
        return
    for entry in plugin_entries(root):
        reason = accept(entry) if accept is not None else None
        if reason:
            registry.failures.append(PluginFailure(str(entry), reason))
        else:
            load_plugin_entry(registry, entry)


def load_plugins(extra_dirs: Iterable[str | os.PathLike[str]] = (), entry_point_plugins: bool = True) -> Registry:
    """A registry with the built-in collections, installed plugins and plugins of extra folders."""
    registry = Registry()
    seen: set[str] = set()
    if entry_point_plugins:
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if ep.value in seen:
                continue
            seen.add(ep.value)
            try:
                _register_module(registry, ep.load(), ep.value)
            except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt of a plugin too
                registry.failures.append(PluginFailure(f"{ep.name} ({ep.value})", _reason(exc)))
    for mod in BUILTIN_MODULES:
        if mod not in seen:  # source tree without an installed distribution
            load_module_plugin(registry, mod)
    env = os.environ.get("LAYERLAB_PLUGIN_PATH", "")
    for folder in [*(p for p in env.split(os.pathsep) if p), *extra_dirs]:
        load_plugin_dir(registry, folder)
    log_loaded(registry)
    return registry


def log_loaded(registry: Registry) -> None:
    """Log what ``registry`` holds (info: each collection) and its failures (warnings)."""
    for info in registry.plugins.values():
        log.info("loaded collection %s %s from %s: %d layer(s), %d activation(s), %d fusing rule(s)", info.meta.name,
                 info.meta.version, info.source, len(info.layers), len(info.activations), len(info.fusing_rules))
    for failure in registry.failures:
        log.warning("%s", failure)


_default: Registry | None = None


def default_registry() -> Registry:
    """The registry of built-in and installed plugins, loaded once per process."""
    global _default
    if _default is None:
        _default = load_plugins()
    return _default
