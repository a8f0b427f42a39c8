"""concatenation against onnxruntime's Concat (axis 1) on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import GraphError, ShapeError
from engine.tensor import FORMATS
from tests.harness import FORMAT_IDS, assert_close, each_backend_and_format, ort_run, round_like, run_layer


def onnx_concat(xs):
    names = [f"x{i}" for i in range(len(xs))]
    return ort_run([helper.make_node("Concat", names, ["y"], axis=1)], dict(zip(names, xs)), {})[0]


@each_backend_and_format
@pytest.mark.parametrize("shapes", [
    [(1, 3, 8, 8)],
    [(1, 3, 7, 5), (1, 2, 7, 5)],
    [(2, 1, 6, 9), (2, 4, 6, 9), (2, 3, 6, 9)],
    [(3, 2, 5, 4)] * 4,
])
def test_concatenation_matches_onnxruntime(backend, fmt, shapes):
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out, _, net = run_layer("concatenation", {}, xs, fmt, backend)
    assert tuple(net.dims("L")) == out.shape
    assert_close(out, onnx_concat([round_like(x, fmt) for x in xs]), fmt)


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_concatenation_with_activation_and_a_gap(fmt):
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((2, c, 5, 6)).astype(np.float32) for c in (2, 3)]
    out, _, _ = run_layer("concatenation", {}, [xs[0], None, xs[1]], fmt, activation="relu")  # slot 1 unconnected
    assert_close(out, np.maximum(onnx_concat([round_like(x, fmt) for x in xs]), 0), fmt)


@pytest.mark.parametrize("shapes,message", [
    ([(1, 3, 8, 8), (1, 2, 8, 9)], r"concatenation L: input 1 \(1x2x8x9\) differs from input 0 \(1x3x8x8\) in W \(9 vs 8\)"),
    ([(1, 3, 8, 8), (1, 3, 8, 8), (2, 1, 7, 8)],
     r"input 2 \(2x1x7x8\) differs from input 0 \(1x3x8x8\) in N \(2 vs 1\), H \(7 vs 8\)"),
])
def test_mismatched_inputs_name_the_dimensions(shapes, message):
    with pytest.raises(ShapeError, match=message):
        run_layer("concatenation", {}, [np.zeros(s, np.float32) for s in shapes], FORMATS[0])


def test_no_input_is_an_error():
    with pytest.raises(GraphError, match="concatenation L: these mandatory inputs are not connected: 0"):
        run_layer("concatenation", {}, [None], FORMATS[0])
