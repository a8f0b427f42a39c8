"""The fused epilogues (engine/epilogues.py): the generated CUDA header is current, every activation that names an
epilogue computes the same as the epilogue kernels of both backends (NaN and infinities included), and the
per-channel ``scale_shift`` operation."""
from __future__ import annotations

import numpy as np
import pytest

from engine import epilogues
from engine.backends.cpu import epilogue as cpu_epilogue
from engine.descriptors import EPILOGUES
from plugins.activations import ACTIVATION_MODULES

#: coefficients other than the defaults, so that each reaches the kernels
COEFS = {"clamp": {"min": -1.5, "max": 2.25}, "leaky_relu": {"alpha": 0.1}, "hard_sigmoid": {"alpha": 1 / 6, "beta": 0.5},
         "elu": {"alpha": 0.7}}


def _fused_activations():
    import importlib

    found = []
    for name in ACTIVATION_MODULES:
        impl = importlib.import_module(f"plugins.activations.{name}").ACTIVATION
        if impl.desc.epilogue is not None:
            found.append(impl)
    return found


FUSED = _fused_activations()


def _values() -> np.ndarray:
    rng = np.random.default_rng(3)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 3.0, -3.0, 6.0, 20.0, -20.0, 100.0, -100.0, 1e-3]
    return np.concatenate([rng.standard_normal(997) * 4, np.linspace(-12, 12, 241), special]).astype(np.float32)


def _reference(impl, x: np.ndarray) -> np.ndarray:
    """The activation's own implementation in float64. GELU at -inf is -inf * Phi(-inf): NaN in float32 (the
    plugin's own float32 result too) but -inf in float64, whose Phi stays above 0: that value is the float32 one."""
    coefs = impl.desc.coefficient_values(COEFS.get(impl.desc.name, {}))
    with np.errstate(all="ignore"):
        ref = impl.apply(np, x.astype(np.float64), coefs)
        if impl.desc.name == "gelu":
            ref[x == -np.inf] = impl.apply(np, x[x == -np.inf], coefs)
    return ref


def _close(got: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> None:
    got = got.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)


def test_header_is_generated_from_the_table():
    assert epilogues.main(["--check"]) == 0, "run: python -m engine.epilogues --write"


def test_every_epilogue_has_an_activation_and_a_cpu_code():
    assert set(EPILOGUES) == {impl.desc.epilogue for impl in FUSED}
    assert {k for k in cpu_epilogue.FUSED_EPILOGUES if k} == set(EPILOGUES)
    assert len({e.code for e in epilogues.EPILOGUE_TABLE.values()}) == len(epilogues.EPILOGUE_TABLE)
    for impl in FUSED:  # the coefficients the epilogue reads are the activation's
        names = {c.name for c in impl.desc.coefficients}
        assert set(epilogues.EPILOGUE_TABLE[impl.desc.epilogue].coefficients) <= names
    # the code of no epilogue is 0; an activation outside the table has none, so kernels decline it
    assert epilogues.code(None) == 0 and epilogues.code("selu") is None and epilogues.code("relu") == 1


@pytest.mark.parametrize("impl", FUSED, ids=lambda i: i.desc.name)
def test_cpu_epilogue_matches_the_activation(impl):
    from engine.backends.cpu import pointwise

    x = _values()
    out = np.empty_like(x)
    pointwise.activation(x, out, impl.desc.epilogue, impl.desc.coefficient_values(COEFS.get(impl.desc.name, {})))
    _close(out, _reference(impl, x), 2e-6, 1e-6)


@pytest.mark.parametrize("impl", FUSED, ids=lambda i: i.desc.name)
def test_cpu_epilogue_in_place_and_as_a_pair(impl):
    """In place (out is x), and fused into another kernel (the element-wise one) with the coefficients as its
    ``alpha`` argument carries them (one float, or a pair)."""
    from engine.backends.cpu import elementwise, pointwise

    coefs = impl.desc.coefficient_values(COEFS.get(impl.desc.name, {}))
    x = _values()
    ref = _reference(impl, x)
    inplace = x.copy()
    pointwise.activation(inplace, inplace, impl.desc.epilogue, coefs)
    _close(inplace, ref, 2e-6, 1e-6)
    fused = np.empty_like(x)
    elementwise.element_wise(x, np.zeros_like(x), fused, elementwise.ELEMENT_WISE_OPS["sum"],
                             cpu_epilogue.FUSED_EPILOGUES[impl.desc.epilogue],
                             cpu_epilogue.epilogue_alpha(impl.desc.epilogue, coefs))
    _close(fused, ref, 2e-6, 1e-6)


def test_cpu_gelu_through_the_rational_erf_and_its_saturation():
    """GELU's Phi takes erf by a rational form on x = v / sqrt(2) clamped to +-4 and is exactly 0 or 1 beyond |x| =
    3.9: every float32 around the saturation and the clamp and a dense range, within the activation tests'
    tolerance of float64's, signs and NaN kept."""
    from engine.backends.cpu import pointwise
    from engine.backends.cpu.epilogue import PHI_SATURATED

    impl = next(i for i in FUSED if i.desc.name == "gelu")
    joins = np.float32([PHI_SATURATED * np.sqrt(2), 4 * np.sqrt(2)])
    near = np.concatenate([np.nextafter(j, np.float32(np.inf) * s, dtype=np.float32) * np.float32([1, -1])[:, None]
                           for j in joins for s in (1, -1)]).ravel()
    x = np.concatenate([np.linspace(-9, 9, 180_001, dtype=np.float32), joins, -joins, near,
                        np.float32([1e-30, -1e-30, 1e-7, -1e-7])])
    out = np.empty_like(x)
    pointwise.activation(x, out, "gelu", {})
    ref = _reference(impl, x)
    _close(out, ref, 2e-6, 1e-6)
    assert (np.sign(out) == np.sign(x))[np.abs(x) < 5].all()


def _scale_shift_case(nhwc: bool, dtype=np.float32):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 6, 5, 7)).astype(dtype)
    x[0, 1, 2, 3] = np.nan
    scale = rng.standard_normal(6).astype(np.float32)
    shift = rng.standard_normal(6).astype(np.float32)
    ref = np.clip(x.astype(np.float64) * scale[None, :, None, None] + shift[None, :, None, None], -0.5, 1.0)
    phys = np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if nhwc else x
    return phys, scale, shift, ref


def _logical(a, nhwc: bool):
    return a.transpose(0, 3, 1, 2) if nhwc else a


@pytest.mark.parametrize("nhwc", [False, True])
def test_cpu_scale_shift(nhwc):
    from engine.backends.cpu import pointwise

    x, scale, shift, ref = _scale_shift_case(nhwc)
    out = np.empty_like(x)
    pointwise.scale_shift(x, scale, shift, out, nhwc, "clamp", {"min": -0.5, "max": 1.0})
    _close(_logical(out, nhwc), ref, 1e-6, 1e-6)
    plain = _logical(x, nhwc).astype(np.float64) * scale[None, :, None, None] + shift[None, :, None, None]
    pointwise.scale_shift(x, scale, shift, x, nhwc, None, {})  # in place, no activation
    _close(_logical(x, nhwc), plain, 1e-6, 1e-6)


@pytest.mark.parametrize("nhwc", [False, True])
def test_cpu_scale_shift_reads_the_leading_channels_of_a_join(nhwc):
    """A join's leading channels read as a view of its longer buffer (rows of 9 channels per pixel, 6 read; in NCHW
    two images of 9 planes, 6 read) give what the same channels copied out give; a view whose last row would run
    past the memory (channels 2-7 of 9) is declined, and the layer's plain path then serves it."""
    from engine.backends import get_backend
    from engine.backends.cpu import pointwise

    rng = np.random.default_rng(8)
    whole = rng.standard_normal((2, 9, 5, 7)).astype(np.float32)
    phys = np.ascontiguousarray(whole.transpose(0, 2, 3, 1)) if nhwc else whole
    axis = 3 if nhwc else 1
    scale, shift = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    for first, done in ((0, True), (2, False)):
        view = phys[(slice(None),) * axis + (slice(first, first + 6),)]
        assert not view.flags.c_contiguous
        out = np.full(view.shape, np.nan, np.float32)
        assert pointwise.scale_shift(view, scale, shift, out, nhwc, "relu", {}) is done
        kernel = get_backend("numpy").kernel("scale_shift")
        assert (kernel(view, scale, shift, out, nhwc, "relu", {}) is not None) is done
        if done:
            x = whole[:, first:first + 6].astype(np.float64)
            ref = np.maximum(x * scale[None, :, None, None] + shift[None, :, None, None], 0)
            _close(_logical(out, nhwc), ref, 1e-6, 1e-6)


@pytest.mark.parametrize("impl", FUSED, ids=lambda i: i.desc.name)
@pytest.mark.parametrize("nhwc", [False, True])
def test_cpu_scale_shift_applies_every_epilogue(impl, nhwc):
    """Batch normalization's pass with each activation, rows of channels (NHWC) or planes (NCHW) of odd sizes."""
    from engine.backends.cpu import pointwise

    rng = np.random.default_rng(11)
    x = (rng.standard_normal((1, 37, 3, 5)) * 4).astype(np.float32)
    scale, shift = rng.standard_normal(37).astype(np.float32), rng.standard_normal(37).astype(np.float32)
    coefs = impl.desc.coefficient_values(COEFS.get(impl.desc.name, {}))
    phys = np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if nhwc else x
    out = np.empty_like(phys)
    pointwise.scale_shift(phys, scale, shift, out, nhwc, impl.desc.epilogue, coefs)
    y = (x.astype(np.float64) * scale[None, :, None, None] + shift[None, :, None, None]).astype(np.float32)
    _close(_logical(out, nhwc), _reference(impl, y), 2e-6, 1e-6)


def test_cpu_operations_decline_what_they_do_not_serve():
    from engine.backends import get_backend

    backend = get_backend("numpy")
    act, ss = backend.kernel("activation"), backend.kernel("scale_shift")
    x16 = np.zeros((1, 2, 3, 4), np.float16)
    assert act(x16, x16, "relu", {}) is None  # float16: the activation's own code
    assert act(np.zeros(4, np.float32), np.zeros(4, np.float32), None, {}) is None
    assert ss(np.zeros((1, 2, 3, 4), np.float32), np.ones(3, np.float32), np.zeros(3, np.float32),
              np.zeros((1, 2, 3, 4), np.float32), False, None, {}) is None  # 3 values for 2 channels


# ---- GPU -----------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("impl", FUSED, ids=lambda i: i.desc.name)
def test_gpu_epilogue_matches_the_activation(impl, dtype):
    import cupy

    from engine.backends import get_backend

    backend = get_backend("cupy")
    coefs = impl.desc.coefficient_values(COEFS.get(impl.desc.name, {}))
    x = _values()
    if dtype == np.float16:
        x = x[np.abs(x) < 60000].astype(np.float16)
    ref = _reference(impl, x.astype(np.float32))
    dx = cupy.asarray(x)
    assert backend.kernel("activation")(dx, dx, impl.desc.epilogue, coefs) is not None
    tol = (2e-6, 1e-6) if dtype == np.float32 else (2e-3, 2e-3)
    _close(cupy.asnumpy(dx), ref.astype(dtype).astype(np.float64) if dtype == np.float16 else ref, *tol)
    # the element-wise kernel fuses the same epilogue
    out = cupy.empty_like(dx)
    dx = cupy.asarray(x)
    assert backend.kernel("element_wise")("sum", dx, cupy.zeros_like(dx), out, impl.desc.epilogue, coefs) is not None
    _close(cupy.asnumpy(out), ref.astype(dtype).astype(np.float64) if dtype == np.float16 else ref, *tol)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("nhwc", [False, True])
def test_gpu_scale_shift(nhwc, dtype):
    import cupy

    from engine.backends import get_backend

    x, scale, shift, ref = _scale_shift_case(nhwc, dtype)
    dx = cupy.asarray(x)
    out = cupy.empty_like(dx)
    done = get_backend("cupy").kernel("scale_shift")(dx, cupy.asarray(scale), cupy.asarray(shift), out, nhwc, "clamp",
                                                     {"min": -0.5, "max": 1.0})
    assert done is not None
    tol = 1e-6 if dtype == np.float32 else 2e-3
    _close(_logical(cupy.asnumpy(out), nhwc), ref, tol, tol)


@pytest.mark.gpu
@pytest.mark.parametrize("view", ["nhwc", "slice", "other"])
def test_gpu_activation_on_views_of_memory(view):
    """A logical NCHW view of NHWC memory (run as one flat pass), a strided slice and a pair of different layouts
    all get the activation of each element, in place or not."""
    import cupy

    from engine.backends import get_backend

    backend = get_backend("cupy")
    rng = np.random.default_rng(3)
    base = cupy.asarray((4 * rng.standard_normal((2, 9, 10, 12))).astype(np.float32))
    x = {"nhwc": base.transpose(0, 3, 1, 2), "slice": base[:, ::2, :, 1:], "other": base.transpose(0, 3, 1, 2)}[view]
    ref = np.clip(cupy.asnumpy(x), 0.0, 6.0)
    out = x if view != "other" else cupy.empty(x.shape, x.dtype)  # C-contiguous output of a transposed input
    assert backend.kernel("activation")(x, out, "clamp", {"min": 0.0, "max": 6.0}) is not None
    np.testing.assert_array_equal(cupy.asnumpy(out), ref)


def test_one_coefficient_and_a_pair_reach_the_kernels_as_one_argument_type():
    """Every epilogue's coefficients reach a kernel as the same Numba type (a pair of float32 values): a kernel the
    warm-up compiled for ReLU serves ReLU6's clamp and leaky ReLU's slope without compiling again."""
    import numba

    def alpha(impl):
        coefs = impl.desc.coefficient_values(COEFS.get(impl.desc.name, {}))
        return cpu_epilogue.kernel_alpha(cpu_epilogue.epilogue_alpha(impl.desc.epilogue, coefs))

    kinds = {numba.typeof(alpha(impl)) for impl in FUSED}
    assert kinds == {numba.types.UniTuple(numba.types.float32, 2)}
    assert cpu_epilogue.kernel_alpha(0.25) == (np.float32(0.25), np.float32(0))
    assert cpu_epilogue.kernel_alpha((-1.5, 2.25)) == (np.float32(-1.5), np.float32(2.25))


@pytest.mark.parametrize("shape,bias_shape", [((64, 3, 49, 49), (3, 49, 49)), ((4, 3, 49, 49), (1, 3, 49, 49)),
                                              ((3, 4100), None), ((5, 33), (33,)), ((3, 1), None)])
@pytest.mark.parametrize("in_place", [False, True])
def test_cpu_softmax_rows_agree_with_a_reference(shape, bias_shape, in_place):
    """The CPU's softmax along the last axis (rows shared out over the cores where there are enough), a bias repeated
    over the leading axes added as it reads, large scores (the maximum subtracted first), a row with NaN and a row
    of -inf as NumPy's softmax gives them; a bias that broadcasts otherwise or a float64 score is declined."""
    from engine.backends.cpu import pointwise

    rng = np.random.default_rng(12)
    x = (rng.standard_normal(shape) * 20).astype(np.float32)
    flat = x.reshape(-1, shape[-1])
    flat[1, 0] = np.nan
    flat[2] = -np.inf
    bias = None if bias_shape is None else (rng.standard_normal(bias_shape) * 5).astype(np.float32)
    s = x.astype(np.float64) + (0 if bias is None else bias)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        ref = e / e.sum(axis=-1, keepdims=True)
    out = x if in_place else np.full(shape, 7.0, np.float32)
    assert pointwise.softmax_rows(x, out, bias)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    assert np.isnan(out.reshape(-1, shape[-1])[1:3]).all()
    assert not pointwise.softmax_rows(x.astype(np.float64), out)
    if len(shape) == 4:
        assert not pointwise.softmax_rows(x, out, np.zeros((shape[0], 1, *shape[2:]), np.float32))
