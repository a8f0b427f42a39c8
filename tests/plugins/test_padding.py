"""padding against onnxruntime's Pad (constant / reflect / edge, negative pads crop) on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ParameterError, ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, round_like, run_layer
from tests.plugins.group_b_refs import onnx_pad

ONNX_MODE = {"zero": "constant", "reflect": "reflect", "replicate": "edge"}
SIDES = ("top", "bottom", "left", "right")

CASES = [
    # (N, C, H, W), (top, bottom, left, right)
    ((1, 3, 5, 6), (1, 1, 1, 1)),
    ((2, 2, 6, 7), (2, 0, 3, 1)),
    ((1, 2, 7, 6), (-1, 2, 2, -2)),  # crop one side, pad the other
    ((2, 1, 8, 9), (-2, -3, 0, -1)),  # crop only
    ((1, 4, 4, 5), (3, 3, 4, 4)),  # reflect at its limit (size - 1)
]


@each_backend_and_format
@pytest.mark.parametrize("mode", list(ONNX_MODE))
@pytest.mark.parametrize("shape,pads", CASES)
def test_padding_matches_onnxruntime(backend, fmt, mode, shape, pads):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    params = dict(zip(SIDES, pads), mode=mode)
    out, _, net = run_layer("padding", params, [x], fmt, backend)
    t, b, lt, r = pads
    ref = onnx_pad(round_like(x, fmt), [0, 0, t, lt], [0, 0, b, r], ONNX_MODE[mode])
    assert_close(out, ref, fmt, f"padding {params}")
    assert tuple(net.dims("L")) == ref.shape


def test_documented_reflect_and_replicate_rows():
    x = np.array([[[[1.0, 2.0, 3.0]]]], np.float32)
    fmt = FORMATS[0]
    out, _, _ = run_layer("padding", dict(mode="reflect", top=0, bottom=0, left=2, right=0), [x], fmt)
    np.testing.assert_array_equal(out[0, 0, 0], [3, 2, 1, 2, 3])
    out, _, _ = run_layer("padding", dict(mode="replicate", top=0, bottom=0, left=2, right=0), [x], fmt)
    np.testing.assert_array_equal(out[0, 0, 0], [1, 1, 1, 2, 3])


def test_padding_fuses_activation_and_follows_new_sizes():
    fmt = FORMATS[1]
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((1, 2, 5, 5)).astype(np.float32), rng.standard_normal((2, 2, 7, 4)).astype(np.float32)
    params = dict(mode="reflect", top=2, bottom=-1, left=1, right=3)
    _, _, net = run_layer("padding", params, [a], fmt, activation="sigmoid")
    net.set_input("in0", b)
    net.run()
    ref = onnx_pad(b, [0, 0, 2, 1], [0, 0, -1, 3], "reflect")
    assert_close(net.output("out"), 1 / (1 + np.exp(-ref.astype(np.float64))), fmt)


def test_padding_errors_are_named():
    x = np.zeros((1, 1, 4, 5), np.float32)
    fmt = FORMATS[0]
    with pytest.raises(ShapeError, match=r"padding L: reflect padding left=5 needs W > 5, but the input has W = 5"):
        run_layer("padding", dict(mode="reflect", left=5), [x], fmt)
    with pytest.raises(ShapeError, match=r"padding L: reflect padding bottom=2 needs H > 2, but the cropped input has H = 2"):
        run_layer("padding", dict(mode="reflect", top=-2, bottom=2), [x], fmt)
    with pytest.raises(ShapeError, match=r"padding L: top=-3 and bottom=-1 crop away all of the input's H = 4"):
        run_layer("padding", dict(top=-3, bottom=-1), [x], fmt)
    with pytest.raises(ParameterError, match=r"padding L: parameter mode: 'edge' is not one of zero, reflect, replicate"):
        run_layer("padding", dict(mode="edge"), [x], fmt)
    with pytest.raises(ParameterError, match=r"padding L: parameter right: '1.5' is not an integer in \[-65536, 65536\]"):
        run_layer("padding", dict(right=1.5), [x], fmt)
