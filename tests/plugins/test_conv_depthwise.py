"""conv_depthwise: the fusing rule that makes it (fp32 NHWC, an expansion's activation kept as conv_activation), the
fused layer against the unfused chain convolution[act] -> depthwise convolution[act] on every backend and format,
grouped second convolutions through the generic path, and a bad conv_activation."""
from __future__ import annotations

import numpy as np
import pytest

from engine.backends.selection import served_candidates
from engine.errors import ParameterError, ShapeError
from engine.model import Model
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import Layout, Precision, TensorFormat
from tests.harness import (
    DictWeights,
    assert_close,
    backend_param,
    chain_model,
    each_backend_and_format,
    run_layer,
    run_unfused,
)


def panels_available() -> bool:
    """Whether this CPU has the micro-kernel (FMA vectors) the one kernel needs."""
    try:
        from engine.backends.cpu.microkernel import panels_available as available
    except ImportError:  # no Numba
        return False
    return available()


FP32_NHWC = TensorFormat(Precision.FP32, Layout.NHWC)
#: (input dims, expansion's params and activation, depthwise params and activation)
CHAINS = [
    ((1, 8, 13, 11), dict(num_output_channels=24, kernel_size=1, padding=0), ("clamp", {"min": "0", "max": "6"}),
     dict(num_output_channels=24, groups=24), ("clamp", {"min": "0", "max": "6"})),
    ((2, 16, 12, 12), dict(num_output_channels=40, kernel_size=1, padding=0), ("hardswish", {}),
     dict(num_output_channels=40, groups=40, kernel_size=5, padding=2, stride=2), ("none", {})),
    ((1, 4, 9, 10), dict(num_output_channels=32, kernel_size=1, padding=0, bias="false"), ("silu", {}),
     dict(num_output_channels=32, groups=32, kernel_size=3, padding=0, stride=2), ("relu", {})),
    ((1, 6, 8, 8), dict(num_output_channels=12, kernel_size=1, padding=0), ("relu", {}),
     dict(num_output_channels=12, groups=12, dilation=2, padding=2), ("none", {})),  # dilated: two convolutions
]


def chain(expand: dict, act1: tuple, dw: dict, act2: tuple) -> list:
    return [("convolution", "expand", expand, act1[0]), ("convolution", "dw", dw, act2[0])]


def _model(dims, expand, act1, dw, act2) -> Model:
    m = chain_model("x".join(map(str, dims)), chain(expand, act1, dw, act2))
    m.layers["expand"].act_coefs = dict(act1[1])
    m.layers["dw"].act_coefs = dict(act2[1])
    return m


@each_backend_and_format
@pytest.mark.parametrize("dims,expand,act1,dw,act2", CHAINS)
def test_the_pair_fuses_in_fp32_nhwc_and_computes_the_chain(backend, fmt, dims, expand, act1, dw, act2):
    x = np.random.default_rng(sum(dims)).standard_normal(dims).astype(np.float32)
    weights = {"expand": {}, "dw": {}}
    rng = np.random.default_rng(7)
    for name, p in (("expand", expand), ("dw", dw)):
        cin = dims[1] if name == "expand" else expand["num_output_channels"]
        k = int(p.get("kernel_size", 3))
        weights[name]["weights"] = (rng.standard_normal((p["num_output_channels"], cin // p.get("groups", 1), k, k))
                                    / np.sqrt(k * k * cin)).astype(np.float32)
        weights[name]["bias"] = rng.standard_normal(p["num_output_channels"]).astype(np.float32)
    net = Network(_model(dims, expand, act1, dw, act2), default_registry(), backend_param(backend), fmt,
                  weights=DictWeights(weights))
    fused = fmt == FP32_NHWC
    assert net.layer("dw").desc.name == ("conv_depthwise" if fused else "convolution")
    if fused:
        layer = net.layer("dw")
        assert layer.p["conv_activation"].startswith(act1[0])
        assert layer.inner_activation.name == act1[0] and (layer.activation is None) == (act2[0] == "none")
        assert ("expand", "dw") in {(inner, outer) for _, inner, outer, _ in net.fused.applied}
    with served_candidates() as served:
        got = net.infer({"in0": x})["out"]
    one_kernel = fused and backend == "numpy" and "dilation" not in dw and panels_available()
    assert ("expand_depthwise" in served) == one_kernel
    ref = Network(_model(dims, expand, act1, dw, act2), default_registry(), backend_param(backend), fmt,
                  weights=DictWeights(weights), fusing="off").infer({"in0": x})["out"]
    assert_close(got, ref, fmt, "conv_depthwise against the chain")


@each_backend_and_format
@pytest.mark.parametrize("groups", [4, 32])
def test_the_layer_alone_computes_both_convolutions_and_both_activations(backend, fmt, groups):
    """Placed by hand (any format, any backend, a batch of two): the first convolution with conv_activation, then the
    second, grouped or depthwise, with the layer's own activation."""
    x = np.random.default_rng(2).standard_normal((2, 3, 10, 9)).astype(np.float32)
    params = dict(num_output_channels=32, kernel_size=1, padding=0, conv_activation="clamp(min=0, max=1)",
                  dw_num_output_channels=32, dw_groups=groups, dw_stride=2)
    out, w, _ = run_layer("conv_depthwise", params, [x], fmt, backend, activation="tanh")
    first = dict(num_output_channels=32, kernel_size=1, padding=0)
    mid = run_unfused(x, [("convolution", "a", first, "none")], {"a": {"weights": w["weights"], "bias": w["bias"]}},
                      fmt, backend)
    second = dict(num_output_channels=32, groups=groups, stride=2)
    ref = run_unfused(np.clip(mid, 0, 1), [("convolution", "b", second, "tanh")],
                      {"b": {"weights": w["dw_weights"], "bias": w["dw_bias"]}}, fmt, backend)
    assert_close(out, ref, fmt, f"conv_depthwise, second convolution of {groups} groups")


@pytest.mark.parametrize("text", ["clamp(min)", "3x", "no_such_activation", "clamp(min=zero)"])
def test_a_bad_conv_activation_is_one_clear_error(text):
    x = np.zeros((1, 3, 6, 6), np.float32)
    with pytest.raises(ParameterError, match="^layer L parameter conv_activation: "):
        run_layer("conv_depthwise", dict(conv_activation=text), [x], FP32_NHWC)


@pytest.mark.parametrize("params,message", [
    (dict(num_output_channels=8, dw_num_output_channels=6, dw_groups=3), "depthwise convolution: input has 8 channels"),
    (dict(dw_kernel_size=9, dw_padding=0), "depthwise convolution: kernel 9x9"),
    (dict(kernel_size=9, padding=0), "^conv_depthwise L: convolution: kernel 9x9")])
def test_a_shape_either_convolution_cannot_take_is_this_layers_error(params, message):
    with pytest.raises(ShapeError, match=message if message.startswith("^") else f"^conv_depthwise L: .*{message}"):
        run_layer("conv_depthwise", params, [np.zeros((1, 3, 6, 6), np.float32)], FP32_NHWC)
