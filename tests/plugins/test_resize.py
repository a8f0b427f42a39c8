"""resize against onnxruntime's Resize on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from engine.errors import ParameterError, ShapeError
from engine.tensor import FORMATS
from tests.harness import BACKENDS, FORMAT_IDS, assert_close, ort_run, round_like, run_layer

ONNX_MODE = {"nearest": "nearest", "bilinear": "linear", "bicubic": "cubic"}


def int64_const(name, values):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, [len(values)], values))


def onnx_resize(x, mode, coords, size=None, scales=None):
    """ONNX Resize by sizes or by scales (nearest rounds half down, cubic A = -0.75: the ONNX defaults)."""
    attrs = dict(mode=ONNX_MODE[mode], coordinate_transformation_mode=coords, nearest_mode="round_prefer_floor",
                 cubic_coeff_a=-0.75)
    if size is not None:
        nodes = [int64_const("sz", [x.shape[0], x.shape[1], *size]),
                 helper.make_node("Resize", ["x", "", "", "sz"], ["y"], **attrs)]
        return ort_run(nodes, {"x": x}, {})[0]
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], **attrs)
    return ort_run([node], {"x": x}, {"s": np.array([1, 1, *scales], np.float32)})[0]


CASES = [
    # (N, C, H, W), params (size or scales)
    ((1, 3, 5, 7), dict(scale_h=2, scale_w=2)),
    ((2, 2, 6, 4), dict(scale_h=1.5, scale_w=3)),
    ((1, 2, 9, 8), dict(scale_h=0.5, scale_w=0.75)),
    ((2, 1, 7, 6), dict(size="11x4")),
    ((1, 2, 8, 9), dict(size="3")),
    ((1, 1, 4, 5), dict(size="1x9")),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("coords", ["half_pixel", "align_corners"])
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
@pytest.mark.parametrize("shape,params", CASES)
def test_resize_matches_onnxruntime(backend, fmt, mode, coords, shape, params):
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    params = dict(params, mode=mode, coordinate_mode=coords)
    out, _, net = run_layer("resize", params, [x], fmt, backend)
    if "size" in params:
        parts = [int(p) for p in str(params["size"]).split("x")]
        size = parts * 2 if len(parts) == 1 else parts
        ref = onnx_resize(round_like(x, fmt), mode, coords, size=size)
    else:
        ref = onnx_resize(round_like(x, fmt), mode, coords, scales=[params["scale_h"], params["scale_w"]])
    assert_close(out, ref, fmt, f"resize {params}")
    assert tuple(net.dims("L")) == ref.shape


def test_resize_fuses_activation():
    x = np.random.default_rng(6).standard_normal((1, 2, 5, 5)).astype(np.float32)
    fmt = FORMATS[0]
    out, _, _ = run_layer("resize", dict(mode="bicubic"), [x], fmt, activation="relu")
    assert_close(out, np.maximum(onnx_resize(x, "bicubic", "half_pixel", scales=[2, 2]), 0), fmt)


def test_resize_errors_are_named():
    x = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(ParameterError, match=r"resize L: parameter size: 8x0: give both the height and the width"):
        run_layer("resize", dict(size="8x0"), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"resize L: parameter scale_h: '0' is not a number in \[0.01, 1024\]"):
        run_layer("resize", dict(scale_h=0), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"resize L: parameter mode: 'linear' is not one of nearest, bilinear, bicubic"):
        run_layer("resize", dict(mode="linear"), [x], FORMATS[0])
    with pytest.raises(ShapeError, match=r"resize L: scaling the input 4x4 by 0.2x1 gives 0x4; the output must be at least 1x1"):
        run_layer("resize", dict(scale_h=0.2, scale_w=1), [x], FORMATS[0])
