"""Automatic layouts: where the layers compute channels-last, token layers (matrix products, layer normalization over
the trailing axes, attention) and the layers between them hold their rank-4 tensors in logical order; image layers
keep channels-last; a network without token layers is unchanged; settings win; the results do not move."""
from __future__ import annotations

import numpy as np
import pytest

from engine.analysis import format_status
from engine.format_conversion import layer_formats
from engine.model import Model
from engine.network import Network
from engine.plugins import default_registry
from engine.run import format_notes
from engine.tensor import FP32_NCHW, Layout, Precision, TensorFormat
from tests.harness import BACKENDS, DictWeights, backend_param

FP32_NHWC = TensorFormat(Precision.FP32, Layout.NHWC)
FP16_NHWC = TensorFormat(Precision.FP16, Layout.NHWC)


def token_block(pin: dict[str, str] | None = None) -> Model:
    """A convolution stem, its output permuted to N x H x W x C tokens, a transformer-style block on the tokens
    (layer norm, matmul, residual sum with a constant read only by the block), then back to an image for pooling."""
    m = Model("tokens")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "stem", params={"num_output_channels": "16", "kernel_size": "1x1x2x2",
                                               "stride": "1x1x2x2", "padding": "1x1x0x0"}, inputs=["inp"])
    m.add_layer("transpose", "to_tokens", params={"perm": "0,2,3,1"}, inputs=["stem"])
    m.add_layer("layer_normalization", "norm", params={"axis": "-1"}, inputs=["to_tokens"])
    m.add_layer("matmul", "mlp", params={"num_outputs": "16", "bias": "true"}, inputs=["norm"], activation="relu")
    m.add_layer("constant", "shift", params={"dimensions": "1x4x4x16"})
    m.add_layer("element_wise", "shifted", params={"operation": "sum"}, inputs=["mlp", "shift"])
    m.add_layer("element_wise", "residual", params={"operation": "sum"}, inputs=["to_tokens", "shifted"])
    m.add_layer("transpose", "to_image", params={"perm": "0,3,1,2"}, inputs=["residual"])
    m.add_layer("pooling", "pool", params={"pool_type": "max", "kernel_size": "2x2", "stride": "2x2"},
                inputs=["to_image"])
    m.add_layer("output", "out", inputs=["pool"])
    for name, text in (pin or {}).items():
        m.set_layer_format(name, text)
    return m


def cnn() -> Model:
    m = Model("cnn")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "c1", params={"num_output_channels": "8"}, inputs=["inp"])
    m.add_layer("convolution", "c2", params={"num_output_channels": "8"}, inputs=["c1"])
    m.add_layer("element_wise", "sum", params={"operation": "sum"}, inputs=["c2", "c1"], activation="relu")
    m.add_layer("concatenation", "join", inputs=["sum", "c1"])
    m.add_layer("output", "out", inputs=["join"])
    return m


def layouts(model: Model, fmt: TensorFormat = FP32_NHWC) -> dict[str, Layout]:
    return {n: f.layout for n, f in layer_formats(model, default_registry(), fmt).items()}


def test_token_layers_and_the_layers_between_them_hold_logical_order():
    got = layouts(token_block())
    logical = {n for n, lay in got.items() if lay is Layout.NCHW}
    # the stem's permute reads only the convolution; the residual sum reads a token layer, and logical order
    # spreads to the permute back; the constant follows the sum reading it
    assert logical == {"norm", "mlp", "shift", "shifted", "residual", "to_image"}
    assert got["stem"] is got["pool"] is got["to_tokens"] is Layout.NHWC


def test_a_network_without_token_layers_keeps_channels_last():
    assert set(layouts(cnn()).values()) == {Layout.NHWC}
    assert set(layouts(cnn(), FP16_NHWC).values()) == {Layout.NHWC}


def test_nothing_changes_where_the_layers_compute_in_logical_order():
    assert set(layouts(token_block(), FP32_NCHW).values()) == {Layout.NCHW}


def test_a_setting_wins_over_the_automatic_layout():
    got = layouts(token_block({"mlp": "nhwc", "norm": "fp16"}))
    assert got["mlp"] is Layout.NHWC  # its own setting
    assert got["norm"] is Layout.NHWC  # a partial setting keeps the network's layout
    assert got["shifted"] is Layout.NHWC  # follows the product it reads


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", ["fp32 nhwc", "fp16 nhwc"])
def test_results_match_the_logical_order_network(backend, fmt):
    reg = default_registry()
    be = backend_param(backend)
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    weights = {"shift": {"value": np.random.default_rng(4).standard_normal((1, 4, 4, 16)).astype(np.float32)}}
    fmt = TensorFormat.parse(fmt)
    net = Network(token_block(), reg, be, fmt, weights=DictWeights(weights))
    ref = Network(token_block(), reg, backend_param("numpy"), FP32_NCHW, weights=DictWeights(weights))
    for n in (net, ref):
        n.set_input("inp", x)
        n.run()
    # two conversions only: into the tokens and back to the image
    assert [(src, a.layout, b.layout) for _, src, a, b in net.conversions] == [
        ("to_tokens", Layout.NHWC, Layout.NCHW), ("to_image", Layout.NCHW, Layout.NHWC)]
    got, want = net.output("out", FP32_NCHW), ref.output("out", FP32_NCHW)
    tol = 1e-5 if fmt.precision is Precision.FP32 else 2e-2
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * float(np.abs(want).max()))


def test_the_notes_count_the_automatic_layouts_in_one_line():
    reg = default_registry()
    net = Network(token_block({"pool": "fp16"}), reg, backend_param("numpy"), FP32_NHWC)
    notes = format_notes(net)
    assert sum("hold their tensors in logical order" in n for n in notes) == 1
    assert any(n.startswith("6 layer(s) hold their tensors in logical order") for n in notes)
    assert any(n.startswith("layer pool runs in fp16|nhwc") for n in notes)  # a setting is still named
    # the overview's badge says which is which
    assert format_status(net, "mlp") == ["logical order fp32|nchw"]
    assert format_status(net, "pool") == ["pinned fp16|nhwc"]


def test_the_layouts_do_not_depend_on_the_order_the_layers_are_listed_in():
    model = token_block()  # with a long chain of follow layers after the token layers, then listed backwards
    chain = Model("chain")
    for name, spec in model.layers.items():
        chain.layers[name] = spec
    prev = "residual"
    for i in range(300):
        chain.add_layer("element_wise", f"e{i}", params={"operation": "sum"}, inputs=[prev, prev])
        prev = f"e{i}"
    chain.layers["to_image"].inputs = [prev]
    backwards = Model("backwards")
    for name in reversed(list(chain.layers)):
        backwards.layers[name] = chain.layers[name]
    got, want = layouts(backwards), layouts(chain)
    assert got == want
    assert got["e0"] is got["e299"] is got["to_image"] is Layout.NCHW and got["stem"] is Layout.NHWC
