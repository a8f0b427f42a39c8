"""The activations collection against onnxruntime on every backend and format.

Every activation runs on two paths: fused into a layer that applies every activation itself
(element_wise with a single input), and applied by the network's generic activation pass after a
test-only layer that fuses none. Both must match the onnxruntime reference and each other. Also:
float16 robustness for large-magnitude inputs, the activation functions applied directly to float16
and float32 arrays, descriptors, and coefficient validation errors."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper

import plugins.activations as collection
from engine.descriptors import ActivationDesc, InputDesc, LayerDesc
from engine.errors import ModelFileError, ParameterError
from engine.layer import Layer
from engine.model import Model
from engine.modelfile import dumps, loads
from engine.network import Network
from engine.plugins import load_plugins
from engine.registry import PluginMeta, Registry
from engine.tensor import FORMATS, Dims, Precision
from tests.harness import (
    BACKENDS,
    assert_close,
    backend_param,
    each_backend_and_format,
    layer_model,
    ort_run,
    round_like,
    run_layer,
)

FP16_FORMATS = [f for f in FORMATS if f.precision is Precision.FP16]


# ---- onnxruntime references ---------------------------------------------------------------------
def onnx_op(op: str, opset: int = 17, **attrs: Any):
    def ref(x: np.ndarray) -> np.ndarray:
        return ort_run([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, {}, opset=opset)[0]
    return ref


def onnx_leaky(op: str, alpha: float):
    """op(x) + alpha * x, composed from primitive ONNX operators."""
    def ref(x: np.ndarray) -> np.ndarray:
        nodes = [helper.make_node(op, ["x"], ["s"]), helper.make_node("Mul", ["x", "a"], ["ax"]),
                 helper.make_node("Add", ["s", "ax"], ["y"])]
        return ort_run(nodes, {"x": x}, {"a": np.array(alpha, np.float32)})[0]
    return ref


def onnx_silu(x: np.ndarray) -> np.ndarray:
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    return ort_run(nodes, {"x": x}, {})[0]


def onnx_clip(lo: float, hi: float):
    def ref(x: np.ndarray) -> np.ndarray:
        inits = {"lo": np.array(lo, np.float32), "hi": np.array(hi, np.float32)}
        return ort_run([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], {"x": x}, inits)[0]
    return ref


# (activation, coefficients, reference); every activation of the collection appears at least once
CASES = [
    ("relu", {}, onnx_op("Relu")),
    ("leaky_relu", {"alpha": "0.2"}, onnx_op("LeakyRelu", alpha=0.2)),
    ("sigmoid", {}, onnx_op("Sigmoid")),
    ("tanh", {}, onnx_op("Tanh")),
    ("leaky_sigmoid", {}, onnx_leaky("Sigmoid", 0.01)),
    ("leaky_sigmoid", {"alpha": "0.3"}, onnx_leaky("Sigmoid", 0.3)),
    ("leaky_tanh", {"alpha": "0.25"}, onnx_leaky("Tanh", 0.25)),
    ("softmax", {}, onnx_op("Softmax", axis=1)),
    ("sine", {}, onnx_op("Sin")),
    ("gelu", {}, onnx_op("Gelu", opset=20)),
    ("gelu_tanh", {}, onnx_op("Gelu", opset=20, approximate="tanh")),
    ("silu", {}, onnx_silu),
    ("elu", {}, onnx_op("Elu", alpha=1.0)),
    ("elu", {"alpha": "0.5"}, onnx_op("Elu", alpha=0.5)),
    ("clamp", {}, onnx_clip(0.0, 6.0)),
    ("clamp", {"min": "-1.5", "max": "2.25"}, onnx_clip(-1.5, 2.25)),
    ("relu6", {}, onnx_clip(0.0, 6.0)),  # legacy name of clamp with its defaults
    ("hardswish", {}, onnx_op("HardSwish", opset=14)),
    ("softplus", {}, onnx_op("Softplus")),
    ("mish", {}, onnx_op("Mish", opset=18)),
    ("selu", {}, onnx_op("Selu")),
    ("selu", {"alpha": "1.5", "gamma": "0.75"}, onnx_op("Selu", alpha=1.5, gamma=0.75)),
    ("celu", {}, onnx_op("Celu", opset=12)),
    ("celu", {"alpha": "0.4"}, onnx_op("Celu", opset=12, alpha=0.4)),
    ("hard_sigmoid", {}, onnx_op("HardSigmoid")),
    ("hard_sigmoid", {"alpha": str(1 / 6), "beta": "0.4"}, onnx_op("HardSigmoid", alpha=1 / 6, beta=0.4)),
]
CASE_IDS = [f"{a}-{'-'.join(f'{k}={v}' for k, v in c.items())}" if c else a for a, c, _ in CASES]
REFS = {(a, tuple(sorted(c.items()))): r for a, c, r in CASES}

#: activations whose output exceeds the float16 range for inputs near the float16 maximum (gamma > 1)
GROWING = {"selu"}
#: activations that must stay finite in float16 for inputs up to the float16 maximum
# (sin of huge arguments is range-reduction noise)
LARGE_INPUT_CASES = [c for c in CASES if c[0] != "sine" and c[0] not in GROWING]


# ---- a layer that fuses no activation -------------------------------------------------------------
class PassThrough(Layer):
    """Copies its input; leaves its activation to the network's generic activation pass."""

    desc = LayerDesc("test_pass_through", "Pass-through (test)", "Copies its input; fuses no activation.",
                     inputs=(InputDesc("input"),))
    fused_activations = frozenset()

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        assert inputs[0] is not None
        return inputs[0]

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.store(out, self.nchw(inputs[0]))


@pytest.fixture(scope="module")
def reg() -> Registry:
    r = load_plugins()
    assert not r.failures, r.failures
    r.register_plugin(PluginMeta("activation_tests", "0", "tests", "test-only layers"),
                      lambda registrar: registrar.layer(PassThrough), "test")
    return r


def run_path(reg: Registry, layer_type: str, x: np.ndarray, fmt, backend: str, act: str,
             coefs: dict[str, str]) -> np.ndarray:
    model = layer_model(layer_type, {}, [x.shape], act, coefs)
    net = Network(model, reg, backend_param(backend), fmt)
    layer = net.layer("L")
    assert layer.fuses_activation is (layer_type != "test_pass_through")  # the path is the one meant
    net.set_input("in0", x)
    net.run()
    return net.output("out")


def both_paths(reg, x, fmt, backend, act, coefs) -> tuple[np.ndarray, np.ndarray]:
    fused = run_path(reg, "element_wise", x, fmt, backend, act, coefs)
    generic = run_path(reg, "test_pass_through", x, fmt, backend, act, coefs)
    return fused, generic


# ---- tests ----------------------------------------------------------------------------------------
def test_cases_cover_the_whole_collection(reg):
    names = set(reg.plugins["activations"].activations)
    assert names == {reg.find_activation(a).name for a, _, _ in CASES}
    assert len(collection.ACTIVATION_MODULES) == len(names)


@each_backend_and_format
@pytest.mark.parametrize("act,coefs,ref", CASES, ids=CASE_IDS)
def test_fused_and_generic_paths_match_onnxruntime(reg, backend, fmt, act, coefs, ref):
    x = (np.random.default_rng(7).standard_normal((2, 5, 4, 3)) * 4).astype(np.float32)
    x[0, :, 0, 0] = [-7.0, -3.0, 0.0, 3.0, 7.0]  # the kinks of clamp, hardswish and relu6 bounds
    fused, generic = both_paths(reg, x, fmt, backend, act, coefs)
    expected = ref(round_like(x, fmt))
    assert_close(fused, expected, fmt, f"{act} fused")
    assert_close(generic, expected, fmt, f"{act} generic")
    assert_close(generic, fused, fmt, f"{act} generic vs fused")


@pytest.fixture(scope="module")
def large_fp16() -> np.ndarray:
    big = np.array([-65504, -60000, -1000, -30, -8, -1, 0, 1, 8, 30, 1000, 60000, 65504], np.float32)
    x = np.empty((1, big.size, 1, 2), np.float32)  # channels hold the values: softmax sees them all
    x[0, :, 0, 0], x[0, :, 0, 1] = big, big[::-1]
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FP16_FORMATS, ids=[str(f) for f in FP16_FORMATS])
@pytest.mark.parametrize("act,coefs,ref", LARGE_INPUT_CASES, ids=[i for i, c in zip(CASE_IDS, CASES) if c in LARGE_INPUT_CASES])
def test_large_fp16_inputs_stay_finite(reg, large_fp16, backend, fmt, act, coefs, ref):
    expected = ref(large_fp16)
    for path, out in zip(("fused", "generic"), both_paths(reg, large_fp16, fmt, backend, act, coefs)):
        assert np.all(np.isfinite(out)), f"{act} {path}: {out.ravel()}"
        np.testing.assert_allclose(out, expected, rtol=1e-2, atol=1e-3, err_msg=f"{act} {path}")


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("act,coefs,ref", CASES, ids=CASE_IDS)
def test_apply_on_float16_and_float32_arrays(reg, dtype, act, coefs, ref):
    """What the CuPy backend does in fp16 formats (activation on float16 arrays), checked on NumPy:
    same dtype out, no overflow or invalid operation, accurate for moderate and extreme inputs."""
    impl = reg.activation_class(act)
    values = np.random.default_rng(3).standard_normal((1, 6, 5, 4)) * 5
    if act != "sine":
        extreme = 65504.0 if dtype == np.float16 else 1e30
        if act in GROWING:  # outputs above the float16 maximum are infinite by definition: stay below it
            extreme /= 2
        values[0, :, 4, 0] = [-extreme, -extreme / 2, -50.0, 50.0, extreme / 2, extreme]
    x = values.astype(dtype)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        y = impl.apply(np, x, impl.desc.coefficient_values(coefs))
    assert y.dtype == dtype and y.shape == x.shape
    assert np.all(np.isfinite(y))
    expected = ref(x.astype(np.float32))
    tol = 1e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(y.astype(np.float32), expected, rtol=tol, atol=tol, err_msg=act)


def test_gelu_tail_is_accurate_in_float32(reg):
    """Phi(x) for negative x comes from erfc directly: relative accuracy holds deep in the tail,
    where 0.5*(1 + erf(x/sqrt(2))) would cancel to 0 or noise (float32 limits it to ~1e-5 relative:
    exp(-x*x/2) amplifies the rounding of x*x; x = -14 gives a subnormal result)."""
    import math

    x = np.array([-14.0, -12.0, -9.0, -6.0, -3.0, -1e-3, 1e-3, 2.5], np.float32)
    y = reg.activation_class("gelu").apply(np, x, {})
    exact = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float64)])
    np.testing.assert_allclose(y, exact, rtol=3e-5, atol=1e-44)


def test_descriptors_document_formula_onnx_and_coefficients(reg):
    for name in reg.plugins["activations"].activations:
        desc = reg.find_activation(name)
        assert isinstance(desc, ActivationDesc) and desc.collection == "activations"
        assert desc.display_name and desc.summary and "\n" not in desc.summary, name
        assert "<code>y" in desc.documentation and "ONNX" in desc.documentation, name
        defaults = desc.coefficient_values({})
        for c in desc.coefficients:
            assert f"<b>{c.name}</b>" in desc.documentation, f"{name}: coefficient {c.name} undocumented"
            assert c.doc, f"{name}.{c.name}"
            assert (c.min is None or c.min <= c.default) and (c.max is None or c.default <= c.max)
            assert defaults[c.name] == c.default


@pytest.mark.parametrize("act,coefs,pattern", [
    ("elu", {"alpha": "abc"}, r"^layer L: activation elu coefficient alpha='abc' is not a number$"),
    ("leaky_sigmoid", {"alpha": "nan"}, r"^layer L: activation leaky_sigmoid coefficient alpha='nan' is not a number$"),
    ("clamp", {"min": "7", "max": "6"},
     r"^layer L: activation clamp coefficient min=7 is greater than coefficient max=6; min must be <= max$"),
    ("clamp", {"min": "10"},
     r"^layer L: activation clamp coefficient min=10 is greater than coefficient max=6 \(default\); min must be <= max$"),
    ("relu6", {"max": "-1"},
     r"^layer L: activation clamp coefficient min=0 \(default\) is greater than coefficient max=-1; min must be <= max$"),
    ("leaky_tanh", {"beta": "1"}, r"^layer L: activation leaky_tanh has no coefficient 'beta' \(it has: alpha\)$"),
    ("hardswish", {"alpha": "1"}, r"^layer L: activation hardswish has no coefficient 'alpha' \(it has: none\)$"),
    ("leaky_tanh", {"alpha": "2"}, r"^layer L: activation leaky_tanh coefficient alpha='2' is outside \[0.0, 1.0\]$"),
    ("elu", {"alpha": "-1"}, r"^layer L: activation elu coefficient alpha='-1' is outside \[0.0, None\]$"),
    ("celu", {"alpha": "0"}, r"^layer L: activation celu coefficient alpha='0' is outside \[1e-06, None\]$"),
])
def test_bad_coefficients_name_layer_activation_and_coefficient(act, coefs, pattern):
    with pytest.raises(ParameterError, match=pattern):
        run_layer("element_wise", {}, [np.zeros((1, 2, 3, 3), np.float32)], FORMATS[0], activation=act, coefs=coefs)


def test_clamp_min_equal_max_is_allowed():
    x = np.linspace(-3, 3, 18, dtype=np.float32).reshape(1, 2, 3, 3)
    out, _, _ = run_layer("element_wise", {}, [x], FORMATS[0], activation="clamp", coefs={"min": "0.5", "max": "0.5"})
    np.testing.assert_array_equal(out, np.full_like(x, 0.5))


def test_model_file_with_bad_clamp_is_refused_at_load(reg):
    m = Model("bad")
    m.add_layer("input", "in0", params={"dimensions": "1x2x3x3"})
    m.add_layer("element_wise", "L", inputs=["in0"], activation="clamp", act_coefs={"min": "3", "max": "1"})
    with pytest.raises(ModelFileError, match=r"layer L: activation clamp coefficient min=3 is greater than coefficient max=1"):
        loads(dumps(m), "bad.lnet", reg)
