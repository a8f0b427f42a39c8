"""A third-party LayerLab collection, installed with pip (``pip install examples/layerlab-sample-plugin``) and found
through the ``layerlab.plugins`` entry point: ``sample_gain`` (y = gain * x + offset, ``gain`` editable live in
analysis mode) and ``sample_gain_pair`` (two gains in one layer), which its fusing rule makes out of two
``sample_gain`` layers in a row."""
from __future__ import annotations

from engine.registry import PluginMeta, Registrar
from layerlab_sample.gain import SampleGain
from layerlab_sample.gain_pair import SampleGainPair

PLUGIN = PluginMeta(
    name="sample",
    version="0.1.0",
    author="LayerLab examples",
    description="A sample third-party collection: a gain layer with a runtime option, and a fusing rule.",
)

#: two gains in a row become one layer (its ``gain`` from the inner layer, ``outer_gain`` from the outer one)
RULES = ["*|*|sample_gain_pair = sample_gain[offset == 0] {sample_gain[offset == 0 && act == 'none']}"]


def register(registrar: Registrar) -> None:
    registrar.layer(SampleGain)
    registrar.layer(SampleGainPair)
    for rule in RULES:
        registrar.fusing_rule(rule)
