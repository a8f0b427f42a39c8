"""LayerLab's inference library. Qt-free: usable from scripts, the CLI, tests and the GPU machine.

The public names below are imported on first use (PEP 562), so ``import engine`` (and so every
``import engine.x``) stays light: the command line's ``--help`` and a module that needs only the model
document do not load the network, the backends or the plugins."""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> (module, attribute) it comes from
_EXPORTS: dict[str, tuple[str, str]] = {
    "Dims": ("engine.tensor", "Dims"),
    "LayerLabError": ("engine.errors", "LayerLabError"),
    "LayerSpec": ("engine.model", "LayerSpec"),
    "Model": ("engine.model", "Model"),
    "Network": ("engine.network", "Network"),
    "TensorFormat": ("engine.tensor", "TensorFormat"),
    "default_registry": ("engine.plugins", "default_registry"),
    "get_backend": ("engine.backends", "get_backend"),
    "load_model": ("engine.modelfile", "load"),
    "load_plugins": ("engine.plugins", "load_plugins"),
    "save_model": ("engine.modelfile", "save"),
}

__all__ = ["Dims", "LayerLabError", "LayerSpec", "Model", "Network", "TensorFormat", "default_registry",
           "get_backend", "load_model", "load_plugins", "save_model"]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use and keep the name in this module."""
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'engine' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
