"""The activation collection: activation functions any layer can carry."""
from __future__ import annotations

from engine.registry import PluginMeta, Registrar
from plugins.activations.leaky_relu import LeakyRelu
from plugins.activations.relu import Relu
from plugins.activations.sigmoid import Sigmoid
from plugins.activations.tanh import Tanh

PLUGIN = PluginMeta(
    name="activations",
    version="0.1.0",
    author="LayerLab",
    description="Activation functions: relu, leaky_relu, sigmoid, tanh and more.",
)

ACTIVATIONS = [Relu, LeakyRelu, Sigmoid, Tanh]


def register(registrar: Registrar) -> None:
    for cls in ACTIVATIONS:
        registrar.activation(cls)
