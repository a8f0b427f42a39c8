"""Resampling of 4-D tensors to any size in one kernel (``kernels/resize_taps.cu``): the separable taps of a Resize
(nearest, bilinear, bicubic; any coordinate mode, as ``plugins.standard._common_resample.axis_taps`` gives them)
applied to every output value at once, in either layout. The array code this replaces gathered and weighted whole
rows and columns, tap by tap: eight kernels and three temporaries for a bilinear resize, on a strided view in NHWC
(deeplabv3's 64 -> 512 upsampling of 32 images took 3.5 ms of its 19)."""
from __future__ import annotations

from typing import Any

import cupy

from engine.backends.cuda import runtime
from engine.backends.selection import Launched

_TYPES = {cupy.dtype(cupy.float16): "__half", cupy.dtype(cupy.float32): "float"}
MAX_TAPS = 4


def resize_taps(x: Any, out: Any, taps_h: Any, taps_w: Any, nhwc: bool) -> Launched | None:
    """``out`` = physical 4-D ``x`` resampled by ``taps_h`` and ``taps_w`` (each with ``index`` and ``weight``: int64
    source indices and weights of ``x``'s dtype or None for nearest, each (taps, size), on the device); ``x`` and ``out``
    C-contiguous, of one dtype (fp16 or fp32) and layout, the same batch and channels. None for anything else."""
    if not (x.ndim == out.ndim == 4 and x.dtype == out.dtype and x.dtype in _TYPES and x.flags.c_contiguous
            and out.flags.c_contiguous and out.size < 2**62):
        return None
    (ih, wh), (iw, ww) = (taps_h.index, taps_h.weight), (taps_w.index, taps_w.weight)
    if nhwc:
        n, hin, win, c = x.shape
        n2, hout, wout, c2 = out.shape
    else:
        n, c, hin, win = x.shape
        n2, c2, hout, wout = out.shape
    arrays = [a for a in (ih, wh, iw, ww) if a is not None]
    if (n, c) != (n2, c2) or ih.shape[-1] != hout or iw.shape[-1] != wout or not (
            1 <= ih.shape[0] <= MAX_TAPS and 1 <= iw.shape[0] <= MAX_TAPS) \
            or not all(isinstance(a, cupy.ndarray) and a.flags.c_contiguous for a in arrays) \
            or ih.dtype != cupy.int64 or iw.dtype != cupy.int64 \
            or any(w is not None and (w.dtype != x.dtype or w.shape != i.shape) for i, w in ((ih, wh), (iw, ww))):
        return None
    if out.size:
        weighted = (1 if wh is not None else 0) | (2 if ww is not None else 0)
        runtime.function("resize_taps.cu", f"resize_taps<{_TYPES[x.dtype]},{_TYPES[x.dtype]}>")(
            (runtime.blocks(out.size, 256),), (256,),
            (x, out, ih, x if wh is None else wh, cupy.int32(ih.shape[0]), iw, x if ww is None else ww,
             cupy.int32(iw.shape[0]), cupy.int32(c), cupy.int32(hin), cupy.int32(win), cupy.int32(hout),
             cupy.int32(wout), cupy.int32(1 if nhwc else 0), cupy.int32(weighted), cupy.int64(out.size)))
    return Launched("resize_taps")
