"""Matrix products on the GPU through cuBLAS on handles of LayerLab's own, so that CUDA graphs capture them.

CuPy's ``matmul`` refuses to run while a stream is being captured (its cuBLAS binding raises
``NotImplementedError`` when it sets the handle's stream during capture), so a network with a Linear layer or an
attention block would run layer by layer from Python, every launch paying the host's overhead. cuBLAS itself
supports capture (``cublasGemmEx`` and its strided-batched form record ordinary kernels) when the handle has a
workspace of its own (no allocation inside the captured work). This module calls the cuBLAS library CuPy loaded,
through ctypes, with one handle and one workspace per stream; the scalars are passed by host pointer, so their
values are baked into the captured kernels.

Products are row-major as in NumPy: ``out = a @ b`` over the last two axes, the leading (batch) axes broadcast.
A matrix may be stored row by row or transposed (a ``swapaxes`` view: cuBLAS reads it with ``op T``, no copy);
other layouts, and batch axes that no single stride walks (a partial broadcast), are copied first. A product whose
right-hand matrix is the same for every batch entry and whose left-hand rows are contiguous runs as one large
product (a Linear layer on the channels-last rows of an image)."""
from __future__ import annotations

import ctypes
import functools
import re
import threading
from typing import Any

import cupy

#: bytes of the workspace of each handle (cuBLAS's advice for Hopper: 32 MiB)
WORKSPACE = 32 << 20

_OP_N, _OP_T = 0, 1
_DTYPES = {cupy.dtype(cupy.float32): 0, cupy.dtype(cupy.float16): 2}  # cudaDataType: CUDA_R_32F, CUDA_R_16F
_COMPUTE_32F, _COMPUTE_32F_FAST_TF32 = 68, 77  # cublasComputeType_t
_GEMM_DEFAULT = -1
_INT_MAX = (1 << 31) - 1

_p, _i, _ll, _sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_size_t
_SIGNATURES: dict[str, list[Any]] = {
    "cublasCreate_v2": [ctypes.POINTER(_p)],
    "cublasSetStream_v2": [_p, _p],
    "cublasSetWorkspace_v2": [_p, _p, _sz],
    "cublasGemmEx": [_p, _i, _i, _i, _i, _i, _p, _p, _i, _i, _p, _i, _i, _p, _p, _i, _i, _i, _i],
    "cublasGemmStridedBatchedEx": [_p, _i, _i, _i, _i, _i, _p, _p, _i, _i, _ll, _p, _i, _i, _ll, _p, _p, _i, _i,
                                   _ll, _i, _i, _i],
}


class BlasError(RuntimeError):
    """A cuBLAS call failed (its status code in the message)."""


@functools.cache
def _library() -> ctypes.CDLL:
    """The cuBLAS library CuPy uses (already loaded in the process: found in its memory map), else the system's."""
    import cupy_backends.cuda.libs.cublas  # noqa: F401, PLC0415 - loads the cuBLAS CuPy was built against

    names: list[str] = []
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            names += sorted({m.group(0) for m in re.finditer(r"/\S*/libcublas\.so[.\d]*", maps.read())})
    except OSError:
        pass
    for name in [*names, "libcublas.so.13", "libcublas.so.12", "libcublas.so"]:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        for fn, argtypes in _SIGNATURES.items():
            getattr(lib, fn).argtypes = argtypes
            getattr(lib, fn).restype = ctypes.c_int
        return lib
    raise BlasError("the cuBLAS library was not found")


def _check(status: int, call: str) -> None:
    if status != 0:
        raise BlasError(f"cuBLAS {call} failed with status {status}")


class _Handle:
    """A cuBLAS handle bound to one stream, with its own workspace (kept as long as the process: a captured graph
    may use it at any later launch)."""

    def __init__(self, stream: int) -> None:
        lib = _library()
        self.ptr = ctypes.c_void_p()
        _check(lib.cublasCreate_v2(ctypes.byref(self.ptr)), "cublasCreate")
        self.workspace = cupy.empty(WORKSPACE, cupy.uint8)
        _check(lib.cublasSetStream_v2(self.ptr, ctypes.c_void_p(stream)), "cublasSetStream")
        _check(lib.cublasSetWorkspace_v2(self.ptr, ctypes.c_void_p(self.workspace.data.ptr), WORKSPACE),
               "cublasSetWorkspace")


_HANDLES: dict[tuple[int, int], _Handle] = {}
_LOCK = threading.Lock()


def _handle() -> _Handle:
    """The handle of the current device and stream (bound to that stream when made: nothing to set per call)."""
    key = (cupy.cuda.Device().id, cupy.cuda.get_current_stream().ptr)
    with _LOCK:
        handle = _HANDLES.get(key)
        if handle is None:
            handle = _HANDLES[key] = _Handle(key[1])
    return handle


def _matrix(x: Any) -> tuple[Any, int, int]:
    """(array, op, leading dimension) of the last two axes of ``x`` as cuBLAS reads them: row by row (``op N`` of
    the column-major transpose), transposed (``op T``), or a contiguous copy."""
    rows, cols = x.shape[-2:]
    s0, s1 = (s // x.itemsize for s in x.strides[-2:])
    if (s1 == 1 or cols == 1) and s0 >= max(cols, 1) and x.strides[-2] % x.itemsize == 0:
        return x, _OP_N, max(s0, cols, 1)
    if (s0 == 1 or rows == 1) and s1 >= max(rows, 1) and x.strides[-1] % x.itemsize == 0:
        return x, _OP_T, max(s1, rows, 1)
    x = cupy.ascontiguousarray(x)
    return x, _OP_N, max(cols, 1)


def _batch_stride(x: Any, batch: tuple[int, ...]) -> int | None:
    """The one stride (elements) that walks the flattened batch axes of ``x`` broadcast to ``batch`` (0: the same
    matrix for all), or None when no single stride does."""
    lead = x.ndim - 2
    shape = (1,) * (len(batch) - lead) + x.shape[:lead]
    strides = (0,) * (len(batch) - lead) + tuple(s // x.itemsize for s in x.strides[:lead])
    steps = [0 if n == 1 else s for n, s in zip(shape, strides, strict=True)]
    if not any(steps):
        return 0
    if any(n == 1 for n, b in zip(shape, batch, strict=True) if b != 1):
        return None  # broadcast along some batch axes only
    stride = None
    expected = None
    for n, s in reversed(list(zip(batch, steps, strict=True))):
        if n == 1:
            continue
        if stride is None:
            stride, expected = s, s * n
        elif s != expected:
            return None
        else:
            expected = s * n
    return stride or 0


def _operand(x: Any, batch: tuple[int, ...]) -> tuple[Any, int, int, int]:
    """(array, op, leading dimension, batch stride) of operand ``x`` broadcast to ``batch``, copied where cuBLAS
    cannot read it in place."""
    x, op, ld = _matrix(x)
    stride = _batch_stride(x, batch)
    if stride is None:
        x = cupy.ascontiguousarray(cupy.broadcast_to(x, batch + x.shape[-2:]))
        x, op, ld = _matrix(x)
        stride = x.shape[-2] * x.shape[-1]
    return x, op, ld, stride


def serves(a: Any, b: Any, out: Any) -> bool:
    """Whether :func:`matmul` computes ``out = a @ b`` for these arrays: CuPy arrays of rank 2 or more, a and b
    both float16 or both float32, ``out`` C-contiguous of a's dtype or float32, sizes within cuBLAS's int range."""
    if not all(isinstance(x, cupy.ndarray) for x in (a, b, out)):
        return False
    if a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.dtype not in _DTYPES:
        return False
    if out.dtype not in (a.dtype, cupy.dtype(cupy.float32)) or not out.flags.c_contiguous:
        return False
    m, k = a.shape[-2:]
    n = b.shape[-1]
    return b.shape[-2] == k and out.shape[-2:] == (m, n) and max(m, n, k, 1) <= _INT_MAX and out.size > 0 and k > 0


def matmul(a: Any, b: Any, out: Any, tf32: bool = False, alpha: float = 1.0) -> None:
    """``out[...] = alpha * a @ b`` (batch axes broadcast into ``out``'s) on the current stream; float32 accumulation
    (TF32 tensor cores for float32 operands only with ``tf32``). Call :func:`serves` first."""
    batch = tuple(out.shape[:-2])
    m, n, k = out.shape[-2], out.shape[-1], a.shape[-1]
    a, op_a, lda, a_batch = _operand(a, batch)
    b, op_b, ldb, b_batch = _operand(b, batch)
    count = 1
    for size in batch:
        count *= size
    if op_a == _OP_N and b_batch == 0 and lda == k and (count == 1 or a_batch == m * k) and m * count <= _INT_MAX:
        m, count = m * count, 1  # one product over all rows (b shared, a's rows contiguous)
    if max(m, lda, ldb) > _INT_MAX:
        raise BlasError(f"a {a.shape} @ b {b.shape}: too large for one cuBLAS call")
    handle = _handle()
    lib = _library()
    factor, zero = ctypes.c_float(alpha), ctypes.c_float(0.0)
    compute = _COMPUTE_32F_FAST_TF32 if tf32 and a.dtype == cupy.float32 else _COMPUTE_32F
    in_type, out_type = _DTYPES[a.dtype], _DTYPES[out.dtype]
    # row-major C = A @ B is column-major C^T = B^T @ A^T: b comes first
    args = (handle.ptr, op_b, op_a, n, m, k, ctypes.byref(factor))
    if count == 1:
        _check(lib.cublasGemmEx(*args, b.data.ptr, in_type, ldb, a.data.ptr, in_type, lda, ctypes.byref(zero),
                                out.data.ptr, out_type, n, compute, _GEMM_DEFAULT), "cublasGemmEx")
        return
    _check(lib.cublasGemmStridedBatchedEx(*args, b.data.ptr, in_type, ldb, b_batch, a.data.ptr, in_type, lda,
                                          a_batch, ctypes.byref(zero), out.data.ptr, out_type, n, m * n, count,
                                          compute, _GEMM_DEFAULT), "cublasGemmStridedBatchedEx")
