"""The standard layer collection. Each module defines one layer and exposes it as ``LAYER``."""
from __future__ import annotations

import importlib

from engine.fusing import BUILTIN_RULES
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
    "affine",
    "batch_normalization",
    "color_conversion",
    "concatenation",
    "deconvolution",
    "conv_bn",
    "conv_pool",
    "depth_to_space",
    "space_to_depth",
    "dropout",
    "fully_connected",
    "pooling",
    # end group A
    # group B (one module name per line)
    "gram_matrix",
    "instance_normalization",
    "lrn",
    "mono_four_stack",
    "mono_to_rgb",
    "padding",
    "resize",
    "slice",
    "upsample",
    "upscale_concat",
    "upscale_concat_two",
    "upscale_sum",
    "zero_embed",
    "placeholder",
    # end group B
    # ONNX import (one module name per line)
    "prelu",
    "group_normalization",
    # end ONNX import
)


def register(registrar: Registrar) -> None:
    for name in LAYER_MODULES:
        registrar.layer(importlib.import_module(f"{__name__}.{name}").LAYER)
    for rule in BUILTIN_RULES:
        registrar.fusing_rule(rule)
