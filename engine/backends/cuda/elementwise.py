"""``out = act(a op b)`` in one pass (``kernels/element_wise.cuh``): a residual add + ReLU is one kernel instead of
an add and an in-place ReLU."""
from __future__ import annotations

from typing import Any

import cupy

from engine.backends.cuda import runtime
from engine.backends.selection import Launched
from engine.epilogues import EPILOGUE_TABLE, coefficients

#: the operations the kernel computes (their numbers in element_wise.cuh); it fuses every epilogue of
#: ``engine.epilogues``
OPERATIONS = {"sum": 0, "product": 1, "sub": 2, "max": 3, "min": 4}
EPILOGUES = {None: 0, **{name: e.code for name, e in EPILOGUE_TABLE.items()}}


def _kernel(op: str, epilogue: str | None) -> Any:
    return runtime.element_wise(
        "T a, T b, float32 alpha, float32 beta", "T y",
        f"y = (T)layerlab_element_wise<{OPERATIONS[op]}, {EPILOGUES[epilogue]}>((float)a, (float)b, alpha, beta);",
        f"layerlab_ew_{op}_{epilogue or 'none'}", ("element_wise.cuh",))


def element_wise(op: str, a: Any, b: Any, out: Any, epilogue: str | None, coefs: dict[str, float]) -> Launched | None:
    """``out = act(a op b)`` computed in float32 and rounded once, for arrays of one shape, precision (fp16 or
    fp32) and C-contiguous layout; None for anything else."""
    if op not in OPERATIONS or epilogue not in EPILOGUES:
        return None
    if not (a.dtype == b.dtype == out.dtype and a.dtype in (cupy.float16, cupy.float32) and a.shape == b.shape == out.shape):
        return None
    if not (a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous):
        return None
    alpha, beta = coefficients(epilogue, coefs)
    _kernel(op, epilogue)(a, b, cupy.float32(alpha), cupy.float32(beta), out)
    return Launched("element_wise")
