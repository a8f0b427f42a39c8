"""The error of custom-layer code (its own module so the CuPy kernel launcher and the layer share it without
importing each other)."""
from __future__ import annotations

from engine.errors import LayerLabError


class CustomCodeError(LayerLabError):
    """Custom layer code failed (compile error, exception, wrong result shape): names the layer and the line."""
