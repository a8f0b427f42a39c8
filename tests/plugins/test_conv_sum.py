"""conv_sum and conv_bn_sum (a convolution added to a residual tensor): against onnxruntime's Conv (+
BatchNormalization) -> Add, against the unfused chain, and the fusing rules that make them in a ResNet block."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.fusing.rewriting import apply_rules
from engine.fusing.syntax import parse_rule
from engine.model import Model
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import FP32_NCHW, Dims, TensorFormat
from plugins.standard.fusing_rules import RULES
from tests.harness import (
    DictWeights,
    assert_close,
    backend_param,
    each_backend_and_format,
    ort_run,
    round_like,
    run_layer,
)
from tests.plugins.conv_reference import BN_ORDER, conv_node

#: (input dims, residual dims, params): the shapes of each CPU kernel path (panels at 7x7 and for an RGB stem,
#: Winograd at 3x3 stride 1, im2col otherwise), a broadcast residual, groups and asymmetric padding (unfused paths)
CASES = [
    ((1, 16, 7, 7), (1, 32, 7, 7), dict(num_output_channels=32)),
    ((1, 16, 20, 20), (1, 16, 20, 20), dict(num_output_channels=16)),
    ((2, 8, 12, 10), (2, 6, 6, 5), dict(num_output_channels=6, stride=2)),
    ((1, 8, 16, 16), (1, 12, 16, 16), dict(num_output_channels=12, kernel_size=1, padding=0)),
    ((1, 3, 30, 30), (1, 32, 15, 15), dict(num_output_channels=32, kernel_size=7, stride=2, padding=3)),
    ((1, 4, 9, 9), (1, 6, 1, 1), dict(num_output_channels=6)),
    ((1, 4, 9, 9), (1, 6, 9, 9), dict(num_output_channels=6, groups=2, bias="false")),
    ((1, 4, 9, 9), (1, 6, 9, 9), dict(num_output_channels=6, padding=1, padding_end=0, kernel_size=2)),
]
IDS = [f"{c[0]}+{c[1]}-{'-'.join(f'{k}={v}' for k, v in c[2].items())}" for c in CASES]
ACTS = {"none": lambda y: y, "relu": lambda y: np.maximum(y, 0), "sigmoid": lambda y: 1 / (1 + np.exp(-y))}


def onnx_reference(x, r, w, params, bn):
    nodes = [conv_node(params, w, "c")]
    if bn:
        nodes.append(helper.make_node("BatchNormalization", ["c", *BN_ORDER], ["b"], epsilon=float(params.get("epsilon", 1e-5))))
    nodes.append(helper.make_node("Add", [nodes[-1].output[0], "r"], ["y"]))
    return ort_run(nodes, {"x": x, "r": r}, w)[0]


@each_backend_and_format
@pytest.mark.parametrize("layer_type", ["conv_sum", "conv_bn_sum"])
@pytest.mark.parametrize("dims,rdims,params", CASES, ids=IDS)
@pytest.mark.parametrize("activation", ["relu", "sigmoid"])
def test_matches_onnxruntime(backend, fmt, layer_type, dims, rdims, params, activation):
    rng = np.random.default_rng(3)
    x, r = rng.standard_normal(dims).astype(np.float32), rng.standard_normal(rdims).astype(np.float32)
    params = dict(params, epsilon=0.001) if layer_type == "conv_bn_sum" else params
    out, w, _ = run_layer(layer_type, params, [x, r], fmt, backend, activation=activation)
    ref = ACTS[activation](onnx_reference(round_like(x, fmt), round_like(r, fmt), w, params, layer_type == "conv_bn_sum"))
    assert_close(out, ref, fmt, f"{layer_type} {params}")


def resnet_block(bn: bool, activation: str = "relu", conv_first: bool = True) -> Model:
    """in0 -> conv(+bn) -> [relu] -> conv(+bn) -> sum with in0 [relu] -> out: a ResNet basic block; the second
    convolution at the sum's input 0 (``out += identity``) or, ``conv_first`` False, input 1 (``x + conv(x)``)."""
    m = Model("block")
    m.add_layer("input", "in0", params={"dimensions": "1x16x14x14"})
    m.add_layer("convolution", "c1", params={"num_output_channels": "16"}, inputs=["in0"], activation="relu")
    m.add_layer("convolution", "c2", params={"num_output_channels": "16", "bias": "false" if bn else "true"},
                inputs=["c1"])
    last = "c2"
    if bn:
        m.add_layer("batch_normalization", "bn2", inputs=["c2"])
        last = "bn2"
    m.add_layer("element_wise", "add", params={"operation": "sum"}, inputs=[last, "in0"] if conv_first else ["in0", last],
                activation=activation)
    m.add_layer("output", "out", inputs=["add"])
    return m


@each_backend_and_format
@pytest.mark.parametrize("bn", [False, True], ids=["conv", "conv_bn"])
@pytest.mark.parametrize("conv_first", [True, False], ids=["conv+x", "x+conv"])
def test_a_resnet_block_fuses_and_computes_what_the_chain_computes(backend, fmt, bn, conv_first):
    x = np.random.default_rng(5).standard_normal((1, 16, 14, 14)).astype(np.float32)
    fused = Network(resnet_block(bn, conv_first=conv_first), default_registry(), backend_param(backend), fmt)
    plain = Network(resnet_block(bn, conv_first=conv_first), default_registry(), backend_param(backend), fmt,
                    fusing="off")
    assert fused.layer("add").desc.name == ("conv_bn_sum" if bn else "conv_sum")
    assert fused.layer("add").activation.name == "relu"
    assert "c2" not in fused.nodes and "bn2" not in fused.nodes and plain.layer("add").desc.name == "element_wise"
    for _ in range(2):  # the second run replays the prepared kernel calls (CPU): same result, new input
        x = x + 0.5
        assert_close(fused.infer({"in0": x})["out"], plain.infer({"in0": x})["out"], fmt, f"bn={bn}")


def test_what_does_not_fuse():
    reg = default_registry()
    rules = [parse_rule(r) for r in RULES]

    def fused_types(edit):
        m = resnet_block(bn=False)
        edit(m)
        return {s.type for s in apply_rules(m, reg, FP32_NCHW, rules).model.layers.values()}

    assert "conv_sum" in fused_types(lambda m: None)
    assert "conv_sum" in fused_types(lambda m: setattr(m.layers["add"], "inputs", ["in0", "c2"]))
    # an activation on the convolution, another reader, three inputs, another operation, a difference with the
    # convolution second (a difference's inputs do not commute): the chain stays as it is
    assert "conv_sum" not in fused_types(lambda m: setattr(m.layers["c2"], "activation", "relu"))
    assert "conv_sum" not in fused_types(lambda m: m.add_layer("output", "peek", inputs=["c2"]))
    assert "conv_sum" not in fused_types(lambda m: setattr(m.layers["add"], "inputs", ["c2", "in0", "c1"]))
    assert "conv_sum" not in fused_types(lambda m: m.layers["add"].params.update(operation="product"))
    assert "conv_sum" not in fused_types(lambda m: (m.layers["add"].params.update(operation="sub"),
                                                    setattr(m.layers["add"], "inputs", ["in0", "c2"])))


def test_a_sum_of_a_convolution_at_input_1_takes_the_other_input_as_residual():
    """x + conv(x): the fused layer reads the convolution's input at input 0 and the sum's input 0 as its residual;
    a sum of two convolutions fuses the one at input 0; one whose input-0 convolution has another reader fuses the
    other."""
    reg = default_registry()
    rules = [parse_rule(r) for r in RULES]
    m = resnet_block(bn=False, conv_first=False)
    m.layers["c1"].activation = "none"
    result = apply_rules(m, reg, FP32_NCHW, rules)
    assert result.model.layers["add"].type == "conv_sum" and result.model.layers["add"].inputs == ["c1", "in0"]
    assert ("*|*|conv_sum", "c2", "add", "add") in result.applied
    m.layers["add"].inputs = ["c1", "c2"]  # two convolutions: c1 (input 0) is read by c2 too, so c2 fuses
    fused = apply_rules(m, reg, FP32_NCHW, rules).model.layers["add"]
    assert (fused.type, fused.inputs) == ("conv_sum", ["c1", "c1"])
    m.layers["c2"].inputs = ["in0"]  # now both convolutions are free: the one at input 0 fuses
    fused = apply_rules(m, reg, FP32_NCHW, rules).model.layers["add"]
    assert (fused.type, fused.inputs) == ("conv_sum", ["in0", "c2"])


def test_the_cpu_adds_the_residual_inside_the_convolution_kernels(monkeypatch):
    """fp32 NHWC on the CPU: each kernel path (panels, Winograd, im2col) takes the residual, and no element-wise
    pass runs after it; the result equals the unfused chain's."""
    elementwise = pytest.importorskip("engine.backends.cpu.elementwise", reason="Numba is not installed")
    passes = []
    real = elementwise.element_wise
    monkeypatch.setattr(elementwise, "element_wise", lambda *a, **kw: passes.append(1) or real(*a, **kw))
    fmt = TensorFormat.parse("fp32 nhwc")
    for size, stride, kernel in ((7, 1, 3), (20, 1, 3), (20, 2, 3), (16, 1, 1)):
        m = Model("block")
        m.add_layer("input", "in0", params={"dimensions": f"1x32x{size}x{size}"})
        m.add_layer("input", "in1", params={"dimensions": f"1x32x{-(-size // stride)}x{-(-size // stride)}"})
        m.add_layer("convolution", "c", params={"num_output_channels": "32", "stride": str(stride),
                                                "kernel_size": str(kernel), "padding": str(kernel // 2)},
                    inputs=["in0"])
        m.add_layer("element_wise", "add", inputs=["c", "in1"], activation="relu")
        m.add_layer("output", "out", inputs=["add"])
        rng = np.random.default_rng(size + stride)
        feed = {n: rng.standard_normal(tuple(Dims.parse(m.layers[n].params["dimensions"]))).astype(np.float32)
                for n in ("in0", "in1")}
        weights = DictWeights(None, seed=1)
        fused = Network(m, default_registry(), backend_param("numpy"), fmt, weights=weights)
        assert fused.layer("add").desc.name == "conv_sum"
        passes.clear()
        got = fused.infer(feed)["out"]
        assert passes == [], f"{size}x{size} stride {stride}: an element-wise pass ran after the convolution"
        ref = Network(m, default_registry(), backend_param("numpy"), FP32_NCHW, weights=DictWeights(None, seed=1),
                      fusing="off").infer(feed)["out"]
        assert_close(got, ref, fmt, f"{size}x{size} stride {stride} kernel {kernel}")
