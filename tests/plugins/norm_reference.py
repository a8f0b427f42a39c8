"""The normalization layers' check against onnxruntime: a seeded input and seeded per-channel scale and bias
weights, the layer's output compared with the reference operator's on the same values rounded to the format."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from engine.tensor import TensorFormat
from tests.harness import assert_close, round_like, run_layer, scale_bias


def assert_normalization_matches(layer_type: str, params: dict[str, Any], shape: tuple[int, ...], fmt: TensorFormat,
                                 backend: str, reference: Callable[..., np.ndarray]) -> None:
    """``layer_type`` with ``params`` on a seeded input of ``shape``, its scale and bias loaded as weights, against
    ``reference(x, scale, bias)``."""
    x = (np.random.default_rng(1).standard_normal(shape) * 3 + 1).astype(np.float32)
    w = scale_bias(shape[1], 2)
    out, used, _ = run_layer(layer_type, params, [x], fmt, backend, weights=w)
    assert set(used) == {"scale", "bias"}
    ref = reference(round_like(x, fmt), round_like(w["scale"], fmt), round_like(w["bias"], fmt))
    assert_close(out, ref, fmt, f"{layer_type} {shape} {params}")
