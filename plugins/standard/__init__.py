"""The standard layer collection. Each module defines one layer and exposes it as ``LAYER``."""
from __future__ import annotations

import importlib

from engine.registry import PluginMeta, Registrar

PLUGIN = PluginMeta(
    name="standard",
    version="0.1.0",
    author="LayerLab",
    description="Standard layers: input/output, convolutions, normalization, pooling, resampling and more.",
)

LAYER_MODULES = (
    "input",
    "output",
    "convolution",
    "element_wise",
    # group A (one module name per line)
    # end group A
    # group B (one module name per line)
    "resize",
    # end group B
)


def register(registrar: Registrar) -> None:
    for name in LAYER_MODULES:
        registrar.layer(importlib.import_module(f"{__name__}.{name}").LAYER)
