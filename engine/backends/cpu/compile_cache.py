"""Whether Numba's on-disk cache holds the CPU kernels already, and the lock a background compile of them holds
(``python -m engine.backends.cpu.warmup``), so that a second process neither compiles them at once nor waits."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


def compiled_before() -> bool:
    """Whether Numba's on-disk cache already holds the main kernels (compiled by an earlier run on this
    machine); compiling them all takes about three minutes on 2 cores."""
    from engine.backends.cpu import few_outputs, im2col, microkernel, panels, winograd  # noqa: PLC0415 - Numba

    try:
        parallel = (panels._panel_windows_par, panels._panel_par) if microkernel.panels_available() else ()
        kernels = (winograd._wino_par, im2col._conv_par, few_outputs._few_par, *parallel)
        return all(os.path.exists(k._cache._cache_file._index_path) for k in kernels)
    except AttributeError:  # a Numba without this cache layout: say nothing
        return True


def warmup_lock_path(family: str | None = None) -> Path:
    """The lock file that a background compile of these kernels (``engine.backends.cpu.warmup``) holds meanwhile;
    with ``family``, the lock of a compile of that family alone (parallel test processes share the families out)."""
    digest = hashlib.sha1(os.path.dirname(__file__).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"layerlab-warmup-{digest}{'-' + family if family else ''}.lock"


def compile_under_way() -> bool:
    """Whether another process is compiling these kernels now (it holds :func:`warmup_lock_path`)."""
    try:
        with open(warmup_lock_path(), "a+b") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(lock, fcntl.LOCK_UN)
    except OSError:  # no temporary folder to lock in: the warmup cannot lock either
        return False
    return False


@contextlib.contextmanager
def compiles_reported(report: Callable[[str], None]) -> Iterator[None]:
    """Meanwhile, ``report(kernel name)`` as Numba starts compiling a kernel in this process (a first run with an
    empty or outdated kernel cache compiles for seconds per kernel: the designer's status bar names it)."""
    from numba.core import event  # noqa: PLC0415 - Numba loads with the CPU kernels

    class _Compiles(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            dispatcher = (ev.data or {}).get("dispatcher")
            func = getattr(dispatcher, "py_func", None)
            report(getattr(func, "__name__", "kernel").lstrip("_"))

        def on_end(self, ev: event.Event) -> None:
            pass

    listener = _Compiles()
    event.register("numba:compile", listener)
    try:
        yield
    finally:
        event.unregister("numba:compile", listener)
