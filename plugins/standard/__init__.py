"""The standard layer collection."""
from __future__ import annotations

from engine.registry import PluginMeta, Registrar
from plugins.standard.convolution import Convolution
from plugins.standard.element_wise import ElementWise
from plugins.standard.input import InputLayer
from plugins.standard.output import OutputLayer

PLUGIN = PluginMeta(
    name="standard",
    version="0.1.0",
    author="LayerLab",
    description="Standard layers: input, output, convolution, element-wise and more.",
)

LAYERS = [InputLayer, OutputLayer, Convolution, ElementWise]


def register(registrar: Registrar) -> None:
    for cls in LAYERS:
        registrar.layer(cls)
