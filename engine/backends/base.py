"""The backend interface every array backend implements."""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import time
from collections.abc import Callable
from typing import Any, ClassVar

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


@dataclasses.dataclass(frozen=True, slots=True)
class ConvOperands:
    """What every backend's ``conv2d`` candidates see of a call first: logical NCHW views of the input, the weights,
    the bias (or None) and the output, and the stride, padding and dilation (each a pair). Each backend's record of
    a call adds what its candidates need besides."""

    x: Any
    w: Any
    b: Any | None
    out: Any
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]


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


#: Operations a backend may offer a hand-written kernel for (``Backend.kernel``), with the kernel's call.
#: Arrays are the backend's; "physical" arrays are in the tensor's memory layout (NHWC when ``nhwc``).
#: ``epilogue`` is the activation's declared fused epilogue (``ActivationDesc.epilogue``) or None.
KERNEL_OPERATIONS: dict[str, str] = {
    "conv2d": "(x, w, b, out, stride, padding, dilation, groups, epilogue, coefs, cache=None): act(conv(x, w) + b) "
              "into out, logical NCHW views; cache: a dict of the layer where the kernel may keep what it derives "
              "from w (checked against the identity of w), None when the weights change between runs",
    "conv2d_sum": "(x, w, b, residual, out, stride, padding, dilation, groups, epilogue, coefs, cache=None): "
                  "act(conv(x, w) + b + residual) into out, as conv2d; residual a logical NCHW view of out's shape",
    "expand_depthwise": "(x, w1, b1, epilogue1, coefs1, w2, b2, epilogue2, coefs2, out, stride, padding, cache=None): "
                        "act2(depthwise(act1(conv1x1(x, w1) + b1), w2) + b2) into out, logical NCHW views, without "
                        "the expanded tensor in memory",
    "element_wise": "(op, a, b, out, epilogue, coefs): out = act(a op b) (op: sum, product, max, min, sub), "
                    "physical arrays of one shape and layout",
    "upsample": "(x, out, factor, bilinear, nhwc): upsampling of physical x by integer factors (nearest, or "
                "bilinear with half-pixel centres)",
    "upsample_concat": "(x, skip, out, factor, bilinear, nhwc): the channels of x upsampled (as upsample) followed "
                       "by the channels of skip, the upsampled size equal to the skip size",
    "dense": "(x, w, b, out, epilogue, coefs): out (N, O) = act(x (N, K) @ w (O, K) transposed + b), 2-D arrays",
    "linear": "(x, w, b, out, epilogue, coefs, cache=None): out (M, O) = act(x (M, K) @ w (K, O) + b), 2-D arrays, "
              "many rows (a linear layer over a transformer's tokens); cache: where the backend may keep what it "
              "derives from w (w stays the same array), None where w changes between calls",
    "pool2d": "(x, out, is_max, kernel, stride, padding, count_include_pad, nhwc): max or average pooling of "
              "physical x (averages over the real cells of a window unless count_include_pad)",
    "global_pool": "(x, out, is_max, nhwc): max or average over all pixels of each channel of physical x into out "
                   "(N x C values, physical N,1,1,C or N,C,1,1)",
    "channel_scale": "(x, g, out, nhwc, epilogue, coefs): out = x * act(g[n, c]) for physical x and out of one "
                     "shape and g of N x C values (a squeeze-excitation gate; act the gate's epilogue or None)",
    "to_channels_last": "(data, out): out = data, data a C-contiguous float32 NCHW array (an image given to an input "
                        "layer), out the logical NCHW view of channels-last memory of its shape and dtype",
    "activation": "(x, out, epilogue, coefs): out = act(x) in one pass for the fused epilogue ``epilogue`` "
                  "(``engine.epilogues``), physical arrays of one shape and dtype; out may be x",
    "scale_shift": "(x, scale, shift, out, nhwc, epilogue, coefs): out = act(x * scale[c] + shift[c]) in one pass, "
                   "c the channel of physical 4-D x (NHWC when nhwc), scale and shift float32 vectors; out may be x",
    "layer_norm": "(x, scale, bias, out, n, inner, epsilon, epilogue, coefs): out = act((x - mean) / sqrt(var + "
                  "epsilon) * scale + bias) over the n values of each row of x seen as (outer, n, inner), x and out "
                  "C-contiguous of one shape and dtype, scale and bias vectors of n values of that dtype",
    "resize_taps": "(x, out, taps_h, taps_w, nhwc): out = physical 4-D x resampled by separable taps (int64 "
                   "indices and weights of x's dtype or None for nearest, each (taps, size), on the device: "
                   "device_taps of plugins.standard._common_resample), one pass, either layout",
    "softmax_rows": "(x, out, bias=None): out = softmax of C-contiguous float32 x (plus bias, C-contiguous, whose "
                    "shape without leading ones is x's trailing axes) along its last axis, out C-contiguous of x's "
                    "shape (fp16 or fp32)",
    "attention": "(q, k, v, bias, out, scale, k_transposed=False, cache=None): out = softmax(scale * q @ k^T + bias) "
                 "@ v over the last two axes (k given as k^T where k_transposed), the leading axes and the bias "
                 "broadcast, float32 operands read in place, out C-contiguous float32; cache: a dict of the layer "
                 "where the kernel may keep its prepared call for the same arrays",
    "matmul": "(a, b, out, tf32, alpha=1.0): out = alpha * a @ b over the last two axes, the leading axes broadcast "
              "into out's (NumPy's rules, both operands of rank 2 or more), a and b of one float dtype, out "
              "C-contiguous of a's dtype or float32; float32 accumulation (tf32: TF32 tensor cores allowed for float32 operands)",
}

#: the operations of ``KERNEL_OPERATIONS`` only the GPU backend offers: on the CPU the layers compute them themselves
GPU_OPERATIONS: frozenset[str] = frozenset()
#: the operations only the CPU backend offers: on the GPU the layers compute them with the backend's ``matmul``
#: (and, for attention, its ``softmax_rows``; an expansion and its depthwise layer, two convolutions)
CPU_OPERATIONS = frozenset({"linear", "attention", "expand_depthwise"})


class Backend:
    """Array module, memory and synchronisation for one kind of device."""

    name = "base"
    xp: Any = np

    @property
    def device_name(self) -> str:
        raise NotImplementedError

    def to_device(self, host: np.ndarray) -> Any:
        return self.xp.asarray(host)

    def to_host(self, array: Any, pinned: bool = False) -> np.ndarray:
        """A host copy of ``array`` (on the CPU: the array itself). ``pinned``: into page-locked memory where the
        device has it (faster copies; the memory is pooled and returned when the array is freed)."""
        return np.asarray(array)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self.xp.empty(shape, dtype=dtype)

    def available_memory(self) -> int:
        """Bytes this backend can still allocate (checked before a network allocates its tensors)."""
        from engine.limits import host_memory_bytes  # noqa: PLC0415

        return host_memory_bytes()

    def alloc_bytes(self, nbytes: int) -> Any:
        """A raw byte buffer that tensors are carved from (memory pool slot)."""
        return self.xp.empty((max(int(nbytes), 1),), dtype=np.uint8)

    #: what kind of device the backend computes on: "cpu" or "gpu"
    device_kind: ClassVar[str] = "cpu"
    #: True when the backend can capture a run of layers as a graph and replay it (``capture_graph``)
    supports_graphs: ClassVar[bool] = False
    #: whether layers read a join's leading channels as a strided view of a longer join's buffer, so that joins of
    #: the same leading inputs share one buffer (``engine.memory_plan.join_chains``)
    views_joins: ClassVar[bool] = False
    #: whether a layer may write its output into the buffer of an input it reads last (``Layer.overwritable_inputs``:
    #: a residual sum into its residual's), its kernels reading each value of that input before writing its place
    overwrites_inputs: ClassVar[bool] = False
    #: the module holding the backend's kernel factories (one function per operation name, see ``kernel``)
    kernel_module: ClassVar[str | None] = None

    def activate(self) -> None:
        """Make this backend's stream current in the calling thread (before running layers)."""

    def running(self) -> contextlib.AbstractContextManager[Any]:
        """Context held around one inference (all its layers); the NumPy backend holds BLAS to one thread
        in it, its own kernels spreading every layer over the cores."""
        return contextlib.nullcontext()

    def kernel(self, operation: str) -> Callable[..., bool] | None:
        """The backend's hand-written kernel for ``operation`` (one of ``KERNEL_OPERATIONS``), or None when
        it has none: the caller then computes it with the generic array code.

        Looked up on first use in the backend's ``kernel_module``, where a function named after the operation
        makes the kernel for this backend (compiling nothing until then), and memoized per backend. A kernel
        returns False when it does not serve a particular case (the caller falls back then, too)."""
        if operation not in KERNEL_OPERATIONS:
            raise ValueError(f"unknown kernel operation {operation!r} (known: {', '.join(KERNEL_OPERATIONS)})")
        made = self.__dict__.setdefault("_kernels", {})
        if operation not in made:
            factory = None
            if self.kernel_module is not None:
                factory = getattr(importlib.import_module(self.kernel_module), operation, None)
            made[operation] = factory(self) if factory is not None else None
        return made[operation]

    def compute_format(self, fmt: Any, tf32: bool = False) -> Any:
        """The tensor format the layers of a network in ``fmt`` compute in when neither they nor the run set one
        (``engine.tensor.TensorFormat``). Inputs and outputs are host arrays in any format either way."""
        return fmt

    def call_sequence(self, calls: list[Callable[[], None]]) -> Callable[..., None]:
        """One callable running the prepared ``calls`` (layers' recorded kernel calls) in order, for a network's
        replay of them; given a list, it appends the host clock (``time.perf_counter``) after each call; after an
        exception its ``failed_at`` is the index of the call that raised. The CPU's calls its kernels' launches
        straight (``engine.backends.cpu.runtime.Sequence``)."""
        return CallSequence(calls)

    def capture_graph(self, run: Callable[[], None]) -> Any:
        """Record the device work of ``run()`` as a graph (the work is not done: launch it); only where
        ``supports_graphs``. Raises what capturing raises (the caller then runs eagerly)."""
        raise NotImplementedError(f"the {self.name} backend cannot capture graphs")

    def launch_graph(self, graph: Any) -> None:
        """Replay a graph made by ``capture_graph`` on the backend's stream."""
        raise NotImplementedError(f"the {self.name} backend cannot capture graphs")

    def synchronize(self) -> None:
        """Wait until all queued device work has finished."""

    def timer(self) -> Timer:
        return Timer()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.device_name}>"


class CallSequence:
    """Calls run in order (``Backend.call_sequence``); ``failed_at``: the index of the call that raised."""

    __slots__ = ("calls", "failed_at")

    def __init__(self, calls: list[Callable[[], None]]) -> None:
        self.calls = tuple(calls)
        self.failed_at = -1

    def __call__(self, stamps: list[float] | None = None) -> None:
        i = 0
        try:
            for call in self.calls:
                call()
                if stamps is not None:
                    stamps.append(time.perf_counter())
                i += 1
        except BaseException:
            self.failed_at = i
            raise
