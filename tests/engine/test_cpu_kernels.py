"""The NumPy backend's Numba kernels (engine/backends/cpu_kernels.py): Winograd and im2col convolutions
and upsampling against float64 references and against the generic NumPy path they replace."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from engine.backends import numpy_backend
from engine.backends.numpy_backend import NumpyBackend, cpu_kernels
from plugins.standard.convolution import conv2d
from plugins.standard.resize import resample
from plugins.standard.upsample import upsample_taps

ck = pytest.importorskip("engine.backends.cpu_kernels", reason="Numba is not installed")


def _ref_conv(x, w, b, stride, padding, dilation, act=None, alpha=0.0):
    y = conv2d(np, x.astype(np.float64), w.astype(np.float64), None if b is None else b.astype(np.float64),
               stride, padding, dilation, 1)
    if act == "relu":
        y = np.maximum(y, 0)
    elif act == "leaky_relu":
        y = np.where(y > 0, y, alpha * y)
    return y


def _tensors(rng, n, c, h, w, nhwc):
    """A random input (logical NCHW view) in NCHW or NHWC memory."""
    if nhwc:
        return rng.standard_normal((n, h, w, c)).astype(np.float32).transpose(0, 3, 1, 2)
    return rng.standard_normal((n, c, h, w)).astype(np.float32)


def _out(n, k, h, w, nhwc):
    return np.full((n, h, w, k), np.nan, np.float32).transpose(0, 3, 1, 2) if nhwc else np.full((n, k, h, w), np.nan,
                                                                                                  np.float32)


def _rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


@pytest.mark.parametrize("nhwc", [False, True])
@pytest.mark.parametrize("n,c,k,h,w,pad", [(1, 16, 24, 17, 23, 1), (2, 32, 8, 20, 20, 0), (1, 20, 20, 9, 31, 2),
                                          (1, 64, 64, 64, 64, 1)])
@pytest.mark.parametrize("act", [None, "relu", "leaky_relu"])
def test_winograd_matches_the_direct_convolution(nhwc, n, c, k, h, w, pad, act):
    rng = np.random.default_rng(1)
    x = _tensors(rng, n, c, h, w, nhwc)
    wt = (rng.standard_normal((k, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32)
    ho, wo = h + 2 * pad - 2, w + 2 * pad - 2
    out = _out(n, k, ho, wo, nhwc)
    ck.winograd_conv3x3(x, ck.transform_weights(wt, nhwc), b, out, (pad, pad), ck.FUSED_ACTIVATIONS[act], 0.1)
    ref = _ref_conv(x, wt, b, (1, 1), (pad, pad), (1, 1), act, 0.1)
    assert np.isfinite(out).all(), "every output pixel written"
    assert _rel(out, ref) < 1e-5


@pytest.mark.parametrize("kernel,stride,padding,dilation,c", [
    ((7, 7), (2, 2), (3, 3), (1, 1), 3),     # a ResNet stem
    ((3, 3), (2, 2), (1, 1), (1, 1), 16),    # strided
    ((1, 1), (1, 1), (0, 0), (1, 1), 24),    # 1x1: no im2col
    ((1, 1), (2, 2), (0, 0), (1, 1), 8),     # 1x1 strided: im2col
    ((3, 5), (1, 2), (2, 1), (2, 1), 5),     # rectangular, dilated, asymmetric stride
    ((3, 3), (1, 1), (1, 1), (1, 1), 3),     # few channels
])
def test_im2col_nhwc_matches_the_reference(kernel, stride, padding, dilation, c):
    rng = np.random.default_rng(2)
    x = _tensors(rng, 2, c, 19, 22, nhwc=True)
    wt = rng.standard_normal((12, c, *kernel)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    ref = _ref_conv(x, wt, b, stride, padding, dilation, "relu")
    out = _out(2, 12, *ref.shape[2:], nhwc=True)
    ck.conv_nhwc(x, ck.gemm_weights(wt), kernel, b, out, stride, padding, dilation, ck.FUSED_ACTIVATIONS["relu"])
    assert _rel(out, ref) < 1e-5


def test_relu_keeps_nan_in_both_kernels():
    x = np.zeros((1, 16, 12, 12), np.float32)
    x[0, 3, 5, 5] = np.nan
    wt = np.ones((4, 16, 3, 3), np.float32)
    out = _out(1, 4, 12, 12, nhwc=False)
    ck.winograd_conv3x3(x, ck.transform_weights(wt, False), None, out, (1, 1), ck.FUSED_ACTIVATIONS["relu"])
    assert np.isnan(out[0, :, 5, 5]).all()
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    outh = _out(1, 4, 12, 12, nhwc=True)
    ck.conv_nhwc(xh, ck.gemm_weights(wt), (3, 3), None, outh, (1, 1), (1, 1), (1, 1), ck.FUSED_ACTIVATIONS["relu"])
    assert np.isnan(outh[0, :, 5, 5]).all()
    assert not np.isnan(outh[0, :, 0, 0]).any()


@pytest.mark.parametrize("nhwc", [False, True])
@pytest.mark.parametrize("method", ["nearest", "bilinear"])
@pytest.mark.parametrize("factor", [(2, 2), (3, 1), (1, 4)])
def test_upsample_matches_the_generic_resampling(nhwc, method, factor):
    rng = np.random.default_rng(3)
    shape = (2, 7, 9, 5) if nhwc else (2, 5, 7, 9)
    x = rng.standard_normal(shape).astype(np.float32)
    h, w = (shape[1], shape[2]) if nhwc else (shape[2], shape[3])
    ho, wo = h * factor[0], w * factor[1]
    out = np.empty((2, ho, wo, 5) if nhwc else (2, 5, ho, wo), np.float32)
    ck.upsample(x, out, factor, method == "bilinear", nhwc)
    taps = (upsample_taps(np, h, ho, factor[0], method, np.float32), upsample_taps(np, w, wo, factor[1], method, np.float32))
    ref = resample(np, x, *taps, (1, 2) if nhwc else (2, 3))
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def test_backend_picks_a_kernel_or_declines():
    be = NumpyBackend()
    rng = np.random.default_rng(4)
    x = _tensors(rng, 1, 32, 40, 40, nhwc=False)
    wt = rng.standard_normal((16, 32, 3, 3)).astype(np.float32)
    out = _out(1, 16, 40, 40, nhwc=False)
    cache: dict = {}
    assert be.conv2d(x, wt, None, out, (1, 1), (1, 1), (1, 1), 1, "relu", {}, cache)
    assert "winograd_nchw" in cache and cache["winograd_nchw"][0] is wt
    assert _rel(out, _ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1), "relu")) < 1e-5
    # NCHW with no Winograd case: the generic path
    assert not be.conv2d(x, wt[:, :, :1, :1], None, out, (1, 1), (0, 0), (1, 1), 1, None, {})
    # an activation the kernels do not fuse, grouped convolutions and fp16: declined
    assert not be.conv2d(x, wt, None, out, (1, 1), (1, 1), (1, 1), 1, "sigmoid", {})
    assert not be.conv2d(x, wt[:, :16], None, out, (1, 1), (1, 1), (1, 1), 2, None, {})
    assert not be.conv2d(x.astype(np.float16), wt.astype(np.float16), None, out.astype(np.float16), (1, 1), (1, 1), (1, 1),
                         1, None, {})


def test_new_weights_replace_the_cached_transform():
    be = NumpyBackend()
    rng = np.random.default_rng(5)
    x = _tensors(rng, 1, 16, 24, 24, nhwc=True)
    cache: dict = {}
    for _ in range(2):
        wt = rng.standard_normal((8, 16, 3, 3)).astype(np.float32)
        out = _out(1, 8, 24, 24, nhwc=True)
        assert be.conv2d(x, wt, None, out, (1, 1), (1, 1), (1, 1), 1, None, {}, cache)
        assert _rel(out, _ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1))) < 1e-5


def test_kernels_can_be_switched_off_or_missing(monkeypatch):
    assert cpu_kernels() is ck
    monkeypatch.setenv("LAYERLAB_CPU_KERNELS", "off")
    assert cpu_kernels() is None
    monkeypatch.delenv("LAYERLAB_CPU_KERNELS")
    monkeypatch.setitem(sys.modules, "engine.backends.cpu_kernels", None)  # as if Numba could not be imported
    assert numpy_backend.cpu_kernels() is None
    be = NumpyBackend()
    x = np.ones((1, 16, 20, 20), np.float32)
    assert not be.conv2d(x, np.ones((4, 16, 3, 3), np.float32), None, np.empty((1, 4, 20, 20), np.float32),
                         (1, 1), (1, 1), (1, 1), 1, None, {})
    assert not be.upsample(x, np.empty((1, 16, 40, 40), np.float32), (2, 2), True, False)


@pytest.mark.parametrize("net", ["dncnn", "unet", "resnet18"])
@pytest.mark.parametrize("fmt", ["fp32 nchw", "fp32 nhwc"])
def test_reference_networks_agree_with_and_without_kernels(monkeypatch, net, fmt):
    from engine.network import Network
    from engine.plugins import default_registry
    from engine.tensor import Dims, TensorFormat
    from tests.bench.networks import NETWORKS

    dims = Dims(1, 3, 64, 64)
    reg = default_registry()
    x = np.random.default_rng(6).random((1, 3, 64, 64), np.float32)
    outs = []
    for mode in ("on", "off"):
        monkeypatch.setenv("LAYERLAB_CPU_KERNELS", mode)
        network = Network(NETWORKS[net](dims), reg, NumpyBackend(), TensorFormat.parse(fmt))
        network.set_input("input", x)
        network.run()
        outs.append(np.asarray(network.output("output"), np.float64))
    assert _rel(outs[0], outs[1]) < 1e-5
