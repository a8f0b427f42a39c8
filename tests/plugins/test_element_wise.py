"""element_wise against onnxruntime (Sum/Mul/Max/Min/Sub/Div/Mean) on every backend and format, with
broadcasting of size-1 dimensions (the squeeze-excitation product N x C x H x W * N x C x 1 x 1)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, ort_run, round_like, run_layer

OPS = {"sum": "Sum", "product": "Mul", "max": "Max", "min": "Min", "sub": "Sub", "div": "Div", "mean": "Mean"}


def onnx_chain(op, xs):
    names = [f"x{i}" for i in range(len(xs))]
    if op in ("sum", "max", "min", "mean"):
        nodes = [helper.make_node(OPS[op], names, ["y"])]
    else:  # binary ops chained left to right
        nodes, acc = [], names[0]
        for i, n in enumerate(names[1:]):
            out = "y" if i == len(names) - 2 else f"t{i}"
            nodes.append(helper.make_node(OPS[op], [acc, n], [out]))
            acc = out
    return ort_run(nodes, dict(zip(names, xs)), {})[0]


@each_backend_and_format
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("shapes", [[(1, 3, 7, 5)] * 2, [(2, 4, 6, 9)] * 3, [(1, 3, 5, 5), (1, 1, 1, 1)],
                                    [(2, 4, 6, 5), (2, 4, 1, 1)], [(2, 1, 1, 1), (2, 3, 4, 5)],
                                    [(1, 3, 4, 5), (1, 1, 4, 5), (1, 3, 1, 1)]])
def test_element_wise_matches_onnxruntime(backend, fmt, op, shapes):
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    if op == "div":  # denominators away from zero: the quotient stays within float16 range and tolerances
        xs[1:] = [np.sign(x) * (0.5 + np.abs(x)) for x in xs[1:]]
    out, _, _ = run_layer("element_wise", {"operation": op}, xs, fmt, backend)
    assert_close(out, onnx_chain(op, [round_like(x, fmt) for x in xs]), fmt, op)


def test_mismatched_inputs_name_the_dimension():
    with pytest.raises(ShapeError, match=r"element_wise L: inputs of dimensions 1x3x4x4 and 1x2x4x4 differ in C"):
        run_layer("element_wise", {}, [np.zeros((1, 3, 4, 4), np.float32), np.zeros((1, 2, 4, 4), np.float32)],
                  FORMATS[0])


def test_squeeze_excitation_product_shape_and_values():
    """x (N x C x H x W) times a per-image, per-channel gate (N x C x 1 x 1) scales each channel."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    gate = rng.uniform(0, 1, (2, 3, 1, 1)).astype(np.float32)
    for order in ([x, gate], [gate, x]):
        out, _, net = run_layer("element_wise", {"operation": "product"}, order, FORMATS[0])
        np.testing.assert_allclose(out, x * gate, rtol=1e-6)
    assert net.dims("L") == (2, 3, 4, 5)


@pytest.mark.parametrize("op", ["div", "mean"])
def test_single_input_passes_through(op):
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    out, _, _ = run_layer("element_wise", {"operation": op}, [x], FORMATS[0])
    np.testing.assert_array_equal(out, x)
