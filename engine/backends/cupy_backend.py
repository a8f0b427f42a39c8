"""The CuPy backend: runs on a CUDA GPU. Imported only when asked for (cupy is optional)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cupy
import numpy as np

from engine.backends.base import Backend, Timer


class _EventTimer(Timer):
    def __init__(self) -> None:
        super().__init__()
        self._a = cupy.cuda.Event()
        self._b = cupy.cuda.Event()

    def start(self) -> None:
        self._a.record()

    def stop(self) -> None:
        self._b.record()

    def elapsed_ms(self) -> float:
        self._b.synchronize()
        return float(cupy.cuda.get_elapsed_time(self._a, self._b))


class CupyBackend(Backend):
    """All work runs on GPU ``device`` (its ordinal), on one non-blocking stream of the backend (so it can be
    captured as a CUDA graph); memory, kernels, graphs and the cuDNN handle belong to that GPU; fp16 convolutions
    use cuDNN through its frontend graph API when the ``cudnn`` package is there."""

    name = "cupy"
    xp = cupy
    device_kind = "gpu"
    supports_graphs = True
    kernel_module = "engine.backends.cupy_kernels"

    def __init__(self, device: int = 0) -> None:
        self.device = cupy.cuda.Device(device)
        with self.device:
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self._cudnn: Any = None
        self.cudnn_status = "not loaded yet"

    def activate(self) -> None:
        """Make this backend's GPU and stream current in the calling thread (before any work on them)."""
        self.device.use()
        self.stream.use()

    @property
    def cudnn(self) -> Any:
        """The cuDNN convolution helper, or None when the cudnn frontend package is unusable."""
        if self._cudnn is None and self.cudnn_status == "not loaded yet":
            try:
                from engine.backends.cudnn_conv import CudnnConvolutions  # noqa: PLC0415

                with self.device:
                    self._cudnn = CudnnConvolutions(self.stream)
                self.cudnn_status = self._cudnn.version
            except Exception as exc:  # missing package or library: im2col + cuBLAS instead
                self.cudnn_status = f"unavailable ({type(exc).__name__}: {exc})"
        return self._cudnn

    @property
    def device_name(self) -> str:
        props = cupy.cuda.runtime.getDeviceProperties(self.device.id)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    def available_memory(self) -> int:
        """Free device memory, plus what CuPy's pool holds unused."""
        free, _total = cupy.cuda.runtime.memGetInfo()
        return int(free) + int(cupy.get_default_memory_pool().free_bytes())

    def to_device(self, host: np.ndarray) -> Any:
        with self.device:
            return cupy.asarray(host)

    def to_host(self, array: Any, pinned: bool = False) -> np.ndarray:
        if not isinstance(array, cupy.ndarray):
            return np.asarray(array)
        if not pinned:
            return cupy.asnumpy(array)
        import cupyx  # noqa: PLC0415 - with cupy

        with self.device:  # page-locked memory from CuPy's pinned pool; the copy runs on the current stream
            host = cupyx.empty_pinned(array.shape, array.dtype)
            cupy.ascontiguousarray(array).get(out=host)
        return host

    def synchronize(self) -> None:
        with self.device:
            self.stream.synchronize()
            cupy.cuda.get_current_stream().synchronize()

    def timer(self) -> Timer:
        with self.device:
            return _EventTimer()

    def capture_graph(self, run: Callable[[], None]) -> Any:
        """Capture the work ``run()`` queues on the backend's stream as a CUDA graph (memory from an
        asynchronous pool, as capture needs); on failure the stream is synchronized and the error raised."""
        try:
            with self.device, cupy.cuda.using_allocator(cupy.cuda.MemoryAsyncPool().malloc):
                self.stream.begin_capture()
                try:
                    run()
                finally:
                    graph = self.stream.end_capture()
        except Exception:
            self.stream.synchronize()
            raise
        return graph

    def launch_graph(self, graph: Any) -> None:
        with self.device:
            graph.launch(self.stream)
