"""Constant folds of imported layers (engine.importers.onnx.folding): an affine layer after a convolution without
activation becomes part of the convolution's weights and bias; what would change a value is left alone."""
from __future__ import annotations

import numpy as np

from engine.importers.onnx.folding import fold_affine_into_convolutions
from engine.model import LayerSpec

RNG = np.random.default_rng(5)


def _graph(conv_act: str = "none", bias: bool = True, mode: str = "per_channel", extra_reader: bool = False):
    layers = {"x": LayerSpec("x", "input"),
              "c": LayerSpec("c", "convolution", params={"bias": "true" if bias else "false"}, activation=conv_act,
                             inputs=["x"]),
              "a": LayerSpec("a", "affine", params={"mode": mode, "scale": "2.5", "shift": "-1"}, activation="relu",
                             inputs=["c"]),
              "out": LayerSpec("out", "output", inputs=["a"])}
    if extra_reader:
        layers["other"] = LayerSpec("other", "output", inputs=["c"])
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    weights = {"c": {"weights": w} | ({"bias": RNG.standard_normal(4).astype(np.float32)} if bias else {}),
               "a": {"scale": RNG.uniform(0.5, 2, 4).astype(np.float32), "shift": RNG.standard_normal(4).astype(np.float32)}
               if mode == "per_channel" else {}}
    return layers, weights


def test_a_per_channel_affine_folds_into_the_convolution_before_it():
    layers, weights = _graph()
    w, b = weights["c"]["weights"].copy(), weights["c"]["bias"].copy()
    s, t = weights["a"]["scale"], weights["a"]["shift"]
    assert fold_affine_into_convolutions(layers, weights) == [("a", "c")]
    assert "a" not in layers and "a" not in weights and layers["out"].inputs == ["c"]
    np.testing.assert_allclose(weights["c"]["weights"], w * s[:, None, None, None], rtol=1e-6)
    np.testing.assert_allclose(weights["c"]["bias"], s * b + t, rtol=1e-6)
    assert layers["c"].activation == "relu"  # the affine's activation now follows the folded convolution


def test_a_per_tensor_affine_and_a_convolution_without_bias():
    layers, weights = _graph(bias=False, mode="per_tensor")
    w = weights["c"]["weights"].copy()
    assert fold_affine_into_convolutions(layers, weights) == [("a", "c")]
    np.testing.assert_allclose(weights["c"]["weights"], w * 2.5, rtol=1e-6)
    np.testing.assert_allclose(weights["c"]["bias"], np.full(4, -1.0), rtol=1e-6)
    assert layers["c"].params["bias"] == "true"


def test_what_would_change_a_value_is_not_folded():
    for kwargs in ({"conv_act": "relu"}, {"extra_reader": True}):  # an activation between; another reader of c
        layers, weights = _graph(**kwargs)
        assert fold_affine_into_convolutions(layers, weights) == []
        assert "a" in layers
