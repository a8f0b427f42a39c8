"""dropout: the identity at inference, passed through without a copy (bypass)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ParameterError
from engine.model import Model
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import FORMATS, Dims
from tests.harness import (
    FORMAT_IDS,
    ChainLayer,
    assert_close,
    backend_param,
    chain_model,
    each_backend_and_format,
    ort_run,
    round_like,
    run_layer,
)


@each_backend_and_format
@pytest.mark.parametrize("shape,ratio", [((1, 3, 8, 8), 0.5), ((2, 4, 7, 5), 0.0), ((1, 1, 3, 3), 0.9)])
def test_dropout_is_identity_like_onnxruntime(backend, fmt, shape, ratio):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, _, _ = run_layer("dropout", dict(ratio=ratio), [x], fmt, backend)
    ref = ort_run([helper.make_node("Dropout", ["x", "r"], ["y"])], {"x": round_like(x, fmt)}, {"r": np.float32(ratio)})[0]
    np.testing.assert_array_equal(out, ref)


CONV_C: ChainLayer = ("convolution", "c", {"num_output_channels": 4}, "none")
CONV_E: ChainLayer = ("convolution", "e", {"num_output_channels": 2}, "none")


def _chain(dropout_act: str = "none") -> Model:
    """x -> c -> dropout d -> e -> out."""
    return chain_model("2x3x8x8", [CONV_C, ("dropout", "d", {}, dropout_act), CONV_E], "t", source="x")


def test_dropout_aliases_its_input_without_a_buffer():
    plain = chain_model("2x3x8x8", [CONV_C, CONV_E], "t", source="x")
    with_dropout = Network(_chain(), default_registry(), reuse_buffers=False)
    without = Network(plain, default_registry(), reuse_buffers=False)
    x = np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)
    a, b = with_dropout.infer({"x": x}), without.infer({"x": x})
    np.testing.assert_array_equal(a["out"], b["out"])
    # no buffer of its own: the same memory as the network without the dropout layer
    assert with_dropout.peak_memory_bytes == without.peak_memory_bytes
    np.testing.assert_array_equal(with_dropout.output("d"), with_dropout.output("c"))


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_dropout_with_activation_leaves_its_input_unchanged(fmt):
    net = Network(_chain("relu"), default_registry(), backend_param("numpy"), fmt)
    x = np.random.default_rng(3).standard_normal((2, 3, 8, 8)).astype(np.float32)
    net.infer({"x": x})
    conv = net.output("c")
    assert conv.min() < 0  # the activation did not touch the convolution's buffer
    assert_close(net.output("d"), np.maximum(conv, 0), fmt)
    assert net.dims("d") == Dims(2, 4, 8, 8)


def test_ratio_must_be_below_one():
    x = np.zeros((1, 1, 2, 2), np.float32)
    with pytest.raises(ParameterError, match=r"dropout L: parameter ratio: 1 must be smaller than 1"):
        run_layer("dropout", dict(ratio=1), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"dropout L: parameter ratio: '-0.1' is not a number in \[0, 1\]"):
        run_layer("dropout", dict(ratio=-0.1), [x], FORMATS[0])
    _, _, net = run_layer("dropout", dict(ratio=0.25), [x], FORMATS[0])
    assert net.layer("L").p["ratio"] == 0.25
