"""One-pass pointwise kernels of the CuPy backend: an activation by its fused epilogue (``kernels/epilogue.cuh``, an
activation that no producer fused runs as one kernel instead of a chain of CuPy operations), and the per-channel
``act(x * scale + shift)`` of batch normalization (``kernels/scale_shift.cuh``), in the tensor's own precision."""
from __future__ import annotations

from typing import Any

import cupy

from engine.backends.cuda import runtime
from engine.backends.selection import Launched
from engine.epilogues import EPILOGUE_TABLE, code, coefficients

_FLOATS = (cupy.float16, cupy.float32)


def _activation_kernel(epilogue: str) -> Any:
    return runtime.element_wise("T x, float32 a, float32 b", "T y",
                                f"y = (T)layerlab_act({code(epilogue)}, (float)x, a, b);",
                                f"layerlab_act_{epilogue}", ("epilogue.cuh",))


def activation(x: Any, out: Any, epilogue: str | None, coefs: dict[str, float]) -> Launched | None:
    """``out = act(x)`` (``out`` may be ``x``) in float32 arithmetic, rounded once, for arrays of one shape and
    precision (fp16 or fp32) in any strides; None for an epilogue not in ``engine.epilogues`` or other dtypes."""
    if epilogue not in EPILOGUE_TABLE or not (x.dtype == out.dtype and x.dtype in _FLOATS and x.shape == out.shape):
        return None
    a, b = coefficients(epilogue, coefs)
    flat = _dense_pair(x, out)
    if flat is not None:  # one flat pass over the memory, not a 4-D strided walk (a logical NCHW view of NHWC)
        x, out = flat
    _activation_kernel(epilogue)(x, cupy.float32(a), cupy.float32(b), out)
    return Launched("activation")


def _dense_pair(x: Any, out: Any) -> tuple[Any, Any] | None:
    """``x`` and ``out`` as 1-D views of their memory when both are dense with the same axis order (an element-wise
    kernel on a transposed view computes a 4-D index per element: three times slower on NHWC activations); None
    otherwise."""
    if x.strides != out.strides or x.size == 0:
        return None
    order = sorted(range(x.ndim), key=lambda i: -x.strides[i])
    xt, ot = x.transpose(order), out.transpose(order)
    if not (xt.flags.c_contiguous and ot.flags.c_contiguous):
        return None
    return xt.reshape(-1), ot.reshape(-1)


def _rows(x: Any) -> Any | None:
    """4-D ``x`` as a 2-D view (its first axes merged into rows, its last ones into columns; each row dense) where
    its strides allow, else None: an element-wise kernel then computes a 2-D index per element instead of 4-D."""
    n, a, b, c = x.shape
    item = x.itemsize
    s0, s1, s2, s3 = x.strides
    if s3 == item and s2 == c * s3 and s1 == b * s2:  # only the first axis strided: (n, a*b*c) rows
        return cupy.lib.stride_tricks.as_strided(x, (n, a * b * c), (s0, item))
    if s3 == item and s1 == b * s2 and s0 == a * s1:  # only the last axis short of its stride: (n*a*b, c) rows
        return cupy.lib.stride_tricks.as_strided(x, (n * a * b, c), (s2, item))
    return None


def _scale_shift_kernel() -> Any:
    return runtime.element_wise(
        "T x, raw float32 scale, raw float32 shift, int32 nhwc, int64 C, int64 HW, int32 act, float32 alpha, "
        "float32 beta", "T y", "scale_shift.cuh", "layerlab_scale_shift", ("epilogue.cuh",))


def scale_shift(x: Any, scale: Any, shift: Any, out: Any, nhwc: bool, epilogue: str | None,
                coefs: dict[str, float]) -> Launched | None:
    """``out = act(x * scale[c] + shift[c])`` per channel ``c`` of physical 4-D ``x`` (fp16 or fp32, any strides;
    ``out`` C-contiguous of the same shape and dtype, may be ``x``), ``scale`` and ``shift`` float32 vectors of C
    values; None otherwise."""
    if epilogue is not None and epilogue not in EPILOGUE_TABLE:
        return None
    if not (x.ndim == 4 and x.dtype == out.dtype and x.dtype in _FLOATS and x.shape == out.shape
            and out.flags.c_contiguous):
        return None
    c = x.shape[3] if nhwc else x.shape[1]
    if not (scale.dtype == shift.dtype == cupy.float32 and scale.size == shift.size == c):
        return None
    a, b = coefficients(epilogue, coefs)
    hw = x.shape[2] * x.shape[3]
    if not x.flags.c_contiguous:  # e.g. the leading channels of a longer join: rows of a matrix, where they are
        rows = _rows(x)
        if rows is not None:
            x, out = rows, out.reshape(rows.shape)
    _scale_shift_kernel()(x, scale, shift, int(nhwc), c, hw, code(epilogue), cupy.float32(a), cupy.float32(b), out)
    return Launched("scale_shift")
