"""Small compiled helpers the CPU kernels share: how the parallel kernels cut a batch into jobs (blocks of ``rows``
output rows of one image each), a padded input's copy by the launch's threads, and constants passed on as plain
values."""
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


@njit(inline="always")
def copy_inside(src, x, part, parts):  # pragma: no cover - compiled
    """Part ``part`` of ``parts`` (rows of all images) of the copy of the images ``src`` (N, H, W, C) into the middle
    of ``x`` (N, H + 2 PH, W + 2 PW, C), whose border (zeros) is left as it is: a parallel kernel's first loop, so
    that its threads copy a padded layer's input before its sums (a NumPy copy in the calling thread before the
    launch had left the other cores idle). A row is one run of W*C values in both (a loop per pixel had copied an
    RGB stem's 3 channels one at a time)."""
    h, w = src.shape[1], src.shape[2]
    top, left = (x.shape[1] - h) // 2, (x.shape[2] - w) // 2
    rows, run = src.shape[0] * h, w * src.shape[3]
    for q in range(rows * part // parts, rows * (part + 1) // parts):
        s, d = src[q // h, q % h].reshape(run), x[q // h, top + q % h, left:left + w].reshape(run)
        for e in range(run):
            d[e] = s[e]
