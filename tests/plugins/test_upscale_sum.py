"""upscale_sum against onnxruntime (Resize, Pad edge to the skip size, Add) on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, ort_run, round_like, run_layer
from tests.plugins.group_b_refs import onnx_upscale_to

CASES = [
    ((1, 3, 4, 5), (8, 10), "2", (2, 2)),
    ((2, 2, 4, 4), (7, 8), "2", (2, 2)),
    ((1, 2, 3, 3), (7, 9), "2x3", (2, 3)),
    ((2, 1, 3, 2), (10, 5), "3x2", (3, 2)),
]


def onnx_upscale_sum(x0, x1, factor, method):
    nodes, inits = onnx_upscale_to(x0, factor, method, x1.shape[2:])
    nodes.append(helper.make_node("Add", ["u", "skip"], ["y"]))
    return ort_run(nodes, {"x0": x0, "skip": x1}, inits)[0]


@each_backend_and_format
@pytest.mark.parametrize("method", ["nearest", "bilinear"])
@pytest.mark.parametrize("s0,hw1,factor,fhw", CASES)
def test_upscale_sum_matches_onnxruntime(backend, fmt, method, s0, hw1, factor, fhw):
    rng = np.random.default_rng(1)
    x0, x1 = rng.standard_normal(s0).astype(np.float32), rng.standard_normal((*s0[:2], *hw1)).astype(np.float32)
    out, _, net = run_layer("upscale_sum", dict(factor=factor, method=method), [x0, x1], fmt, backend)
    ref = onnx_upscale_sum(round_like(x0, fmt), round_like(x1, fmt), fhw, method)
    assert_close(out, ref, fmt, f"upscale_sum {factor} {method}")
    assert tuple(net.dims("L")) == ref.shape


def test_documented_example_and_fused_activation():
    x0, x1 = np.array([[[[1.0, 2.0]]]], np.float32), np.ones((1, 1, 2, 4), np.float32)
    out, _, _ = run_layer("upscale_sum", {}, [x0, x1], FORMATS[0])
    np.testing.assert_array_equal(out[0, 0], [[2, 2, 3, 3], [2, 2, 3, 3]])
    out, _, _ = run_layer("upscale_sum", {}, [x0, -4 * x1], FORMATS[0], activation="relu")
    np.testing.assert_array_equal(out[0, 0], np.zeros((2, 4)))


def test_upscale_sum_channel_mismatch_is_named():
    with pytest.raises(ShapeError, match=r"upscale_sum L: input 0 \(1x2x4x4\) and input 1 \(1x3x8x8\) must have the same "
                                         r"number of channels \(2 vs 3\)"):
        run_layer("upscale_sum", {}, [np.zeros((1, 2, 4, 4), np.float32), np.zeros((1, 3, 8, 8), np.float32)], FORMATS[0])
