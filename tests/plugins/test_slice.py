"""slice against onnxruntime's Slice on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ParameterError, ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, ort_run, round_like, run_layer
from tests.plugins.group_b_refs import int64_const

BIG = 2**62  # ONNX Slice clamps out-of-range bounds, so "to the end" is a huge number


def onnx_bounds(text):
    """ONNX (start, end, step) of a Python-style range, written independently of the layer's parser."""
    parts = [p.strip() for p in text.split(":")]
    if len(parts) == 1 and parts[0]:
        i = int(parts[0])
        return i, (i + 1 if i != -1 else BIG), 1
    parts += [""] * (3 - len(parts))
    step = int(parts[2]) if parts[2] else 1
    start = int(parts[0]) if parts[0] else (0 if step > 0 else BIG)
    end = int(parts[1]) if parts[1] else (BIG if step > 0 else -BIG)
    return start, end, step


def onnx_slice(x, channels, height, width):
    b = [onnx_bounds(t) for t in (channels, height, width)]
    nodes = [int64_const("s", [v[0] for v in b]), int64_const("e", [v[1] for v in b]), int64_const("a", [1, 2, 3]),
             int64_const("t", [v[2] for v in b]), helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])]
    return ort_run(nodes, {"x": x}, {})[0]


CASES = [
    # (N, C, H, W), (channels, height, width)
    ((1, 5, 7, 6), (":", ":", ":")),
    ((2, 6, 8, 9), ("1:4", "2:", ":-2")),
    ((1, 4, 9, 8), ("::2", "1:-1:3", "::-1")),
    ((2, 3, 6, 7), ("-1", "-3:", " 5:1:-2 ")),
    ((1, 8, 5, 5), ("-2::-3", "2", "-100:100")),
    ((1, 2, 10, 3), ("", "3:9:2", "1:2")),
]


@each_backend_and_format
@pytest.mark.parametrize("shape,ranges", CASES)
def test_slice_matches_onnxruntime(backend, fmt, shape, ranges):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    params = dict(zip(("channels", "height", "width"), ranges))
    out, _, net = run_layer("slice", params, [x], fmt, backend)
    ref = onnx_slice(round_like(x, fmt), *ranges)
    assert_close(out, ref, fmt, f"slice {params}")
    assert tuple(net.dims("L")) == ref.shape


def test_documented_examples_and_fused_activation():
    x = np.random.default_rng(2).standard_normal((1, 8, 10, 10)).astype(np.float32)
    fmt = FORMATS[0]
    assert run_layer("slice", dict(channels="0:3"), [x], fmt)[0].shape == (1, 3, 10, 10)
    assert run_layer("slice", dict(height="1:-1", width="::2"), [x], fmt)[0].shape == (1, 8, 8, 5)
    np.testing.assert_array_equal(run_layer("slice", dict(channels="-1"), [x], fmt)[0], x[:, 7:8])
    out, _, _ = run_layer("slice", dict(width="::-1"), [x], fmt, activation="relu")
    np.testing.assert_array_equal(out, np.maximum(x[:, :, :, ::-1], 0))


def test_slice_errors_are_named():
    x = np.zeros((1, 3, 4, 4), np.float32)
    fmt = FORMATS[0]
    for bad in ("1:2:0", "a:b", "1:2:3:4", "1.5", "0-2"):
        with pytest.raises(ParameterError, match=rf"slice L: parameter height: '{bad}' is not a range start:end:step"):
            run_layer("slice", dict(height=bad), [x], fmt)
    with pytest.raises(ShapeError, match=r"slice L: channels '5' keeps nothing of the input's C = 3 \(indices 0..2, or -3..-1"):
        run_layer("slice", dict(channels="5"), [x], fmt)
    with pytest.raises(ShapeError, match=r"slice L: width '3:1' keeps nothing of the input's W = 4"):
        run_layer("slice", dict(width="3:1"), [x], fmt)
