"""fully_connected against onnxruntime's Gemm (transB) on the flattened input, every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ParameterError, WeightsError
from engine.model import Model
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import FORMATS
from tests.harness import FORMAT_IDS, assert_close, each_backend_and_format, ort_run, round_like, run_layer


def onnx_fc(x, w, b):
    """ONNX Flatten (axis 1) then Gemm with transB; reshaped to N x O x 1 x 1."""
    nodes = [helper.make_node("Flatten", ["x"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "w"] + (["b"] if b is not None else []), ["y"], transB=1)]
    y = ort_run(nodes, {"x": x}, {"w": w} | ({"b": b} if b is not None else {}))[0]
    return y.reshape(x.shape[0], -1, 1, 1)


@each_backend_and_format
@pytest.mark.parametrize("shape,params", [
    ((1, 3, 4, 4), dict(num_outputs=10)),
    ((2, 5, 3, 7), dict(num_outputs=7, bias="false")),
    ((3, 16, 1, 1), dict(num_outputs=1)),
    ((2, 2, 5, 6), dict()),
])
def test_fully_connected_matches_onnxruntime(backend, fmt, shape, params):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, w, net = run_layer("fully_connected", params, [x], fmt, backend)
    assert tuple(net.dims("L")) == out.shape == (shape[0], int(params.get("num_outputs", 16)), 1, 1)
    assert w["weights"].shape == (out.shape[1], int(np.prod(shape[1:])))
    ref = onnx_fc(round_like(x, fmt), round_like(w["weights"], fmt), round_like(w["bias"], fmt) if "bias" in w else None)
    assert_close(out, ref, fmt)


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_weights_from_inputs_and_activation(fmt):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    w = rng.standard_normal((1, 1, 5, 12)).astype(np.float32)  # any dimensions with 5*12 values
    b = rng.standard_normal((1, 5, 1, 1)).astype(np.float32)
    out, used, _ = run_layer("fully_connected", dict(num_outputs=5), [x, w, b], fmt, activation="sigmoid")
    assert used == {}
    ref = onnx_fc(round_like(x, fmt), round_like(w, fmt).reshape(5, 12), round_like(b, fmt).reshape(5))
    assert_close(out, 1 / (1 + np.exp(-ref.astype(np.float64))), fmt)


def test_wrong_weight_file_shape_and_bad_parameter():
    x = np.zeros((1, 2, 3, 3), np.float32)
    with pytest.raises(ParameterError, match=r"fully_connected L: parameter num_outputs: '0' is not an integer in \[1"):
        run_layer("fully_connected", dict(num_outputs=0), [x], FORMATS[0])
    m = Model("t")
    m.add_layer("input", "x", params={"dimensions": "1x2x3x3"})
    m.add_layer("fully_connected", "fc", params={"num_outputs": 4}, inputs=["x"])
    net = Network(m, default_registry())
    net.infer({"x": x})
    with pytest.raises(WeightsError, match=r"layer fc: the new input sizes need weight 'weights' of shape \(4, 32\)"):
        net.infer({"x": np.zeros((1, 2, 4, 4), np.float32)})


def test_flops_count_one_multiply_add_per_weight_and_item():
    _, _, net = run_layer("fully_connected", dict(num_outputs=5), [np.zeros((3, 2, 4, 4), np.float32)], FORMATS[0],
                          activation="relu")
    assert net.layer("L").flops([net.dims("in0")], net.dims("L")) == 3 * 5 * (2 * 32 + 2)  # + bias + relu
