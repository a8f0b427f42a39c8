"""Per-layer profiling of a Network: per-layer times taken from the same launches as a plain run.

* **GPU** (a backend with ``device_kind`` "gpu"): the timed iterations are plain runs (a CUDA-graph replay where the
  network captures one). CUPTI's activity records of the kernels, memory sets and copies they ran
  (:mod:`engine.backends.cuda.kernel_trace`) are matched to layers by launch order: one untimed eager run, synchronised
  after every layer, says which records each layer launches; the records of every timed run are matched to that
  sequence. A layer's time is its records' device time plus the gaps before them (the device idle, waiting for the
  next launch), so the layer times add up to the span of the iteration on the device. Where CUPTI is unusable, each
  layer is timed with device events around it, run one by one outside the graph (host launch gaps included; the
  report says so).
* **CPU**: the timed iterations are plain runs (the replay of recorded kernel calls as call sequences included);
  the network reports each finished layer with the host clock at its end (``Hooks.layer_ended``, which a call
  sequence notes after each call and reports when it is done) and a layer's time is the clock from the previous
  layer's end to its own, so the layer times add up to the iteration's time spent in layers, on the plain run's
  path.

The analytic cost of each layer (FLOPs from the layer, bytes read and written from the tensor sizes) gives achieved
throughput and the layer's place against the device's peaks (roofline), measured as the best of several trials and
cached per machine with the date (``device_peaks``)."""
from __future__ import annotations

import datetime as _dt
import difflib
import json
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.atomic import atomic_write_text
from engine.backends.base import Backend
from engine.backends.selection import cache_folder, served_candidates
from engine.errors import LayerLabError, check_at_least
from engine.network import Network

#: how the per-layer times were measured (the report's ``run.timing``)
TIMING_CUPTI_GRAPH = "CUPTI kernel records of a CUDA-graph replay (the plain run), matched to layers by launch order"
TIMING_CUPTI_EAGER = "CUPTI kernel records of plain runs (no CUDA graph), matched to layers by launch order"
TIMING_EVENTS = ("CUDA events around each layer, run one by one outside the CUDA graph (host launch gaps included: "
                 "CUPTI unusable: {why})")
TIMING_HOST = "host clock per layer, same code path as a plain run"
#: a network whose gaps between kernels exceed its kernels' time is launch-bound
PEAKS_FILE = "device_peaks.json"
PEAKS_FORMAT = 1


class Cancelled(LayerLabError):
    """The run was cancelled by the user."""


# ---- device peaks ---------------------------------------------------------------------------------------------
@dataclass
class DevicePeaks:
    flops_per_s: float  # dense matrix product in the network's precision
    bytes_per_s: float  # device-to-device copy
    #: when they were measured (ISO date and time) and over how many trials (best kept)
    measured: str = ""
    trials: int = 1

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) above which a layer is compute-bound."""
        return self.flops_per_s / self.bytes_per_s

    def roof(self, intensity: float) -> float:
        """The highest FLOP rate the peaks allow at ``intensity`` (FLOP/byte)."""
        return min(self.flops_per_s, self.bytes_per_s * intensity)


_peaks_cache: dict[str, DevicePeaks] = {}


def peaks_path() -> Path:
    """The file caching measured device peaks on this machine (in the user's cache folder)."""
    return cache_folder() / PEAKS_FILE


def _peaks_key(backend: Backend, dtype: Any) -> str:
    return f"{backend.name}|{backend.device_name}|{platform.node()}|{np.dtype(dtype)}"


def measure_peaks(backend: Backend, dtype: Any, trials: int = 5, budget_s: float = 1.0) -> DevicePeaks:
    """Measure the device's matrix-product rate and copy bandwidth: the best of ``trials`` trials (each the best of
    repeated runs in its share of ``budget_s``), so that a moment of a busy machine does not set the roof."""
    xp = backend.xp
    n = 2048 if backend.name != "numpy" else 1024
    a = xp.ones((n, n), dtype=dtype)
    b = xp.ones((n, n), dtype=dtype)
    src = xp.ones((64 << 20) // 4 if backend.name != "numpy" else (16 << 20) // 4, dtype=np.float32)
    dst = xp.empty_like(src)
    share = budget_s / (2 * max(1, trials))

    def rate(fn: Callable[[], None], work: float) -> float:
        fn()
        backend.synchronize()
        best, deadline = 0.0, time.perf_counter() + share
        while True:
            t = backend.timer()
            t.start()
            fn()
            t.stop()
            backend.synchronize()
            best = max(best, work / max(t.elapsed_ms() / 1e3, 1e-9))
            if time.perf_counter() > deadline:
                return best

    flops = bandwidth = 0.0
    for _ in range(max(1, trials)):  # interleaved, so a busy moment spoils one trial of each, not all of one
        flops = max(flops, rate(lambda: xp.matmul(a, b), 2.0 * n**3))
        bandwidth = max(bandwidth, rate(lambda: xp.copyto(dst, src), 2.0 * src.nbytes))
    now = _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")
    return DevicePeaks(flops, bandwidth, now, max(1, trials))


def _read_peaks_file(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != PEAKS_FORMAT or not isinstance(doc.get("peaks"), dict):
        return {}
    return doc["peaks"]


def device_peaks(backend: Backend, dtype: Any, remeasure: bool = False) -> DevicePeaks:
    """The device's peaks for ``dtype``: measured once per machine and cached with the date (in memory and in
    ``peaks_path()``); ``remeasure`` measures again and replaces the cached values."""
    key = _peaks_key(backend, dtype)
    path = peaks_path()
    if not remeasure:
        if key in _peaks_cache:
            return _peaks_cache[key]
        entry = _read_peaks_file(path).get(key)
        try:
            peaks = DevicePeaks(float(entry["flops_per_s"]), float(entry["bytes_per_s"]), str(entry["measured"]),
                                int(entry["trials"]))
            if peaks.flops_per_s > 0 and peaks.bytes_per_s > 0:
                _peaks_cache[key] = peaks
                return peaks
        except (TypeError, KeyError, ValueError):
            pass  # absent or damaged: measure
    peaks = measure_peaks(backend, dtype)
    _peaks_cache[key] = peaks
    stored = _read_peaks_file(path)
    stored[key] = {"flops_per_s": peaks.flops_per_s, "bytes_per_s": peaks.bytes_per_s, "measured": peaks.measured,
                   "trials": peaks.trials}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"format": PEAKS_FORMAT, "peaks": stored}, indent=2) + "\n", "device peaks")
    except (OSError, LayerLabError):
        pass  # a read-only cache folder: measured again next time
    return peaks


# ---- results --------------------------------------------------------------------------------------------------
@dataclass
class KernelStat:
    """One kernel (or memory set, copy, CPU call) of a layer: its name, mean device time per iteration, launch
    shape (GPU kernels) and the candidate that served the layer's operation (empty where unknown)."""

    name: str
    kind: str = "kernel"
    ms: float = 0.0
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    candidate: str = ""


@dataclass
class LayerProfile:
    name: str
    type: str
    output_dims: str
    output_bytes: int
    flops: int
    bytes_read: int
    bytes_written: int
    #: the layer's time in each timed iteration (device time + gaps on the GPU, host clock on the CPU)
    times_ms: list[float] = field(default_factory=list)
    fused_activation: bool = True
    bypass: bool = False
    #: for a format conversion fused into a neighbouring layer: that layer (its time is in that layer's)
    fused_into: str = ""
    #: GPU: time its kernels ran and time the device waited before them, per timed iteration
    device_ms: list[float] = field(default_factory=list)
    gap_ms: list[float] = field(default_factory=list)
    kernels: list[KernelStat] = field(default_factory=list)
    #: the candidates that served the layer's operations (``engine.backends.selection``), in order
    candidates: list[str] = field(default_factory=list)

    def stats(self) -> dict[str, float]:
        t = np.asarray(self.times_ms or [0.0])
        return {"median": float(np.median(t)), "mean": float(t.mean()), "min": float(t.min()), "max": float(t.max())}

    @property
    def intensity(self) -> float:
        """FLOPs per byte read and written (0 for a layer that moves nothing)."""
        moved = self.bytes_read + self.bytes_written
        return self.flops / moved if moved else 0.0

    @property
    def achieved_flops_per_s(self) -> float:
        """FLOPs per second at the layer's mean time (0 where it was not timed)."""
        sec = self.stats()["mean"] / 1e3
        return self.flops / sec if sec > 0 else 0.0

    def above_roof(self, peaks: DevicePeaks, factor: float = 1.0) -> bool:
        """Whether the layer's achieved rate lies above ``factor`` times the roofline of ``peaks``."""
        return self.intensity > 0 and self.achieved_flops_per_s > factor * peaks.roof(self.intensity)


@dataclass
class ProfileResult:
    layers: list[LayerProfile]
    network_times_ms: list[float]
    peak_memory_bytes: int
    peaks: DevicePeaks | None
    #: how the per-layer times were measured (one of the TIMING_ texts; empty: layers not timed)
    timing: str = ""
    notes: list[str] = field(default_factory=list)


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


# ---- matching device records to layers ------------------------------------------------------------------------
def attribute(reference: Sequence[tuple[str, str]], names: Sequence[str]) -> list[str | None]:
    """The layer of each record of a run, given ``reference`` (layer, record name) in launch order from a run
    synchronised after every layer, and the run's record ``names`` in order. Equal sequences match one to one;
    otherwise the longest common runs of names match, and a record outside them goes to the layer of the record
    before it (None before the first match)."""
    ref_names = [n for _, n in reference]
    if ref_names == list(names):
        return [layer for layer, _ in reference]
    out: list[str | None] = [None] * len(names)
    matcher = difflib.SequenceMatcher(None, ref_names, list(names), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for k, j in enumerate(range(j1, j2)):
            if tag in ("equal", "replace") and i1 + k < i2:
                out[j] = reference[i1 + k][0]
    last: str | None = None
    for j, layer in enumerate(out):
        if layer is None:
            out[j] = last
        else:
            last = layer
    return out


def account(spans: Sequence[tuple[int, int]], begin_ns: int | None = None,
            end_ns: int | None = None) -> list[tuple[float, float]]:
    """(busy ms, gap ms) of each piece of work given as (start ns, end ns) in start order: the time it alone kept
    the device busy and the idle time before it, so that all of them add up to the span from the first start to
    the last end (overlapping work counts once). With ``begin_ns`` and ``end_ns`` (the iteration's bounds on the
    device) the wait before the first piece counts in its gap and the idle end in the last piece's, so that they
    add up to ``end_ns - begin_ns``."""
    out = []
    reached: int | None = begin_ns
    for start, end in spans:
        if reached is None:
            gap, busy, reached = 0, max(0, end - start), max(start, end)
        else:
            gap = max(0, start - reached)
            busy = max(0, end - max(start, reached))
            reached = max(reached, end)
        out.append([busy / 1e6, gap / 1e6])
    if out and end_ns is not None and reached is not None:
        out[-1][1] += max(0, end_ns - reached) / 1e6
    return [(busy, gap) for busy, gap in out]


#: a traced run whose span on the device exceeds the median run's by this factor is left out of the layer times (the
#: host was held between two launches: one such run among twenty moves every layer's mean)
OUTLIER_SPAN_FACTOR = 1.25


def steady_runs(spans_ms: Sequence[float]) -> list[int]:
    """The indices of the runs whose span (``spans_ms``) is within :data:`OUTLIER_SPAN_FACTOR` of the median run's
    (at least half of them)."""
    if not spans_ms:
        return []
    limit = OUTLIER_SPAN_FACTOR * float(np.median(spans_ms))
    return [i for i, span in enumerate(spans_ms) if span <= limit]


def fit_gaps(costs: Sequence[LayerProfile], plain_ms: float, runs: int) -> float | None:
    """Where the traced runs took longer than the plain ones (``plain_ms``, untraced: CUPTI's work on every launch
    widens the host's gaps between kernels, which decide a network that runs layer by layer), scale every layer's
    gap of each of the ``runs`` traced runs by one factor so that a run's layer times add up to the plain time, the
    kernels' busy time untouched; returns the factor, or None where nothing was scaled."""
    timed = [lp for lp in costs if len(lp.device_ms) >= runs > 0]
    if not timed:
        return None
    busy = float(np.mean([sum(lp.device_ms[-runs + i] for lp in timed) for i in range(runs)]))
    gaps = float(np.mean([sum(lp.gap_ms[-runs + i] for lp in timed) for i in range(runs)]))
    if gaps <= 0 or busy + gaps <= plain_ms:
        return None
    factor = min(1.0, max(0.0, (plain_ms - busy) / gaps))
    for lp in timed:
        for i in range(len(lp.gap_ms) - runs, len(lp.gap_ms)):
            lp.gap_ms[i] *= factor
            lp.times_ms[i] = lp.device_ms[i] + lp.gap_ms[i]
    return factor


# ---- profiling ------------------------------------------------------------------------------------------------
#: ``warming(done, total, layer)``: the untimed runs before the timed ones (the first loads or compiles the kernels),
#: layer by layer: ``done`` layers of ``total`` computed, ``layer`` the one computed next
Warming = Callable[[int, int, str], None]


class WarmupLayers:
    """A ``Hooks.layer_done`` callback that follows the untimed runs before the timed ones: it polls ``check()`` after
    every layer (a cancel is seen within one layer, also during the first run, which compiles) and reports
    ``warming(done, total, next layer)``. ``passes``: how many untimed runs; ``remove()`` ends it."""

    def __init__(self, net: Network, passes: int, warming: Warming | None, check: Callable[..., None]) -> None:
        self.net, self.warming, self.check = net, warming, check
        self.order = list(net.order)
        self.total = max(1, passes * len(self.order))
        self.done = 0
        net.hooks.layer_done.append(self)

    def __call__(self, name: str) -> None:
        self.done = min(self.done + 1, self.total)
        self.check()
        if self.warming is not None:
            at = self.order.index(name) + 1 if name in self.order else 0
            self.warming(self.done, self.total, self.order[at % len(self.order)] if self.order else name)

    def remove(self) -> None:
        if self in self.net.hooks.layer_done:
            self.net.hooks.layer_done.remove(self)


def profile(net: Network, iterations: int = 10, warmup: int = 1,
            progress: Callable[[int, int], None] | None = None,
            should_cancel: Callable[[], bool] | None = None, measure_device: bool = True,
            remeasure_peaks: bool = False, warming: Warming | None = None) -> ProfileResult:
    """Run ``warmup`` + ``iterations`` plain inferences and time every layer of every timed iteration (see the
    module documentation for how). ``progress(i, n)`` is called after each timed iteration; ``should_cancel()`` is
    polled before every iteration (and every layer of an untimed run on the CPU), a True answer raises Cancelled.
    ``warming`` follows the untimed runs on the CPU layer by layer (``Warming``). ``remeasure_peaks`` measures the
    device's peaks again instead of using the cached ones."""
    check_at_least("iterations", iterations, 1, LayerLabError)

    def check(*_: Any) -> None:
        if should_cancel is not None and should_cancel():
            raise Cancelled("the run was cancelled")

    backend = net.backend
    check()
    if backend.device_kind == "gpu":
        from engine.backends.cuda.kernel_trace import KernelTracer, TraceUnavailable  # noqa: PLC0415

        try:
            tracer = KernelTracer()
        except TraceUnavailable as exc:
            result = _profile_layer_events(net, iterations, warmup, progress, check)
            result.timing = TIMING_EVENTS.format(why=str(exc))
        else:
            result = _profile_traced(net, tracer, iterations, warmup, progress, check)
    else:
        result = _profile_host(net, iterations, warmup, progress, check, warming)
    if measure_device:
        result.peaks = network_peaks(net, remeasure_peaks)
        key = _peaks_key(backend, _compute_dtype(net))
        if not remeasure_peaks and key not in _remeasured and any(
                lp.above_roof(result.peaks, STALE_ROOF_FACTOR) for lp in result.layers):
            # the cached peaks were measured low (a busy moment of the first run on this machine): once per process,
            # measure again rather than draw layers above the roof in every report from now on
            _remeasured.add(key)
            result.peaks = network_peaks(net, remeasure=True)
    return result


#: peaks measured again in this process because layers ran above the cached ones (at most once each)
_remeasured: set[str] = set()
#: how far above the cached roof a layer's rate must be for the peaks to count as measured low (Winograd and other
#: shortcuts do less arithmetic than their FLOP count, so a layer may lie somewhat above a true roof)
STALE_ROOF_FACTOR = 2.0


def _compute_dtype(net: Network) -> Any:
    return net.fmt.dtype if net.backend.name != "numpy" else np.float32  # NumPy computes fp16 layers in fp32


def network_peaks(net: Network, remeasure: bool = False) -> DevicePeaks:
    """The peaks of ``net``'s device in the precision its layers compute in (``device_peaks``)."""
    return device_peaks(net.backend, _compute_dtype(net), remeasure)


def _restart(net: Network) -> None:
    for n in net.input_names:
        net.mark_affected(n)


def _plain_iteration(net: Network) -> float:
    """One plain run of the whole network, timed on the backend's clock (ms)."""
    backend = net.backend
    _restart(net)
    backend.synchronize()
    whole = backend.timer()
    whole.start()
    net.run()
    whole.stop()
    backend.synchronize()
    return whole.elapsed_ms()


def _served_per_layer(net: Network, check: Callable[..., None],
                      after: Callable[[str], None] | None = None) -> dict[str, list[str]]:
    """One untimed run layer by layer, noting the candidates that served each layer (``after(name)`` follows each
    layer's work)."""
    served: dict[str, list[str]] = {}
    current: dict[str, Any] = {}

    def before(_: Network, name: str, __: Any) -> None:
        check()
        current["block"] = served_candidates()
        current["names"] = current["block"].__enter__()

    def done(_: Network, name: str, __: Any) -> None:
        current["block"].__exit__(None, None, None)
        served[name] = list(current["names"])
        if after is not None:
            after(name)

    _restart(net)
    net.hooks.before_layer.append(before)
    net.hooks.after_layer.append(done)
    try:
        net.run()
    finally:
        net.hooks.before_layer.remove(before)
        net.hooks.after_layer.remove(done)
    net.backend.synchronize()
    return served


def _call_name(call: Any) -> str:
    """A readable name of a recorded kernel call (``functools.partial`` of a kernel function, or a function)."""
    fn = getattr(call, "func", call)
    return str(getattr(fn, "__name__", "") or type(fn).__name__)


def _profile_host(net: Network, iterations: int, warmup: int, progress: Callable[[int, int], None] | None,
                  check: Callable[..., None], warming: Warming | None = None) -> ProfileResult:
    """CPU: plain runs, each layer's end noted on the host clock (``Hooks.layer_ended``: the replay's call sequences
    note each call's end themselves, so the timed runs take the plain run's path)."""
    untimed = WarmupLayers(net, 2 + warmup, warming, check)  # planning, candidates served, warm-up
    try:
        net.run()  # plans shapes, weights and memory
        costs = layer_costs(net)
        by_name = {c.name: c for c in costs}
        served = _served_per_layer(net, check)
        for _ in range(warmup):
            check()
            _plain_iteration(net)
    finally:
        untimed.remove()
    marks: list[tuple[str, float]] = []
    clock = time.perf_counter

    def begin(_: Network) -> None:
        marks.append(("", clock()))

    def ended(name: str, when: float) -> None:
        marks.append((name, when))

    net.hooks.before_inference.append(begin)
    net.hooks.layer_ended.append(ended)
    net_times: list[float] = []
    try:
        for i in range(iterations):
            check()
            marks.clear()
            ms = _plain_iteration(net)
            net_times.append(ms)
            for (_, t0), (name, t1) in zip(marks, marks[1:]):
                by_name[name].times_ms.append((t1 - t0) * 1e3)
            if progress is not None:
                progress(i + 1, iterations)
    finally:
        net.hooks.before_inference.remove(begin)
        net.hooks.layer_ended.remove(ended)
    calls = {name: call for name, call, _ in (net.replayer.recorded or []) if call is not None}
    for lp in costs:
        lp.candidates = served.get(lp.name, [])
        if lp.times_ms:
            label = ", ".join(lp.candidates) or (_call_name(calls[lp.name]) if lp.name in calls else "")
            lp.kernels = [KernelStat(label or lp.type, "host", float(np.mean(lp.times_ms)), None, None,
                                     ", ".join(lp.candidates))]
    return ProfileResult(costs, net_times, net.peak_memory_bytes, None, TIMING_HOST)


def _profile_traced(net: Network, tracer: Any, iterations: int, warmup: int,
                    progress: Callable[[int, int], None] | None, check: Callable[..., None]) -> ProfileResult:
    """GPU with CUPTI: plain runs (graph replays where captured) traced, records matched to layers."""
    backend = net.backend
    net.run()  # plans shapes, weights and memory
    costs = layer_costs(net)
    by_name = {c.name: c for c in costs}
    for _ in range(max(warmup, 2)):  # an eager run, then the capture
        check()
        _plain_iteration(net)
    net_times = []
    for _ in range(iterations):  # the network's time: plain runs, untraced (tracing slows launches)
        check()
        net_times.append(_plain_iteration(net))
    tracer.start()
    try:
        net.replayer.drop()  # captured again while tracing is on, as CUPTI follows graphs instantiated under it
        for _ in range(2):
            check()
            _plain_iteration(net)
        tracer.take()
        reference: list[tuple[str, str]] = []
        per_layer: dict[str, list[Any]] = {}

        def after(name: str) -> None:
            backend.synchronize()
            got = tracer.take()
            per_layer[name] = got
            reference.extend((name, r.name) for r in got)

        served = _served_per_layer(net, check, after)
        tracer.take()
        traced: list[list[Any]] = []
        for i in range(iterations):
            check()
            _plain_iteration(net)
            traced.append(tracer.take())
            if progress is not None:
                progress(i + 1, iterations)
    finally:
        tracer.stop()
    replayed = net.graph_capture and net.graph_status.startswith("captured")
    net.replayer.drop()  # the next plain run captures a graph of its own, without the tracer's instrumentation
    kernel_sums: dict[str, list[list[float]]] = {}
    shapes: dict[str, list[Any]] = {}
    unmatched = 0
    accounts = [account([(r.start_ns, r.end_ns) for r in records]) for records in traced]
    kept = steady_runs([sum(busy + gap for busy, gap in acc) for acc in accounts])
    left_out = len(traced) - len(kept)
    traced, accounts = [traced[i] for i in kept], [accounts[i] for i in kept]
    spans: list[float] = []
    for records, acc in zip(traced, accounts):
        owners = attribute(reference, [r.name for r in records])
        spans.append(sum(busy + gap for busy, gap in acc))
        layer_busy: dict[str, float] = {}
        layer_gap: dict[str, float] = {}
        seen: dict[str, list[Any]] = {}
        for owner, r, (busy, gap) in zip(owners, records, acc):
            if owner is None:
                unmatched += 1
                owner = net.order[0]
            layer_busy[owner] = layer_busy.get(owner, 0.0) + busy
            layer_gap[owner] = layer_gap.get(owner, 0.0) + gap
            seen.setdefault(owner, []).append((r, busy + gap))
        for name, lp in by_name.items():
            if name not in layer_busy and name not in per_layer:
                continue  # not computed
            lp.device_ms.append(layer_busy.get(name, 0.0))
            lp.gap_ms.append(layer_gap.get(name, 0.0))
            lp.times_ms.append(layer_busy.get(name, 0.0) + layer_gap.get(name, 0.0))
            got = seen.get(name, [])
            if name not in shapes:
                shapes[name] = [r for r, _ in got]
            if len(got) == len(shapes[name]):
                kernel_sums.setdefault(name, []).append([r.duration_ms for r, _ in got])
    for name, lp in by_name.items():
        lp.candidates = served.get(name, [])
        only = lp.candidates[0] if len(set(lp.candidates)) == 1 else ""
        durations = np.mean(np.asarray(kernel_sums[name]), axis=0) if kernel_sums.get(name) else None
        lp.kernels = [KernelStat(r.name, r.kind, float(durations[k]) if durations is not None else r.duration_ms,
                                 r.grid, r.block, only if r.kind == "kernel" else "")
                      for k, r in enumerate(shapes.get(name, []))]
    notes = []
    if left_out:
        notes.append(f"{left_out} of {left_out + len(traced)} traced runs left out: each took over "
                     f"{OUTLIER_SPAN_FACTOR:g} times the median run on the device (the host held a launch)")
    fitted = fit_gaps(costs, float(np.median(net_times)), len(traced))
    if fitted is not None:
        notes.append(f"tracing slowed the launches: the gaps between kernels are scaled by {fitted:.3f} to the plain "
                     "runs' time (their kernels' own time is as measured)")
        spans = []
    # the device's wait before the first kernel (the host's work in Network.run and the graph's launch) is part of a
    # plain run; traced runs launch slower (CUPTI's own work), so it is taken from the untraced runs: their median time
    # less the kernels' mean span (the layers' means then add up to the median plain run), counted in the first
    # layer's gap
    launch = max(0.0, float(np.median(net_times)) - float(np.mean(spans))) if spans else 0.0
    first = next((lp for lp in costs if lp.times_ms), None)
    if first is not None and launch > 0:
        first.times_ms = [t + launch for t in first.times_ms]
        first.gap_ms = [g + launch for g in first.gap_ms]
        notes.append(f"the wait for the launch before the first kernel ({launch:.4f} ms: a plain run's time less its "
                     f"kernels' span) is counted in the gap of the first layer, {first.name}")
    if unmatched:
        notes.append(f"{unmatched} device record(s) launched before any layer's were counted in the first layer")
    ref_count = len(reference)
    counts = sorted({len(t) for t in traced})
    if counts != [ref_count]:
        notes.append(f"a timed run launched {', '.join(map(str, counts))} records where the layer-by-layer run "
                     f"launched {ref_count}: matched by kernel names")
    return ProfileResult(costs, net_times, net.peak_memory_bytes, None,
                         TIMING_CUPTI_GRAPH if replayed else TIMING_CUPTI_EAGER, notes)


def _profile_layer_events(net: Network, iterations: int, warmup: int, progress: Callable[[int, int], None] | None,
                          check: Callable[..., None]) -> ProfileResult:
    """GPU without CUPTI: device events around every layer, the layers run one by one (no graph)."""
    backend = net.backend
    net.run()  # plans shapes, weights and memory
    costs = layer_costs(net)
    by_name = {c.name: c for c in costs}
    timers: dict[str, Any] = {n: backend.timer() for n in net.order}
    recording = {"on": False}

    def before(_: Network, name: str, __: Any) -> None:
        check()
        if recording["on"]:
            timers[name].start()

    def after(_: Network, name: str, __: Any) -> None:
        if recording["on"]:
            timers[name].stop()

    net.hooks.before_layer.append(before)
    net.hooks.after_layer.append(after)
    net_times: list[float] = []
    try:
        for i in range(warmup + iterations):
            timed = i >= warmup
            recording["on"] = timed
            ms = _plain_iteration(net)
            if timed:
                net_times.append(ms)
                for name in net.last_executed:
                    by_name[name].times_ms.append(timers[name].elapsed_ms())
                if progress is not None:
                    progress(i - warmup + 1, iterations)
    finally:
        net.hooks.before_layer.remove(before)
        net.hooks.after_layer.remove(after)
    return ProfileResult(costs, net_times, net.peak_memory_bytes, None)
