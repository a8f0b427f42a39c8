"""Arrays whose first byte starts a cache line, for the CPU kernels and the NumPy backend's tensors.

NumPy's allocator gives 16-byte alignment: a tensor or a weight array then starts 16, 32 or 48 bytes into a
64-byte cache line, and every vector of a pixel's channels or of a weight panel that the kernels load or store
straddles two lines. Aligned, mobilenet_v2 ran in 0.90-0.92 of the time on two Zen 3 cores, efficientnet_b0 in
0.83-0.88, resnet50 and convnext_tiny in about 0.95 (``tests/bench/bench_cpu_alignment.py``: the same network twice
in one process, in turns). Arrays of at least a huge page also start one and ask for transparent huge pages
(:func:`_huge_pages`). Imports only NumPy."""
from __future__ import annotations

import mmap
from typing import Any

import numpy as np

#: bytes of a cache line (x86-64, Arm's Neoverse and Apple's cores: 64 or a multiple of it)
CACHE_LINE = 64


#: whether arrays of at least HUGE_PAGE bytes ask the kernel for transparent huge pages (see :func:`_huge_pages`)
HUGE_PAGES = True
#: bytes of an x86-64 (and most Arm) transparent huge page
HUGE_PAGE = 2 << 20


def _huge_pages(nbytes: int) -> np.ndarray | None:
    """``nbytes`` of memory starting a huge page, its whole huge pages given to the kernel's transparent huge pages
    (``madvise``; the tail stays in 4 KiB pages: no memory beyond what is asked for), or None where it cannot be had.
    A large weight array or a network's tensors are read once a run, by far more 4 KiB pages than the TLB holds (on
    a virtual machine each miss walks two page tables); NumPy advises its own allocations from 4 MiB, 16 bytes into
    a page. resnet50 in 0.990-0.997 of the time, mobilenet_v2 0.987-0.989 (2 Zen 5 cores, in turns in one process).
    """
    if not HUGE_PAGES or nbytes < HUGE_PAGE or not hasattr(mmap, "MADV_HUGEPAGE"):
        return None
    try:
        # private (a shared anonymous map is shared memory, which has its own huge page setting), one huge page more
        # than asked for to start one
        m = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        raw = np.frombuffer(m, np.uint8)
        start = -raw.ctypes.data % HUGE_PAGE
        m.madvise(mmap.MADV_HUGEPAGE, start, nbytes // HUGE_PAGE * HUGE_PAGE)
    except (OSError, ValueError, AttributeError):  # no such map or advice here: the ordinary allocation
        return None
    return raw[start:start + nbytes]


def aligned_empty(shape: int | tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` whose data starts a cache line."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    huge = _huge_pages(count * dtype.itemsize)
    if huge is not None:
        return huge.view(dtype).reshape(shape)
    raw = np.empty(count * dtype.itemsize + CACHE_LINE, np.uint8)
    start = -raw.ctypes.data % CACHE_LINE
    return raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape)


def aligned_zeros(shape: int | tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """As :func:`aligned_empty`, filled with zeros."""
    out = aligned_empty(shape, dtype)
    out.fill(0)
    return out


def aligned_copy(a: Any, dtype: Any = np.float32) -> np.ndarray:
    """A C-contiguous copy of ``a`` (as ``dtype``) whose data starts a cache line."""
    a = np.asarray(a)
    out = aligned_empty(a.shape, dtype)
    out[...] = a
    return out
