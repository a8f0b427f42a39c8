"""Device activity records of the GPU's kernels, memory sets and copies, through NVIDIA's CUPTI (``cupti-python``):
what the profile reads to time each layer from the same launches as a plain run (a CUDA-graph replay included).

``cupti`` is imported on first use only; where it is missing or unusable, :class:`KernelTracer` raises
:class:`TraceUnavailable` naming why, and the profile falls back to its event timing."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from engine.errors import LayerLabError

#: bytes of one CUPTI activity buffer
BUFFER_BYTES = 8 << 20


class TraceUnavailable(LayerLabError):
    """CUPTI cannot trace this process (package missing, library missing, tracing refused)."""


@dataclass(frozen=True)
class DeviceRecord:
    """One piece of device work: a kernel (``kind`` "kernel") with its launch shape, or a memory set or copy."""

    kind: str
    name: str
    start_ns: int
    end_ns: int
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    graph_node: int = 0

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e6


class _Sink:
    """Where CUPTI's completed buffers go; CUPTI takes one pair of buffer callbacks per process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: list[DeviceRecord] = []
        self.registered = False


_sink = _Sink()


def _record(activity: Any, cupti: Any) -> DeviceRecord | None:
    kind = int(activity.kind)
    node = int(getattr(activity, "graph_node_id", 0) or 0)
    if kind in (int(cupti.ActivityKind.CONCURRENT_KERNEL), int(cupti.ActivityKind.KERNEL)):
        return DeviceRecord("kernel", str(activity.name), int(activity.start), int(activity.end),
                            (int(activity.grid_x), int(activity.grid_y), int(activity.grid_z)),
                            (int(activity.block_x), int(activity.block_y), int(activity.block_z)), node)
    if kind == int(cupti.ActivityKind.MEMSET):
        return DeviceRecord("memset", f"memset {int(getattr(activity, 'bytes', 0))} B", int(activity.start),
                            int(activity.end), graph_node=node)
    if kind == int(cupti.ActivityKind.MEMCPY):
        try:
            what = cupti.ActivityMemcpyKind(activity.copy_kind).name
        except Exception:  # an unknown copy kind
            what = str(getattr(activity, "copy_kind", "?"))
        return DeviceRecord("memcpy", f"memcpy {what} {int(getattr(activity, 'bytes', 0))} B", int(activity.start),
                            int(activity.end), graph_node=node)
    return None


class KernelTracer:
    """Collects the device records of the kernels, memory sets and copies launched while it is on (``start`` ..
    ``stop``), in the order they ran; ``take()`` hands over what finished so far (synchronize first)."""

    def __init__(self) -> None:
        try:
            from cupti import cupti  # noqa: PLC0415 - optional, GPU only
        except Exception as exc:  # not installed, or its library does not load
            raise TraceUnavailable(f"CUPTI is not usable ({type(exc).__name__}: {exc}); install cupti-python "
                                   "matching the CUDA version") from None
        self._cupti = cupti
        self._kinds = [cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMSET, cupti.ActivityKind.MEMCPY]
        self.on = False
        if not _sink.registered:
            def requested() -> tuple[int, int]:
                return BUFFER_BYTES, 0

            def completed(activities: list[Any]) -> None:
                got = [r for r in (_record(a, cupti) for a in activities) if r is not None]
                with _sink.lock:
                    _sink.records.extend(got)

            try:
                cupti.activity_register_callbacks(requested, completed)
            except Exception as exc:
                raise TraceUnavailable(f"CUPTI refused to trace ({type(exc).__name__}: {exc})") from None
            _sink.registered = True

    def start(self) -> None:
        """Record from now on."""
        try:
            for kind in self._kinds:
                self._cupti.activity_enable(kind)
        except Exception as exc:
            raise TraceUnavailable(f"CUPTI refused to trace ({type(exc).__name__}: {exc})") from None
        self.on = True

    def stop(self) -> None:
        """Stop recording (what was recorded stays for ``take``)."""
        if self.on:
            self._flush()
            for kind in self._kinds:
                self._cupti.activity_disable(kind)
            self.on = False

    def _flush(self) -> None:
        self._cupti.activity_flush_all(1)

    def take(self) -> list[DeviceRecord]:
        """The records of the work finished since the last ``take`` (synchronize the device first), by start time."""
        self._flush()
        with _sink.lock:
            got, _sink.records = _sink.records, []
        return sorted(got, key=lambda r: (r.start_ns, r.end_ns))
