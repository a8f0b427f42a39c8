"""upscale_concat_two against onnxruntime (Resize, Pad edge to the skip size, Concat of three) on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, round_like, run_layer
from tests.plugins.test_upscale_concat import onnx_upscale_concat

CASES = [
    ((1, 3, 4, 5), (1, 2, 8, 10), 1, "2", (2, 2)),
    ((2, 2, 4, 3), (2, 3, 7, 6), 4, "2", (2, 2)),
    ((2, 1, 3, 2), (2, 2, 10, 5), 3, "3x2", (3, 2)),
]


@each_backend_and_format
@pytest.mark.parametrize("method", ["nearest", "bilinear"])
@pytest.mark.parametrize("s0,s1,c2,factor,fhw", CASES)
def test_upscale_concat_two_matches_onnxruntime(backend, fmt, method, s0, s1, c2, factor, fhw):
    rng = np.random.default_rng(1)
    s2 = (s1[0], c2, *s1[2:])
    xs = [rng.standard_normal(s).astype(np.float32) for s in (s0, s1, s2)]
    out, _, net = run_layer("upscale_concat_two", dict(factor=factor, method=method), xs, fmt, backend, activation="tanh")
    ref = np.tanh(onnx_upscale_concat(round_like(xs[0], fmt), [round_like(x, fmt) for x in xs[1:]], fhw, method))
    assert_close(out, ref, fmt, f"upscale_concat_two {factor} {method}")
    assert tuple(net.dims("L")) == ref.shape == (s1[0], s0[1] + s1[1] + c2, *s1[2:])


def test_upscale_concat_two_shape_errors_are_named():
    z = lambda *s: np.zeros(s, np.float32)  # noqa: E731
    with pytest.raises(ShapeError, match=r"upscale_concat_two L: input 2 \(1x3x8x7\) must have the same N, H and W as "
                                         r"input 1 \(1x1x8x8\)"):
        run_layer("upscale_concat_two", {}, [z(1, 2, 4, 4), z(1, 1, 8, 8), z(1, 3, 8, 7)], FORMATS[0])
    with pytest.raises(ShapeError, match=r"upscale_concat_two L: input 0 \(1x2x4x4\) upsampled by 3x3 is 12x12, too far"):
        run_layer("upscale_concat_two", dict(factor=3), [z(1, 2, 4, 4), z(1, 1, 8, 8), z(1, 3, 8, 8)], FORMATS[0])
