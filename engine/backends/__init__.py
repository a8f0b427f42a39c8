"""Backends own the array module, device memory, host transfers, timing and synchronisation.

NumPy is always available. CuPy is imported lazily, only when a CuPy backend is asked for or
probed, and only counts as usable when a CUDA device answers."""
from __future__ import annotations

import contextlib
import subprocess
import sys
from typing import Any, TextIO

from engine.backends.base import Backend
from engine.backends.cpu.backend import NumpyBackend
from engine.errors import BackendError

BACKENDS = ("auto", "numpy", "cupy")
_cupy_probe: tuple[bool, str] | None = None


def cupy_status() -> tuple[bool, str]:
    """(usable, reason) for the CuPy backend; never raises, cached after the first probe."""
    global _cupy_probe
    if _cupy_probe is None:
        from engine.backends.cuda.device import probe  # noqa: PLC0415

        _cupy_probe = probe()
    return _cupy_probe


def cupy_usable() -> bool:
    return cupy_status()[0]


def gpu_names() -> list[str]:
    """The names of this machine's CUDA GPUs by ordinal (empty where CuPy is unusable)."""
    if not cupy_usable():
        return []
    from engine.backends.cuda.device import gpu_names as names  # noqa: PLC0415

    return names()


def check_device(device: int | None) -> int:
    """``device`` (None: 0) when this machine has that GPU; else a BackendError listing the GPUs there are."""
    ordinal = 0 if device is None else device
    names = gpu_names()
    if not 0 <= ordinal < len(names):
        there = ", ".join(f"{i}: {n}" for i, n in enumerate(names)) or "none"
        raise BackendError(f"device {ordinal} is out of range: this machine has {len(names)} CUDA GPU(s) ({there})")
    return ordinal


def get_backend(name: str = "auto", notice: TextIO | None = sys.stderr, defer_compile: bool = False,
                device: int | None = None, always_notice: bool = False) -> Backend:
    """The backend called ``name``: 'numpy', 'cupy', or 'auto' (CuPy if usable, else NumPy with a
    one-line notice on ``notice``, given once per machine unless ``always_notice``). ``defer_compile``: where the
    NumPy backend's CPU kernels were never compiled on this machine, compile them in a background process and run
    this backend on the plain NumPy path meanwhile (what the command line and the designer do, so a first run takes
    seconds, not half a minute). ``device``: the GPU ordinal of the CuPy backend (None: 0); a device with the NumPy
    backend, or one out of range, is an error (where no GPU is usable, ``auto`` with a device is an error too: the
    device was asked for)."""
    key = (name or "auto").lower()
    if key not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}: expected one of {', '.join(BACKENDS)}")
    if device is not None and (isinstance(device, bool) or not isinstance(device, int) or device < 0):
        raise BackendError(f"device {device!r}: expected a GPU ordinal, 0 or more")
    if key == "numpy":
        if device is not None:
            raise BackendError(f"device {device}: the numpy backend runs on the CPU; a device chooses the GPU of the "
                               "cupy backend")
        return _numpy_backend(notice, defer_compile)
    ok, reason = cupy_status()
    if key == "cupy" or ok or device is not None:
        if not ok:
            what = "the cupy backend" if key == "cupy" else f"device {device}"
            raise BackendError(f"{what} cannot be used here: {reason}")
        from engine.backends.cuda.backend import CupyBackend  # noqa: PLC0415

        return CupyBackend(check_device(device))
    if notice is not None:
        from engine.notices import once_per_machine  # noqa: PLC0415

        if always_notice or once_per_machine("cupy-fallback"):
            print(f"layerlab: using the numpy backend: {reason}", file=notice)
    return _numpy_backend(notice, defer_compile)


#: where to say that kernels are being compiled (the latest caller's stream), and whether it was said there
_compile_notice: list[Any] = []


def _numpy_backend(notice: TextIO | None, defer_compile: bool = False) -> Backend:
    """The NumPy backend. Where its CPU kernels have never been compiled on this machine and ``defer_compile``,
    start compiling them in a background process and give a backend on the plain NumPy path, saying so on
    ``notice`` only when that compile starts (not while another process is compiling them already). Otherwise
    Numba compiles on first use (minutes on 2 cores; it caches them on disk), and ``notice`` hears of it only
    when Numba actually compiles, not when it loads the kernels from its cache."""
    from engine.backends.cpu import compile_cache  # noqa: PLC0415
    from engine.backends.cpu.backend import cpu_kernels  # noqa: PLC0415

    backend = NumpyBackend()
    if cpu_kernels() is None:
        return backend
    if defer_compile and not compile_cache.compiled_before():
        backend.use_cpu_kernels = False
        if not compile_cache.compile_under_way():
            # ``python -m engine.backends.cpu.warmup`` in its own session: it outlives this command; one started
            # meanwhile sees this one's lock and exits (started by name: that module imports the network)
            subprocess.Popen([sys.executable, "-m", "engine.backends.cpu.warmup"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True)
            if notice is not None:
                print("layerlab: compiling the CPU kernels for this machine in the background (once, about half a "
                      "minute); until then runs use the plain NumPy path", file=notice)
        return backend
    if notice is not None:
        _say_when_numba_compiles(notice)
    return backend


def _say_when_numba_compiles(notice: TextIO) -> None:
    """Say once on ``notice`` (the latest caller's stream) when Numba starts compiling something."""
    if not _compile_notice:
        from numba.core import event  # noqa: PLC0415 - the CPU kernels imported numba already

        class _FirstCompile(event.Listener):
            def on_start(self, ev: event.Event) -> None:
                if _compile_notice and not _compile_notice[1]:
                    _compile_notice[1] = True
                    with contextlib.suppress(ValueError, OSError):  # the caller's stream may be closed by now
                        print("layerlab: compiling the CPU kernels for this machine (first run after installing: "
                              "a few minutes in the background; they are cached)", file=_compile_notice[0], flush=True)

            def on_end(self, ev: event.Event) -> None:
                pass

        event.register("numba:compile", _FirstCompile())
    if not _compile_notice or _compile_notice[0] is not notice:
        _compile_notice[:] = [notice, False]


__all__ = ["BACKENDS", "Backend", "NumpyBackend", "check_device", "cupy_status", "cupy_usable", "get_backend",
           "gpu_names"]
