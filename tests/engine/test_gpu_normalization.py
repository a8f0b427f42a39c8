"""Normalizations in one GPU kernel (engine/backends/cuda/normalization.py): layer normalization of rows of every
layout against a float64 reference, the layer taking it for ConvNeXt's channels of an NHWC image and a transformer's
tokens; the softmax of attention scores."""
from __future__ import annotations

import numpy as np
import pytest

from engine.model import Model
from engine.network import Network
from engine.tensor import TensorFormat
from tests.harness import backend_param

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(8)


def _reference(x, scale, bias, n, inner, eps):
    v = x.astype(np.float64).reshape(-1, n, inner)
    mean = v.mean(axis=1, keepdims=True)
    var = v.var(axis=1, keepdims=True)
    y = (v - mean) / np.sqrt(var + eps) * scale.reshape(1, n, 1) + bias.reshape(1, n, 1)
    return y.reshape(x.shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape,n,inner", [((7, 96), 96, 1), ((2, 5, 3, 768), 768, 1), ((2, 40, 6), 40, 6),
                                           ((3, 1), 1, 1), ((4, 33), 33, 1)])
def test_rows_of_every_layout_agree_with_a_reference(shape, n, inner, dtype):
    cupy = pytest.importorskip("cupy")
    from engine.backends.cuda import normalization

    x = (RNG.standard_normal(shape) * 3 + 1).astype(dtype)
    scale, bias = RNG.standard_normal(n).astype(dtype), RNG.standard_normal(n).astype(dtype)
    out = cupy.full(shape, np.nan, dtype)
    done = normalization.layer_norm(cupy.asarray(x), cupy.asarray(scale), cupy.asarray(bias), out, n, inner, 1e-5,
                                    "relu", {})
    assert done is not None and done.candidate == "layer_norm"
    ref = np.maximum(_reference(x, scale.astype(np.float64), bias.astype(np.float64), n, inner, 1e-5), 0)
    tol = 1e-4 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(cupy.asnumpy(out).astype(np.float64), ref, rtol=tol, atol=tol)


def test_cases_it_does_not_serve_write_nothing():
    cupy = pytest.importorskip("cupy")
    from engine.backends.cuda import normalization

    x = cupy.ones((4, 8), cupy.float32)
    out = cupy.zeros((4, 8), cupy.float32)
    w = cupy.ones(8, cupy.float32)
    assert normalization.layer_norm(x, w.astype(cupy.float16), w, out, 8, 1, 1e-5, None, {}) is None
    assert normalization.layer_norm(x.T, w[:4], w[:4], out.T, 4, 1, 1e-5, None, {}) is None  # not C-contiguous
    assert normalization.layer_norm(x, w, w, out, 8, 1, 1e-5, "no such epilogue", {}) is None
    assert float(abs(out).max()) == 0.0


def _norm_model(dims: str, over: str) -> Model:
    m = Model("norm")
    m.add_layer("input", "inp", params={"dimensions": dims})
    m.add_layer("layer_normalization", "ln", params={"over": over}, inputs=["inp"], activation="gelu")
    m.add_layer("output", "out", inputs=["ln"])
    return m


@pytest.mark.parametrize("dims,over,fmt", [("2x96x7x5", "channels", "fp16 nhwc"), ("2x96x7x5", "channels", "fp32 nchw"),
                                           ("2x49x96", "trailing", "fp16 nhwc"), ("1x7x7x96", "trailing", "fp16 nhwc")])
def test_the_layer_runs_the_one_pass_kernel(registry, dims, over, fmt):
    gpu, cpu = backend_param("cupy"), backend_param("numpy")
    calls = []
    kernel = gpu.kernel("layer_norm")
    gpu._kernels["layer_norm"] = lambda *a: calls.append(a[4:6]) or kernel(*a)
    net = Network(_norm_model(dims, over), registry, gpu, TensorFormat.parse(fmt))
    ref = Network(_norm_model(dims, over), registry, cpu, TensorFormat.parse("fp32 nchw"))
    shape = tuple(int(d) for d in dims.split("x"))
    x = RNG.standard_normal(shape).astype(np.float32)
    for n in (net, ref):
        n.set_input("inp", x)
        n.run()
    assert calls, "the layer did not use the kernel"
    tol = 1e-4 if "fp32" in fmt else 3e-2
    np.testing.assert_allclose(net.output("out"), ref.output("out"), rtol=tol, atol=tol)


@pytest.mark.parametrize("out_dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(192, 49, 49), (3, 1), (2, 4100), (5, 33)])
def test_softmax_rows_agree_with_a_reference(shape, out_dtype):
    cupy = pytest.importorskip("cupy")
    from engine.backends.cuda import normalization

    x = (RNG.standard_normal(shape) * 20).astype(np.float32)  # large scores: the maximum must be subtracted
    out = cupy.full(shape, np.nan, out_dtype)
    assert normalization.softmax_rows(cupy.asarray(x), out) is not None
    e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    ref = e / e.sum(axis=-1, keepdims=True)
    tol = 1e-5 if out_dtype == np.float32 else 1e-3
    np.testing.assert_allclose(cupy.asnumpy(out).astype(np.float64), ref, rtol=tol * 10, atol=tol)
    assert normalization.softmax_rows(cupy.asarray(x).astype(cupy.float16), out) is None  # float32 scores only


@pytest.mark.parametrize("bias_shape", [(3, 49, 49), (1, 3, 49, 49), (49, 49), (8, 3, 49, 49)])
@pytest.mark.parametrize("bias_dtype", [np.float16, np.float32])
def test_softmax_rows_add_a_bias_broadcast_over_the_leading_axes(bias_shape, bias_dtype):
    cupy = pytest.importorskip("cupy")
    from engine.backends.cuda import normalization

    x = (RNG.standard_normal((8, 3, 49, 49)) * 5).astype(np.float32)
    bias = (RNG.standard_normal(bias_shape) * 5).astype(bias_dtype)
    out = cupy.full(x.shape, np.nan, np.float16)
    assert normalization.softmax_rows(cupy.asarray(x), out, cupy.asarray(bias)) is not None
    s = x.astype(np.float64) + bias.astype(np.float64)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(cupy.asnumpy(out).astype(np.float64), e / e.sum(axis=-1, keepdims=True),
                               rtol=1e-2, atol=1e-3)
    # a bias that broadcasts otherwise (over a middle axis) is not served: the caller adds it
    assert normalization.softmax_rows(cupy.asarray(x), out, cupy.zeros((8, 1, 49, 49), bias_dtype)) is None
