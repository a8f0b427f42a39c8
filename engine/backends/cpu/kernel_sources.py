"""Numba's cache of the CPU kernels kept sound. The sources the cached kernels were compiled from: Numba's cache
checks only the file defining a kernel, not the helpers it inlines from the package's other files (the epilogues,
the micro-kernel), so the kernels' runtime forgets cached kernels compiled from other sources of the package before
any is loaded. And a cached kernel that cannot be read back (a truncated or damaged file) is compiled again, with a
warning, instead of failing the layer that needed it. Imports nothing of the package but its logging (the runtime
imports it first)."""
from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import Any

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


#: the packages whose kernels an unreadable cache entry is compiled again for (names ending in a dot)
TOLERANT_PACKAGES = {__name__.rpartition(".")[0] + "."}


def tolerate_unreadable_kernels() -> None:
    """Make Numba treat a cached kernel of the packages in :data:`TOLERANT_PACKAGES` (this one) that it cannot read
    back (``pickle`` errors on a truncated file, a damaged index) as not cached: the kernel is compiled again and its
    entry written afresh, with one warning naming it. Numba itself raises, and the layer failed with an internal
    error. Other packages' cached functions are left to Numba. Idempotent."""
    from numba.core import caching  # noqa: PLC0415 - Numba loads with the kernels' runtime

    load = caching.Cache.load_overload
    if getattr(load, "layerlab_tolerant", False):
        return

    def load_overload(self: Any, sig: Any, target_context: Any) -> Any:
        try:
            return load(self, sig, target_context)
        except Exception as exc:  # noqa: BLE001 - any unreadable entry: compile again
            func = getattr(self, "_py_func", None)
            module = getattr(func, "__module__", "") or ""
            if not any((module + ".").startswith(p) for p in TOLERANT_PACKAGES):
                raise
            from engine.log import get_logger  # noqa: PLC0415

            get_logger(__name__).warning("the cached CPU kernel %s.%s could not be read (%s: %s); compiling it again",
                                         module, getattr(func, "__qualname__", "?"), type(exc).__name__, exc)
            return None

    load_overload.layerlab_tolerant = True  # type: ignore[attr-defined]
    caching.Cache.load_overload = load_overload
