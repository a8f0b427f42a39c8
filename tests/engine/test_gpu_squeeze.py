"""The squeeze-excitation kernels of the CuPy backend against float64 NumPy references: global pooling as a
reduction (engine/backends/cuda/pooling.py ``global_pool``) and the gated channel scale
(engine/backends/cuda/channel_scale.py), in both layouts and precisions."""
from __future__ import annotations

import numpy as np
import pytest

from tests.engine.test_gpu_depthwise import EPILOGUES

pytestmark = pytest.mark.gpu


def _physical(cupy, a: np.ndarray, nhwc: bool):
    return cupy.asarray(np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if nhwc else a)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("nhwc", [True, False])
@pytest.mark.parametrize("is_max", [False, True])
@pytest.mark.parametrize("shape", [(1, 1152, 7, 7), (2, 24, 56, 56), (3, 37, 33, 29), (1, 5, 1, 1), (4, 40, 112, 112)])
def test_global_pool_matches_reference(dtype, nhwc, is_max, shape):
    import cupy

    from engine.backends.cuda import pooling

    x = np.random.default_rng(shape[1]).standard_normal(shape).astype(dtype) + dtype(0.25)
    n, c = shape[:2]
    out = cupy.full((n, 1, 1, c) if nhwc else (n, c, 1, 1), np.nan, dtype)
    assert pooling.global_pool(_physical(cupy, x, nhwc), out, is_max, nhwc) is not None
    got = cupy.asnumpy(out).reshape(n, c).astype(np.float64)
    ref = x.astype(np.float64).max(axis=(2, 3)) if is_max else x.astype(np.float64).mean(axis=(2, 3))
    tol = 2e-3 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("nhwc", [True, False])
def test_global_max_propagates_nan_of_its_channel_only(nhwc):
    import cupy

    from engine.backends.cuda import pooling

    x = np.random.default_rng(0).standard_normal((2, 6, 40, 40)).astype(np.float32)
    x[1, 4, 33, 2] = np.nan
    out = cupy.zeros((2, 1, 1, 6) if nhwc else (2, 6, 1, 1), cupy.float32)
    pooling.global_pool(_physical(cupy, x, nhwc), out, True, nhwc)
    nan = np.isnan(cupy.asnumpy(out).reshape(2, 6))
    assert nan[1, 4] and nan.sum() == 1


def test_global_pool_declines_mixed_precision_and_wrong_outputs():
    import cupy

    from engine.backends.cuda import pooling

    x = cupy.zeros((1, 4, 4, 8), cupy.float16)
    assert pooling.global_pool(x, cupy.zeros((1, 1, 1, 8), cupy.float32), False, True) is None
    assert pooling.global_pool(x, cupy.zeros((1, 1, 1, 4), cupy.float16), False, True) is None
    assert pooling.global_pool(x[:, :, ::2], cupy.zeros((1, 1, 1, 8), cupy.float16), False, True) is None


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("nhwc", [True, False])
@pytest.mark.parametrize("shape", [(2, 24, 9, 11), (1, 7, 5, 3), (3, 6, 4, 4)])
@pytest.mark.parametrize("epilogue", [None, "sigmoid", "hard_sigmoid", "relu"])
def test_channel_scale_matches_reference(dtype, nhwc, shape, epilogue):
    import cupy

    from engine.backends.cuda.channel_scale import channel_scale

    fn, coefs = EPILOGUES[epilogue]
    rng = np.random.default_rng(shape[1])
    x = rng.standard_normal(shape).astype(dtype)
    n, c = shape[:2]
    g = rng.standard_normal((n, c, 1, 1)).astype(dtype)
    out = cupy.full(_physical(cupy, x, nhwc).shape, np.nan, dtype)
    done = channel_scale(_physical(cupy, x, nhwc), _physical(cupy, g, nhwc), out, nhwc, epilogue, coefs)
    assert done is not None and done.candidate == "channel_scale"
    got = cupy.asnumpy(out)
    got = got.transpose(0, 3, 1, 2) if nhwc else got
    tol = 2e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(got, x.astype(np.float64) * fn(g.astype(np.float64)), rtol=tol, atol=tol)


def test_channel_scale_declines_other_shapes():
    import cupy

    from engine.backends.cuda.channel_scale import channel_scale

    x = cupy.zeros((2, 4, 4, 8), cupy.float16)
    out = cupy.zeros_like(x)
    assert channel_scale(x, cupy.zeros((1, 1, 1, 8), cupy.float16), out, True, None, {}) is None  # one gate for all
    assert channel_scale(x, cupy.zeros((2, 1, 1, 8), cupy.float32), out, True, None, {}) is None  # mixed precision
    assert channel_scale(x, cupy.zeros((2, 1, 1, 8), cupy.float16), out, True, "selu", {}) is None
