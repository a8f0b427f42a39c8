"""The unary, reduce and softmax operations and the constant layer that import the ONNX node tests' operators, against
onnxruntime on every backend and format (tests/harness.py)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from engine.backends import get_backend
from engine.errors import ParameterError
from engine.model import Model
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import FORMATS
from tests.harness import BACKENDS, FORMAT_IDS, DictWeights, assert_close, backend_param, ort_run, round_like, run_layer

RNG = np.random.default_rng(11)


def _x(*shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(np.float32)


def _against_ort(layer: str, params: dict, x: np.ndarray, nodes: list, fmt, backend) -> None:
    xs = round_like(x, fmt)
    out, _, _ = run_layer(layer, params, [xs], fmt, backend)
    ref = ort_run(nodes, {"x": xs}, {})[0]
    assert_close(out, ref.reshape(out.shape) if ref.size == out.size and ref.ndim == 0 else ref, fmt, f"{layer} {params}")


#: unary operation -> (ONNX operator, the input range inside its domain)
UNARY = {"cos": ("Cos", (-3, 3)), "tan": ("Tan", (-1.2, 1.2)), "asin": ("Asin", (-0.95, 0.95)),
         "acos": ("Acos", (-0.95, 0.95)), "atan": ("Atan", (-4, 4)), "sinh": ("Sinh", (-3, 3)),
         "cosh": ("Cosh", (-3, 3)), "asinh": ("Asinh", (-4, 4)), "acosh": ("Acosh", (1.05, 5)),
         "atanh": ("Atanh", (-0.9, 0.9)), "ceil": ("Ceil", (-4, 4)), "floor": ("Floor", (-4, 4)),
         "round": ("Round", (-4, 4)), "sign": ("Sign", (-4, 4)), "softsign": ("Softsign", (-4, 4))}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("operation", sorted(UNARY))
def test_unary_operations(operation, fmt, backend):
    op, (low, high) = UNARY[operation]
    x = _x(2, 3, 4, 5, low=low, high=high)
    if operation == "round":  # ties: halves go to the even neighbour, as ONNX
        x.reshape(-1)[:6] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5]
    if operation == "sign":
        x.reshape(-1)[0] = 0.0
    _against_ort("unary", {"operation": operation}, x, [helper.make_node(op, ["x"], ["y"])], fmt, backend)


REDUCE = {"l1": "ReduceL1", "l2": "ReduceL2", "sum_square": "ReduceSumSquare", "log_sum": "ReduceLogSum",
          "log_sum_exp": "ReduceLogSumExp", "prod": "ReduceProd"}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("operation", sorted(REDUCE))
@pytest.mark.parametrize("axes,keep", [((1, -1), True), ((0, 2), False), ((), False)])
def test_reduce_operations(operation, axes, keep, fmt, backend):
    low, high = (0.5, 1.5) if operation in ("log_sum", "prod") else (-2, 2)  # a sum > 0; a product of no overflow
    x = _x(2, 3, 4, 5, low=low, high=high)
    node = helper.make_node(REDUCE[operation], ["x"], ["y"], keepdims=int(keep), **({"axes": list(axes)} if axes else {}))
    _against_ort("reduce", {"operation": operation, "axes": ",".join(map(str, axes)), "keepdims": keep}, x, [node], fmt,
                 backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("operation", ["argmax", "argmin"])
@pytest.mark.parametrize("axis,keep,last", [(1, True, False), (-1, False, False), (2, True, True)])
def test_arg_operations(operation, axis, keep, last, fmt, backend):
    x = np.round(_x(2, 3, 4, 5) * 2) / 2  # ties, so that first and last index differ
    x = round_like(x, fmt)
    node = helper.make_node("ArgMax" if operation == "argmax" else "ArgMin", ["x"], ["i"], axis=axis,
                            keepdims=int(keep), select_last_index=int(last))
    nodes = [node, helper.make_node("Cast", ["i"], ["y"], to=TensorProto.FLOAT)]
    _against_ort("reduce", {"operation": operation, "axes": str(axis), "keepdims": keep, "last_index": last}, x, nodes,
                 fmt, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("operation,op", [("log_softmax", "LogSoftmax"), ("hardmax", "Hardmax")])
@pytest.mark.parametrize("shape,axis", [((2, 3, 4, 5), 1), ((3, 7), -1), ((2, 5, 6), 1)])
def test_softmax_operations(operation, op, shape, axis, fmt, backend):
    x = _x(*shape) * 5
    _against_ort("softmax", {"axis": axis, "operation": operation}, x, [helper.make_node(op, ["x"], ["y"], axis=axis)],
                 fmt, backend)


def test_arg_operations_take_one_axis():
    with pytest.raises(ParameterError, match="argmax takes exactly one axis"):
        run_layer("reduce", {"operation": "argmax", "axes": "1,2"}, [_x(2, 3, 4)], FORMATS[0])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("dims", ["2x3x4x5", "3x4", "7"])
def test_constant_layer_adds_its_values_at_every_run(dims, fmt, backend):
    """A constant read by an element-wise layer: the same values at every run, whatever the input."""
    shape = tuple(int(s) for s in dims.split("x"))
    value = round_like(_x(*shape), fmt)
    m = Model("m")
    m.add_layer("input", "in0", params={"dimensions": dims})
    m.add_layer("constant", "k", params={"dimensions": dims})
    m.add_layer("element_wise", "add", params={"operation": "sum"}, inputs=["in0", "k"])
    m.add_layer("unary", "neg", params={"operation": "neg"}, inputs=["add"])
    m.add_layer("output", "out", inputs=["neg"])
    net = Network(m, default_registry(), backend_param(backend), fmt, weights=DictWeights({"k": {"value": value}}))
    for _ in range(2):
        x = round_like(_x(*shape), fmt)
        out = net.infer({"in0": x})["out"]
        assert_close(out, -(x.astype(np.float64) + value), fmt, dims)


def test_constant_layer_without_weights_is_zero():
    m = Model("m")
    m.add_layer("constant", "k", params={"dimensions": "2x3"})
    m.add_layer("output", "out", inputs=["k"])
    net = Network(m, default_registry(), get_backend("numpy"), FORMATS[0])
    np.testing.assert_array_equal(net.infer({})["out"], np.zeros((2, 3), np.float32))


def _two(shape_a: tuple[int, ...], shape_b: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Two tensors of small whole values (so that equal values occur) and a few zeros (false, for the logic)."""
    return (np.round(_x(*shape_a)), np.round(_x(*shape_b)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("operation,op", [("less", "Less"), ("less_equal", "LessOrEqual"), ("greater", "Greater"),
                                          ("greater_equal", "GreaterOrEqual"), ("equal", "Equal"), ("and", "And"),
                                          ("or", "Or"), ("xor", "Xor")])
@pytest.mark.parametrize("shapes", [((2, 3, 4, 5), (2, 3, 4, 5)), ((3, 4, 5), (5,))])
def test_compare_operations(operation, op, shapes, fmt, backend):
    a, b = (round_like(v, fmt) for v in _two(*shapes))
    out, _, _ = run_layer("compare", {"operation": operation}, [a, b], fmt, backend)
    if operation in ("and", "or", "xor"):
        nodes = [helper.make_node("Cast", ["a"], ["ab"], to=TensorProto.BOOL),
                 helper.make_node("Cast", ["b"], ["bb"], to=TensorProto.BOOL), helper.make_node(op, ["ab", "bb"], ["m"])]
    else:
        nodes = [helper.make_node(op, ["a", "b"], ["m"])]
    ref = ort_run([*nodes, helper.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT)], {"a": a, "b": b}, {})[0]
    assert_close(out, ref, fmt, operation)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("shapes", [((2, 3, 4, 5),) * 3, ((4, 5), (3, 4, 5), (1,)), ((1, 3, 1, 1), (2, 3, 4, 5), (5,))])
def test_where_selects_by_the_mask(shapes, fmt, backend):
    mask = (RNG.uniform(size=shapes[0]) > 0.5).astype(np.float32)
    x, y = round_like(_x(*shapes[1]), fmt), round_like(_x(*shapes[2]), fmt)
    out, _, _ = run_layer("where", {}, [mask, x, y], fmt, backend)
    ref = ort_run([helper.make_node("Cast", ["c"], ["cb"], to=TensorProto.BOOL),
                   helper.make_node("Where", ["cb", "x", "y"], ["out"])], {"c": mask, "x": x, "y": y}, {})[0]
    assert_close(out, ref, fmt, "where")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_not_of_a_mask(fmt, backend):
    mask = (RNG.uniform(size=(2, 3, 4, 5)) > 0.5).astype(np.float32)
    out, _, _ = run_layer("unary", {"operation": "not"}, [mask], fmt, backend)
    ref = ort_run([helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BOOL), helper.make_node("Not", ["b"], ["n"]),
                   helper.make_node("Cast", ["n"], ["y"], to=TensorProto.FLOAT)], {"x": mask}, {})[0]
    assert_close(out, ref, fmt, "not")
