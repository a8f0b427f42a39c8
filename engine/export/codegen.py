"""Small helpers for writing generated source code (names, literals), shared by the exporters and custom layers.
No engine imports beyond the tensor types: anything may use them without import cycles."""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from engine.tensor import Dims

_CAMEL_SPLIT = re.compile(r"[^A-Za-z0-9]+")


def camel_case(name: str) -> str:
    """``denoiser_v2`` -> ``DenoiserV2``; a name starting with a digit gets a ``Net`` prefix."""
    parts = [p for p in _CAMEL_SPLIT.split(name) if p]
    out = "".join(p[:1].upper() + p[1:] for p in parts) or "Network"
    return out if out[0].isalpha() else f"Net{out}"



def py_literal(value: Any) -> str:
    """Python source of a number, bool, string, tuple or list."""
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        f = float(value)
        if f == float("inf"):
            return "float('inf')"
        if f == float("-inf"):
            return "-float('inf')"
        return repr(f)
    if isinstance(value, tuple):
        inner = ", ".join(py_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    return repr(value)


def plain_value(value: Any) -> Any:
    """Parameter values as plain Python (dimensions as an (H, W) tuple)."""
    if isinstance(value, Dims):
        return (int(value.h), int(value.w))
    return value
