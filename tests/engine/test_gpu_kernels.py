"""The CUDA kernels of the CuPy backend (engine/backends/cuda/): upsampling, upsampling fused with
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

    from engine.backends.cuda import upsample

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
    assert upsample.upscale_concat(xs, ss, out, factor, method == "bilinear", nhwc)
    got = _logical(cupy.asnumpy(out), nhwc).astype(np.float64)
    tol = 2e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


def test_upscale_concat_declines_what_it_does_not_cover():
    import cupy

    from engine.backends.cuda import upsample

    x = cupy.zeros((1, 4, 4, 8), cupy.float16)
    assert not upsample.upscale_concat(x[:, :, :, :4], None, cupy.zeros((1, 8, 8, 4), cupy.float16), (2, 2), True, True)
    assert not upsample.upscale_concat(x, None, cupy.zeros((1, 8, 8, 8), cupy.float64), (2, 2), True, True)
    skip = cupy.zeros((1, 8, 8, 4), cupy.float16)
    assert not upsample.upscale_concat(x, skip, cupy.zeros((1, 8, 8, 16), cupy.float16), (2, 2), True, True)


def test_vector_path_is_taken_for_aligned_half_nhwc(monkeypatch):
    """fp16 NHWC with channel counts of multiples of 8 runs the 16-byte kernel, not the scalar one."""
    import cupy

    from engine.backends.cuda import upsample

    calls = []
    monkeypatch.setattr(upsample, "scalar_kernel", lambda: calls.append("scalar") or (lambda *a: None))
    x = cupy.ones((1, 4, 4, 16), cupy.float16)
    out = cupy.zeros((1, 8, 8, 24), cupy.float16)
    assert upsample.upscale_concat(x, cupy.full((1, 8, 8, 8), 2, cupy.float16), out, (2, 2), True, True)
    assert calls == []
    assert float(out[..., :16].min()) == 1.0 and float(out[..., 16:].max()) == 2.0


@pytest.mark.parametrize("dtype,nhwc,c0,c1", [(np.float32, True, 16, 8), (np.float32, False, 5, 3),
                                               (np.float16, False, 16, 8)])
def test_aligned_fp32_nhwc_and_nchw_take_their_own_kernels(monkeypatch, dtype, nhwc, c0, c1):
    """fp32 NHWC with channel counts of multiples of 4 moves 16 bytes a thread; NCHW goes by rows of channel
    planes: neither runs the element-wise kernel that divides its indices out."""
    import cupy

    from engine.backends.cuda import upsample

    monkeypatch.setattr(upsample, "scalar_kernel", lambda: pytest.fail("the element-wise kernel ran"))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, c0, 6, 7)).astype(dtype)
    skip = rng.standard_normal((2, c1, 12, 14)).astype(dtype)
    ref = np.concatenate([_upsampled(x, (12, 14), (2, 2), "bilinear"), skip.astype(np.float64)], axis=1)
    out = cupy.full((2, 12, 14, c0 + c1) if nhwc else (2, c0 + c1, 12, 14), np.nan, dtype)
    assert upsample.upscale_concat(_physical(cupy, x, nhwc), _physical(cupy, skip, nhwc), out, (2, 2), True, nhwc)
    tol = 2e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(_logical(cupy.asnumpy(out), nhwc).astype(np.float64), ref, rtol=tol, atol=tol)


def test_nchw_upsampling_of_more_planes_than_a_grid_holds():
    """More than 65535 channel planes (the grid's z limit): the element-wise kernel, same values."""
    import cupy

    from engine.backends.cuda import upsample

    x = np.random.default_rng(4).standard_normal((1, 70000, 1, 2)).astype(np.float32)
    out = cupy.full((1, 70000, 2, 4), np.nan, np.float32)
    assert upsample.upscale_concat(cupy.asarray(x), None, out, (2, 2), False, False)
    np.testing.assert_array_equal(cupy.asnumpy(out), _upsampled(x, (2, 4), (2, 2), "nearest").astype(np.float32))


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

    from engine.backends.cuda import conv_direct

    x = cupy.zeros((1, 3, 8, 8), cupy.float16)
    out = cupy.zeros((1, 16, 8, 8), cupy.float16)
    assert conv_direct.direct_applies(x, cupy.zeros((16, 3, 3, 3), cupy.float16), out, 1, "relu")
    assert not conv_direct.direct_applies(x, cupy.zeros((16, 8, 3, 3), cupy.float16), out, 1, "relu")
    assert not conv_direct.direct_applies(x, cupy.zeros((12, 3, 3, 3), cupy.float16), out, 1, None)
    assert not conv_direct.direct_applies(x, cupy.zeros((16, 3, 3, 3), cupy.float16), out, 1, "selu")
    assert not conv_direct.direct_applies(x, cupy.zeros((16, 1, 3, 3), cupy.float16), out, 3, None)
    assert not conv_direct.direct_applies(x.astype(cupy.float32), cupy.zeros((16, 3, 3, 3), cupy.float32),
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
    from engine.backends.cuda import conv_direct

    x = cupy.zeros((1, 32, 8, 8), cupy.float16)
    out = cupy.zeros((1, 3, 8, 8), cupy.float16)
    one = ((1, 1), (0, 0), (1, 1))
    assert conv_direct.pointwise_applies(x, cupy.zeros((3, 32, 1, 1), cupy.float16), out, *one, 1, "relu")
    assert not conv_direct.pointwise_applies(x, cupy.zeros((8, 32, 1, 1), cupy.float16), out, *one, 1, None)  # 8 outputs: cuDNN
    assert not conv_direct.pointwise_applies(x, cupy.zeros((3, 32, 3, 3), cupy.float16), out, *one, 1, None)
    assert not conv_direct.pointwise_applies(x, cupy.zeros((3, 32, 1, 1), cupy.float16), out, (2, 2), (0, 0), (1, 1), 1, None)
    assert not conv_direct.pointwise_applies(x, cupy.zeros((3, 12, 1, 1), cupy.float16), out, *one, 1, None)  # C % 8
    assert not conv_direct.pointwise_applies(x, cupy.zeros((3, 32, 1, 1), cupy.float16), out, *one, 1, "selu")
    assert not conv_direct.pointwise_applies(x.astype(cupy.float32), cupy.zeros((3, 32, 1, 1), cupy.float32),
                                             out.astype(cupy.float32), *one, 1, None)


def _few_channel_case(c, k, kernel, stride, padding, hw, act):
    """A cuDNN backend, an fp16 NHWC input, weights, bias and NaN-filled output (logical NCHW cupy views) for a
    few-channel convolution, and its float64 reference (leaky_relu with alpha 0.1)."""
    import cupy

    backend = backend_param("cupy")
    if backend.cudnn is None:
        pytest.skip(f"cuDNN frontend: {backend.cudnn_status}")
    backend.activate()
    rng = np.random.default_rng(c * 31 + k)
    x = rng.standard_normal((2, c, *hw)).astype(np.float16)
    w = (rng.standard_normal((k, c, *kernel)) / np.sqrt(c * kernel[0] * kernel[1])).astype(np.float16)
    b = rng.standard_normal(k).astype(np.float16)
    ref = conv2d(np, x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), stride, padding, (1, 1), 1)
    ref = {None: ref, "relu": np.maximum(ref, 0), "leaky_relu": np.where(ref >= 0, ref, 0.1 * ref)}[act]
    xd = _physical(cupy, x, True).transpose(0, 3, 1, 2)
    wd = _physical(cupy, w, True).transpose(0, 3, 1, 2)
    out = cupy.full((2, *ref.shape[2:], k), np.nan, np.float16).transpose(0, 3, 1, 2)
    return backend, xd, wd, cupy.asarray(b), out, ref


def _close(backend, out, ref) -> None:
    import cupy

    backend.synchronize()
    got = cupy.asnumpy(out).astype(np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 5e-3


@pytest.mark.parametrize("c,k,kernel,stride,padding,hw", [
    (3, 64, (7, 7), 2, (3, 3), (37, 50)),   # an RGB stem, odd sizes
    (3, 16, (7, 7), 2, (3, 3), (224, 224)),
    (1, 8, (5, 5), 2, (2, 2), (31, 20)),
    (4, 24, (3, 3), 2, (1, 1), (16, 17)),
    (1, 12, (5, 3), 3, (2, 1), (29, 40)),   # stride 3: 9 channels, padded to 16
    (3, 5, (4, 4), 2, (0, 0), (20, 22)),    # output channels not a multiple of 8; no padding
])
@pytest.mark.parametrize("act", [None, "relu", "leaky_relu"])
def test_space_to_depth_convolution_matches_reference(c, k, kernel, stride, padding, hw, act):
    """A strided few-channel convolution run as a stride-1 convolution over its space-to-depth input (cuDNN)."""
    from engine.backends.cuda import gather

    backend, xd, wd, bd, out, ref = _few_channel_case(c, k, kernel, (stride, stride), padding, hw, act)
    assert gather.s2d_applies(xd, wd, out, (stride, stride), (1, 1), 1)
    w2 = gather.s2d_weights(wd, stride)
    assert w2.shape[1] % 8 == 0 and w2.shape[2:] == (-(-kernel[0] // stride), -(-kernel[1] // stride))
    buffers: dict = {}
    for _ in range(2):  # the second call reuses the kept transformed input
        assert gather.conv_space_to_depth(backend.cudnn, xd, w2, bd, out, stride, padding, act, {"alpha": 0.1},
                                                buffers)
    assert len(buffers) == 1
    _close(backend, out, ref)


def test_space_to_depth_is_not_used_where_it_does_not_pay():
    import cupy

    from engine.backends.cuda import gather

    def args(c, kernel, stride, dtype=cupy.float16, dilation=(1, 1), groups=1):
        x = cupy.zeros((1, 16, 16, c), dtype).transpose(0, 3, 1, 2)
        w = cupy.zeros((8, c // groups, *kernel), dtype)
        out = cupy.zeros((1, 8, 8, 8), dtype).transpose(0, 3, 1, 2)
        return x, w, out, (stride, stride), dilation, groups

    assert gather.s2d_applies(*args(3, (7, 7), 2))
    assert not gather.s2d_applies(*args(3, (7, 7), 1))           # stride 1
    assert not gather.s2d_applies(*args(8, (3, 3), 2))           # 32 channels after folding
    assert not gather.s2d_applies(*args(3, (2, 2), 2))           # kernel no larger than the stride
    assert not gather.s2d_applies(*args(3, (7, 7), 2, cupy.float32))
    assert not gather.s2d_applies(*args(3, (7, 7), 2, dilation=(2, 2)))
    assert not gather.s2d_applies(*args(3, (7, 7), 2, groups=3))


@pytest.mark.parametrize("op", ["sum", "product", "max", "min", "sub"])
@pytest.mark.parametrize("act", [None, "relu", "leaky_relu", "sigmoid", "tanh"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_element_wise_kernel_matches_numpy(op, act, dtype):
    import cupy

    backend = backend_param("cupy")
    kernel = backend.kernel("element_wise")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 5, 7, 24)).astype(dtype)
    b = rng.standard_normal((2, 5, 7, 24)).astype(dtype)
    a[0, 0, 0, :2] = np.nan  # NaN passes through every operation and activation
    out = cupy.empty(a.shape, dtype)
    assert kernel(op, cupy.asarray(a), cupy.asarray(b), out, act, {"alpha": 0.2})
    f = {"sum": np.add, "product": np.multiply, "max": np.maximum, "min": np.minimum, "sub": np.subtract}[op]
    ref = f(a.astype(np.float64), b.astype(np.float64))
    ref = {None: ref, "relu": np.maximum(ref, 0), "leaky_relu": np.where(ref >= 0, ref, 0.2 * ref),
           "sigmoid": 1 / (1 + np.exp(-ref)), "tanh": np.tanh(ref)}[act]
    got = cupy.asnumpy(out).astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    tol = 1e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(got[~np.isnan(got)], ref[~np.isnan(ref)], rtol=tol, atol=tol)
    # not served: different shapes, mixed precision, a non-contiguous array
    assert not kernel(op, cupy.asarray(a), cupy.asarray(b[:, :, :, :1]), out, act, {})
    assert not kernel(op, cupy.asarray(a), cupy.asarray(b.astype(np.float32 if dtype == np.float16 else np.float16)),
                      out, act, {})
    assert not kernel(op, cupy.asarray(a).transpose(0, 2, 1, 3), cupy.asarray(b).transpose(0, 2, 1, 3),
                      out.transpose(0, 2, 1, 3), act, {})


@pytest.mark.parametrize("c,k,kernel,stride,padding,hw", [
    (3, 64, (3, 3), (1, 1), (1, 1), (45, 61)),   # dncnn's input layer, odd sizes
    (1, 16, (5, 5), (1, 1), (2, 2), (20, 33)),
    (3, 8, (7, 7), (2, 2), (3, 3), (40, 36)),    # 147 taps: above the limit, but the function itself still works
    (4, 12, (3, 3), (2, 1), (0, 1), (17, 30)),
    (2, 5, (1, 3), (1, 1), (0, 1), (9, 11)),
])
@pytest.mark.parametrize("act", [None, "relu"])
def test_patch_convolution_matches_reference(c, k, kernel, stride, padding, hw, act):
    """A few-channel convolution run as a 1x1 convolution over its gathered patches (cuDNN)."""
    from engine.backends.cuda import gather

    backend, xd, wd, bd, out, ref = _few_channel_case(c, k, kernel, stride, padding, hw, act)
    assert gather.patch_applies(xd, wd, out, (1, 1), 1) == (c * kernel[0] * kernel[1] <= 64)
    wp = gather.patch_weights(wd)
    assert wp.shape[1] % 8 == 0 and wp.shape[2:] == (1, 1)
    assert gather.conv_patches(backend.cudnn, xd, wp, bd, out, kernel, stride, padding, act, {})
    _close(backend, out, ref)


def _hopper_or_skip():
    backend_param("cupy")
    from engine.backends.cuda import wgmma

    if not wgmma.is_hopper():
        pytest.skip("the 64-channel wgmma kernel needs a Hopper GPU (compute capability 9.0)")
    if not wgmma.available("conv64"):
        pytest.fail("the 64-channel wgmma kernel does not compile on this Hopper GPU")
    return wgmma


def _conv64_case(n, h, w, act, bias, seed, c=64, scale=24.0, k=64):
    """A random fp16 3x3 convolution from ``c`` channels to ``k`` (input, weights, bias or None) and its float64
    result after ``act``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float16)
    wt = (rng.standard_normal((k, c, 3, 3)) / scale).astype(np.float16)
    b = rng.standard_normal(k).astype(np.float16) if bias else None
    ref = conv2d(np, x.astype(np.float64), wt.astype(np.float64), None if b is None else b.astype(np.float64),
                 (1, 1), (1, 1), (1, 1), 1)
    if act == "relu":
        ref = np.maximum(ref, 0)
    elif act == "leaky_relu":
        ref = np.where(ref < 0, 0.1 * ref, ref)
    return x, wt, b, ref


def _check_against_reference(case, act, applies, run):
    """``applies`` accepts the case's convolution and ``run(x, w, b, out)`` (physical NHWC on the device) writes
    its float64 result within fp16 tolerance."""
    import cupy

    x, wt, b, ref = case
    n, _, h, w = x.shape
    xd = cupy.asarray(np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
    out = cupy.full((n, h, w, ref.shape[1]), np.nan, cupy.float16)
    assert applies(xd.transpose(0, 3, 1, 2), cupy.asarray(wt), out.transpose(0, 3, 1, 2), (1, 1), (1, 1), (1, 1), 1,
                   act)
    assert run(xd, cupy.asarray(wt), None if b is None else cupy.asarray(b), out)
    got = cupy.asnumpy(out).transpose(0, 3, 1, 2).astype(np.float64)
    np.testing.assert_allclose(got, ref, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("n,h,w", [(1, 16, 16), (2, 29, 130), (3, 9, 5), (1, 1, 97), (1, 17, 200)])
@pytest.mark.parametrize("act", [None, "relu", "leaky_relu"])
@pytest.mark.parametrize("bias", [True, False])
def test_64_channel_wgmma_convolution_matches_reference(n, h, w, act, bias):
    """The Hopper 64 -> 64 3x3 kernel against float64 on sizes that are not whole strips or segments (the edges
    read zeros, pixels outside the image are never written)."""
    wgmma = _hopper_or_skip()
    _check_against_reference(
        _conv64_case(n, h, w, act, bias, n * 1000 + h * 10 + w), act, wgmma.conv64_applies,
        lambda x, wt, b, out: wgmma.conv3x3_c64(x, wgmma.conv64_weights(wt), b, out, act, 0.1))


def _nan_stays_local(run, weights, applies, x_shape, nan_at, k, act, declined_act):
    """Through ``run(x, weights(w), None, out, act, 0.0)`` on a zero NHWC input of ``x_shape`` with one NaN at
    ``nan_at`` (n, y, x, c) and 0.01 weights to ``k`` channels, the NaN reaches exactly its 3 x 3 neighbourhood of
    the output; ``applies`` accepts that convolution, not with the activation ``declined_act`` nor with stride 2.
    Returns the input, the weights and the output (physical NHWC) for the kernel's own checks."""
    import cupy

    x = cupy.zeros(x_shape, cupy.float16)
    x[nan_at] = cupy.nan
    wt = cupy.full((k, x_shape[3], 3, 3), 0.01, cupy.float16)
    out = cupy.zeros((*x_shape[:3], k), cupy.float16)
    assert run(x, weights(wt), None, out, act, 0.0)
    bad = cupy.isnan(out).any(axis=3).get()
    _, y, xp, _ = nan_at
    assert bad[0, y - 1:y + 2, xp - 1:xp + 2].all() and bad.sum() == 9
    xl, ol = x.transpose(0, 3, 1, 2), out.transpose(0, 3, 1, 2)
    assert applies(xl, wt, ol, (1, 1), (1, 1), (1, 1), 1, None)
    assert not applies(xl, wt, ol, (1, 1), (1, 1), (1, 1), 1, declined_act)
    assert not applies(xl, wt, ol, (2, 2), (1, 1), (1, 1), 1, None)
    return x, wt, out


def test_64_channel_wgmma_convolution_passes_nan_and_declines_other_shapes():
    import cupy

    wgmma = _hopper_or_skip()
    x, wt, out = _nan_stays_local(wgmma.conv3x3_c64, wgmma.conv64_weights, wgmma.conv64_applies, (1, 20, 20, 64),
                                  (0, 7, 9, 5), 64, "relu", "selu")
    xl, ol = x.transpose(0, 3, 1, 2), out.transpose(0, 3, 1, 2)
    one = ((1, 1), (1, 1), (1, 1))
    assert not wgmma.conv64_applies(xl, wt, ol, (1, 1), (0, 0), (1, 1), 1, None)
    assert not wgmma.conv64_applies(xl, cupy.zeros((32, 64, 3, 3), cupy.float16), ol[:, :32], *one, 1, None)
    assert not wgmma.conv64_applies(xl.astype(cupy.float32), wt.astype(cupy.float32), ol.astype(cupy.float32),
                                          *one, 1, None)
    assert not wgmma.conv3x3_c64(x[:, :, ::2], wgmma.conv64_weights(wt), None, out[:, :, :10], None, 0.0)


def _backend_picks(monkeypatch, tmp_path, case, act, name):
    """The CuPy backend's conv2d offers kernel ``name`` as a timed candidate for ``case``: when every candidate
    times alike it is chosen (ties go to the first row in the table's order among those timed alike: the selector
    keeps the first minimum), remembered for the configuration in the selector's file, and its result is the
    convolution's."""
    import cupy

    _hopper_or_skip()
    from engine.backends.cuda import cudnn, runtime
    from engine.backends.selection import Selector

    backend = backend_param("cupy")
    backend.activate()
    timed: list = []

    def fake_elapsed(fn, repeat=3):
        done = fn()
        timed.append(done)
        return (0.5 if getattr(done, "candidate", None) == name else 1.0) if done is not None else None

    monkeypatch.setattr(runtime, "elapsed_ms", fake_elapsed)
    monkeypatch.setattr(cudnn, "TUNE_MIN_FLOP", 0.0)
    monkeypatch.setattr(backend, "_selector", Selector(tmp_path / "choices.json", "test"))
    monkeypatch.setattr(backend, "_kernels", {}, raising=False)
    x, wt, b, ref = case
    out = _nhwc(cupy, np.full(ref.shape, np.nan, np.float16))
    cache: dict = {}
    done = backend.kernel("conv2d")(_nhwc(cupy, x), _nhwc(cupy, wt), cupy.asarray(b), out, (1, 1), (1, 1), (1, 1),
                                    1, act, {}, cache)
    backend.synchronize()
    assert done is not None and done.candidate == name
    assert name in cache and len(timed) >= 2  # offered and timed beside cuDNN
    assert list(Selector(tmp_path / "choices.json", "test")._choices.values()) == [name]  # on disk
    np.testing.assert_allclose(cupy.asnumpy(out).astype(np.float64), ref, rtol=5e-3, atol=5e-3)


def test_backend_convolution_runs_the_64_channel_kernel_when_it_times_fastest(monkeypatch, tmp_path):
    _backend_picks(monkeypatch, tmp_path, _conv64_case(1, 24, 40, "relu", True, 7), "relu", "conv64")


@pytest.mark.parametrize("c", [1, 2, 3])
@pytest.mark.parametrize("n,h,w", [(1, 16, 16), (2, 29, 130), (1, 9, 5), (1, 1, 97)])
@pytest.mark.parametrize("act", [None, "relu", "leaky_relu"])
@pytest.mark.parametrize("bias", [True, False])
def test_few_channel_wgmma_convolution_matches_reference(c, n, h, w, act, bias):
    """The Hopper 3x3 kernel from an input of 1-3 channels to 64 (taps gathered in shared memory) against float64,
    on sizes that are not whole strips or segments."""

    wgmma = _hopper_or_skip()
    if not wgmma.available("patch64"):
        pytest.fail("the few-channel wgmma kernel does not compile on this Hopper GPU")
    _check_against_reference(
        _conv64_case(n, h, w, act, bias, c * 100 + h + w, c=c, scale=3.0), act, wgmma.patch64_applies,
        lambda x, wt, b, out: wgmma.conv3x3_patch64(x, wgmma.patch64_weights(wt), b, out, act, 0.1))


def test_few_channel_wgmma_convolution_keeps_nan_local_and_declines_other_shapes():
    import cupy

    wgmma = _hopper_or_skip()
    x, wt, out = _nan_stays_local(wgmma.conv3x3_patch64, wgmma.patch64_weights, wgmma.patch64_applies,
                                  (1, 20, 20, 3), (0, 7, 9, 1), 64, "relu", "selu")
    xl, ol = x.transpose(0, 3, 1, 2), out.transpose(0, 3, 1, 2)
    one = ((1, 1), (1, 1), (1, 1))
    assert not wgmma.patch64_applies(xl, wt[:32], ol[:, :32], *one, 1, None)
    x4 = cupy.zeros((1, 4, 20, 20), cupy.float16)
    assert not wgmma.patch64_applies(x4, cupy.zeros((64, 4, 3, 3), cupy.float16), ol, *one, 1, None)


@pytest.mark.parametrize("k", [1, 3, 8])
@pytest.mark.parametrize("n,h,w", [(1, 16, 16), (2, 29, 130), (3, 9, 5), (1, 1, 97), (1, 17, 200)])
@pytest.mark.parametrize("act", [None, "relu", "leaky_relu"])
@pytest.mark.parametrize("bias", [True, False])
def test_output_layer_wgmma_convolution_matches_reference(k, n, h, w, act, bias):
    """The Hopper 3x3 kernel from 64 channels to 1-8 (pixels as M, outputs as N) against float64, on sizes that
    are not whole strips or segments."""
    wgmma = _hopper_or_skip()
    if not wgmma.available("out64"):
        pytest.fail("the output-layer wgmma kernel does not compile on this Hopper GPU")
    _check_against_reference(
        _conv64_case(n, h, w, act, bias, k * 100 + h + w, k=k), act, wgmma.out64_applies,
        lambda x, wt, b, out: wgmma.conv3x3_out64(x, wgmma.out64_weights(wt), b, out, act, 0.1))


def test_output_layer_wgmma_convolution_keeps_nan_local_and_declines_other_shapes():
    import cupy

    wgmma = _hopper_or_skip()
    # the NaN next to a strip boundary (64 pixels)
    x, wt, out = _nan_stays_local(wgmma.conv3x3_out64, wgmma.out64_weights, wgmma.out64_applies, (1, 20, 70, 64),
                                  (0, 7, 63, 5), 3, None, "selu")
    xl, ol = x.transpose(0, 3, 1, 2), out.transpose(0, 3, 1, 2)
    one = ((1, 1), (1, 1), (1, 1))
    assert not wgmma.out64_applies(xl, wt, ol, (1, 1), (0, 0), (1, 1), 1, None)
    w9 = cupy.zeros((9, 64, 3, 3), cupy.float16)
    assert not wgmma.out64_applies(xl, w9, cupy.zeros((1, 9, 20, 70), cupy.float16), *one, 1, None)
    assert not wgmma.out64_applies(xl[:, :32], wt[:, :32], ol, *one, 1, None)
    assert not wgmma.conv3x3_out64(x[:, :, ::2], wgmma.out64_weights(wt), None, out[:, :, :35], None, 0.0)


def test_backend_convolution_runs_the_output_layer_kernel_when_it_times_fastest(monkeypatch, tmp_path):
    """64 -> 3, dncnn's last layer."""
    _backend_picks(monkeypatch, tmp_path, _conv64_case(1, 24, 70, None, True, 11, k=3), None, "out64")
