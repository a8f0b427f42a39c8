"""The analysis layer collection: layers made for analysis mode, each with runtime options that the
Parameter Editor changes live (mix, linear_blend, noise, affine_transform, snapshot, selector)."""
from __future__ import annotations

from engine.registry import PluginMeta, registering

PLUGIN = PluginMeta(
    name="analysis",
    version="0.1.0",
    author="LayerLab",
    description="Analysis layers with live runtime options: mix, linear blend, noise, affine transform, "
                "snapshot and selector.",
)

LAYER_MODULES = (
    "mix",
    "linear_blend",
    "noise",
    "affine_transform",
    "snapshot",
    "selector",
)

register = registering(__name__, layers=LAYER_MODULES)
