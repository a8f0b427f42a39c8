"""The CUDA kernels of the CuPy backend (engine/backends/gpu_kernels.py): upsampling, upsampling fused with
a concatenation, and the direct convolution of few-channel inputs, against float64 NumPy references."""
from __future__ import annotations

import numpy as np
import pytest

from plugins.standard._common_conv import conv2d
from plugins.standard._common_resample import resample, upsample_taps
from tests.harness import backend_param

pytestmark = pytest.mark.gpu


def _upsampled(x: np.ndarray, size: tuple[int, int], factor: tuple[int, int], method: str) -> np.ndarray:
    """float64 NCHW reference: ``x`` upsampled by ``factor`` to ``size`` (edge values repeat beyond)."""
    th = upsample_taps(np, x.shape[2], size[0], factor[0], method, np.float64)
    tw = upsample_taps(np, x.shape[3], size[1], factor[1], method, np.float64)
    return resample(np, x.astype(np.float64), th, tw)


def _physical(cupy, a: np.ndarray, nhwc: bool):
    return cupy.asarray(np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if nhwc else a)


def _logical(a: np.ndarray, nhwc: bool) -> np.ndarray:
    return a.transpose(0, 3, 1, 2) if nhwc else a


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("nhwc", [True, False])
@pytest.mark.parametrize("method", ["nearest", "bilinear"])
@pytest.mark.parametrize("c0,c1,factor,extra", [(16, 8, (2, 2), (0, 0)), (5, 3, (2, 2), (0, 0)), (8, 0, (3, 2), (0, 0)),
                                                (8, 16, (2, 2), (1, 1)), (3, 0, (1, 4), (0, 2))])
def test_upscale_concat_matches_reference(dtype, nhwc, method, c0, c1, factor, extra):
    import cupy

    from engine.backends import gpu_kernels

    rng = np.random.default_rng(c0 * 7 + c1)
    x = rng.standard_normal((2, c0, 7, 9)).astype(dtype)
    size = (7 * factor[0] + extra[0], 9 * factor[1] + extra[1])
    skip = rng.standard_normal((2, c1, *size)).astype(dtype) if c1 else None
    ref = _upsampled(x, size, factor, method)
    if skip is not None:
        ref = np.concatenate([ref, skip.astype(np.float64)], axis=1)
    out_shape = (2, *size, c0 + c1) if nhwc else (2, c0 + c1, *size)
    out = cupy.full(out_shape, np.nan, dtype)
    xs = _physical(cupy, x, nhwc)
    ss = _physical(cupy, skip, nhwc) if skip is not None else None
    assert gpu_kernels.upscale_concat(xs, ss, out, factor, method == "bilinear", nhwc)
    got = _logical(cupy.asnumpy(out), nhwc).astype(np.float64)
    tol = 2e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


def test_upscale_concat_declines_what_it_does_not_cover():
    import cupy

    from engine.backends import gpu_kernels

    x = cupy.zeros((1, 4, 4, 8), cupy.float16)
    assert not gpu_kernels.upscale_concat(x[:, :, :, :4], None, cupy.zeros((1, 8, 8, 4), cupy.float16), (2, 2), True, True)
    assert not gpu_kernels.upscale_concat(x, None, cupy.zeros((1, 8, 8, 8), cupy.float64), (2, 2), True, True)
    skip = cupy.zeros((1, 8, 8, 4), cupy.float16)
    assert not gpu_kernels.upscale_concat(x, skip, cupy.zeros((1, 8, 8, 16), cupy.float16), (2, 2), True, True)


def test_vector_path_is_taken_for_aligned_half_nhwc(monkeypatch):
    """fp16 NHWC with channel counts of multiples of 8 runs the 16-byte kernel, not the scalar one."""
    import cupy

    from engine.backends import gpu_kernels

    calls = []
    monkeypatch.setattr(gpu_kernels, "_scalar_upcat", lambda: calls.append("scalar") or (lambda *a: None))
    x = cupy.ones((1, 4, 4, 16), cupy.float16)
    out = cupy.zeros((1, 8, 8, 24), cupy.float16)
    assert gpu_kernels.upscale_concat(x, cupy.full((1, 8, 8, 8), 2, cupy.float16), out, (2, 2), True, True)
    assert calls == []
    assert float(out[..., :16].min()) == 1.0 and float(out[..., 16:].max()) == 2.0


def _nhwc(cupy, a):
    """A logical NCHW cupy view of NHWC memory holding ``a``."""
    return cupy.ascontiguousarray(cupy.asarray(a).transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("c,k,kernel,stride,padding,dilation", [
    (3, 32, 3, 1, 1, 1), (3, 64, 7, 2, 3, 1), (1, 8, 3, 1, 0, 1), (4, 16, 5, 2, 2, 2), (2, 24, 1, 1, 0, 1)])
@pytest.mark.parametrize("act", [None, "relu", "leaky_relu"])
@pytest.mark.parametrize("bias", [True, False])
def _backend_conv_against_reference(c, k, kernel, stride, padding, dilation, act, bias, size, seed):
    """The CuPy backend's convolution of a random fp16 NHWC input against float64; returns its weight cache
    (the key tells which kernel ran)."""
    import cupy

    backend = backend_param("cupy")
    backend.activate()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, c, *size)).astype(np.float16)
    w = (rng.standard_normal((k, c, kernel, kernel)) / np.sqrt(c * kernel * kernel)).astype(np.float16)
    b = rng.standard_normal(k).astype(np.float16) if bias else None
    ref = conv2d(np, x.astype(np.float64), w.astype(np.float64), None if b is None else b.astype(np.float64),
                 (stride, stride), (padding, padding), (dilation, dilation), 1)
    if act == "relu":
        ref = np.maximum(ref, 0)
    elif act == "leaky_relu":
        ref = np.where(ref < 0, 0.1 * ref, ref)
    out = _nhwc(cupy, np.full(ref.shape, np.nan, np.float16))
    cache: dict = {}
    done = backend.kernel("conv2d")(_nhwc(cupy, x), _nhwc(cupy, w), None if b is None else cupy.asarray(b), out,
                          (stride, stride), (padding, padding), (dilation, dilation), 1, act, {"alpha": 0.1}, cache)
    assert done
    backend.synchronize()
    np.testing.assert_allclose(cupy.asnumpy(out).astype(np.float64), ref, rtol=5e-3, atol=5e-3)
    return cache


@pytest.mark.parametrize("c,k,kernel,stride,padding,dilation", [
    (3, 32, 3, 1, 1, 1), (3, 64, 7, 2, 3, 1), (1, 8, 3, 1, 0, 1), (4, 16, 5, 2, 2, 2), (2, 24, 1, 1, 0, 1)])
@pytest.mark.parametrize("act", [None, "relu", "leaky_relu"])
@pytest.mark.parametrize("bias", [True, False])
def test_direct_convolution_matches_reference(c, k, kernel, stride, padding, dilation, act, bias):
    cache = _backend_conv_against_reference(c, k, kernel, stride, padding, dilation, act, bias, (29, 34), c * 31 + k)
    assert "direct" in cache  # the direct kernel ran (not cuDNN)


def test_direct_convolution_is_not_used_for_wide_inputs_or_other_activations():
    import cupy

    from engine.backends import gpu_kernels

    x = cupy.zeros((1, 3, 8, 8), cupy.float16)
    out = cupy.zeros((1, 16, 8, 8), cupy.float16)
    assert gpu_kernels.direct_applies(x, cupy.zeros((16, 3, 3, 3), cupy.float16), out, 1, "relu")
    assert not gpu_kernels.direct_applies(x, cupy.zeros((16, 8, 3, 3), cupy.float16), out, 1, "relu")
    assert not gpu_kernels.direct_applies(x, cupy.zeros((12, 3, 3, 3), cupy.float16), out, 1, None)
    assert not gpu_kernels.direct_applies(x, cupy.zeros((16, 3, 3, 3), cupy.float16), out, 1, "sigmoid")
    assert not gpu_kernels.direct_applies(x, cupy.zeros((16, 1, 3, 3), cupy.float16), out, 3, None)
    assert not gpu_kernels.direct_applies(x.astype(cupy.float32), cupy.zeros((16, 3, 3, 3), cupy.float32),
                                          out.astype(cupy.float32), 1, None)


@pytest.mark.parametrize("c,k", [(32, 3), (8, 1), (64, 7), (16, 5)])
@pytest.mark.parametrize("act", [None, "relu", "leaky_relu"])
@pytest.mark.parametrize("bias", [True, False])
def test_pointwise_few_output_convolution_matches_reference(c, k, act, bias):
    cache = _backend_conv_against_reference(c, k, 1, 1, 0, 1, act, bias, (23, 37), c * 7 + k)
    assert "pointwise" in cache  # the few-output kernel ran (not cuDNN)


def test_pointwise_kernel_declines_other_shapes():
    import cupy

    backend_param("cupy")
    from engine.backends import gpu_kernels

    x = cupy.zeros((1, 32, 8, 8), cupy.float16)
    out = cupy.zeros((1, 3, 8, 8), cupy.float16)
    one = ((1, 1), (0, 0), (1, 1))
    assert gpu_kernels.pointwise_applies(x, cupy.zeros((3, 32, 1, 1), cupy.float16), out, *one, 1, "relu")
    assert not gpu_kernels.pointwise_applies(x, cupy.zeros((8, 32, 1, 1), cupy.float16), out, *one, 1, None)  # 8 outputs: cuDNN
    assert not gpu_kernels.pointwise_applies(x, cupy.zeros((3, 32, 3, 3), cupy.float16), out, *one, 1, None)
    assert not gpu_kernels.pointwise_applies(x, cupy.zeros((3, 32, 1, 1), cupy.float16), out, (2, 2), (0, 0), (1, 1), 1, None)
    assert not gpu_kernels.pointwise_applies(x, cupy.zeros((3, 12, 1, 1), cupy.float16), out, *one, 1, None)  # C % 8
    assert not gpu_kernels.pointwise_applies(x, cupy.zeros((3, 32, 1, 1), cupy.float16), out, *one, 1, "sigmoid")
    assert not gpu_kernels.pointwise_applies(x.astype(cupy.float32), cupy.zeros((3, 32, 1, 1), cupy.float32),
                                             out.astype(cupy.float32), *one, 1, None)
