"""The CuPy backend: runs on a CUDA GPU. Imported only when asked for (cupy is optional)."""
from __future__ import annotations

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
    name = "cupy"
    xp = cupy

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
        cupy.cuda.get_current_stream().synchronize()

    def timer(self) -> Timer:
        return _EventTimer()
