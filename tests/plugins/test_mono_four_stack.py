"""mono_four_stack against onnxruntime (Pad to even size, SpaceToDepth blocksize 2) on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, ort_run, round_like, run_layer
from tests.plugins.group_b_refs import int64_const


def onnx_four_stack(x):
    h, w = x.shape[2:]
    nodes = [int64_const("p", [0, 0, 0, 0, 0, 0, h % 2, w % 2]), helper.make_node("Pad", ["x", "p"], ["e"], mode="constant"),
             helper.make_node("SpaceToDepth", ["e"], ["y"], blocksize=2)]
    return ort_run(nodes, {"x": x}, {})[0]


@each_backend_and_format
@pytest.mark.parametrize("shape", [(1, 1, 4, 6), (2, 1, 5, 7), (1, 1, 6, 3), (3, 1, 1, 1), (2, 1, 9, 8)])
def test_mono_four_stack_matches_onnxruntime(backend, fmt, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, _, net = run_layer("mono_four_stack", {}, [x], fmt, backend)
    ref = onnx_four_stack(round_like(x, fmt))
    assert_close(out, ref, fmt, f"mono_four_stack {shape}")
    assert tuple(net.dims("L")) == ref.shape


def test_documented_example_and_fused_activation():
    x = np.array([[[[1, 2, 3, 4], [5, 6, 7, 8]]]], np.float32)
    out, _, _ = run_layer("mono_four_stack", {}, [x], FORMATS[0])
    np.testing.assert_array_equal(out, [[[[1, 3]], [[2, 4]], [[5, 7]], [[6, 8]]]])
    out, _, _ = run_layer("mono_four_stack", {}, [x - 4.5], FORMATS[0], activation="relu")
    np.testing.assert_array_equal(out, [[[[0, 0]], [[0, 0]], [[0.5, 2.5]], [[1.5, 3.5]]]])


def test_needs_one_channel():
    with pytest.raises(ShapeError, match=r"mono_four_stack L: the input 1x3x4x4 has 3 channels; mono_four_stack needs exactly 1"):
        run_layer("mono_four_stack", {}, [np.zeros((1, 3, 4, 4), np.float32)], FORMATS[0])
