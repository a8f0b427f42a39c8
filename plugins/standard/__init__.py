"""The standard layer collection. Each layer module defines one layer and exposes it as ``LAYER``."""
from __future__ import annotations

from engine.registry import PluginMeta, registering
from plugins.standard.fusing_rules import RULES

PLUGIN = PluginMeta(
    name="standard",
    version="0.1.0",
    author="LayerLab",
    description="Standard layers: input/output, convolutions, normalization, pooling, resampling and more.",
)

#: the layer modules, one per line (each defines one layer as ``LAYER``); ``_common_*`` modules hold what several
#: layers share and ``fusing_rules`` the collection's fusing rules
LAYER_MODULES = (
    "input",
    "output",
    "convolution",
    "element_wise",
    "affine",
    "batch_normalization",
    "color_conversion",
    "concatenation",
    "deconvolution",
    "conv_bn",
    "conv_pool",
    "conv_depthwise",
    "conv_sum",
    "conv_bn_sum",
    "depth_to_space",
    "space_to_depth",
    "dropout",
    "fully_connected",
    "pooling",
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
    "prelu",
    "group_normalization",
    "transpose",
    "reshape",
    "layer_normalization",
    "softmax",
    "reduce",
    "matmul",
    "unary",
    "constant",
    "compare",
    "where",
    "gather",
    "attention",
)

register = registering(__name__, layers=LAYER_MODULES, rules=RULES)
