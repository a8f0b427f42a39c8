"""group_normalization against onnxruntime's GroupNormalization (opset 21, per-channel scale and bias) on
every backend and format; secondary inputs, defaults, shape and parameter errors."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ParameterError, ShapeError
from engine.tensor import FORMATS
from tests.harness import FORMAT_IDS, assert_close, each_backend_and_format, ort_run, round_like, run_layer, scale_bias
from tests.plugins.norm_reference import assert_normalization_matches


def onnx_group_norm(x, scale, bias, groups, epsilon):
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups, epsilon=epsilon)
    return ort_run([node], {"x": x}, {"s": scale, "b": bias}, opset=21)[0]


@each_backend_and_format
@pytest.mark.parametrize("shape,groups,epsilon", [((1, 6, 7, 5), 3, 1e-5), ((2, 8, 6, 4), 2, 1e-3),
                                                  ((2, 4, 3, 5), 1, 1e-5), ((1, 4, 1, 9), 4, 0.1)])
def test_group_normalization_matches_onnxruntime(backend, fmt, shape, groups, epsilon):
    assert_normalization_matches("group_normalization", dict(num_groups=groups, epsilon=epsilon), shape, fmt, backend,
                                 lambda x, scale, bias: onnx_group_norm(x, scale, bias, groups, epsilon))


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_secondary_inputs_replace_the_weights(fmt):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 5, 4)).astype(np.float32)
    w = scale_bias(4, 4)
    out, used, _ = run_layer("group_normalization", {"num_groups": 2},
                             [x, w["scale"].reshape(1, 4, 1, 1), w["bias"].reshape(1, 4, 1, 1)], fmt)
    assert used == {}
    ref = onnx_group_norm(round_like(x, fmt), round_like(w["scale"], fmt), round_like(w["bias"], fmt), 2, 1e-5)
    assert_close(out, ref, fmt)


def test_default_weights_are_identity_and_activation_is_fused():
    x = np.random.default_rng(6).standard_normal((1, 4, 3, 6)).astype(np.float32)
    out, used, net = run_layer("group_normalization", {"num_groups": 2}, [x], FORMATS[0], activation="relu")
    assert net.layer("L").fuses_activation
    np.testing.assert_array_equal(used["scale"], np.ones(4, np.float32))
    np.testing.assert_array_equal(used["bias"], np.zeros(4, np.float32))
    g = x.astype(np.float64).reshape(1, 2, -1)
    ref = ((g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + 1e-5)).reshape(x.shape)
    assert_close(out, np.maximum(ref, 0), FORMATS[0])


def test_channels_not_a_multiple_of_groups_is_a_shape_error():
    with pytest.raises(ShapeError, match=r"group_normalization L: input has 6 channels, not a multiple of num_groups 4"):
        run_layer("group_normalization", {"num_groups": 4}, [np.zeros((1, 6, 3, 3), np.float32)], FORMATS[0])


def test_bad_parameters_are_named():
    x = np.zeros((1, 2, 3, 3), np.float32)
    with pytest.raises(ParameterError, match=r"group_normalization L: parameter epsilon: 0: must be greater than 0"):
        run_layer("group_normalization", dict(epsilon=0), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"parameter num_groups: '0' is not an integer in \[1, 65536\]"):
        run_layer("group_normalization", dict(num_groups=0), [x], FORMATS[0])
