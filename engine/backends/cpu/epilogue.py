"""The activation every CPU kernel fuses into its write (``FUSED_EPILOGUES``, the codes of ``engine.epilogues``),
compiled inline into each.

Only the switches (:func:`activate`, :func:`activate_row`) are inlined by Numba (``inline="always"``, at the level of
its own IR); the functions they call (:func:`_silu`, :func:`_phi`, ...) are plain compiled functions that LLVM inlines.
Numba inlines by copying the callee's IR into every call site, nested calls included: with every function inlined
that way the first compile of the kernels took 460 instead of 260 CPU seconds, for the same run time (the lone
activation kernel, Winograd, depthwise, products and element-wise kernels timed in turns). Where one call covers a
whole output row or block (the depthwise rows, the lone activation, NCHW batch normalization's planes; also a depthwise
pixel's channels past its last whole vector, a few values beside the pixel's vector tiles), kernels call
:func:`activate_span`, the row switch compiled once, instead: the depthwise family compiled in 15-18 instead of 23-25
CPU seconds and the pointwise one in 28-30 instead of 31-33 (fresh caches, in turns), their layers' times within the
machine's spread. Where a call covers one pixel's channels (the panel product's activation by rows), the call costs
more than the switch: a 40 -> 240 1x1 layer with SiLU at 28x28 took 0.30-0.36 instead of 0.23-0.25 ms on two Zen 3
cores with every call site calling, so those stay inlined."""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir as llvm_ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from engine.epilogues import EPILOGUE_TABLE, coefficients

#: fused epilogues the kernels apply themselves (``ActivationDesc.epilogue`` -> code used by the kernel): every
#: epilogue of ``engine.epilogues``
FUSED_EPILOGUES: dict[str | None, int] = {None: 0, **{name: e.code for name, e in EPILOGUE_TABLE.items()}}


def epilogue_alpha(epilogue: str | None, coefs: dict[str, float]) -> float | tuple[float, float]:
    """What a kernel's ``alpha`` argument carries for ``epilogue``: its one coefficient as a float, or both as a
    pair (clamp's min and max, hard_sigmoid's alpha and beta). ``activate`` reads either."""
    a, b = coefficients(epilogue, coefs)
    if epilogue is not None and len(EPILOGUE_TABLE[epilogue].coefficients) == 2:
        return a, b
    return a


def kernel_alpha(alpha: float | tuple[float, float]) -> tuple[np.float32, np.float32]:
    """``alpha`` (one coefficient, or a pair: :func:`epilogue_alpha`) as the pair of float32 values every kernel
    takes: one argument type for every epilogue, so that Numba compiles a kernel once (the warm-up's compile serves
    ReLU6's clamp and hard-sigmoid too) rather than once for one coefficient and again for a pair. Passed by value,
    the values stay in registers as a single float did. Called on every run of some kernels: ``np.ndim`` took
    4 us of a squeeze-excitation layer's 10."""
    if isinstance(alpha, (tuple, list)) or (isinstance(alpha, np.ndarray) and alpha.ndim):
        return np.float32(alpha[0]), np.float32(alpha[1])
    return np.float32(alpha), np.float32(0)


def _first(alpha):  # pragma: no cover - replaced by the overload in compiled code
    raise NotImplementedError


def _second(alpha):  # pragma: no cover - replaced by the overload in compiled code
    raise NotImplementedError


@overload(_first, inline="always")
def _first_of(alpha):  # numba compares these parameters with the lambdas': no annotations
    if isinstance(alpha, (types.BaseTuple, types.Array)):
        return lambda alpha: np.float32(alpha[0])
    return lambda alpha: np.float32(alpha)


@overload(_second, inline="always")
def _second_of(alpha):  # as _first_of
    if isinstance(alpha, (types.BaseTuple, types.Array)):
        return lambda alpha: np.float32(alpha[1])
    return lambda alpha: np.float32(0)


@njit
def _unit(g):  # pragma: no cover - compiled
    return np.minimum(np.maximum(g, np.float32(0)), np.float32(1))


@njit
def _softplus(v):  # pragma: no cover - compiled
    return np.maximum(v, np.float32(0)) + np.float32(math.log1p(math.exp(-abs(v))))


@intrinsic
def _float_of_bits(typingctx, bits):  # pragma: no cover - compiled
    """The float32 whose bits are the low 32 of the integer ``bits`` (a bit cast, which LLVM vectorises)."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
        value = args[0]
        if bits.bitwidth > 32:
            value = builder.trunc(value, llvm_ir.IntType(32))
        elif bits.bitwidth < 32:
            value = builder.zext(value, llvm_ir.IntType(32))
        return builder.bitcast(value, llvm_ir.FloatType())

    return types.float32(bits), codegen


@intrinsic
def _fma(typingctx, a, b, c):  # pragma: no cover - compiled
    """``a * b + c`` for float32 values as LLVM's ``fmuladd``: one fused multiply-add where the CPU has them (one
    rounding, and one instruction instead of two in a polynomial's chain of dependent steps), a product and a sum
    elsewhere. Numba's kernels are compiled without fast-math, so ``a * b + c`` stays two operations."""
    if not all(isinstance(t, types.Float) and t.bitwidth == 32 for t in (a, b, c)):
        return None

    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
        f32 = llvm_ir.FloatType()
        fn = cgutils.get_or_insert_function(builder.module, llvm_ir.FunctionType(f32, [f32, f32, f32]),
                                            "llvm.fmuladd.f32")
        return builder.call(fn, args)

    return types.float32(types.float32, types.float32, types.float32), codegen


@njit
def _exp_neg(v):  # pragma: no cover - compiled
    """``exp(v)`` for float32 ``v`` <= 0 (NaN passes), with no call to libm, so that a loop of it vectorises
    (``math.exp`` is a scalar call per value; the softmax rows use it): Cephes' expf, a
    degree-6 polynomial on the remainder of v / ln 2 times 2**n built from its bits, within 2 ulp of float32's;
    0 below -87.3, where 2**n would be denormal."""
    x = np.maximum(v, np.float32(-87.3))
    fx = np.floor(x * np.float32(1.44269504088896341) + np.float32(0.5))
    r = x - fx * np.float32(0.693359375) - fx * np.float32(-2.12194440e-4)
    z = r * r
    y = np.float32(1.9875691500e-4)
    y = _fma(y, r, np.float32(1.3981999507e-3))
    y = _fma(y, r, np.float32(8.3334519073e-3))
    y = _fma(y, r, np.float32(4.1665795894e-2))
    y = _fma(y, r, np.float32(1.6666665459e-1))
    y = _fma(y, r, np.float32(5.0000001201e-1))
    y = _fma(y, z, r) + np.float32(1)
    scaled = y * _float_of_bits((np.int32(fx) + np.int32(127)) << np.int32(23))
    return np.float32(0) if v < np.float32(-87.3) else scaled


#: sigmoid(x) = 1/2 + x * P(x**2) / Q(x**2) for |x| <= SIGMOID_SATURATED (the rational form of Eigen's and ONNX
#: Runtime's float32 logistic), highest power first: within 1.7e-7 of float64's sigmoid everywhere (three float32
#: ulps of 1), 4.4e-6 relative for x > -4
SIGMOID_P = (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
             2.48287947061529e-01)
SIGMOID_Q = (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
             1.16817656904453e-01, 9.93151921023180e-01)
#: |x| beyond which the rational form is evaluated at the bound (sigmoid is within float32 rounding of 0 or 1)
SIGMOID_SATURATED = 18.0


@njit
def _sigmoid(v):  # pragma: no cover - compiled
    """1 / (1 + exp(-v)) through exp(-|v|) (never overflows): 1 / (1 + e) for v >= 0, e / (1 + e) below."""
    e = _exp_neg(-np.abs(v))
    d = np.divide(np.float32(1), np.float32(1) + e)  # NumPy's division: no zero test, which kept loops scalar
    return d if v >= np.float32(0) else e * d


@njit
def _sigmoid_rational(v):  # pragma: no cover - compiled
    """1 / (1 + exp(-v)) for float32 ``v`` by the rational form ``SIGMOID_P`` / ``SIGMOID_Q`` of v clamped to
    +-SIGMOID_SATURATED (nine fused multiply-adds and one division, a loop of it vectorised), clamped to [0, 1].
    The micro-kernel's SiLU (``microkernel._sigmoid_ir``) computes the same steps. NaN stays NaN (the clamps are
    selects on ordered comparisons, false for NaN). Through :func:`_sigmoid` (Cephes' expf of -|v|, a division and
    the selects of both signs: about thirty operations a vector) SiLU had cost efficientnet_b0 about a third of its
    time on two Zen 3 cores. Only :func:`activate_span` (compiled once, called) and the micro-kernel take it: in the
    switches inlined into every kernel (:func:`activate`, :func:`activate_row`) it made a ReLU Winograd layer (64
    channels at 256x256) a tenth slower, so they keep :func:`_sigmoid`, within 2e-7 of it."""
    x = np.float32(-SIGMOID_SATURATED) if v < np.float32(-SIGMOID_SATURATED) else v
    x = np.float32(SIGMOID_SATURATED) if x > np.float32(SIGMOID_SATURATED) else x
    s = x * x
    p = np.float32(SIGMOID_P[0])
    p = _fma(p, s, np.float32(SIGMOID_P[1]))
    p = _fma(p, s, np.float32(SIGMOID_P[2]))
    p = _fma(p, s, np.float32(SIGMOID_P[3]))
    p = _fma(p, s, np.float32(SIGMOID_P[4]))
    q = np.float32(SIGMOID_Q[0])
    q = _fma(q, s, np.float32(SIGMOID_Q[1]))
    q = _fma(q, s, np.float32(SIGMOID_Q[2]))
    q = _fma(q, s, np.float32(SIGMOID_Q[3]))
    q = _fma(q, s, np.float32(SIGMOID_Q[4]))
    q = _fma(q, s, np.float32(SIGMOID_Q[5]))
    y = np.divide(x * p, q) + np.float32(0.5)  # NumPy's division: no zero test (vectorises)
    y = np.float32(0) if y < np.float32(0) else y
    return np.float32(1) if y > np.float32(1) else y


#: erf(x) = x * P(x**2) / Q(x**2) for |x| <= 4 (the rational form of Eigen's and XLA's float32 erf), highest
#: power first: within 2.3e-7 of float64's Phi = (1 + erf) / 2
ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
         -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
         -1.42647390514189e-02)
#: |x| from which :func:`_phi` is exactly 0 or 1 (the rational form is within 5e-8 of it there)
PHI_SATURATED = 3.9


@njit
def _phi(v):  # pragma: no cover - compiled
    """The normal distribution's Phi(v) = (1 + erf(x)) / 2, x = v / sqrt(2) clamped to +-4, for float32 ``v`` with
    no call to libm: erf by the rational form ``ERF_P`` / ``ERF_Q`` (eleven fused multiply-adds and one division,
    a loop of it vectorised), exactly 0 and 1 beyond |x| = 3.9. The micro-kernel's GELU (``_gelu_ir``) computes the
    same steps. A NaN gives a number here (the clamp's comparisons are ordered): GELU's product with v carries it;
    Phi(-inf) = 0. Where this took 1/2 + erf / 2 by a polynomial near 0 and exp of a polynomial of log erfc beyond
    (two polynomials and an exponential, about fifty operations a vector), the GELU fused into a 1x1 convolution
    of 56x56x384 values cost 1.84 ms on two Zen 3 cores; now 0.72."""
    x = v * np.float32(0.70710678118654752)
    x = x if x < np.float32(4) else np.float32(4)
    x = x if x > np.float32(-4) else np.float32(-4)
    s = x * x
    p = np.float32(ERF_P[0])
    p = _fma(p, s, np.float32(ERF_P[1]))
    p = _fma(p, s, np.float32(ERF_P[2]))
    p = _fma(p, s, np.float32(ERF_P[3]))
    p = _fma(p, s, np.float32(ERF_P[4]))
    p = _fma(p, s, np.float32(ERF_P[5]))
    p = _fma(p, s, np.float32(ERF_P[6]))
    q = np.float32(ERF_Q[0])
    q = _fma(q, s, np.float32(ERF_Q[1]))
    q = _fma(q, s, np.float32(ERF_Q[2]))
    q = _fma(q, s, np.float32(ERF_Q[3]))
    q = _fma(q, s, np.float32(ERF_Q[4]))
    phi = _fma(np.float32(0.5), np.divide(x * p, q), np.float32(0.5))  # NumPy's division: no zero test (vectorises)
    phi = np.float32(0) if x < np.float32(-PHI_SATURATED) else phi
    return np.float32(1) if x > np.float32(PHI_SATURATED) else phi


@njit
def _gelu(v):  # pragma: no cover - compiled
    return v * _phi(v)


@njit
def _gelu_tanh(v):  # pragma: no cover - compiled
    c = np.minimum(np.maximum(v, np.float32(-10)), np.float32(10))
    inner = np.float32(math.tanh(np.float32(0.79788456080286536) * (c + np.float32(0.044715) * c * c * c)))
    return np.float32(0.5) * v * (np.float32(1) + inner)


@njit
def _relu(v):  # pragma: no cover - compiled
    """max(v, 0), plus 0: in place (``activate_row``) the maximum alone stores a new value only where v < 0, which
    LLVM turns into AVX2's masked store (vmaskmovps, microcoded on Zen); with the sum every value is stored (-0
    becomes +0, NaN stays). 1.2 M values on one Zen 3 core: 0.11 against 0.86 ms."""
    return np.maximum(v, np.float32(0)) + np.float32(0)


@njit
def _leaky_relu(v, alpha):  # pragma: no cover - compiled
    return np.maximum(v, np.float32(0)) + _first(alpha) * np.minimum(v, np.float32(0))


@njit
def _clamp(v, alpha):  # pragma: no cover - compiled
    return np.minimum(np.maximum(v, _first(alpha)), _second(alpha))


@njit
def _hard_swish(v):  # pragma: no cover - compiled
    return v * _unit(v * np.float32(1.0 / 6.0) + np.float32(0.5))


@njit
def _hard_sigmoid(v, alpha):  # pragma: no cover - compiled
    return _unit(v * _first(alpha) + _second(alpha))


@njit
def _silu(v):  # pragma: no cover - compiled
    return v * _sigmoid(v)


@njit(inline="always")
def activate(val, act, alpha):  # pragma: no cover - compiled
    """The epilogue of code ``act`` (``FUSED_EPILOGUES``) of ``val``, its coefficients in ``alpha`` (a float, or a
    pair or array of two: see :func:`epilogue_alpha`); NaN stays NaN. ReLU and the clamps are written with maximum
    and minimum, not as a select on ``val > 0``: activating in place, ``y = val if val > 0 else ...`` is a store
    only where the test fails, which LLVM turns into AVX2's masked store (vmaskmovps), microcoded on AMD's Zen: a
    64-channel ReLU pass ran 4x slower than NumPy's there."""
    zero = np.float32(0)
    if act == 0:
        return val
    if act == 1:
        return _relu(val)
    if act == 2:
        return _leaky_relu(val, alpha)
    if act == 3:
        return _sigmoid(val)
    if act == 4:
        return np.float32(math.tanh(val))
    if act == 5:
        return _clamp(val, alpha)
    if act == 6:
        return _hard_swish(val)
    if act == 7:
        return _hard_sigmoid(val, alpha)
    if act == 8:
        return _silu(val)
    if act == 9:
        return _gelu(val)
    if act == 10:
        return _gelu_tanh(val)
    if act == 11:
        return np.maximum(val, zero) + _first(alpha) * np.float32(math.expm1(np.minimum(val, zero)))
    if act == 12:
        return _softplus(val)
    if act == 13:
        return val * np.float32(math.tanh(_softplus(val)))
    return val


@njit(inline="always")
def activate_row(row, act, alpha):  # pragma: no cover - compiled
    """``row[:] = activate(row, act, alpha)`` in place over a 1-D float32 array, the code tested once rather than
    per value: each cheap epilogue (ReLU, leaky ReLU, the clamps, hard-swish, hard-sigmoid, sigmoid, SiLU, GELU) is a
    loop of its own with the code a constant, which LLVM vectorises; the others go value by value. A ReLU6 after a depthwise
    convolution's sums cost about as much as the sums themselves per value (mobilenet_v2's 16-channel layer at
    112x112 on one core: 1.63 against 0.89 ms without it)."""
    if act == 0:
        return
    if act == 1:
        for k in range(row.size):
            row[k] = _relu(row[k])
    elif act == 2:
        for k in range(row.size):
            row[k] = _leaky_relu(row[k], alpha)
    elif act == 5:
        for k in range(row.size):
            row[k] = _clamp(row[k], alpha)
    elif act == 6:
        for k in range(row.size):
            row[k] = _hard_swish(row[k])
    elif act == 7:
        for k in range(row.size):
            row[k] = _hard_sigmoid(row[k], alpha)
    elif act == 3:
        for k in range(row.size):
            row[k] = _sigmoid(row[k])
    elif act == 8:
        for k in range(row.size):
            row[k] = _silu(row[k])
    elif act == 9:
        for k in range(row.size):
            row[k] = _gelu(row[k])
    else:
        for k in range(row.size):
            row[k] = activate(row[k], act, alpha)


@njit(cache=True, nogil=True)
def activate_span(row, act, alpha):  # pragma: no cover - compiled
    """:func:`activate_row`, compiled once and called rather than inlined: for a kernel whose call covers a whole
    output row or block (see the module's documentation). Sigmoid and SiLU by :func:`_sigmoid_rational`, as the
    micro-kernel's epilogue computes them."""
    if act == 3:
        for k in range(row.size):
            row[k] = _sigmoid_rational(row[k])
    elif act == 8:
        for k in range(row.size):
            row[k] = row[k] * _sigmoid_rational(row[k])
    else:
        activate_row(row, act, alpha)
