"""instance_normalization against onnxruntime's InstanceNormalization on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ParameterError
from engine.tensor import FORMATS
from tests.harness import FORMAT_IDS, assert_close, each_backend_and_format, ort_run, round_like, run_layer, scale_bias
from tests.plugins.norm_reference import assert_normalization_matches


def onnx_instance_norm(x, scale, bias, epsilon):
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=epsilon)
    return ort_run([node], {"x": x}, {"s": scale, "b": bias})[0]


@each_backend_and_format
@pytest.mark.parametrize("shape,epsilon", [((1, 3, 7, 5), 1e-5), ((2, 4, 6, 8), 1e-3), ((3, 2, 1, 9), 0.1)])
def test_instance_normalization_matches_onnxruntime(backend, fmt, shape, epsilon):
    assert_normalization_matches("instance_normalization", dict(epsilon=epsilon), shape, fmt, backend,
                                 lambda x, scale, bias: onnx_instance_norm(x, scale, bias, epsilon))


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_secondary_inputs_replace_the_weights(fmt):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    w = scale_bias(3, 4)
    scale_in, bias_in = w["scale"].reshape(1, 3, 1, 1), w["bias"].reshape(1, 3, 1, 1)
    out, used, _ = run_layer("instance_normalization", {}, [x, scale_in, bias_in], fmt, weights=scale_bias(3, 5))
    assert used == {}  # nothing loaded for weights that inputs provide
    ref = onnx_instance_norm(round_like(x, fmt), round_like(w["scale"], fmt), round_like(w["bias"], fmt), 1e-5)
    assert_close(out, ref, fmt)
    out, used, _ = run_layer("instance_normalization", {}, [x, None, bias_in], fmt)  # scale loaded, bias from the input
    assert set(used) == {"scale"}
    ref = onnx_instance_norm(round_like(x, fmt), used["scale"], round_like(w["bias"], fmt), 1e-5)
    assert_close(out, ref, fmt)


def test_default_weights_are_identity_and_activation_is_fused():
    x = np.random.default_rng(6).standard_normal((1, 2, 4, 6)).astype(np.float32)
    out, used, _ = run_layer("instance_normalization", {}, [x], FORMATS[0], activation="relu")
    np.testing.assert_array_equal(used["scale"], np.ones(2, np.float32))
    np.testing.assert_array_equal(used["bias"], np.zeros(2, np.float32))
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(axis=(2, 3), keepdims=True)) / np.sqrt(x64.var(axis=(2, 3), keepdims=True) + 1e-5)
    assert_close(out, np.maximum(ref, 0), FORMATS[0])


def test_documented_example():
    x = np.array([[[[1.0, 3.0]]]], np.float32)
    out, _, _ = run_layer("instance_normalization", dict(epsilon=1e-8), [x], FORMATS[0],
                          weights={"scale": np.array([2.0], np.float32), "bias": np.array([1.0], np.float32)})
    np.testing.assert_allclose(out, [[[[-1.0, 3.0]]]], atol=1e-5)


def test_bad_epsilon_is_named():
    x = np.zeros((1, 2, 3, 3), np.float32)
    with pytest.raises(ParameterError, match=r"instance_normalization L: parameter epsilon: 0: must be greater than 0"):
        run_layer("instance_normalization", dict(epsilon=0), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"parameter epsilon: '-1' is not a number in \[0, 1\]"):
        run_layer("instance_normalization", dict(epsilon=-1), [x], FORMATS[0])
