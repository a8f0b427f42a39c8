"""mono_to_rgb against onnxruntime (Concat of the channel three times) on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, ort_run, round_like, run_layer


@each_backend_and_format
@pytest.mark.parametrize("shape", [(1, 1, 4, 6), (2, 1, 5, 7), (3, 1, 1, 2)])
def test_mono_to_rgb_matches_onnxruntime(backend, fmt, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, _, net = run_layer("mono_to_rgb", {}, [x], fmt, backend, activation="leaky_relu", coefs={"alpha": "0.1"})
    nodes = [helper.make_node("Concat", ["x", "x", "x"], ["c"], axis=1), helper.make_node("LeakyRelu", ["c"], ["y"], alpha=0.1)]
    ref = ort_run(nodes, {"x": round_like(x, fmt)}, {})[0]
    assert_close(out, ref, fmt, f"mono_to_rgb {shape}")
    assert tuple(net.dims("L")) == ref.shape


def test_documented_example():
    out, _, _ = run_layer("mono_to_rgb", {}, [np.array([[[[0.2, 0.8]]]], np.float32)], FORMATS[0])
    np.testing.assert_array_equal(out, np.array([[[[0.2, 0.8]]] * 3], np.float32))


def test_needs_one_channel():
    with pytest.raises(ShapeError, match=r"mono_to_rgb L: the input 1x3x4x4 has 3 channels; mono_to_rgb needs exactly 1"):
        run_layer("mono_to_rgb", {}, [np.zeros((1, 3, 4, 4), np.float32)], FORMATS[0])
