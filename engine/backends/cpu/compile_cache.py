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
    machine); compiling them all takes about half a minute on 2 cores."""
    from engine.backends.cpu import few_outputs, im2col, microkernel, panels, winograd  # noqa: PLC0415 - Numba

    try:
        parallel = (panels._panel_windows_par, panels._panel_par) if microkernel.panels_available() else ()
        kernels = (winograd._wino_par, im2col._conv_par, few_outputs._few_par, *parallel)
        return all(os.path.exists(k._cache._cache_file._index_path) for k in kernels)
    except AttributeError:  # a Numba without this cache layout: say nothing
        return True


#: the file beside Numba's cached kernels that names the sources they were compiled from
SOURCES_MARKER = "layerlab-kernel-sources.sha1"


def sources_digest() -> str:
    """A digest of every source file of the CPU kernels (and of Numba's version): Numba's cache checks only the
    file defining a kernel, not the helpers it inlines from the package's other files (the epilogues, the
    micro-kernel), so a change there would leave stale compiled kernels in use."""
    import numba  # noqa: PLC0415 - imported by the kernels' runtime, which calls this

    h = hashlib.sha1(numba.__version__.encode())
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def kernel_cache_folder() -> Path:
    """The folder where Numba caches this package's kernels (``__pycache__`` beside them, or under
    ``NUMBA_CACHE_DIR``, as Numba's own rules choose)."""
    from numba.core.caching import FunctionCache  # noqa: PLC0415

    return Path(FunctionCache(sources_digest)._cache_path)


def forget_stale_kernels(folder: Path | None = None, digest: str | None = None) -> bool:
    """Delete the cached kernels of ``folder`` (default :func:`kernel_cache_folder`) when they were compiled from
    other sources than ``digest`` (default :func:`sources_digest`), and record the digest; True when it deleted.
    Called as the kernels' runtime loads, before any kernel is loaded from the cache. Errors (a read-only cache
    folder) leave the cache as it is."""
    try:
        folder = kernel_cache_folder() if folder is None else folder
        digest = sources_digest() if digest is None else digest
        marker = folder / SOURCES_MARKER
        if marker.is_file() and marker.read_text(encoding="ascii").strip() == digest:
            return False
        stale = [f for f in folder.glob("*") if f.suffix in (".nbi", ".nbc")] if folder.is_dir() else []
        for f in stale:
            with contextlib.suppress(FileNotFoundError):
                f.unlink()
        folder.mkdir(parents=True, exist_ok=True)
        marker.write_text(digest + "\n", encoding="ascii")
        return bool(stale)
    except (OSError, UnicodeDecodeError, ImportError, AttributeError, RuntimeError):
        return False


def warmup_lock_path() -> Path:
    """The lock file that a background compile of these kernels (``engine.backends.cpu.warmup``) holds meanwhile."""
    digest = hashlib.sha1(os.path.dirname(__file__).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"layerlab-warmup-{digest}.lock"


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
