"""The layers of tensors of any rank, against onnxruntime on every backend and format (tests/harness.py)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ParameterError, ShapeError
from engine.model import Model
from engine.plugins import default_registry
from engine.tensor import FORMATS
from engine.typecheck import check, errors
from tests.harness import BACKENDS, FORMAT_IDS, assert_close, ort_run, round_like, run_layer

RNG = np.random.default_rng(5)


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _check(layer, params, inputs, nodes, fmt, backend, weights=None, inits=None, extra_inputs=None):
    xs = [round_like(x, fmt) for x in inputs]
    out, _, _ = run_layer(layer, params, xs, fmt, backend, weights=weights)
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    ref = ort_run(nodes, feeds, {k: round_like(v, fmt) for k, v in (inits or {}).items()})[0]
    assert_close(out, ref, fmt, f"{layer} {params}")


CASES = [
    ("transpose", {"perm": "0,2,3,1"}, [_x(2, 3, 4, 5)], [helper.make_node("Transpose", ["x0"], ["y"], perm=[0, 2, 3, 1])]),
    ("transpose", {"perm": "0,2,1,3,4"}, [_x(1, 2, 3, 4, 5)],
     [helper.make_node("Transpose", ["x0"], ["y"], perm=[0, 2, 1, 3, 4])]),
    ("transpose", {"perm": "1,0"}, [_x(3, 7)], [helper.make_node("Transpose", ["x0"], ["y"], perm=[1, 0])]),
    ("softmax", {"axis": -1}, [_x(2, 3, 7)], [helper.make_node("Softmax", ["x0"], ["y"], axis=-1)]),
    ("softmax", {"axis": 2}, [_x(2, 3, 4, 5)], [helper.make_node("Softmax", ["x0"], ["y"], axis=2)]),
    ("unary", {"operation": "erf"}, [_x(2, 9, 4)], [helper.make_node("Erf", ["x0"], ["y"])]),
    ("unary", {"operation": "exp"}, [_x(2, 3, 4, 5)], [helper.make_node("Exp", ["x0"], ["y"])]),
    ("unary", {"operation": "abs"}, [_x(6)], [helper.make_node("Abs", ["x0"], ["y"])]),
    ("unary", {"operation": "neg"}, [_x(2, 6)], [helper.make_node("Neg", ["x0"], ["y"])]),
    ("matmul", {}, [_x(2, 3, 4, 5), _x(2, 3, 5, 6)], [helper.make_node("MatMul", ["x0", "x1"], ["y"])]),
    ("matmul", {}, [_x(2, 1, 4, 5), _x(3, 5, 2)], [helper.make_node("MatMul", ["x0", "x1"], ["y"])]),
    ("element_wise", {"operation": "sum"}, [_x(2, 7, 6), _x(6)], [helper.make_node("Add", ["x0", "x1"], ["y"])]),
    ("element_wise", {"operation": "product"}, [_x(2, 3, 4, 5), _x(4, 1)],
     [helper.make_node("Mul", ["x0", "x1"], ["y"])]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_layers_agree_with_onnxruntime(case, fmt, backend):
    layer, params, inputs, nodes = CASES[case]
    _check(layer, params, inputs, nodes, fmt, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("shape,target,expected", [((1, 48, 4, 4), "0,2,-1,4,4", (1, 2, 24, 4, 4)),
                                                    ((2, 3, 4, 5), "0,-1", (2, 60)), ((6, 4), "2,3,4", (2, 3, 4))])
def test_reshape(shape, target, expected, fmt, backend):
    """ONNX Reshape keeps the row-major order of the values (NumPy's reshape of the logical array)."""
    x = round_like(_x(*shape), fmt)
    out, _, _ = run_layer("reshape", {"shape": target}, [x], fmt, backend)
    assert_close(out, x.reshape(expected), fmt, target)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("op", ["mean", "sum", "max", "min"])
@pytest.mark.parametrize("keep", [True, False])
def test_reduce(op, keep, fmt, backend):
    x = _x(2, 3, 4, 5)
    xs = round_like(x, fmt)
    out, _, _ = run_layer("reduce", {"operation": op, "axes": "1,-1", "keepdims": keep}, [xs], fmt, backend)
    ref = getattr(np, op if op in ("mean", "sum") else op)(xs.astype(np.float64), axis=(1, 3), keepdims=keep)
    assert_close(out, ref, fmt, op)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("over,shape", [("trailing", (2, 5, 8)), ("channels", (2, 6, 3, 4)), ("trailing", (2, 3, 4, 6))])
def test_layer_normalization(over, shape, fmt, backend):
    x = round_like(_x(*shape), fmt)
    c = shape[1] if over == "channels" else shape[-1]
    scale, bias = round_like(_x(c), fmt), round_like(_x(c), fmt)
    out, _, _ = run_layer("layer_normalization", {"over": over, "epsilon": 1e-5}, [x], fmt, backend,
                          weights={"scale": scale, "bias": bias})
    if over == "channels":
        t = ort_run([helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
                     helper.make_node("LayerNormalization", ["t", "s", "b"], ["u"], axis=-1, epsilon=1e-5),
                     helper.make_node("Transpose", ["u"], ["y"], perm=[0, 3, 1, 2])],
                    {"x": x}, {"s": scale, "b": bias})[0]
    else:
        t = ort_run([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-5)],
                    {"x": x}, {"s": scale, "b": bias})[0]
    assert_close(out, t, fmt, over)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_matmul_with_weights_is_a_linear_layer(fmt, backend):
    x = round_like(_x(1, 3, 4, 8), fmt)
    w, b = round_like(_x(8, 5), fmt), round_like(_x(5), fmt)
    out, _, _ = run_layer("matmul", {"num_outputs": 5, "bias": True}, [x], fmt, backend, weights={"weights": w, "bias": b})
    assert_close(out, x.astype(np.float64) @ w + b, fmt, "linear")


def test_rank_mismatch_names_both_layers():
    m = Model("m")
    m.add_layer("input", "tokens", params={"dimensions": "1x49x96"})
    m.add_layer("convolution", "conv", params={"num_output_channels": "4"}, inputs=["tokens"])
    diags = errors(check(m, default_registry()))
    assert [(d.layer, d.message) for d in diags] == [
        ("conv", "input 0 (from layer tokens) is a tensor of rank 3 (1x49x96), but convolution takes tensors of rank 4 "
                 "(N x C x H x W)")]


def test_bad_parameters_and_shapes_are_named():
    with pytest.raises(ParameterError, match="perm: '0,0,1' is not a permutation"):
        run_layer("transpose", {"perm": "0,0,1"}, [_x(2, 3, 4)], FORMATS[0])
    with pytest.raises(ShapeError, match="shape 5,-1 does not fit the input 2x3x4"):
        run_layer("reshape", {"shape": "5,-1"}, [_x(2, 3, 4)], FORMATS[0])
    with pytest.raises(ShapeError, match="3 columns of a against 4 rows of b"):
        run_layer("matmul", {}, [_x(2, 3), _x(4, 2)], FORMATS[0])
