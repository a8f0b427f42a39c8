"""upscale_concat against onnxruntime (Resize, Pad edge to the skip size, Concat) on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, ort_run, round_like, run_layer
from tests.plugins.group_b_refs import onnx_upscale_to

# (input 0 shape, skip shape, factor text, factor): exact, cropped (ceil) and edge-extended (floor) cases
CASES = [
    ((1, 3, 4, 5), (1, 2, 8, 10), "2", (2, 2)),
    ((2, 2, 4, 4), (2, 3, 7, 8), "2", (2, 2)),  # H: 8 cropped to 7
    ((1, 2, 3, 3), (1, 1, 7, 9), "2x3", (2, 3)),  # H: 6 extended to 7
    ((2, 1, 3, 2), (2, 2, 10, 5), "3x2", (3, 2)),  # H: 9 -> 10, W: 4 -> 5
]


def onnx_upscale_concat(x0, skips, factor, method):
    nodes, inits = onnx_upscale_to(x0, factor, method, skips[0].shape[2:])
    names = [f"skip{i}" for i in range(len(skips))]
    nodes.append(helper.make_node("Concat", ["u", *names], ["y"], axis=1))
    return ort_run(nodes, {"x0": x0, **dict(zip(names, skips))}, inits)[0]


@each_backend_and_format
@pytest.mark.parametrize("method", ["nearest", "bilinear"])
@pytest.mark.parametrize("s0,s1,factor,fhw", CASES)
def test_upscale_concat_matches_onnxruntime(backend, fmt, method, s0, s1, factor, fhw):
    rng = np.random.default_rng(1)
    x0, x1 = rng.standard_normal(s0).astype(np.float32), rng.standard_normal(s1).astype(np.float32)
    out, _, net = run_layer("upscale_concat", dict(factor=factor, method=method), [x0, x1], fmt, backend)
    ref = onnx_upscale_concat(round_like(x0, fmt), [round_like(x1, fmt)], fhw, method)
    assert_close(out, ref, fmt, f"upscale_concat {factor} {method}")
    assert tuple(net.dims("L")) == ref.shape


def test_documented_example_and_fused_activation():
    rng = np.random.default_rng(2)
    x0, x1 = rng.standard_normal((1, 4, 8, 8)).astype(np.float32), rng.standard_normal((1, 2, 15, 15)).astype(np.float32)
    out, _, _ = run_layer("upscale_concat", {}, [x0, x1], FORMATS[0], activation="relu")
    assert out.shape == (1, 6, 15, 15)
    up = x0.repeat(2, axis=2).repeat(2, axis=3)[:, :, :15, :15]
    np.testing.assert_array_equal(out, np.maximum(np.concatenate([up, x1], axis=1), 0))


def test_upscale_concat_shape_errors_are_named():
    fmt = FORMATS[0]
    with pytest.raises(ShapeError, match=r"upscale_concat L: input 0 \(1x2x5x4\) upsampled by 2x2 is 10x8, too far from "
                                         r"input 1 \(1x1x8x8\): input 0 must have H = 4 to be cropped or edge-extended to H = 8"):
        run_layer("upscale_concat", {}, [np.zeros((1, 2, 5, 4), np.float32), np.zeros((1, 1, 8, 8), np.float32)], fmt)
    with pytest.raises(ShapeError, match=r"input 0 must have W = 3 or 4 to be cropped or edge-extended to W = 7"):
        run_layer("upscale_concat", {}, [np.zeros((1, 2, 4, 2), np.float32), np.zeros((1, 1, 8, 7), np.float32)], fmt)
    with pytest.raises(ShapeError, match=r"upscale_concat L: input 0 \(2x2x4x4\) and input 1 \(1x1x8x8\) have different "
                                         r"batch sizes N \(2 vs 1\)"):
        run_layer("upscale_concat", {}, [np.zeros((2, 2, 4, 4), np.float32), np.zeros((1, 1, 8, 8), np.float32)], fmt)
