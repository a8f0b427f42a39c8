"""The source of a small third-party plugin file that behaves (collection ``thirdparty``: a layer ``double``
and a fusing rule), for the tests that write plugin files into a folder and load or probe them."""
from __future__ import annotations

GOOD = '''
from engine.descriptors import InputDesc, LayerDesc
from engine.layer import Layer
from engine.registry import PluginMeta

PLUGIN = PluginMeta("thirdparty", "1.2", "Someone", "Doubles things")


class Double(Layer):
    desc = LayerDesc("double", "Double", "Multiplies by two.", inputs=(InputDesc("input"),))

    def output_dims(self, inputs):
        return inputs[0]

    def forward(self, inputs, out):
        self.store(out, self.nchw(inputs[0]) * 2)


def register(r):
    r.layer(Double)
    r.fusing_rule("fp32|nchw|double = double {double}")
'''
