"""Backends own the array module, device memory, host transfers, timing and synchronisation.

NumPy is always available. CuPy is imported lazily, only when a CuPy backend is asked for or
probed, and only counts as usable when a CUDA device answers."""
from __future__ import annotations

import sys
from typing import Any, TextIO

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


def get_backend(name: str = "auto", notice: TextIO | None = sys.stderr, always_notice: bool = False) -> Backend:
    """The backend called ``name``: 'numpy', 'cupy', or 'auto' (CuPy if usable, else NumPy with a
    one-line notice on ``notice``, given once per machine unless ``always_notice``)."""
    key = (name or "auto").lower()
    if key not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}: expected one of {', '.join(BACKENDS)}")
    if key == "numpy":
        return _numpy_backend(notice)
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
        from engine.notices import once_per_machine  # noqa: PLC0415

        if always_notice or once_per_machine("cupy-fallback"):
            print(f"layerlab: using the numpy backend: {reason}", file=notice)
    return _numpy_backend(notice)


#: where to say that kernels are being compiled (the latest caller's stream), and whether it was said there
_compile_notice: list[Any] = []


def _numpy_backend(notice: TextIO | None) -> Backend:
    """The NumPy backend, saying on ``notice`` when Numba actually compiles one of its CPU kernels (the first
    inference after installing then takes half a minute more; Numba caches them on disk), not when it
    loads them from its cache."""
    from engine.backends.numpy_backend import cpu_kernels  # noqa: PLC0415

    kernels = cpu_kernels()
    if notice is not None and kernels is not None:
        if not _compile_notice:
            from numba.core import event  # noqa: PLC0415 - cpu_kernels imported numba already

            class _FirstCompile(event.Listener):
                def on_start(self, ev: event.Event) -> None:
                    if _compile_notice and not _compile_notice[1]:
                        _compile_notice[1] = True
                        print("layerlab: compiling the CPU kernels for this machine (first run after installing: "
                              "about half a minute; they are cached)", file=_compile_notice[0], flush=True)

                def on_end(self, ev: event.Event) -> None:
                    pass

            event.register("numba:compile", _FirstCompile())
        if not _compile_notice or _compile_notice[0] is not notice:
            _compile_notice[:] = [notice, False]
    return NumpyBackend()


__all__ = ["BACKENDS", "Backend", "NumpyBackend", "cupy_status", "cupy_usable", "get_backend"]
