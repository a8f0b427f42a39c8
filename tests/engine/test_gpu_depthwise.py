"""The depthwise convolution kernel of the CuPy backend (engine/backends/cuda/depthwise.py) against a float64 NumPy
reference: both layouts and precisions, sizes that are not multiples of the thread's strip or channel vector,
strides, kernel sizes, padding, bias, every fused epilogue, NaN locality; and its place in conv2d's table."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

#: float64 references of the fused epilogues (coefficients as the activations name them)
EPILOGUES = {
    None: (lambda v: v, {}),
    "relu": (lambda v: np.maximum(v, 0), {}),
    "leaky_relu": (lambda v: np.where(v < 0, 0.1 * v, v), {"alpha": 0.1}),
    "sigmoid": (lambda v: 1 / (1 + np.exp(-v)), {}),
    "tanh": (np.tanh, {}),
    "clamp": (lambda v: np.clip(v, -0.5, 0.75), {"min": -0.5, "max": 0.75}),
    "hardswish": (lambda v: v * np.clip(v / 6 + 0.5, 0, 1), {}),
    "hard_sigmoid": (lambda v: np.clip(v / 6 + 0.5, 0, 1), {"alpha": 1 / 6, "beta": 0.5}),
    "silu": (lambda v: v / (1 + np.exp(-v)), {}),
}


def depthwise_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, int],
                        padding: tuple[int, int]) -> np.ndarray:
    """float64 depthwise convolution of NCHW ``x`` by ``w`` (C, 1, R, S) with zero padding."""
    n, c, h, wd = x.shape
    r, s = w.shape[2:]
    (sh, sw), (ph, pw) = stride, padding
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho, wo = (h + 2 * ph - r) // sh + 1, (wd + 2 * pw - s) // sw + 1
    out = np.zeros((n, c, ho, wo))
    for i in range(r):
        for j in range(s):
            out += xp[:, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw] * w[None, :, 0, i, j, None, None]
    return out if b is None else out + b.astype(np.float64)[None, :, None, None]


def _run(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride, padding, nhwc: bool, epilogue=None, coefs=None):
    """The kernel's result (logical NCHW float64) and the Launched it returned."""
    import cupy

    from engine.backends.cuda import depthwise

    n, c, h, wd = x.shape
    r, s = w.shape[2:]
    ho, wo = (h + 2 * padding[0] - r) // stride[0] + 1, (wd + 2 * padding[1] - s) // stride[1] + 1
    if nhwc:
        xl = cupy.asarray(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).transpose(0, 3, 1, 2)
        out = cupy.full((n, ho, wo, c), np.nan, x.dtype).transpose(0, 3, 1, 2)
    else:
        xl, out = cupy.asarray(x), cupy.full((n, c, ho, wo), np.nan, x.dtype)
    wl = cupy.asarray(w)
    bl = None if b is None else cupy.asarray(b)
    assert depthwise.applies(xl, wl, out, stride, padding, (1, 1), c, epilogue)
    done = depthwise.conv_depthwise(xl, depthwise.weights(wl), bl, out, (r, s), stride, padding, epilogue, coefs or {})
    return cupy.asnumpy(out).astype(np.float64), done


def _data(n, c, h, w, r, s, dtype, bias=True, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = (rng.standard_normal((c, 1, r, s)) / np.sqrt(r * s)).astype(dtype)
    b = rng.standard_normal(c).astype(dtype) if bias else None
    return x, wt, b


def _tol(dtype) -> float:
    return 4e-3 if dtype == np.float16 else 1e-5


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("nhwc", [True, False])
@pytest.mark.parametrize("c,h,w,kernel,stride,padding,bias", [
    (12, 11, 13, (3, 3), (1, 1), (1, 1), True),
    (12, 11, 13, (3, 3), (2, 2), (1, 1), False),
    (6, 9, 17, (5, 5), (1, 1), (2, 2), True),
    (7, 10, 9, (5, 5), (2, 2), (2, 2), True),
    (20, 15, 14, (7, 7), (1, 1), (3, 3), True),
    (5, 16, 16, (7, 7), (2, 2), (0, 0), False),
    (8, 8, 19, (3, 5), (2, 1), (0, 2), True),
    (32, 7, 7, (1, 1), (1, 1), (0, 0), True),
])
def test_depthwise_matches_reference(dtype, nhwc, c, h, w, kernel, stride, padding, bias):
    x, wt, b = _data(2, c, h, w, *kernel, dtype, bias, seed=c + h)
    got, done = _run(x, wt, b, stride, padding, nhwc)
    assert done is not None and done.candidate == "depthwise"
    np.testing.assert_allclose(got, depthwise_reference(x, wt, b, stride, padding), rtol=_tol(dtype), atol=_tol(dtype))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("nhwc", [True, False])
@pytest.mark.parametrize("epilogue", list(EPILOGUES))
def test_depthwise_fuses_each_epilogue(dtype, nhwc, epilogue):
    fn, coefs = EPILOGUES[epilogue]
    x, wt, b = _data(1, 16, 9, 10, 3, 3, dtype, seed=3)
    got, _ = _run(x, wt, b, (1, 1), (1, 1), nhwc, epilogue, coefs)
    np.testing.assert_allclose(got, fn(depthwise_reference(x, wt, b, (1, 1), (1, 1))), rtol=_tol(dtype),
                               atol=_tol(dtype))


@pytest.mark.parametrize("nhwc", [True, False])
def test_depthwise_nan_stays_in_its_windows(nhwc):
    x, wt, b = _data(1, 8, 12, 12, 3, 3, np.float32, seed=5)
    x[0, 2, 5, 7] = np.nan
    got, _ = _run(x, wt, b, (2, 2), (1, 1), nhwc)
    # output (oh, ow) of stride 2, padding 1 reads input rows 2oh-1..2oh+1: row 5 feeds oh 2 and 3, column 7 ow 3, 4
    nan = np.isnan(got)
    assert nan[0, 2, 2:4, 3:5].all() and nan.sum() == 4


def test_depthwise_declines_what_it_does_not_cover():
    import cupy

    from engine.backends.cuda import depthwise

    x = cupy.zeros((1, 8, 10, 10), cupy.float16)
    out = cupy.zeros((1, 8, 10, 10), cupy.float16)
    w = cupy.zeros((8, 1, 3, 3), cupy.float16)
    geo = ((1, 1), (1, 1), (1, 1))
    assert depthwise.applies(x, w, out, *geo, 8, None)
    assert not depthwise.applies(x, cupy.zeros((8, 2, 3, 3), cupy.float16), out, *geo, 4, None)  # grouped, not dw
    assert not depthwise.applies(x, w, out, (1, 1), (2, 2), (2, 2), 8, None)  # dilation
    assert not depthwise.applies(x, w, out, (3, 3), (1, 1), (1, 1), 8, None)  # stride 3
    assert not depthwise.applies(x, cupy.zeros((8, 1, 9, 9), cupy.float16), out, (1, 1), (4, 4), (1, 1), 8, None)
    assert not depthwise.applies(x, w.astype(cupy.float32), out, *geo, 8, None)  # mixed precision
    assert not depthwise.applies(x, w, out, *geo, 8, "selu")  # an activation outside the epilogue table
    assert not depthwise.applies(x[:, :, :, ::2], w, out[:, :, :, :5], *geo, 8, None)  # not dense


def test_conv2d_table_serves_depthwise_and_matches(monkeypatch):
    """The backend's conv2d runs a depthwise convolution through one of its rows (the depthwise kernel where
    nothing is timed) with the same result."""
    import cupy

    from engine.backends import get_backend
    from engine.backends.cuda import cudnn

    backend = get_backend("cupy", notice=None)
    backend.activate()
    x, wt, b = _data(2, 24, 14, 14, 3, 3, np.float16, seed=9)
    xl = cupy.asarray(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).transpose(0, 3, 1, 2)
    wl = cupy.asarray(np.ascontiguousarray(wt.transpose(0, 2, 3, 1))).transpose(0, 3, 1, 2)
    ref = np.maximum(depthwise_reference(x, wt, b, (2, 2), (1, 1)), 0)
    kernel = backend.kernel("conv2d")
    for tune in (0, 8):
        monkeypatch.setattr(cudnn, "AUTOTUNE", tune)
        out = cupy.full((2, 7, 7, 24), np.nan, cupy.float16).transpose(0, 3, 1, 2)
        done = kernel(xl, wl, cupy.asarray(b), out, (2, 2), (1, 1), (1, 1), 24, "relu", {}, {})
        assert done is not None and (done.candidate == "depthwise" if tune == 0 else done.candidate in
                                     ("depthwise", "cudnn"))
        np.testing.assert_allclose(cupy.asnumpy(out), ref, rtol=4e-3, atol=4e-3)
