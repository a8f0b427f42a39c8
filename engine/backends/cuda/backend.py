"""The CuPy backend: runs on a CUDA GPU. Imported only when asked for (cupy is optional)."""
from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import cupy
import numpy as np

from engine.backends.base import Backend, Timer
from engine.backends.selection import Selector, cache_folder, settings_key


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
    views_joins = True
    kernel_module = "engine.backends.cuda.ops"

    def __init__(self, device: int = 0) -> None:
        self.device = cupy.cuda.Device(device)
        with self.device:
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self._cudnn: Any = None
        self.cudnn_status = "not loaded yet"
        self._selector: Selector | None = None

    def activate(self) -> None:
        """Make this backend's GPU and stream current in the calling thread (before any work on them)."""
        self.device.use()
        self.stream.use()

    def compute_format(self, fmt: Any, tf32: bool = False) -> Any:
        """Channels-last inside an NCHW network wherever tensor cores do the work (fp16, or fp32 with TF32): cuDNN's
        tensor-core convolutions read and write NHWC, and an NCHW network would pay a transposition around each
        one (measured on an H100: unet fp16 1.32 ms NCHW against 0.56 ms NHWC; dncnn TF32 31 ms against 12 ms).
        Strict fp32 stays NCHW, where cuDNN's NCHW kernels are the faster ones. ``LAYERLAB_GPU_LAYOUT=strict``
        keeps every layer in the network's layout; a layer's own layout setting always wins."""
        from engine.tensor import Layout, Precision, TensorFormat  # noqa: PLC0415

        if os.environ.get("LAYERLAB_GPU_LAYOUT", "").lower() == "strict" or fmt.layout is not Layout.NCHW:
            return fmt
        if fmt.precision is Precision.FP16 or (fmt.precision is Precision.FP32 and tf32):
            return TensorFormat(fmt.precision, Layout.NHWC)
        return fmt

    @property
    def cudnn(self) -> Any:
        """The cuDNN convolution helper, or None when the cudnn frontend package is unusable."""
        if self._cudnn is None and self.cudnn_status == "not loaded yet":
            try:
                from engine.backends.cuda.cudnn import CudnnConvolutions  # noqa: PLC0415

                with self.device:
                    self._cudnn = CudnnConvolutions(self.stream)
                self.cudnn_status = self._cudnn.version
            except Exception as exc:  # missing package or library: im2col + cuBLAS instead
                self.cudnn_status = f"unavailable ({type(exc).__name__}: {exc})"
        return self._cudnn

    @property
    def device_name(self) -> str:
        from engine.backends.cuda.device import device_name  # noqa: PLC0415

        return device_name(self.device.id)

    @property
    def selector(self) -> Selector:
        """The one selector of this backend's operation tables: its choices are kept in
        ``<cache folder>/kernel-choices/<GPU>-cc<major><minor>-driver<version>-<LayerLab version>.json``, so a second
        process on the same GPU, driver and LayerLab does not time again."""
        if self._selector is None:
            major, minor = self.device.compute_capability[:-1], self.device.compute_capability[-1:]
            gpu = re.sub(r"[^A-Za-z0-9._]+", "-", self.device_name).strip("-") or "gpu"
            identity = f"{gpu}-cc{major}{minor}-driver{cupy.cuda.runtime.driverGetVersion()}-{settings_key()}"
            self._selector = Selector(cache_folder() / "kernel-choices" / f"{identity}.json", identity)
        return self._selector

    def available_memory(self) -> int:
        """Free device memory, plus what CuPy's pool holds unused."""
        free, _total = cupy.cuda.runtime.memGetInfo()
        return int(free) + int(cupy.get_default_memory_pool().free_bytes())

    def to_device(self, host: np.ndarray) -> Any:
        """A device copy of a host array. Large contiguous arrays are copied straight from their memory
        (``ndarray.set``: the driver pipelines a pageable copy, as PyTorch's ``.to("cuda")`` does);
        ``cupy.asarray`` would first copy them into a page-locked buffer on the host, one more pass over the data."""
        with self.device:
            a = np.asarray(host)
            if a.flags.c_contiguous and a.nbytes >= 1 << 20:
                out = cupy.empty(a.shape, a.dtype)
                out.set(a)
                return out
            return cupy.asarray(a)

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
