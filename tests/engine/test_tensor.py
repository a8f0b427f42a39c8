from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

from engine.errors import LayerLabError
from engine.tensor import FORMATS, Dims, Layout, Precision, TensorFormat, broadcast_dims, convert, copy_into


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
    with pytest.raises(LayerLabError, match="or 1 to 6 sizes of another rank"):
        Dims.parse("1x2x3x4x5x6x7")
    with pytest.raises(LayerLabError, match="expected N x C x H x W"):
        Dims.parse("3xa")


def test_dims_of_any_rank():
    """Rank 4 keeps its N, C, H, W names; other ranks are plain sizes, stored in logical order in every layout."""
    d = Dims(1, 49, 96)
    assert Dims.parse("1x49x96") == d and str(d) == "1x49x96" and d.rank == 3 and d.elements == 49 * 96
    assert Dims(2, 3, 4, 5).w == 5 and Dims(2, 3, 4, 5).elements == 120
    assert pickle.loads(pickle.dumps(Dims(1, 2, 3, 4, 5))) == Dims(1, 2, 3, 4, 5)
    nhwc = TensorFormat(Precision.FP16, Layout.NHWC)
    assert nhwc.shape(d) == (1, 49, 96) and nhwc.shape(Dims(1, 3, 8, 9)) == (1, 8, 9, 3)
    x = np.arange(49 * 96, dtype=np.float32).reshape(1, 49, 96)
    assert nhwc.dims_of(x) == d
    np.testing.assert_array_equal(convert(x, TensorFormat(), nhwc), x.astype(np.float16))
    assert broadcast_dims([Dims(1, 49, 96), Dims(96)]) == Dims(1, 49, 96)
    assert broadcast_dims([Dims(2, 1, 5), Dims(3, 1)]) == Dims(2, 3, 5)
    with pytest.raises(ValueError, match="sizes 5 and 4 on axis 0"):
        broadcast_dims([Dims(4), Dims(5)])
    with pytest.raises(LayerLabError, match="rank 1 to 6"):
        Dims()


@pytest.mark.parametrize("channels", [1, 3, 4, 5, 16])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_copy_into_nhwc_memory_equals_numpys_copy(channels, dtype):
    """An NCHW image into the NCHW view of NHWC memory (channel by channel up to FEW_CHANNELS, NumPy's copy
    beyond), of the same or another dtype, and into NCHW memory: every value where NumPy's own copy puts it."""
    data = np.random.default_rng(channels).standard_normal((2, channels, 7, 9)).astype(dtype)
    for nhwc in (True, False):
        mem = np.full((2, 7, 9, channels) if nhwc else (2, channels, 7, 9), np.nan, np.float32)
        expected = mem.copy()
        view = (lambda a: a.transpose(0, 3, 1, 2)) if nhwc else (lambda a: a)
        copy_into(view(mem), data)
        view(expected)[...] = data
        np.testing.assert_array_equal(mem, expected)
        assert not np.isnan(mem).any()
