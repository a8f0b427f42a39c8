from __future__ import annotations

import itertools

import numpy as np
import pytest

from engine.errors import LayerLabError
from engine.tensor import FORMATS, Dims, Layout, Precision, TensorFormat, convert


@pytest.mark.parametrize("src,dst", list(itertools.product(FORMATS, FORMATS)), ids=str)
def test_conversions_round_trip(src, dst):
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 7)).astype(np.float32)
    stored = convert(x, TensorFormat(), src)
    assert stored.shape == src.shape(Dims(2, 3, 5, 7)) and stored.dtype == src.dtype
    back = convert(convert(stored, src, dst), dst, TensorFormat())
    tol = 1e-3 if Precision.FP16 in (src.precision, dst.precision) else 0
    np.testing.assert_allclose(back, x, rtol=tol, atol=tol)
    if src.layout is Layout.NHWC:
        np.testing.assert_array_equal(stored[1, 2, 4], x[1, :, 2, 4].astype(src.dtype))


def test_parse_formats_and_dims():
    assert TensorFormat.parse("fp16|nhwc") == TensorFormat(Precision.FP16, Layout.NHWC)
    assert TensorFormat.parse("NHWC") == TensorFormat(Precision.FP32, Layout.NHWC)
    assert Dims.parse("1x3x8x9") == Dims(1, 3, 8, 9) and str(Dims(1, 3, 8, 9)) == "1x3x8x9"
    with pytest.raises(LayerLabError, match="unknown tensor format 'fp64'"):
        TensorFormat.parse("fp64")
    with pytest.raises(LayerLabError, match="expected N x C x H x W"):
        Dims.parse("3x8")
