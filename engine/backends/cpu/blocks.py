"""How the parallel CPU kernels cut a batch into jobs: blocks of ``rows`` output rows of one image each."""
from __future__ import annotations

from numba import njit


@njit(inline="always")
def row_blocks(n, ho, rows):  # pragma: no cover - compiled
    """The number of blocks of ``rows`` output rows in ``n`` images of ``ho`` rows (the last of an image shorter)."""
    return n * ((ho + rows - 1) // rows)


@njit(inline="always")
def row_block(j, ho, rows):  # pragma: no cover - compiled
    """Block ``j`` of :func:`row_blocks`: its image, first output row and end row."""
    per_image = (ho + rows - 1) // rows
    r0 = (j % per_image) * rows
    return j // per_image, r0, min(ho, r0 + rows)
