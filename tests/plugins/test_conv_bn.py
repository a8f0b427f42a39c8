"""conv_bn against onnxruntime's Conv -> BatchNormalization and against the unfused two-layer chain."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ParameterError, WeightsError
from engine.tensor import FORMATS
from tests.harness import (
    assert_close,
    each_backend_and_format,
    ort_run,
    round_like,
    run_layer,
    run_unfused,
)
from tests.plugins.conv_reference import BN_ORDER, CONV_KEYS, conv_node

CASES = [
    ((1, 3, 9, 8), dict(num_output_channels=4)),
    ((2, 4, 8, 7), dict(num_output_channels=6, kernel_size="3x1", stride=2, padding="1x0", epsilon=1e-3)),
    ((2, 6, 7, 7), dict(num_output_channels=3, groups=3, dilation=2, padding=2, bias="false")),
    ((1, 2, 5, 6), dict(num_output_channels=5, kernel_size=1, padding=0, epsilon=0.1)),
]
ACTS = {"none": lambda y: y, "relu": lambda y: np.maximum(y, 0), "sigmoid": lambda y: 1 / (1 + np.exp(-y))}


def onnx_conv_bn(x, w, params):
    bn = helper.make_node("BatchNormalization", ["c", *BN_ORDER], ["y"], epsilon=float(params.get("epsilon", 1e-5)))
    return ort_run([conv_node(params, w, "c"), bn], {"x": x}, w)[0]


def unfused_chain(x, weights, params, fmt, backend, activation):
    """in0 -> convolution -> batch_normalization[activation] -> out, with the fused layer's weights
    (fusing rules off: the standard collection's own rule would fuse this chain into conv_bn)."""
    conv = {k: v for k, v in params.items() if k in CONV_KEYS}
    bn = {"epsilon": params["epsilon"]} if "epsilon" in params else {}
    chain = [("convolution", "conv", conv, "none"), ("batch_normalization", "bn", bn, activation)]
    return run_unfused(x, chain, {"conv": {k: v for k, v in weights.items() if not k.startswith("bn_")},
                                  "bn": {k[3:]: v for k, v in weights.items() if k.startswith("bn_")}}, fmt, backend)


@each_backend_and_format
@pytest.mark.parametrize("activation", list(ACTS))
@pytest.mark.parametrize("shape,params", CASES)
def test_conv_bn_matches_onnxruntime_and_the_unfused_chain(backend, fmt, activation, shape, params):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, w, net = run_layer("conv_bn", params, [x], fmt, backend, activation=activation)
    assert tuple(net.dims("L")) == out.shape
    assert set(w) == {"weights", "bn_mean", "bn_variance", "bn_scale", "bn_bias"} | ({"bias"} if "bias" not in params else set())
    ref = ACTS[activation](onnx_conv_bn(round_like(x, fmt), {k: round_like(v, fmt) for k, v in w.items()}, params))
    assert_close(out, ref, fmt, f"conv_bn {params} vs onnxruntime")
    assert_close(out, unfused_chain(x, w, params, fmt, backend, activation), fmt, f"conv_bn {params} vs chain")


def test_bn_weights_from_inputs_are_used_on_every_run():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    fmt = FORMATS[0]
    variance = np.full((1, 3, 1, 1), 4.0, np.float32)
    ins = [x, None, None, None, variance]  # input 4 is bn_variance
    out, w, net = run_layer("conv_bn", dict(num_output_channels=3), ins, fmt)
    assert "bn_variance" not in w
    ref_w = dict(w, bn_variance=variance.reshape(3))
    assert_close(out, onnx_conv_bn(x, ref_w, {}), fmt)
    net.set_input("in4", np.full((1, 3, 1, 1), 0.25, np.float32))  # a new variance: not a stale fold
    net.run()
    assert_close(net.output("out"), onnx_conv_bn(x, dict(w, bn_variance=np.full(3, 0.25, np.float32)), {}), fmt)
    x2 = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)  # loaded weights: the cached fold stays right
    _, w2, net2 = run_layer("conv_bn", dict(num_output_channels=3), [x], fmt)
    net2.set_input("in0", x2)
    net2.run()
    assert_close(net2.output("out"), onnx_conv_bn(x2, w2, {}), fmt)


def test_random_bn_weights_and_errors():
    x = np.zeros((1, 2, 4, 4), np.float32)
    _, w, _ = run_layer("conv_bn", dict(num_output_channels=32), [x], FORMATS[0])
    assert 0.5 <= w["bn_variance"].min() and w["bn_variance"].max() <= 1.5
    assert 0.75 <= w["bn_scale"].min() and w["bn_scale"].max() <= 1.25
    bad = {"bn_variance": -np.ones(4, np.float32)}
    with pytest.raises(WeightsError, match=r"conv_bn L: weight 'bn_variance': variance\[0\] = -1"):
        run_layer("conv_bn", dict(num_output_channels=4), [x], FORMATS[0], weights=bad)
    with pytest.raises(ParameterError, match=r"conv_bn L: parameter groups: num_output_channels 3 is not a multiple of groups 2"):
        run_layer("conv_bn", dict(num_output_channels=3, groups=2), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"conv_bn L: parameter epsilon: '-0.5' is not a number >= 0"):
        run_layer("conv_bn", dict(epsilon=-0.5), [x], FORMATS[0])
