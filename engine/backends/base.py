"""The backend interface every array backend implements."""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def derived(cache: dict[str, Any] | None, key: str, w: Any, make: Callable[[], Any]) -> Any:
    """``make()`` (something computed from the weights array ``w``), kept in ``cache[key]`` while the
    weights stay that same array; computed afresh every call when ``cache`` is None."""
    cached = cache.get(key) if cache is not None else None
    if cached is not None and cached[0] is w:
        return cached[1]
    value = make()
    if cache is not None:
        cache[key] = (w, value)
    return value


class Timer:
    """Measures device time of a section: start(), stop(), then elapsed_ms() (synchronises)."""

    def __init__(self) -> None:
        self._t0 = 0.0
        self._t1 = 0.0

    def start(self) -> None:
        self._t0 = time.perf_counter()

    def stop(self) -> None:
        self._t1 = time.perf_counter()

    def elapsed_ms(self) -> float:
        return (self._t1 - self._t0) * 1e3


class Backend:
    """Array module, memory and synchronisation for one kind of device."""

    name = "base"
    xp: Any = np

    @property
    def device_name(self) -> str:
        raise NotImplementedError

    def to_device(self, host: np.ndarray) -> Any:
        return self.xp.asarray(host)

    def to_host(self, array: Any) -> np.ndarray:
        return np.asarray(array)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self.xp.empty(shape, dtype=dtype)

    def alloc_bytes(self, nbytes: int) -> Any:
        """A raw byte buffer that tensors are carved from (memory pool slot)."""
        return self.xp.empty((max(int(nbytes), 1),), dtype=np.uint8)

    supports_graphs = False
    #: fp32 convolutions may use TF32 tensor cores (10-bit mantissa products, float32 sums); set from the
    #: network's ``tf32`` setting before each run. Off: strict float32, as the NumPy backend computes.
    allow_tf32 = False
    #: True when conv2d may have a fast path (layers skip the call otherwise)
    has_conv_kernels = False

    def activate(self) -> None:
        """Make this backend's stream current in the calling thread (before running layers)."""

    def running(self) -> contextlib.AbstractContextManager[Any]:
        """Context held around one inference (all its layers); the NumPy backend holds BLAS to one thread
        in it, its own kernels spreading every layer over the cores."""
        return contextlib.nullcontext()

    def conv2d(self, x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int], padding: tuple[int, int],
               dilation: tuple[int, int], groups: int, act: str | None, coefs: dict[str, float],
               cache: dict[str, Any] | None = None) -> bool:
        """A backend's own convolution into ``out`` (logical NCHW views), with ``act`` fused when given.

        ``cache`` is a dict owned by the calling layer where the backend may keep what it derives from
        ``w`` (checked against the identity of ``w``); None when the weights change between runs.
        Returns False when the backend has no fast path for this case (the caller computes it)."""
        return False

    def element_wise(self, op: str, a: Any, b: Any, out: Any, act: str | None, coefs: dict[str, float]) -> bool:
        """``out = act(a op b)`` (op: sum, product, max, min, sub) in one pass by the backend's own kernel, for
        physical arrays of one shape and layout; False when it has none for this case."""
        return False

    def upsample(self, x: Any, out: Any, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> bool:
        """Upsampling by integer factors (nearest, or bilinear with half-pixel centres) of the physical
        array ``x`` into ``out`` by the backend's own kernel; False when it has none for this case."""
        return False

    def pool2d(self, x: Any, out: Any, is_max: bool, kernel: tuple[int, int], stride: tuple[int, int],
               padding: tuple[int, int], count_include_pad: bool, nhwc: bool) -> bool:
        """Max or average pooling of the physical array ``x`` into ``out`` by the backend's own kernel
        (averages over the real cells of a window unless ``count_include_pad``); False when it has none."""
        return False

    def upscale_concat(self, x: Any, skip: Any, out: Any, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> bool:
        """``out`` = channels of ``x`` upsampled by integer factors (as :meth:`upsample`) followed by the
        channels of ``skip``, by the backend's own kernel; physical arrays of one layout (NHWC when
        ``nhwc``), the upsampled size equal to the skip size. False when it has none for this case."""
        return False

    def synchronize(self) -> None:
        """Wait until all queued device work has finished."""

    def timer(self) -> Timer:
        return Timer()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.device_name}>"
