"""color_conversion against float64 NumPy references written from the documented BT.601 formulas,
and against OpenCV's cvtColor where it implements the same conversion."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from engine.errors import ParameterError, ShapeError
from engine.tensor import FORMATS
from plugins.standard.color_conversion import CONVERSIONS
from tests.harness import FORMAT_IDS, assert_close, each_backend_and_format, round_like, run_layer


def reference(x, conversion, offset=0.5):
    """The documented formulas, per pixel, in float64."""
    x = x.astype(np.float64)
    a, b, c = x[:, 0], x[:, 1], x[:, 2]
    if conversion in ("rgb_to_bgr", "bgr_to_rgb"):
        return x[:, ::-1]
    if conversion in ("rgb_to_gray", "bgr_to_gray"):
        r, g, bl = (a, b, c) if conversion == "rgb_to_gray" else (c, b, a)
        return (0.299 * r + 0.587 * g + 0.114 * bl)[:, None]
    if conversion == "rgb_to_ycbcr":
        y = 0.299 * a + 0.587 * b + 0.114 * c
        return np.stack([y, (c - y) / 1.772 + offset, (a - y) / 1.402 + offset], axis=1)
    if conversion == "ycbcr_to_rgb":
        cb, cr = b - offset, c - offset
        return np.stack([a + 1.402 * cr, a - 0.344136 * cb - 0.714136 * cr, a + 1.772 * cb], axis=1)
    if conversion == "rgb_to_yuv":
        y = 0.299 * a + 0.587 * b + 0.114 * c
        return np.stack([y, 0.436 * (c - y) / 0.886, 0.615 * (a - y) / 0.701], axis=1)
    if conversion == "yuv_to_rgb":
        return np.stack([a + 1.139837 * c, a - 0.394652 * b - 0.580599 * c, a + 2.032110 * b], axis=1)
    raise AssertionError(conversion)


@each_backend_and_format
@pytest.mark.parametrize("conversion", CONVERSIONS)
@pytest.mark.parametrize("shape", [(1, 3, 8, 8), (2, 3, 7, 5)])
def test_color_conversion_matches_documented_formula(backend, fmt, conversion, shape):
    x = np.random.default_rng(1).random(shape).astype(np.float32)
    out, _, net = run_layer("color_conversion", dict(conversion=conversion), [x], fmt, backend)
    assert tuple(net.dims("L")) == out.shape
    # (the documented inverse coefficients have 6 decimals: well inside the tolerance)
    assert_close(out, reference(round_like(x, fmt), conversion), fmt, conversion)


@pytest.mark.parametrize("conversion,code,order", [
    ("rgb_to_ycbcr", cv2.COLOR_RGB2YCrCb, [0, 2, 1]),
    ("rgb_to_gray", cv2.COLOR_RGB2GRAY, [0]),
    ("bgr_to_gray", cv2.COLOR_BGR2GRAY, [0]),
])
def test_agrees_with_opencv(conversion, code, order):
    x = np.random.default_rng(2).random((1, 3, 6, 7)).astype(np.float32)
    out, _, _ = run_layer("color_conversion", dict(conversion=conversion), [x], FORMATS[0])
    cv = cv2.cvtColor(np.ascontiguousarray(x[0].transpose(1, 2, 0)), code)
    cv = cv.reshape(cv.shape[0], cv.shape[1], -1).transpose(2, 0, 1)[order]
    np.testing.assert_allclose(out[0], cv, atol=1e-3)  # OpenCV rounds the chroma gains to 3 decimals


@pytest.mark.parametrize("forward,back", [("rgb_to_ycbcr", "ycbcr_to_rgb"), ("rgb_to_yuv", "yuv_to_rgb"),
                                          ("rgb_to_bgr", "bgr_to_rgb")])
def test_round_trip_is_identity(forward, back):
    x = np.random.default_rng(3).random((2, 3, 5, 6)).astype(np.float32)
    y, _, _ = run_layer("color_conversion", dict(conversion=forward, chroma_offset=128), [x], FORMATS[0])
    z, _, _ = run_layer("color_conversion", dict(conversion=back, chroma_offset=128), [y], FORMATS[0])
    np.testing.assert_allclose(z, x, atol=1e-4)


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_chroma_offset_and_activation(fmt):
    x = np.random.default_rng(4).random((1, 3, 4, 4)).astype(np.float32) * 255
    out, _, _ = run_layer("color_conversion", dict(conversion="rgb_to_ycbcr", chroma_offset=128), [x], fmt,
                          activation="relu")
    ref = reference(round_like(x, fmt), "rgb_to_ycbcr", 128)
    assert_close(out, np.maximum(ref, 0), fmt)


def test_errors_are_named():
    with pytest.raises(ShapeError, match=r"color_conversion L: conversion rgb_to_gray needs an input with 3 channels, got 4"):
        run_layer("color_conversion", dict(conversion="rgb_to_gray"), [np.zeros((1, 4, 2, 2), np.float32)], FORMATS[0])
    with pytest.raises(ParameterError, match=r"color_conversion L: parameter conversion: 'rgb_to_hsv' is not one of"):
        run_layer("color_conversion", dict(conversion="rgb_to_hsv"), [np.zeros((1, 3, 2, 2), np.float32)], FORMATS[0])
