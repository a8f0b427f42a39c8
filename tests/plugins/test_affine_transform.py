"""affine_transform against a float64 per-pixel reference on every backend and format; known
geometric cases (a quarter turn is np.rot90, a translation is a shift); its runtime options."""
from __future__ import annotations

import math

import numpy as np
import pytest

from engine.errors import ParameterError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, round_like, run_layer
from tests.plugins.analysis_helpers import chain_net


def ref_transform(x, rotation=0.0, scale=1.0, tx=0.0, ty=0.0, interpolation="bilinear", border="zeros"):
    """Pixel by pixel: invert the forward map p -> c + t + s R p' (R counter-clockwise on screen)."""
    x = x.astype(np.float64)
    n, ch, h, w = x.shape
    c = np.array([(w - 1) / 2, (h - 1) / 2])
    th = math.radians(rotation)
    # screen rows grow downwards: a counter-clockwise turn maps (dx, dy) to (cos dx + sin dy, -sin dx + cos dy)
    fwd = scale * np.array([[math.cos(th), math.sin(th)], [-math.sin(th), math.cos(th)]])
    inv = np.linalg.inv(fwd)

    def read(row, col):
        if border == "edge":
            row, col = min(max(row, 0), h - 1), min(max(col, 0), w - 1)
        if 0 <= row < h and 0 <= col < w:
            return x[:, :, row, col]
        return np.zeros((n, ch))

    out = np.zeros_like(x)
    for r in range(h):
        for q in range(w):
            sx, sy = c + inv @ (np.array([q, r]) - c - np.array([tx, ty]))
            if interpolation == "nearest":
                out[:, :, r, q] = read(int(math.floor(sy + 0.5)), int(math.floor(sx + 0.5)))
            else:
                x0, y0 = math.floor(sx), math.floor(sy)
                fx, fy = sx - x0, sy - y0
                out[:, :, r, q] = ((1 - fy) * ((1 - fx) * read(y0, x0) + fx * read(y0, x0 + 1))
                                   + fy * ((1 - fx) * read(y0 + 1, x0) + fx * read(y0 + 1, x0 + 1)))
    return out


CASES = [
    dict(rotation=30),
    dict(rotation=-45, scale=1.3, translate_x=1.5, translate_y=-0.75),
    dict(scale=0.6, interpolation="nearest"),
    dict(rotation=100, translate_x=2, border="edge"),
    dict(rotation=15, scale=2.0, interpolation="nearest", border="edge"),
]


@each_backend_and_format
@pytest.mark.parametrize("params", CASES)
def test_affine_transform_matches_reference(backend, fmt, params):
    x = np.random.default_rng(7).random((2, 3, 7, 9)).astype(np.float32)
    out, _, _ = run_layer("affine_transform", params, [x], fmt, backend)
    ref = ref_transform(round_like(x, fmt), params.get("rotation", 0), params.get("scale", 1),
                        params.get("translate_x", 0), params.get("translate_y", 0),
                        params.get("interpolation", "bilinear"), params.get("border", "zeros"))
    assert_close(out, ref, fmt, f"affine_transform {params}")


def test_quarter_turn_is_rot90_and_translation_is_a_shift():
    x = np.random.default_rng(8).random((1, 2, 5, 5)).astype(np.float32)
    fmt = FORMATS[0]
    out, _, _ = run_layer("affine_transform", dict(rotation=90, interpolation="nearest"), [x], fmt)
    np.testing.assert_allclose(out, np.rot90(x, 1, axes=(2, 3)), atol=1e-6)
    out, _, _ = run_layer("affine_transform", dict(rotation=90), [x], fmt)  # bilinear on exact positions
    np.testing.assert_allclose(out, np.rot90(x, 1, axes=(2, 3)), atol=1e-5)
    out, _, _ = run_layer("affine_transform", dict(translate_x=2, translate_y=1), [x], fmt)
    shifted = np.zeros_like(x)
    shifted[:, :, 1:, 2:] = x[:, :, :-1, :-2]
    np.testing.assert_allclose(out, shifted, atol=1e-6)


def test_affine_transform_options():
    net = chain_net("affine_transform")
    net.run()
    x = net.output("pre0")
    with pytest.raises(ParameterError, match=r"affine_transform L: parameter scale: '0' is not a number in \[0.01, 100\]"):
        net.set_runtime_option("L", "scale", 0)
    with pytest.raises(ParameterError, match=r"parameter interpolation: 'cubic' is not one of nearest, bilinear"):
        net.set_runtime_option("L", "interpolation", "cubic")
    net.set_runtime_option("L", "rotation", "12.5")
    net.set_runtime_option("L", "interpolation", "nearest")
    assert net.run() == ["L", "post", "out"]
    np.testing.assert_allclose(net.output("L"), ref_transform(x, 12.5, interpolation="nearest"), atol=1e-5)
    net.set_runtime_option("L", "scale", 1.5)
    assert net.run() == ["L", "post", "out"]
    np.testing.assert_allclose(net.output("L"), ref_transform(x, 12.5, 1.5, interpolation="nearest"), atol=1e-5)
    assert net.output("L").shape == x.shape  # the output keeps the input's size
