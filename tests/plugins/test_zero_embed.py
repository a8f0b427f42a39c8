"""zero_embed against onnxruntime's Pad (constant zeros) on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ParameterError, ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, round_like, run_layer
from tests.plugins.group_b_refs import onnx_pad

CASES = [
    # (N, C, H, W), params
    ((1, 3, 5, 6), dict(channels=4)),
    ((2, 3, 4, 5), dict(channels=8, channel_offset=2)),
    ((1, 2, 5, 7), dict(height=9, width=8, top=3, left=1)),
    ((2, 1, 3, 3), dict(channels=3, height=6, width=3, channel_offset=1, top=2)),
    ((1, 2, 4, 4), dict()),  # identity
    ((1, 2, 4, 4), dict(channels=2, height=4, width=5, left=1)),
]


@each_backend_and_format
@pytest.mark.parametrize("shape,params", CASES)
def test_zero_embed_matches_onnxruntime(backend, fmt, shape, params):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, _, net = run_layer("zero_embed", params, [x], fmt, backend)
    _, c, h, w = shape
    oc, ot, ol = (params.get(k, 0) for k in ("channel_offset", "top", "left"))
    size = [params.get(k, 0) or d for k, d in (("channels", c), ("height", h), ("width", w))]
    ref = onnx_pad(round_like(x, fmt), [0, oc, ot, ol], [0, size[0] - oc - c, size[1] - ot - h, size[2] - ol - w], "constant")
    assert_close(out, ref, fmt, f"zero_embed {params}")
    assert tuple(net.dims("L")) == ref.shape


def test_documented_example_and_activation_covers_the_zeros():
    x = np.random.default_rng(2).random((1, 3, 4, 4)).astype(np.float32) + 1
    out, _, _ = run_layer("zero_embed", dict(channels=8, channel_offset=2), [x], FORMATS[0], activation="sigmoid")
    assert out.shape == (1, 8, 4, 4)
    np.testing.assert_allclose(out[:, [0, 1, 5, 6, 7]], 0.5)  # the activation applies to the whole output
    np.testing.assert_allclose(out[:, 2:5], 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-6)


def test_zero_embed_errors_are_named():
    x = np.zeros((1, 3, 4, 4), np.float32)
    with pytest.raises(ShapeError, match=r"zero_embed L: the input 1x3x4x4 does not fit: channel_offset 2 \+ input C 3 = 5 "
                                         r"exceeds channels 4"):
        run_layer("zero_embed", dict(channels=4, channel_offset=2), [x], FORMATS[0])
    with pytest.raises(ShapeError, match=r"top 1 \+ input H 4 = 5 exceeds height 4"):
        run_layer("zero_embed", dict(top=1), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"zero_embed L: parameter left: '-1' is not an integer in \[0, 65536\]"):
        run_layer("zero_embed", dict(left=-1), [x], FORMATS[0])
