"""Matrix products on LayerLab's own cuBLAS handles (engine/backends/cuda/blas.py): every operand layout against
NumPy, and networks with Linear layers and attention captured as one CUDA graph."""
from __future__ import annotations

import numpy as np
import pytest

from engine.model import Model
from engine.network import Network
from engine.tensor import TensorFormat
from tests.harness import assert_replays_match, backend_param

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(21)


def _pair(a_shape, b_shape, dtype):
    return (RNG.standard_normal(a_shape).astype(dtype), RNG.standard_normal(b_shape).astype(dtype))


CASES = [  # (a shape, b shape, how a is viewed, how b is viewed)
    ((7, 5), (5, 3), None, None),
    ((4, 7, 5), (5, 9), None, None),  # a Linear layer: one product over all rows
    ((2, 3, 7, 5), (2, 3, 5, 6), None, None),  # batched, one stride
    ((2, 1, 7, 5), (1, 3, 5, 6), None, None),  # partial broadcast: copied first
    ((3, 5, 7), (3, 6, 5), "T", "T"),  # both transposed views (swapaxes): op T, no copy
    ((6, 8, 5), (6, 5, 4), "slice", None),  # rows of a strided slice
    ((1, 1), (1, 1), None, None),
]


def _view(x, how):
    cupy = pytest.importorskip("cupy")
    d = cupy.asarray(x)
    if how == "T":
        return cupy.swapaxes(d, -1, -2), np.swapaxes(x, -1, -2)
    if how == "slice":
        return d[:, ::2], x[:, ::2]
    return d, x


@pytest.mark.parametrize("dtype,out_dtype", [(np.float32, np.float32), (np.float16, np.float16),
                                             (np.float16, np.float32)])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_products_of_every_layout_agree_with_numpy(case, dtype, out_dtype):
    cupy = pytest.importorskip("cupy")
    from engine.backends.cuda import blas

    a_shape, b_shape, a_how, b_how = CASES[case]
    a, b = _pair(a_shape, b_shape, dtype)
    da, a = _view(a, a_how)
    db, b = _view(b, b_how)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = cupy.full(ref.shape, np.nan, out_dtype)
    assert blas.serves(da, db, out)
    blas.matmul(da, db, out)
    tol = 1e-5 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(cupy.asnumpy(out).astype(np.float64), ref, rtol=tol, atol=tol * 4)


def test_cases_it_does_not_serve_are_declined():
    cupy = pytest.importorskip("cupy")
    from engine.backends.cuda import blas

    a, b = cupy.ones((3, 4), cupy.float32), cupy.ones((4, 2), cupy.float32)
    assert not blas.serves(a, b.astype(cupy.float16), cupy.empty((3, 2), cupy.float32))  # mixed operands
    assert not blas.serves(a, cupy.ones(4, cupy.float32), cupy.empty(3, cupy.float32))  # a vector
    assert not blas.serves(a, b, cupy.empty((2, 3), cupy.float32).T)  # an output that is not C-contiguous
    assert not blas.serves(a, b, cupy.empty((3, 2), cupy.float16))  # float32 operands into float16


def test_strict_float32_does_not_round_to_tf32():
    """Operands whose TF32 rounding (10-bit mantissa) changes the result: strict float32 keeps full precision."""
    cupy = pytest.importorskip("cupy")
    from engine.backends.cuda import blas

    a = np.full((64, 256), 1 + 2.0 ** -15, np.float32)
    b = np.full((256, 64), 1 + 2.0 ** -15, np.float32)
    out = cupy.empty((64, 64), cupy.float32)
    blas.matmul(cupy.asarray(a), cupy.asarray(b), out)
    exact = 256 * (1 + 2.0 ** -15) ** 2
    assert abs(float(out[0, 0]) - exact) < 1e-3  # TF32 would give 256.0


def tokens() -> Model:
    """A transformer-like block on 2 x 16 x 32 tokens: Linear (GELU), Linear, attention, a product of two tensors."""
    m = Model("tokens")
    m.add_layer("input", "inp", params={"dimensions": "2x16x32"})
    m.add_layer("matmul", "fc1", params={"num_outputs": "64", "bias": "true"}, inputs=["inp"], activation="gelu")
    m.add_layer("matmul", "fc2", params={"num_outputs": "32", "bias": "true"}, inputs=["fc1"])
    m.add_layer("attention", "att", params={"scale": "0.2"}, inputs=["fc2", "inp", "fc2"])
    m.add_layer("input", "w", params={"dimensions": "1x32x8"})
    m.add_layer("matmul", "scores", inputs=["att", "w"])  # two tensors, the second broadcast over the batch
    m.add_layer("output", "out", inputs=["scores"])
    return m


@pytest.mark.parametrize("fmt", ["fp16 nhwc", "fp32 nchw"])
def test_a_network_of_products_and_attention_is_captured(registry, fmt):
    f = TensorFormat.parse(fmt)
    net = Network(tokens(), registry, backend_param("cupy"), f)
    ref = Network(tokens(), registry, backend_param("numpy"), TensorFormat.parse("fp32 nchw"))
    w = np.random.default_rng(3).standard_normal((1, 32, 8)).astype(np.float32) * 0.2
    for n in (net, ref):
        n.set_input("w", w)
    assert_replays_match(net, ref, (2, 16, 32))
    assert net.graph_status.startswith("captured"), net.graph_status


def _fastest(monkeypatch, tmp_path, name):
    """The CuPy backend with a fresh selector whose timer finds candidate ``name`` the fastest."""
    from engine.backends.cuda import runtime
    from engine.backends.selection import Selector

    backend = backend_param("cupy")
    backend.activate()

    def fake_elapsed(fn, repeat=3):
        done = fn()
        return (0.5 if getattr(done, "candidate", None) == name else 1.0) if done is not None else None

    monkeypatch.setattr(runtime, "elapsed_ms", fake_elapsed)
    monkeypatch.setattr(backend, "_selector", Selector(tmp_path / "choices.json", "test"))
    monkeypatch.setattr(backend, "_kernels", {}, raising=False)
    return backend


def _act_ref(y, act):
    import math

    if act == "relu":
        return np.maximum(y, 0.0)
    if act == "clamp":
        return np.clip(y, 0.0, 6.0)
    if act == "gelu":
        return 0.5 * y * (1.0 + np.vectorize(math.erf)(y / math.sqrt(2.0)))
    return y


@pytest.mark.parametrize("layout,dtype", [("nhwc", np.float16), ("nchw", np.float32), ("nhwc", np.float32)])
@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", [None, "relu", "clamp", "gelu"])
def test_one_by_one_convolution_as_a_product_matches_the_reference(monkeypatch, tmp_path, layout, dtype, batch, bias,
                                                                   act):
    """conv2d's ``gemm`` row (a 1x1 convolution as one cuBLAS product, then bias and activation in one pass), chosen
    by the selector when it times fastest, computes the convolution in either memory layout."""
    cupy = pytest.importorskip("cupy")
    backend = _fastest(monkeypatch, tmp_path, "gemm")
    c, k, h, w = 24, 40, 5, 7
    x = RNG.standard_normal((batch, c, h, w)).astype(dtype)
    wt = (RNG.standard_normal((k, c, 1, 1)) / np.sqrt(c)).astype(dtype)
    b = RNG.standard_normal(k).astype(dtype) if bias else None
    ref = np.einsum("nchw,kc->nkhw", x.astype(np.float64), wt[:, :, 0, 0].astype(np.float64))
    if bias:
        ref += b.astype(np.float64)[None, :, None, None]
    coefs = {"min": 0.0, "max": 6.0} if act == "clamp" else {}
    ref = _act_ref(ref, act)

    def device(a):
        d = cupy.asarray(np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if layout == "nhwc" else a)
        return d.transpose(0, 3, 1, 2) if layout == "nhwc" else d

    out = device(np.full(ref.shape, np.nan, dtype))
    done = backend.kernel("conv2d")(device(x), device(wt), None if b is None else cupy.asarray(b), out, (1, 1),
                                    (0, 0), (1, 1), 1, act, coefs, {})
    backend.synchronize()
    assert done is not None and done.candidate == "gemm"
    tol = 1e-5 if dtype == np.float32 else 4e-3
    np.testing.assert_allclose(cupy.asnumpy(out).astype(np.float64), ref, rtol=tol, atol=tol)


def test_the_product_row_declines_what_is_not_one_product():
    """``gemm`` applies only to 1x1, stride-1, unpadded, ungrouped convolutions on dense buffers."""
    cupy = pytest.importorskip("cupy")
    from engine.backends.cuda.ops import Convolution, gemm_applies

    def problem(w_shape, stride=(1, 1), padding=(0, 0), groups=1, x=None):
        x = cupy.zeros((1, 8, 6, 6), cupy.float32) if x is None else x
        return Convolution(x, cupy.zeros(w_shape, cupy.float32), None, cupy.zeros((1, 8, 6, 6), cupy.float32),
                           stride, padding, (1, 1), groups, None, {}, None, None, False)

    assert gemm_applies(problem((8, 8, 1, 1)))
    assert not gemm_applies(problem((8, 8, 3, 3), padding=(1, 1)))
    assert not gemm_applies(problem((8, 8, 1, 1), stride=(2, 2)))
    assert not gemm_applies(problem((8, 4, 1, 1), groups=2))
    assert not gemm_applies(problem((8, 8, 1, 1), x=cupy.zeros((1, 8, 6, 12), cupy.float32)[..., ::2]))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("s,c,h,w", [(2, 24, 8, 6), (4, 3, 12, 8), (2, 5, 7, 9)])  # 7x9: a cut-off last patch
@pytest.mark.parametrize("act", [None, "gelu"])
def test_patch_convolution_as_a_product_matches_the_reference(monkeypatch, tmp_path, dtype, s, c, h, w, act):
    """conv2d's ``patchify`` row (kernel = stride: every patch gathered into one row, then one cuBLAS product, bias
    and activation in one pass), chosen when it times fastest, computes ConvNeXt's stem and downsampling layers."""
    cupy = pytest.importorskip("cupy")
    backend = _fastest(monkeypatch, tmp_path, "patchify")
    k = 16
    x = RNG.standard_normal((2, c, h, w)).astype(dtype)
    wt = (RNG.standard_normal((k, c, s, s)) / np.sqrt(c * s * s)).astype(dtype)
    b = RNG.standard_normal(k).astype(dtype)
    ho, wo = h // s, w // s
    patches = x[:, :, :ho * s, :wo * s].astype(np.float64).reshape(2, c, ho, s, wo, s)
    ref = np.einsum("ncirjt,kcrt->nkij", patches, wt.astype(np.float64)) + b.astype(np.float64)[None, :, None, None]
    ref = _act_ref(ref, act)

    def nhwc(a):
        return cupy.asarray(np.ascontiguousarray(a.transpose(0, 2, 3, 1))).transpose(0, 3, 1, 2)

    out = nhwc(np.full(ref.shape, np.nan, dtype))
    done = backend.kernel("conv2d")(nhwc(x), nhwc(wt), cupy.asarray(b), out, (s, s), (0, 0), (1, 1), 1, act, {}, {})
    backend.synchronize()
    assert done is not None and done.candidate == "patchify"
    tol = 1e-5 if dtype == np.float32 else 4e-3
    np.testing.assert_allclose(cupy.asnumpy(out).astype(np.float64), ref, rtol=tol, atol=tol)


def test_candidates_are_timed_on_the_device_not_by_their_launch_overhead():
    """``runtime.elapsed_ms`` times calls captured in a CUDA graph: a kernel's device time, without the host's launch
    overhead (a call that spends 2 ms on the host but queues a tiny kernel times far below 2 ms); calls that cannot be
    captured (a synchronization) are timed as launched; a declining call gives None."""
    import time

    cupy = pytest.importorskip("cupy")
    from engine.backends.cuda import runtime

    backend = backend_param("cupy")
    backend.activate()
    x = cupy.zeros(1024, cupy.float32)

    def slow_host() -> bool:
        time.sleep(0.002)
        x.__iadd__(1.0)
        return True

    assert runtime.elapsed_ms(slow_host) < 1.0
    before = float(x[0].get())
    assert before == 7.0  # the warm-up call, then the 3 captured calls replayed twice (warm-up of the graph, timed)

    def syncs() -> bool:
        x.__iadd__(1.0)
        cupy.cuda.get_current_stream().synchronize()
        return True

    assert runtime.elapsed_ms(syncs) is not None
    assert runtime.elapsed_ms(lambda: None) is None
