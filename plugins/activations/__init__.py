"""The activation collection: activation functions any layer can carry. Each module defines one
activation and exposes it as ``ACTIVATION``."""
from __future__ import annotations

from engine.registry import PluginMeta, registering

PLUGIN = PluginMeta(
    name="activations",
    version="0.1.0",
    author="LayerLab",
    description="Activation functions: relu, leaky_relu, sigmoid, tanh, softmax, gelu, silu, mish, selu and more.",
)

ACTIVATION_MODULES = (
    "relu",
    "leaky_relu",
    "sigmoid",
    "tanh",
    # more (one module name per line)
    "leaky_sigmoid",
    "leaky_tanh",
    "softmax",
    "sine",
    "gelu",
    "gelu_tanh",
    "silu",
    "elu",
    "clamp",
    "hardswish",
    "softplus",
    "mish",
    "selu",
    "celu",
    "hard_sigmoid",
)

register = registering(__name__, activations=ACTIVATION_MODULES)
