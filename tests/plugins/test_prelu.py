"""prelu against onnxruntime's PRelu on every backend and format: per-channel and shared slopes, slopes from
the secondary input, default weights, descriptor and shape errors."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import LayerLabError
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import FORMATS
from engine.weights import WeightsFolder
from tests.harness import assert_close, each_backend_and_format, layer_model, ort_run, round_like, run_layer


def onnx_prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    s = slope.reshape(1, -1, 1, 1) if slope.size > 1 else slope.reshape(1)
    return ort_run([helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": x}, {"s": s})[0]


@each_backend_and_format
@pytest.mark.parametrize("shape,shared", [((1, 3, 7, 5), False), ((2, 4, 6, 8), False), ((2, 3, 5, 4), True),
                                          ((1, 1, 4, 4), False)])
def test_prelu_matches_onnxruntime(backend, fmt, shape, shared):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    slope = rng.uniform(-0.5, 1.5, 1 if shared else shape[1]).astype(np.float32)
    out, used, _ = run_layer("prelu", {"shared_slope": shared}, [x], fmt, backend, weights={"slope": slope})
    assert used["slope"].shape == slope.shape
    assert_close(out, onnx_prelu(round_like(x, fmt), round_like(slope, fmt)), fmt, f"prelu {shape}")


@each_backend_and_format
def test_slope_input_replaces_the_weight_and_activation_is_fused(backend, fmt):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    slope = np.array([0.1, -0.3, 2.0], np.float32)
    out, used, net = run_layer("prelu", {}, [x, slope.reshape(1, 3, 1, 1)], fmt, backend, activation="tanh")
    assert used == {}
    assert net.layer("L").fuses_activation
    assert_close(out, np.tanh(onnx_prelu(round_like(x, fmt), slope)), fmt)


def test_default_slope_is_pytorchs_and_documented_example():
    x = np.array([[[[-2.0, 3.0]], [[-4.0, 0.0]]]], np.float32)
    out, used, _ = run_layer("prelu", {}, [x], FORMATS[0])
    np.testing.assert_array_equal(used["slope"], np.full(2, 0.25, np.float32))
    np.testing.assert_array_equal(out, [[[[-0.5, 3.0]], [[-1.0, 0.0]]]])
    out, _, _ = run_layer("prelu", {}, [x], FORMATS[0], weights={"slope": np.array([0.1, 0.1], np.float32)})
    np.testing.assert_allclose(out[0, 0], [[-0.2, 3.0]], rtol=1e-6)


def test_wrong_slope_count_names_layer_and_shape(tmp_path):
    """A one-element slope file for a per-channel layer (shared_slope false) is refused, naming both shapes."""
    np.save(tmp_path / "L_slope.npy", np.ones(1, np.float32))
    model = layer_model("prelu", {}, [(1, 3, 2, 2)])
    with pytest.raises(LayerLabError, match=r"layer L: weight 'slope' in L_slope.npy has shape \(1,\), expected \(3,\)"):
        Network(model, default_registry(), weights=WeightsFolder(tmp_path)).infer({"in0": np.zeros((1, 3, 2, 2), np.float32)})


def test_descriptor_documents_weights_and_params():
    desc = default_registry().find_layer("prelu")
    assert desc.weights == ("slope",)
    assert [p.name for p in desc.params] == ["shared_slope"]
    for word in ("<b>shared_slope</b>", "NAME_slope.npy", "PRelu"):
        assert word in desc.documentation
