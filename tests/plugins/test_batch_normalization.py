"""batch_normalization against onnxruntime's BatchNormalization on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ParameterError, WeightsError
from engine.tensor import FORMATS
from tests.harness import FORMAT_IDS, assert_close, each_backend_and_format, ort_run, round_like, run_layer

WEIGHTS = ("scale", "bias", "mean", "variance")  # ONNX input order after x


def onnx_bn(x, w, epsilon):
    node = helper.make_node("BatchNormalization", ["x", *WEIGHTS], ["y"], epsilon=float(epsilon))
    return ort_run([node], {"x": x}, {k: w[k] for k in WEIGHTS})[0]


@each_backend_and_format
@pytest.mark.parametrize("shape,epsilon", [((1, 3, 8, 8), 1e-5), ((2, 5, 7, 9), 1e-3), ((3, 1, 4, 5), 0.0)])
def test_batch_normalization_matches_onnxruntime(backend, fmt, shape, epsilon):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, w, _ = run_layer("batch_normalization", dict(epsilon=epsilon), [x], fmt, backend)
    ref = onnx_bn(round_like(x, fmt), {k: round_like(v, fmt) for k, v in w.items()}, epsilon)
    assert_close(out, ref, fmt, f"batch_normalization eps={epsilon}")


def test_random_weights_are_plausible_statistics():
    x = np.zeros((1, 64, 2, 2), np.float32)
    _, w, _ = run_layer("batch_normalization", {}, [x], FORMATS[0])
    assert all(v.shape == (64,) for v in w.values())
    assert -0.1 <= w["mean"].min() and w["mean"].max() <= 0.1
    assert 0.5 <= w["variance"].min() and w["variance"].max() <= 1.5
    assert 0.75 <= w["scale"].min() and w["scale"].max() <= 1.25
    assert -0.1 <= w["bias"].min() and w["bias"].max() <= 0.1
    assert w["variance"].std() > 0.1  # random, not constant


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_weights_from_secondary_inputs_take_precedence(fmt):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    given = {"mean": rng.uniform(-1, 1, 3), "variance": rng.uniform(0.2, 2, 3),
             "scale": rng.uniform(-2, 2, 3), "bias": rng.uniform(-1, 1, 3)}
    given = {k: v.astype(np.float32) for k, v in given.items()}
    # mean and scale come from inputs (shaped 1xCx1x1), variance and bias are loaded
    ins = [x, given["mean"].reshape(1, 3, 1, 1), None, given["scale"].reshape(1, 3, 1, 1), None]
    out, used, _ = run_layer("batch_normalization", {}, ins, fmt,
                             weights={"mean": np.zeros(3), "scale": np.ones(3), "variance": given["variance"],
                                      "bias": given["bias"]})
    assert set(used) == {"variance", "bias"}  # nothing loaded for the weights the inputs provide
    ref = onnx_bn(round_like(x, fmt), {k: round_like(v, fmt) for k, v in given.items()}, 1e-5)
    assert_close(out, ref, fmt)


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_batch_normalization_with_activation(fmt):
    x = np.random.default_rng(4).standard_normal((1, 4, 6, 6)).astype(np.float32)
    out, w, _ = run_layer("batch_normalization", {}, [x], fmt, activation="relu")
    ref = onnx_bn(round_like(x, fmt), {k: round_like(v, fmt) for k, v in w.items()}, 1e-5)
    assert_close(out, np.maximum(ref, 0), fmt)


def test_non_positive_variance_is_a_weights_error():
    x = np.zeros((1, 3, 4, 4), np.float32)
    bad = {"mean": np.zeros(3), "variance": np.array([1.0, -0.5, 1.0]), "scale": np.ones(3), "bias": np.zeros(3)}
    with pytest.raises(WeightsError, match=r"batch_normalization L: weight 'variance': variance\[1\] = -0.5"):
        run_layer("batch_normalization", {}, [x], FORMATS[0], weights=bad)
    zero = dict(bad, variance=np.array([1.0, 1.0, 0.0]))
    with pytest.raises(WeightsError, match=r"variance\[2\] = 0 with epsilon 0"):
        run_layer("batch_normalization", dict(epsilon=0), [x], FORMATS[0], weights=zero)
    out, _, _ = run_layer("batch_normalization", dict(epsilon=1e-3), [x], FORMATS[0], weights=zero)
    assert np.all(np.isfinite(out))


def test_negative_epsilon_is_rejected():
    with pytest.raises(ParameterError, match=r"batch_normalization L: parameter epsilon: '-1' is not a number >= 0"):
        run_layer("batch_normalization", dict(epsilon=-1), [np.zeros((1, 1, 2, 2), np.float32)], FORMATS[0])


@each_backend_and_format
@pytest.mark.parametrize("activation,coefs,act", [
    ("clamp", {"min": "-0.25", "max": "0.5"}, lambda y: np.clip(y, -0.25, 0.5)),
    ("hardswish", None, lambda y: y * np.clip(y / 6 + 0.5, 0, 1)),
])
def test_batch_normalization_folds_statistics_once(backend, fmt, activation, coefs, act):
    """Scale and shift are folded once per weights (the layer's kernel cache) and the fused activation applied in
    the same pass; a second run gives the same result."""
    x = np.random.default_rng(6).standard_normal((2, 4, 5, 3)).astype(np.float32) * 2
    out, w, net = run_layer("batch_normalization", {}, [x], fmt, backend, activation=activation, coefs=coefs)
    ref = onnx_bn(round_like(x, fmt), {k: round_like(v, fmt) for k, v in w.items()}, 1e-5)
    assert_close(out, act(ref.astype(np.float64)), fmt)
    layer = net.nodes["L"].layer
    served = backend == "cupy" or net.backend.cpu_kernels() is not None  # the CPU computes fp16 formats in fp32
    assert ("scale_shift" in layer.__dict__.get("_kernel_cache", {})) == served
    net.set_input("in0", x)
    net.run()
    assert_close(net.output("out"), out, fmt)
