"""Precision helper shared by the activations whose formula takes several steps."""
from __future__ import annotations

from typing import Any

import numpy as np


def widen(x: Any) -> Any:
    """``x`` as float32 when it is float16 (otherwise unchanged).

    Multi-step formulas (softmax, GELU) evaluate in float32 so that the rounding of float16
    intermediates cannot add up and no intermediate can overflow float16's range (65504);
    callers cast the result back to ``x.dtype``."""
    return x.astype(np.float32) if x.dtype == np.float16 else x
