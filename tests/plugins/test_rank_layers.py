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
@pytest.mark.parametrize("shape,params,view,perm,target", [
    ((1, 8, 8, 4), {"input_shape": "1,2,4,2,4,4", "shape": "4,16,4"}, (1, 2, 4, 2, 4, 4), (0, 1, 3, 2, 4, 5), (4, 16, 4)),
    ((2, 3, 4, 5), {"input_shape": "6,20"}, (6, 20), (1, 0), None),
    ((2, 12, 5), {"shape": "2,5,3,4"}, None, (0, 2, 1), (2, 5, 3, 4))])
def test_transpose_reads_and_writes_other_sizes(shape, params, view, perm, target, fmt, backend):
    """A reshape, a transpose and a reshape in one layer (a window partition): the same moves as NumPy's."""
    x = round_like(_x(*shape), fmt)
    out, _, _ = run_layer("transpose", {"perm": ",".join(map(str, perm))} | params, [x], fmt, backend)
    ref = x.reshape(view or shape).transpose(perm)
    assert_close(out, ref.reshape(target) if target else ref, fmt, str(params))


def test_transpose_sizes_that_do_not_hold_the_input_are_named():
    with pytest.raises(ShapeError, match="input_shape 5,5 does not hold the input 2x3x4"):
        run_layer("transpose", {"perm": "1,0", "input_shape": "5,5"}, [_x(2, 3, 4)], FORMATS[0])
    with pytest.raises(ParameterError, match="shape: '0,x' is not empty or 1 to 6 sizes"):
        run_layer("transpose", {"perm": "1,0", "shape": "0,x"}, [_x(2, 3)], FORMATS[0])


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


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("layer", ["matmul", "layer_normalization"])
def test_channels_last_tokens_with_an_activation(layer, fmt, backend):
    """A rank-4 channels-last tensor (ConvNeXt's 1 x H x W x C) through a linear layer or a layer norm with GELU: the
    CPU writes the rows into the output buffer and applies the activation there (float64 reference)."""
    from plugins.activations.gelu import gelu

    x = round_like(_x(1, 5, 6, 8), fmt)
    if layer == "matmul":
        w, b = round_like(_x(8, 12), fmt), round_like(_x(12), fmt)
        params, weights = {"num_outputs": 12, "bias": True}, {"weights": w, "bias": b}
        ref = x.astype(np.float64) @ w + b
    else:
        s, b = round_like(_x(8), fmt), round_like(_x(8), fmt)
        params, weights = {"over": "trailing", "epsilon": 1e-5}, {"scale": s, "bias": b}
        x64 = x.astype(np.float64)
        ref = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * s + b
    out, _, _ = run_layer(layer, params, [x], fmt, backend, activation="gelu", weights=weights)
    assert_close(out, gelu(np, ref), fmt, layer)


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


def _const(name: str, value: np.ndarray):
    """An ONNX Constant node (integer indices and axes, which the reference's initializers cannot hold)."""
    from onnx import numpy_helper
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


GATHER_CASES = [  # (input shape, axis, indices (array, scalar for a dropped axis))
    ((3, 2, 4, 5), 0, np.array(1, np.int64)),
    ((2, 7, 6), -1, np.array([5, -1, 0, 0], np.int64)),
    ((4, 6), 1, np.array([-6, 2], np.int64)),
    ((2, 3, 4, 5, 6), 3, np.array(-2, np.int64)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("case", range(len(GATHER_CASES)))
def test_gather_agrees_with_onnxruntime(case, fmt, backend):
    shape, axis, idx = GATHER_CASES[case]
    x = round_like(_x(*shape), fmt)
    params = {"axis": axis, "indices": ",".join(map(str, idx.reshape(-1).tolist())), "drop_axis": idx.ndim == 0}
    out, _, _ = run_layer("gather", params, [x], fmt, backend)
    ref = ort_run([_const("i", idx), helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)], {"x": x}, {})[0]
    assert_close(out, ref, fmt, f"gather {params}")


SLICE_CASES = [  # (input shape, axes, ranges, ONNX starts, ends, steps)
    ((2, 6, 5), "1", "2:5", [2], [5], [1]),
    ((1, 8, 6, 4), "-1,2", "::-1,1:5:2", [-1, 1], [-9, 5], [-1, 2]),
    ((4, 3, 2, 5, 6), "0,4", "1:3,-2:", [1, -2], [3, 6], [1, 1]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("case", range(len(SLICE_CASES)))
def test_slice_of_any_axes_agrees_with_onnxruntime(case, fmt, backend):
    shape, axes, ranges, starts, ends, steps = SLICE_CASES[case]
    x = round_like(_x(*shape), fmt)
    out, _, _ = run_layer("slice", {"axes": axes, "ranges": ranges}, [x], fmt, backend)
    ax = [int(a) for a in axes.split(",")]
    nodes = [_const("s", np.array(starts)), _const("e", np.array(ends)), _const("a", np.array(ax)),
             _const("t", np.array(steps)), helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])]
    assert_close(out, ort_run(nodes, {"x": x}, {})[0], fmt, f"slice {axes} {ranges}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("shapes,axis", [([(2, 3, 5), (2, 4, 5)], 1), ([(1, 4, 6, 2), (1, 4, 6, 3)], -1),
                                         ([(1, 2, 3, 4), (3, 2, 3, 4)], 0), ([(2, 5), (2, 5), (2, 5)], 0),
                                         ([(1, 2, 3, 2, 2), (1, 2, 3, 1, 2)], 3)])
def test_concatenation_on_any_axis_agrees_with_onnxruntime(shapes, axis, fmt, backend):
    xs = [round_like(_x(*s), fmt) for s in shapes]
    out, _, _ = run_layer("concatenation", {"axis": axis}, xs, fmt, backend)
    ref = ort_run([helper.make_node("Concat", [f"x{i}" for i in range(len(xs))], ["y"], axis=axis)],
                  {f"x{i}": x for i, x in enumerate(xs)}, {})[0]
    assert_close(out, ref, fmt, f"concat axis {axis}")


ATTENTION_CASES = [  # (q, k, v shapes, bias shape or None, k given transposed)
    ((2, 3, 7, 8), (2, 3, 5, 8), (2, 3, 5, 4), None, False),
    ((4, 2, 9, 6), (4, 2, 6, 9), (4, 2, 9, 6), (1, 2, 9, 9), True),
    ((1, 2, 3, 7, 4), (1, 2, 3, 7, 4), (1, 2, 3, 7, 5), (3, 7, 7), False),
    ((6, 16), (10, 16), (10, 3), (6, 10), False),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("case", range(len(ATTENTION_CASES)))
def test_attention_agrees_with_onnxruntime(case, fmt, backend):
    """The fused layer against ONNX's pieces: MatMul(q, k^T), Mul, Add, Softmax, MatMul."""
    qs, ks, vs, bs, kt = ATTENTION_CASES[case]
    xs = [round_like(_x(*s) * 2, fmt) for s in (qs, ks, vs)] + ([round_like(_x(*bs), fmt)] if bs else [])
    scale = 0.3
    out, _, _ = run_layer("attention", {"scale": scale, "k_transposed": kt}, xs, fmt, backend)
    rank = len(ks)
    nodes = ([] if kt else [helper.make_node("Transpose", ["x1"], ["kt"], perm=list(range(rank - 2)) + [rank - 1, rank - 2])])
    nodes += [helper.make_node("MatMul", ["x0", "x1" if kt else "kt"], ["s"]), helper.make_node("Mul", ["s", "c"], ["t"])]
    nodes += [helper.make_node("Add", ["t", "x3"], ["u"])] if bs else []
    nodes += [helper.make_node("Softmax", ["u" if bs else "t"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "x2"], ["y"])]
    ref = ort_run(nodes, {f"x{i}": x for i, x in enumerate(xs)}, {"c": np.array(scale, np.float32)})[0]
    assert_close(out, ref, fmt, f"attention {ATTENTION_CASES[case]}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_constant_feeds_an_element_wise_layer(fmt, backend):
    """A constant of another rank broadcast onto a tensor (a bias table added to attention scores)."""
    from engine.network import Network
    from tests.harness import DictWeights, backend_param

    x, k = round_like(_x(2, 3, 4, 4), fmt), round_like(_x(3, 4, 1), fmt)
    m = Model("m")
    m.add_layer("input", "x", params={"dimensions": "2x3x4x4"})
    m.add_layer("constant", "k", params={"dimensions": "3x4x1"})
    m.add_layer("element_wise", "e", params={"operation": "sum"}, inputs=["x", "k"])
    m.add_layer("output", "out", inputs=["e"])
    net = Network(m, default_registry(), backend_param(backend), fmt, weights=DictWeights({"k": {"value": k}}))
    assert_close(net.infer({"x": x})["out"], x.astype(np.float64) + k, fmt, "constant")


def test_bad_parameters_of_the_new_layers_are_named():
    with pytest.raises(ParameterError, match="indices: 'a' is not a list of integers"):
        run_layer("gather", {"indices": "a"}, [_x(2, 3)], FORMATS[0])
    with pytest.raises(ShapeError, match="indices 3 are outside axis 1 of the input 2x3"):
        run_layer("gather", {"axis": 1, "indices": "0,3"}, [_x(2, 3)], FORMATS[0])
    with pytest.raises(ParameterError, match="drop_axis: removes the axis of one index"):
        run_layer("gather", {"indices": "0,1", "drop_axis": True}, [_x(2, 3)], FORMATS[0])
    with pytest.raises(ParameterError, match="ranges: 1 ranges for 2 axes"):
        run_layer("slice", {"axes": "0,1", "ranges": "0:1"}, [_x(2, 3)], FORMATS[0])
    with pytest.raises(ShapeError, match="channels, height and width cut an N x C x H x W tensor"):
        run_layer("slice", {"channels": "0:1"}, [_x(2, 3)], FORMATS[0])
    with pytest.raises(ShapeError, match="differ on an axis other than 1"):
        run_layer("concatenation", {"axis": 1}, [_x(2, 3, 4), _x(2, 3, 5)], FORMATS[0])
    with pytest.raises(ShapeError, match="q and k need the same last size"):
        run_layer("attention", {}, [_x(2, 3, 4), _x(2, 3, 5), _x(2, 3, 5)], FORMATS[0])
