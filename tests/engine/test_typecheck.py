from __future__ import annotations

from engine.model import Model
from engine.typecheck import check, errors, output_shapes


def msgs(model, registry):
    return {(d.severity, d.layer, d.message) for d in check(model, registry)}


def test_clean_model_has_no_diagnostics(registry):
    m = Model()
    m.add_layer("input", "i", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "c", inputs=["i"])
    m.add_layer("output", "o", inputs=["c"])
    assert check(m, registry) == []
    assert str(output_shapes(m, registry)["o"]) == "1x16x8x8"


def test_each_kind_of_problem_is_reported(registry):
    m = Model()
    m.add_layer("input", "i", params={"dimensions": "1x3x4x4"})
    m.add_layer("element_wise", "e")
    m.add_layer("frobnicate", "f")
    m.add_layer("convolution", "bad", params={"num_output_channels": "x", "colour": "red"}, inputs=["i"])
    m.add_layer("convolution", "big", params={"kernel_size": "7", "padding": "0"}, inputs=["i"])
    m.add_layer("element_wise", "mix", inputs=["i", "big"])
    m.add_layer("convolution", "w", params={"num_output_channels": "4"}, inputs=["i", "i"])
    found = msgs(m, registry)
    assert ("error", "e", "These mandatory inputs are not connected: 0") in found
    assert any(d[1] == "f" and "unknown layer type 'frobnicate'" in d[2] for d in found)
    assert ("error", "bad", "parameter num_output_channels: 'x' is not an integer in [1, 65536]") in found
    assert ("warning", "bad", "unknown parameter 'colour' is ignored") in found
    assert ("error", "big", "kernel 7x7 (dilated) is larger than the padded input 4x4") in found
    assert any(d[1] == "w" and "weights input i has 48 values" in d[2] and "(4, 3, 3, 3)" in d[2] for d in found)
    assert all(d[1] != "mix" for d in found)  # its input's shape is unknown: not reported twice


def test_cycles_and_names(registry):
    m = Model()
    m.add_layer("input", "i")
    m.add_layer("element_wise", "a", inputs=["i"])
    m.add_layer("element_wise", "b", inputs=["a"])
    m.connect("b", "a", 1, allow_cycle=True)
    found = check(m, registry)
    assert {d.layer for d in errors(found)} == {"a", "b"}
    assert all("is part of a cycle: " in d.message for d in found)


def test_shape_mismatch_between_connected_layers(registry):
    m = Model()
    m.add_layer("input", "i", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "c", params={"stride": "2"}, inputs=["i"])
    m.add_layer("element_wise", "s", inputs=["i", "c"])
    assert ("error", "s", "inputs of dimensions 1x3x8x8 and 1x16x4x4 differ in C (3 vs 16)") in msgs(m, registry)


def test_convolution_weights_input_with_other_channel_count(registry):
    m = Model()
    m.add_layer("input", "x", params={"dimensions": "1x32x8x8"})
    m.add_layer("input", "w", params={"dimensions": "16x64x3x3"})
    m.add_layer("convolution", "conv3", params={"num_output_channels": "16"}, inputs=["x", "w"])
    assert ("error", "conv3", "input has 32 channels, weights expect 64") in msgs(m, registry)
