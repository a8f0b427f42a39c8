"""What a layer calls to use its backend's kernels: a convolution through the backend's ``conv2d`` kernel with
the activation's fused epilogue, weights in the layer's memory layout, and the cache where a layer keeps what
is derived from its weights. The layer falls back to the generic array code when these return None."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.backends.base import derived
from engine.backends.selection import Launched
from engine.layer import Layer
from engine.tensor import Layout


def backend_convolve(layer: Layer, x: Any, w: Any, b: Any | None, out: Any, geometry: tuple[Any, ...],
                     groups: int, cacheable: bool = True, residual: Any = None,
                     activation: bool = True) -> Launched | None:
    """``act(conv(x, w) + b)`` by the backend's own kernel (logical NCHW views), the activation fused
    when the backend can, else applied in place after it. None when the backend has no such path.
    ``cacheable``: the weights stay the same array between runs (the backend may cache what it derives).
    ``residual`` (a logical NCHW view of ``out``'s shape): ``act(conv(x, w) + b + residual)`` by the backend's
    ``conv2d_sum`` kernel, None when it has none for the case (the caller adds it). ``activation`` False: the
    layer's activation is left out. The layer's ``tf32`` setting goes to the ``conv2d`` kernel. Where one kernel
    call did all of it, the result carries that call (``Launched.replay``)."""
    act = layer.activation if activation else None
    bv = None if b is None else b.astype(w.dtype, copy=False)
    epilogue, coefs = (act.epilogue, act.coefs) if act is not None else (None, {})
    if residual is not None:
        kernel = layer.backend.kernel("conv2d_sum")
        if kernel is None or out.dtype != layer.fmt.dtype or (act is not None and act.epilogue is None):
            return None
        return kernel(x, w, bv, residual, out, *geometry, groups, epilogue, coefs,
                      kernel_cache(layer) if cacheable else None)
    kernel = layer.backend.kernel("conv2d")
    if kernel is None:
        return None
    if out.dtype != layer.fmt.dtype:  # a conversion fused into the write: computed as unfused, rounded once at the end
        full = layer.xp.empty_like(out, dtype=layer.fmt.dtype)  # same memory layout
        done = backend_convolve(layer, x, w, b, full, geometry, groups, cacheable, activation=activation)
        if done is None:
            return None
        out[...] = full
        return Launched(done.candidate)
    cache = kernel_cache(layer) if cacheable else None
    if act is None or act.epilogue is not None:
        done = kernel(x, w, bv, out, *geometry, groups, epilogue, coefs, cache, tf32=layer.tf32)
        if done is not None:
            return done
    if act is not None and (done := kernel(x, w, bv, out, *geometry, groups, None, {}, cache,
                                           tf32=layer.tf32)) is not None:
        act.apply_inplace(layer.backend, out)  # no fused epilogue for it: one more pass
        return Launched(done.candidate)
    return None


def physical_weight(layer: Layer, w: Any, cacheable: bool, shape: tuple[int, ...] | None = None) -> Any:
    """``w`` (viewed as ``shape`` K, C, R, S when given) in the memory layout of the layer's tensors (KRSC
    for NHWC), seen as logical K, C, R, S; cached on the layer while the same weight array comes back."""
    def make() -> Any:
        phys = w.reshape(shape) if shape is not None else w
        if layer.fmt.layout is Layout.NHWC:
            phys = layer.xp.ascontiguousarray(phys.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        return phys

    return derived(kernel_cache(layer) if cacheable else None, "physical", w, make)


def upload_physical(layer: Layer, w: np.ndarray) -> Any:
    """Host weights ``w`` (K, C, R, S) uploaded in the memory layout :func:`physical_weight` gives them (KRSC for
    NHWC), seen as logical K, C, R, S: ``physical_weight`` then finds them in place, so the device holds one copy."""
    if layer.fmt.layout is Layout.NHWC:
        return layer.backend.to_device(np.ascontiguousarray(w.transpose(0, 2, 3, 1))).transpose(0, 3, 1, 2)
    return layer.backend.to_device(np.ascontiguousarray(w))


def kernel_cache(layer: Layer) -> dict[str, Any]:
    """The dict where a layer keeps what is derived from its weights (physical copies, backend forms)."""
    return layer.__dict__.setdefault("_kernel_cache", {})
