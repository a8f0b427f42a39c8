"""The analysis panels' pure functions: channel grid and colormap values for known tensors, statistics,
downsampling, the network overview, and precision drift finding a planted diverging layer."""
from __future__ import annotations

import math

import numpy as np
import pytest

from engine.analysis import (
    GAP_RGB,
    NAN_RGB,
    Variant,
    as_nchw,
    channel_grid,
    channel_image,
    channel_stats,
    compare_precision,
    display_stride,
    display_tensor,
    downsample,
    grid_layout,
    layer_drift,
    link_roles,
    network_overview,
    redgreen,
)
from engine.errors import LayerLabError
from engine.model import Model
from engine.network import Network
from engine.tensor import TensorFormat
from tests.harness import drift_model


def test_redgreen_values():
    v = np.array([-2.0, -1.0, -0.5, 0.0, 0.25, 1.0, 3.0, np.nan, np.inf, -np.inf], np.float32)
    rgb = redgreen(v)
    assert rgb.tolist() == [[255, 0, 0], [255, 0, 0], [128, 0, 0], [0, 0, 0], [0, 64, 0], [0, 255, 0],
                            [0, 255, 0], list(NAN_RGB), [0, 255, 0], [255, 0, 0]]
    # shift then scale: (v + 1) * 0.5
    assert redgreen(np.array([-1.0, 0.0, 1.0, -3.0]), shift=1.0, scale=0.5).tolist() == [
        [0, 0, 0], [0, 128, 0], [0, 255, 0], [255, 0, 0]]


def test_channel_grid_of_a_known_tensor():
    # N=2, C=3, H=2, W=2: slice (n, c) holds the value (n*3 + c - 2) / 4 everywhere, one pixel marked
    t = np.zeros((2, 3, 2, 2), np.float32)
    for n in range(2):
        for c in range(3):
            t[n, c] = (n * 3 + c - 2) / 4
    t[1, 2, 1, 0] = -1.0
    rgb, lay = channel_grid(t)
    assert (lay.rows, lay.cols, lay.factor) == (2, 3, 1)  # N rows of C columns
    assert rgb.shape == (2 * 3 - 1, 3 * 3 - 1, 3)
    for n in range(2):
        for c in range(3):
            x0, y0 = lay.cell_origin(n, c)
            assert (x0, y0) == (c * 3, n * 3)
            v = (n * 3 + c - 2) / 4
            expect = [round(max(-v, 0) * 255), round(max(v, 0) * 255), 0]
            assert rgb[y0, x0].tolist() == expect, (n, c)
    assert rgb[3 + 1, 6 + 0].tolist() == [255, 0, 0]  # the marked pixel of slice (1, 2)
    assert rgb[2, 0].tolist() == list(GAP_RGB) and rgb[0, 2].tolist() == list(GAP_RGB)
    # hover: grid pixel -> tensor index
    assert lay.locate(6, 4) == (1, 2, 1, 0)
    assert lay.locate(2, 0) is None and lay.locate(0, 2) is None and lay.locate(99, 0) is None


def test_channel_grid_square_packing_blank_cells_and_downsampling():
    t = np.arange(1 * 5 * 8 * 8, dtype=np.float32).reshape(1, 5, 8, 8)
    rgb, lay = channel_grid(t, scale=0.0)
    assert (lay.rows, lay.cols) == (2, 3)
    assert rgb.shape == (2 * 9 - 1, 3 * 9 - 1, 3)
    assert lay.cell_origin(0, 4) == (9, 9) and lay.locate(9 + 7, 9 + 7) == (0, 4, 7, 7)
    assert lay.locate(18, 9) is None  # the sixth cell is blank
    assert rgb[9 + 3, 18 + 3].tolist() == list(GAP_RGB)
    assert rgb[9 + 3, 9 + 3].tolist() == [0, 0, 0]  # scale 0 maps every value to black
    big = np.random.default_rng(0).standard_normal((1, 64, 270, 480)).astype(np.float32)
    rgb, lay = channel_grid(big, max_pixels=1_000_000)
    assert rgb.shape[0] * rgb.shape[1] <= 1_000_000 and lay.factor > 1
    px, py = lay.cell_origin(0, 37)
    assert lay.locate(px, py) == (0, 37, 0, 0)
    assert lay.locate(px + 3, py + 2) == (0, 37, 2 * lay.factor, 3 * lay.factor)
    np.testing.assert_array_equal(rgb[py + 2, px + 3], redgreen(big[0, 37, 2 * lay.factor, 3 * lay.factor]))
    full = channel_image(big, 0, 37, region=(0, 0, 10, 20))
    assert full.shape == (10, 20, 3)
    np.testing.assert_array_equal(full, redgreen(big[0, 37, :10, :20]))


def test_weights_shapes_display_as_slices():
    assert as_nchw(np.zeros((8, 3, 3, 3))).shape == (8, 3, 3, 3)
    assert as_nchw(np.zeros(16)).shape == (1, 16, 1, 1)
    assert as_nchw(np.zeros((10, 20))).shape == (1, 1, 10, 20)
    assert as_nchw(np.zeros((2, 3, 4, 5, 6))).shape == (6, 4, 5, 6)
    lay = grid_layout(8, 3, 3, 3)
    assert (lay.rows, lay.cols) == (8, 3)


def test_channel_stats_with_nan_and_inf():
    t = np.zeros((1, 3, 2, 2), np.float32)
    t[0, 0] = [[1, -2], [3, 4]]
    t[0, 1] = [[np.nan, 1], [np.inf, -1]]
    t[0, 2] = np.nan
    s = channel_stats(t)
    assert s.row(0, 0) == {"min": -2.0, "max": 4.0, "mean": 1.5, "nan": 0, "inf": 0}
    assert s.row(0, 1) == {"min": -1.0, "max": 1.0, "mean": 0.0, "nan": 1, "inf": 1}
    r2 = s.row(0, 2)
    assert math.isnan(r2["min"]) and math.isnan(r2["mean"]) and r2["nan"] == 4
    assert s.total() == {"min": -2.0, "max": 4.0, "nan": 5, "inf": 1}


def test_downsampling_for_display():
    img = np.zeros((1080, 1920, 3), np.uint8)
    small, f = downsample(img, 800)
    assert f == 3 and small.shape == (360, 640, 3)
    assert downsample(img, 4000)[1] == 1
    t = np.zeros((1, 64, 1080, 1920), np.float32)
    assert display_tensor(t, 512).shape == (1, 64, 270, 480)
    assert display_stride(t.shape, 4096, max_values=8_000_000) == 5  # 64 x 216 x 384 = 5.3M (stride 4: 8.3M)
    assert display_stride((1, 3, 10, 10), 4096, max_values=1) == 10


def branch_model() -> Model:
    m = Model("overview")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "conv", params={"num_output_channels": "4"}, inputs=["inp"])
    m.add_layer("batch_normalization", "bn", inputs=["conv"])
    m.add_layer("convolution", "head", params={"num_output_channels": "3"}, inputs=["bn"])
    m.add_layer("mix", "cmp", inputs=["inp", "head"])
    m.add_layer("output", "out", inputs=["cmp"])
    return m


def test_network_overview_shows_order_shapes_and_fused_layers(registry):
    net = Network(branch_model(), registry, fusing="on")
    items = network_overview(net)
    assert [i.name for i in items] == ["inp", "bn", "head", "cmp", "out"]
    by = {i.name: i for i in items}
    assert by["bn"].type == "conv_bn"
    assert by["bn"].fused_from == ["conv"] and by["bn"].status.startswith("fused: conv + bn")
    assert by["bn"].rule
    assert by["head"].shape == "1x3x8x8" and by["bn"].shape == "1x4x8x8"
    assert by["inp"].is_input and by["out"].is_output and "bypass" in by["out"].status
    assert by["head"].has_weights and not by["cmp"].has_weights
    roles = link_roles(items, "head")
    assert roles[("bn", "head", 0)] == "input" and roles[("head", "cmp", 1)] == "output"
    assert roles[("inp", "cmp", 0)] == ""


def test_network_overview_shows_a_sum_fused_with_the_convolution_at_its_second_input(registry):
    """x + conv(x): the sum's inputs commute, so the convolution at input 1 fuses, and the overview says so."""
    m = Model("residual")
    m.add_layer("input", "inp", params={"dimensions": "1x4x8x8"})
    m.add_layer("convolution", "conv", params={"num_output_channels": "4"}, inputs=["inp"])
    m.add_layer("element_wise", "add", params={"operation": "sum"}, inputs=["inp", "conv"])
    m.add_layer("output", "out", inputs=["add"])
    by = {i.name: i for i in network_overview(Network(m, registry, fusing="on"))}
    assert "conv" not in by and by["add"].type == "conv_sum"
    assert by["add"].fused_from == ["conv"] and by["add"].status.startswith("fused: conv + add")
    assert by["add"].rule == "*|*|conv_sum" and by["add"].inputs == ["inp", "inp"]


def test_variant_parsing():
    assert Variant.parse("fp16") == Variant("numpy", TensorFormat.parse("fp16"))
    assert Variant.parse("cupy:fp16 nhwc") == Variant("cupy", TensorFormat.parse("fp16|nhwc"))
    assert str(Variant.parse("numpy")) == "numpy:fp32|nchw"
    with pytest.raises(LayerLabError, match="unknown tensor format"):
        Variant.parse("numpy:fp8")


def test_precision_drift_finds_the_planted_layer(registry):
    x = np.random.default_rng(3).uniform(1.0, 2.0, (1, 2, 6, 6)).astype(np.float32) * 8
    res = compare_precision(drift_model(restore=True), registry, {"inp": x}, "fp32", "fp16", threshold=1e-2)
    d = res.by_name()
    assert [l.name for l in res.layers] == ["inp", "c1", "c2", "amp", "back", "out"]
    assert d["c1"].rel_error < 5e-3 and d["c2"].rel_error < 5e-3  # ordinary fp16 rounding
    assert res.first_over is not None and res.first_over.name == "amp"
    assert math.isinf(d["amp"].rel_error) and d["amp"].nonfinite > 0
    text = res.table()
    assert "first layer over the threshold: amp (linear_blend" in text
    # the same precision twice: no drift anywhere
    same = compare_precision(drift_model(restore=True), registry, {"inp": x}, "fp32", "numpy:fp32 nhwc")
    assert same.first_over is None and max(l.rel_error for l in same.layers) < 1e-6
    assert "no layer exceeds the threshold" in same.table()


def test_layer_drift_maths():
    ref = np.array([3.0, 4.0])
    d = layer_drift("x", "t", ref, np.array([3.0, 4.5]))
    assert d.rel_error == pytest.approx(0.1) and d.max_abs == pytest.approx(0.5)
    assert layer_drift("z", "t", np.zeros(3), np.zeros(3)).rel_error == 0.0
    assert math.isinf(layer_drift("z", "t", np.zeros(3), np.ones(3)).rel_error)
    with pytest.raises(LayerLabError, match="disagree on its shape"):
        layer_drift("s", "t", np.zeros(3), np.zeros(4))
