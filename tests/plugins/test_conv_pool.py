"""conv_pool against onnxruntime's Conv -> (activation) -> MaxPool/AveragePool/Global*Pool and against
the unfused chain convolution[activation] -> pooling."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ParameterError, ShapeError
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import FORMATS
from tests.harness import (
    assert_close,
    chain_model,
    each_backend_and_format,
    round_like,
    run_layer,
    run_unfused,
)
from tests.plugins.conv_reference import CONV_KEYS, onnx_conv
from tests.plugins.test_pooling import onnx_pool

CONVS = [
    ((1, 3, 9, 8), dict(num_output_channels=4)),
    ((2, 4, 11, 10), dict(num_output_channels=6, groups=2, stride=2, kernel_size="3x5", padding="1x2", bias="false")),
]
POOLS = [
    dict(),  # max 2x2 stride 2
    dict(pool_type="average", pool_kernel_size=3, pool_stride=2, pool_padding=1),
    dict(pool_type="average", pool_kernel_size=3, pool_stride=1, pool_padding=1, pool_count_include_pad="true"),
    dict(pool_type="max", pool_kernel_size="3x2", pool_stride="1x2", pool_padding="1x0"),
    dict(pool_type="max", pool_global="true"),
    dict(pool_type="average", pool_global="true"),
]
ACTS = {"none": lambda y: y, "relu": lambda y: np.maximum(y, 0), "tanh": np.tanh}


def pool_params(params):
    """The conv_pool parameters renamed as the pooling layer's."""
    return {k[5:] if k != "pool_type" else k: v for k, v in params.items() if k.startswith("pool_")}


def unfused_chain(x, weights, params, fmt, backend, activation):
    """in0 -> convolution[activation] -> pooling -> out, with fusing rules off."""
    conv = {k: v for k, v in params.items() if k in CONV_KEYS}
    chain = [("convolution", "conv", conv, activation), ("pooling", "pool", pool_params(params), "none")]
    return run_unfused(x, chain, {"conv": weights}, fmt, backend)


@each_backend_and_format
@pytest.mark.parametrize("activation", list(ACTS))
@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize("shape,conv", CONVS)
def test_conv_pool_matches_onnxruntime_and_the_unfused_chain(backend, fmt, activation, pool, shape, conv):
    params = conv | pool
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, w, net = run_layer("conv_pool", params, [x], fmt, backend, activation=activation)
    assert tuple(net.dims("L")) == out.shape
    c = ACTS[activation](onnx_conv(round_like(x, fmt), {k: round_like(v, fmt) for k, v in w.items()}, params))
    assert_close(out, onnx_pool(c, pool_params(params)), fmt, f"conv_pool {params} vs onnxruntime")
    assert_close(out, unfused_chain(x, w, params, fmt, backend, activation), fmt, f"conv_pool {params} vs chain")


def test_weights_from_secondary_input():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    out, used, _ = run_layer("conv_pool", dict(num_output_channels=3, bias="false"), [x, w], FORMATS[0])
    assert used == {}
    assert_close(out, onnx_pool(onnx_conv(x, {"weights": w}, {}), {}), FORMATS[0])


@pytest.mark.parametrize("params, error, message", [
    (dict(pool_kernel_size=5), ShapeError,
     r"^conv_pool L: pooling kernel 5 is larger than the padded convolution output 4$"),
    (dict(pool_padding=2), ParameterError,
     r"conv_pool L: parameter pool_padding: 2x2 must be smaller than the kernel 2x2"),
    (dict(pool_type="min"), ParameterError, r"conv_pool L: parameter pool_type: 'min' is not one of max, average"),
    (dict(kernel_size=7), ShapeError, r"conv_pool L: kernel 7x7 \(dilated\) is larger than the padded input 6x6"),
])
def test_errors_are_named(params, error, message):
    with pytest.raises(error, match=message):
        run_layer("conv_pool", params, [np.zeros((1, 2, 4, 4), np.float32)], FORMATS[0])


def test_flops_are_those_of_the_unfused_chain():
    params = dict(num_output_channels=4, pool_type="average", pool_kernel_size=3, pool_stride=2, pool_padding=1)
    x = np.zeros((2, 3, 9, 8), np.float32)
    _, w, fused = run_layer("conv_pool", params, [x], FORMATS[0])
    m = chain_model("2x3x9x8", [("convolution", "conv", {"num_output_channels": 4}, "none"),
                                ("pooling", "pool", pool_params(params), "none")])
    chain = Network(m, default_registry(), fusing="off")
    chain.run()

    def flops(net, name):
        ins = [net.dims(s) if s else None for s in net.nodes[name].inputs]
        return net.layer(name).flops(ins, net.dims(name))
    assert flops(fused, "L") == flops(chain, "conv") + flops(chain, "pool")
    assert flops(chain, "pool") == 2 * 4 * 5 * 4 * (9 + 1)  # output values x (9 taps + the division)


@pytest.mark.parametrize("pool", [dict(pool_type="max", pool_kernel_size=3, pool_stride=2, pool_padding=1),
                                  dict(pool_type="average", pool_global="true")], ids=["max", "global-average"])
def test_fp32_nhwc_on_the_cpu_runs_the_convolution_and_pooling_kernels(monkeypatch, pool):
    """As the unfused chain does (an imported ResNet's stem, BatchNormalization folded by the exporter, becomes
    conv_pool): the backend's convolution and the NHWC pooling kernel, not the generic NumPy code."""
    pytest.importorskip("engine.backends.cpu.ops", reason="Numba is not installed")
    from engine.backends import cpu

    calls = []
    for module, name in ((cpu.pooling, "pool_nhwc_plan"), (cpu.im2col, "conv_nhwc_plan"), (cpu.panels, "conv_panels_plan"),
                         (cpu.winograd, "winograd_plan")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name,
                            lambda *a, _real=real, _name=name, **kw: calls.append(_name) or _real(*a, **kw))
    params = dict(num_output_channels=8, kernel_size=7, stride=2, padding=3) | pool
    x = np.random.default_rng(4).standard_normal((1, 3, 32, 32)).astype(np.float32)
    fmt = next(f for f in FORMATS if str(f) == "fp32|nhwc")
    out, w, _ = run_layer("conv_pool", params, [x], fmt, "numpy", activation="relu")
    assert "pool_nhwc_plan" in calls and set(calls) & {"conv_nhwc_plan", "conv_panels_plan", "winograd_plan"}
    c = np.maximum(onnx_conv(x, w, params), 0)
    assert_close(out, onnx_pool(c, pool_params(params)), fmt, "conv_pool through the kernels vs onnxruntime")


@pytest.mark.parametrize("pool", [dict(pool_type="max", kernel_size="3", stride="2", padding="1"),
                                  dict(pool_type="average", **{"global": "true"})], ids=["max", "global-average"])
def test_the_cpu_replays_the_convolution_and_the_pooling_as_one_call(pool):
    """fp32 NHWC on the CPU: both are prepared kernel calls, so later runs replay the pair (no Python work per run);
    each run, on a new input, gives what the unfused chain gives."""
    pytest.importorskip("engine.backends.cpu.ops", reason="Numba is not installed")
    from engine.backends import get_backend

    conv = {"num_output_channels": 16, "kernel_size": 7, "stride": 2, "padding": 3}
    m = chain_model("1x3x32x32", [("convolution", "conv", conv, "relu"), ("pooling", "pool", pool, "none")], "stem",
                    source="inp")
    fmt = next(f for f in FORMATS if str(f) == "fp32|nhwc")
    fused = Network(m, default_registry(), get_backend("numpy", notice=None), fmt)
    plain = Network(m, default_registry(), get_backend("numpy", notice=None), fmt, fusing="off")
    assert fused.layer("pool").desc.name == "conv_pool"
    rng = np.random.default_rng(8)
    for _ in range(3):
        x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
        assert_close(fused.infer({"inp": x})["out"], plain.infer({"inp": x})["out"], fmt, "replayed conv_pool")
    assert {name: call for name, call, _ in fused.replayer.recorded}["pool"] is not None
