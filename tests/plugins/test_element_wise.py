"""element_wise against onnxruntime (Sum/Mul/Max/Min/Sub) on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ShapeError
from engine.tensor import FORMATS
from tests.harness import BACKENDS, FORMAT_IDS, assert_close, ort_run, round_like, run_layer

OPS = {"sum": "Sum", "product": "Mul", "max": "Max", "min": "Min", "sub": "Sub"}


def onnx_chain(op, xs):
    names = [f"x{i}" for i in range(len(xs))]
    if op in ("sum", "max", "min"):
        nodes = [helper.make_node(OPS[op], names, ["y"])]
    else:  # binary ops chained left to right
        nodes, acc = [], names[0]
        for i, n in enumerate(names[1:]):
            out = "y" if i == len(names) - 2 else f"t{i}"
            nodes.append(helper.make_node(OPS[op], [acc, n], [out]))
            acc = out
    return ort_run(nodes, dict(zip(names, xs)), {})[0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("shapes", [[(1, 3, 7, 5)] * 2, [(2, 4, 6, 9)] * 3, [(1, 3, 5, 5), (1, 1, 1, 1)]])
def test_element_wise_matches_onnxruntime(backend, fmt, op, shapes):
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out, _, _ = run_layer("element_wise", {"operation": op}, xs, fmt, backend)
    assert_close(out, onnx_chain(op, [round_like(x, fmt) for x in xs]), fmt, op)


def test_mismatched_inputs_name_the_dimension():
    with pytest.raises(ShapeError, match=r"element_wise L: inputs of dimensions 1x3x4x4 and 1x2x4x4 differ in C"):
        run_layer("element_wise", {}, [np.zeros((1, 3, 4, 4), np.float32), np.zeros((1, 2, 4, 4), np.float32)],
                  FORMATS[0])
