"""The CuPy backend: runs on a CUDA GPU. Imported only when asked for (cupy is optional)."""
from __future__ import annotations

from typing import Any

import cupy
import numpy as np

from engine.backends import gpu_kernels
from engine.backends.base import Backend, Timer, derived
from engine.tensor import is_nhwc_memory


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
    """All work runs on one non-blocking stream of the backend (so it can be captured as a CUDA graph);
    convolutions use cuDNN through its frontend graph API when the ``cudnn`` package is there (fp16: after
    our own direct and pointwise kernels where they apply; fp32: strict unless ``allow_tf32``)."""

    name = "cupy"
    xp = cupy
    supports_graphs = True
    has_conv_kernels = True

    def __init__(self) -> None:
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._cudnn: Any = None
        self.cudnn_status = "not loaded yet"

    def activate(self) -> None:
        self.stream.use()

    @property
    def cudnn(self) -> Any:
        """The cuDNN convolution helper, or None when the cudnn frontend package is unusable."""
        if self._cudnn is None and self.cudnn_status == "not loaded yet":
            try:
                from engine.backends.cudnn_conv import CudnnConvolutions  # noqa: PLC0415

                self._cudnn = CudnnConvolutions(self.stream)
                self.cudnn_status = self._cudnn.version
            except Exception as exc:  # missing package or library: im2col + cuBLAS instead
                self.cudnn_status = f"unavailable ({type(exc).__name__}: {exc})"
        return self._cudnn

    def conv2d(self, x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int], padding: tuple[int, int],
               dilation: tuple[int, int], groups: int, act: str | None, coefs: dict[str, float],
               cache: dict[str, Any] | None = None) -> bool:
        if x.dtype not in (cupy.float16, cupy.float32):
            return False
        if x.dtype == cupy.float32:  # our own kernels are fp16; fp32 goes to cuDNN (strict or TF32)
            return self.cudnn is not None and self._cudnn.conv(x, w, b, out, stride, padding, dilation, act, coefs,
                                                                tf32=self.allow_tf32)
        if gpu_kernels.direct_applies(x, w, out, groups, act) and is_nhwc_memory(x) and is_nhwc_memory(out):
            wd = derived(cache, "direct", w, lambda: gpu_kernels.direct_weights(w))
            if gpu_kernels.conv_direct(x.transpose(0, 2, 3, 1), wd, b, out.transpose(0, 2, 3, 1), w.shape[2:], stride,
                                       padding, dilation, act, float(coefs.get("alpha", 0.0))):
                return True
        if (gpu_kernels.pointwise_applies(x, w, out, stride, padding, dilation, groups, act) and is_nhwc_memory(x)
                and is_nhwc_memory(out)):
            wp = derived(cache, "pointwise", w, lambda: gpu_kernels.pointwise_weights(w))
            if gpu_kernels.conv_pointwise(x.transpose(0, 2, 3, 1), wp, b, out.transpose(0, 2, 3, 1), act,
                                          float(coefs.get("alpha", 0.0))):
                return True
        if self.cudnn is None:
            return False
        return self._cudnn.conv(x, w, b, out, stride, padding, dilation, act, coefs)

    def upsample(self, x: Any, out: Any, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> bool:
        return gpu_kernels.upscale_concat(x, None, out, factor, bilinear, nhwc)

    def upscale_concat(self, x: Any, skip: Any, out: Any, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> bool:
        return gpu_kernels.upscale_concat(x, skip, out, factor, bilinear, nhwc)

    @property
    def device_name(self) -> str:
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    def to_device(self, host: np.ndarray) -> Any:
        return cupy.asarray(host)

    def to_host(self, array: Any) -> np.ndarray:
        return cupy.asnumpy(array) if isinstance(array, cupy.ndarray) else np.asarray(array)

    def synchronize(self) -> None:
        self.stream.synchronize()
        cupy.cuda.get_current_stream().synchronize()

    def timer(self) -> Timer:
        return _EventTimer()
