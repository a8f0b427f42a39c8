"""The sources Numba's cached CPU kernels were compiled from: Numba's cache checks only the file defining a kernel,
not the helpers it inlines from the package's other files (the epilogues, the micro-kernel), so the kernels'
runtime forgets cached kernels compiled from other sources of the package before any is loaded. Imports nothing of
the package (the runtime imports it first)."""
from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

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
