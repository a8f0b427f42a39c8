"""Small compiled helpers the CPU kernels share: how the parallel kernels cut a batch into jobs (blocks of ``rows``
output rows of one image each), and constants passed on as plain values."""
from __future__ import annotations

from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def plain(typingctx, value):  # pragma: no cover - compiled
    """``value`` typed as a run-time value of its type. A constant that one compiled kernel passes to another is
    typed as a literal (``Literal[int](0)``), and Numba compiles the callee once more for that constant: the first
    compile of every kernel then took seconds longer for the same machine code."""
    kind = types.unliteral(value)

    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
        return context.cast(builder, args[0], value, kind)

    return kind(value), codegen


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
