"""Backends own the array module, device memory, host transfers, timing and synchronisation.

NumPy is always available. CuPy is imported lazily, only when a CuPy backend is asked for or
probed, and only counts as usable when a CUDA device answers."""
from __future__ import annotations

import subprocess
import sys
from typing import TextIO

from engine.backends.base import Backend
from engine.backends.numpy_backend import NumpyBackend
from engine.errors import BackendError

BACKENDS = ("auto", "numpy", "cupy")
_cupy_probe: tuple[bool, str] | None = None


def cupy_status() -> tuple[bool, str]:
    """(usable, reason) for the CuPy backend; never raises, cached after the first probe."""
    global _cupy_probe
    if _cupy_probe is None:
        try:
            import cupy  # noqa: PLC0415

            count = cupy.cuda.runtime.getDeviceCount()
            if count < 1:
                raise RuntimeError("no CUDA device found")
            probe = cupy.arange(4, dtype=cupy.float32) * 2
            if float(probe.sum()) != 12.0:
                raise RuntimeError("a test computation on the GPU gave a wrong result")
            name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
            name = name.decode() if isinstance(name, bytes) else str(name)
            _cupy_probe = (True, name)
        except ImportError:
            _cupy_probe = (False, "cupy is not installed (pip install 'layerlab[gpu]')")
        except Exception as exc:  # any driver/runtime failure means "not usable", never a crash
            _cupy_probe = (False, f"no usable CUDA GPU ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
    return _cupy_probe


def cupy_usable() -> bool:
    return cupy_status()[0]


def get_backend(name: str = "auto", notice: TextIO | None = sys.stderr, defer_compile: bool = False) -> Backend:
    """The backend called ``name``: 'numpy', 'cupy', or 'auto' (CuPy if usable, else NumPy with a
    one-line notice on ``notice``). ``defer_compile``: where the NumPy backend's CPU kernels were never compiled
    on this machine, compile them in a background process and run this backend on the plain NumPy path meanwhile
    (what the command line and the designer do, so a first run takes seconds, not half a minute)."""
    key = (name or "auto").lower()
    if key not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}: expected one of {', '.join(BACKENDS)}")
    if key == "numpy":
        return _numpy_backend(notice, defer_compile)
    ok, reason = cupy_status()
    if key == "cupy":
        if not ok:
            raise BackendError(f"the cupy backend cannot be used here: {reason}")
        from engine.backends.cupy_backend import CupyBackend  # noqa: PLC0415

        return CupyBackend()
    if ok:
        from engine.backends.cupy_backend import CupyBackend  # noqa: PLC0415

        return CupyBackend()
    if notice is not None:
        print(f"layerlab: using the numpy backend: {reason}", file=notice)
    return _numpy_backend(notice, defer_compile)


def _numpy_backend(notice: TextIO | None, defer_compile: bool = False) -> Backend:
    """The NumPy backend. Where its CPU kernels have never been compiled on this machine, either (``defer_compile``)
    start compiling them in a background process and give a backend on the plain NumPy path, or compile them in
    this process on first use (half a minute more; Numba caches them on disk), saying so on ``notice``."""
    from engine.backends.numpy_backend import cpu_kernels  # noqa: PLC0415

    kernels = cpu_kernels()
    backend = NumpyBackend()
    if kernels is None or kernels.compiled_before():
        return backend
    if defer_compile:
        # ``python -m engine.backends.warmup`` in its own session: it outlives this command; a second one started
        # meanwhile sees the first's lock and exits (started by name: that module imports the network)
        subprocess.Popen([sys.executable, "-m", "engine.backends.warmup"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True)
        backend.use_cpu_kernels = False
        if notice is not None:
            print("layerlab: compiling the CPU kernels for this machine in the background (once, about half a "
                  "minute); until then runs use the plain NumPy path", file=notice)
    elif notice is not None:
        print("layerlab: compiling the CPU kernels for this machine (first run after installing: about half a "
              "minute; they are cached)", file=notice)
    return backend


__all__ = ["BACKENDS", "Backend", "NumpyBackend", "cupy_status", "cupy_usable", "get_backend"]
