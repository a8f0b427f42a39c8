"""Per-layer profiling of a Network, built on its debugger hooks.

Every iteration times every computed layer: with device events on the GPU (read after the
iteration, so timing does not serialise the GPU more than the events do) and with a
high-resolution clock plus a synchronisation on the CPU. The analytic cost of each layer (FLOPs from
the layer, bytes read and written from the tensor sizes) gives achieved throughput and the layer's
place against the device's measured peaks (roofline)."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.backends.base import Backend
from engine.errors import LayerLabError
from engine.network import Network


class Cancelled(LayerLabError):
    """The run was cancelled by the user."""


@dataclass
class DevicePeaks:
    flops_per_s: float  # dense matrix product in the network's precision
    bytes_per_s: float  # device-to-device copy

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) above which a layer is compute-bound."""
        return self.flops_per_s / self.bytes_per_s


_peaks_cache: dict[tuple[str, str], DevicePeaks] = {}


def measure_peaks(backend: Backend, dtype: Any, budget_s: float = 0.5) -> DevicePeaks:
    """Measure the device's matrix-product rate and copy bandwidth (cached per backend and dtype)."""
    key = (backend.device_name, str(np.dtype(dtype)))
    if key in _peaks_cache:
        return _peaks_cache[key]
    xp = backend.xp
    n = 2048 if backend.name != "numpy" else 512
    a = xp.ones((n, n), dtype=dtype)
    b = xp.ones((n, n), dtype=dtype)
    src = xp.ones((64 << 20) // 4 if backend.name != "numpy" else (16 << 20) // 4, dtype=np.float32)
    dst = xp.empty_like(src)

    def rate(fn: Callable[[], None], work: float) -> float:
        fn()
        backend.synchronize()
        best, deadline = 0.0, time.perf_counter() + budget_s / 2
        while True:
            t = backend.timer()
            t.start()
            fn()
            t.stop()
            backend.synchronize()
            best = max(best, work / max(t.elapsed_ms() / 1e3, 1e-9))
            if time.perf_counter() > deadline:
                return best

    flops = rate(lambda: xp.matmul(a, b), 2.0 * n**3)
    bandwidth = rate(lambda: xp.copyto(dst, src), 2.0 * src.nbytes)
    _peaks_cache[key] = DevicePeaks(flops, bandwidth)
    return _peaks_cache[key]


@dataclass
class LayerProfile:
    name: str
    type: str
    output_dims: str
    output_bytes: int
    flops: int
    bytes_read: int
    bytes_written: int
    times_ms: list[float] = field(default_factory=list)
    fused_activation: bool = True
    bypass: bool = False
    #: for a format conversion fused into a neighbouring layer: that layer (its time is in that layer's)
    fused_into: str = ""

    def stats(self) -> dict[str, float]:
        t = np.asarray(self.times_ms or [0.0])
        return {"median": float(np.median(t)), "mean": float(t.mean()), "min": float(t.min()), "max": float(t.max())}


@dataclass
class ProfileResult:
    layers: list[LayerProfile]
    network_times_ms: list[float]
    peak_memory_bytes: int
    peaks: DevicePeaks | None


def layer_costs(net: Network) -> list[LayerProfile]:
    """Analytic cost of every layer of a planned network."""
    out = []
    for name in net.order:
        item = net.storage_format(name).itemsize
        layer = net.layer(name)
        nd = net.nodes[name]
        ins = [net.dims(s) if s else None for s in nd.inputs]
        dims = net.dims(name)
        bypass = net._roots[name] != name
        weights = sum(int(np.prod(w.shape)) for w in layer.weights.values()) * item
        read = 0 if bypass else sum(d.elements for d in ins if d is not None) * item + weights
        written = 0 if bypass else dims.elements * item
        out.append(LayerProfile(name, layer.desc.name, str(dims), dims.elements * item,
                                0 if bypass else int(layer.flops(ins, dims)), read, written,
                                fused_activation=layer.fuses_activation, bypass=bypass,
                                fused_into=", ".join(net.fused_conversions.get(name, ("", ()))[1])))
    return out


def profile(net: Network, iterations: int = 10, warmup: int = 1,
            progress: Callable[[int, int], None] | None = None,
            should_cancel: Callable[[], bool] | None = None, measure_device: bool = True) -> ProfileResult:
    """Run ``warmup`` + ``iterations`` full inferences, timing every layer of every timed iteration.

    ``progress(i, n)`` is called after each timed iteration; ``should_cancel()`` is polled before
    every layer, and a True answer raises Cancelled within one layer's time."""
    if iterations < 1:
        raise LayerLabError(f"iterations must be at least 1, got {iterations}")
    backend = net.backend
    net.run()  # plans shapes, weights and memory
    costs = layer_costs(net)
    by_name = {c.name: c for c in costs}
    timers: dict[str, Any] = {n: backend.timer() for n in net.order}
    recording = {"on": False}

    def before(_: Network, name: str, __: Any) -> None:
        if should_cancel is not None and should_cancel():
            raise Cancelled("the run was cancelled")
        if recording["on"]:
            timers[name].start()

    def after(_: Network, name: str, __: Any) -> None:
        if recording["on"]:
            timers[name].stop()
            if backend.name == "numpy":
                backend.synchronize()

    net.hooks.before_layer.append(before)
    net.hooks.after_layer.append(after)
    net_times: list[float] = []
    try:
        for i in range(warmup + iterations):
            timed = i >= warmup
            recording["on"] = timed
            for n in net.input_names:
                net.mark_affected(n)
            backend.synchronize()
            whole = backend.timer()
            whole.start()
            executed = net.run()
            whole.stop()
            backend.synchronize()
            if timed:
                net_times.append(whole.elapsed_ms())
                for name in executed:
                    by_name[name].times_ms.append(timers[name].elapsed_ms())
                if progress is not None:
                    progress(i - warmup + 1, iterations)
    finally:
        net.hooks.before_layer.remove(before)
        net.hooks.after_layer.remove(after)
    compute = net.fmt.dtype if backend.name != "numpy" else np.float32  # NumPy computes fp16 layers in fp32
    peaks = measure_peaks(backend, compute) if measure_device else None
    return ProfileResult(costs, net_times, net.peak_memory_bytes, peaks)
