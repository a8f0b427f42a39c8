"""Shared by the batch-normalization layers (batch_normalization, conv_bn): the maths and the weights."""
from __future__ import annotations

from typing import Any

import numpy as np

BN_WEIGHTS = ("mean", "variance", "scale", "bias")


def batch_norm_coefficients(xp: Any, mean: Any, variance: Any, scale: Any, bias: Any, epsilon: float,
                            dtype: Any) -> tuple[Any, Any]:
    """(mul, add) of shape (C,) such that ``batch_norm(x) = x * mul + add``; computed in float32."""
    f32 = np.float32
    mul = scale.astype(f32) / xp.sqrt(variance.astype(f32) + f32(epsilon))
    add = bias.astype(f32) - mean.astype(f32) * mul
    return mul.astype(dtype), add.astype(dtype)


def batch_norm(xp: Any, x: Any, mean: Any, variance: Any, scale: Any, bias: Any, epsilon: float) -> Any:
    """Logical NCHW ``(x - mean) / sqrt(variance + epsilon) * scale + bias``, each weight of shape (C,)."""
    mul, add = batch_norm_coefficients(xp, mean, variance, scale, bias, epsilon, x.dtype)
    c = x.shape[1]
    return x * mul.reshape(1, c, 1, 1) + add.reshape(1, c, 1, 1)


def bn_init_weight(weight: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Plausible random statistics: mean in [-0.1, 0.1], variance in [0.5, 1.5] (always positive),
    scale in [0.75, 1.25], bias in [-0.1, 0.1]. ``weight`` is one of BN_WEIGHTS."""
    lo, hi = {"mean": (-0.1, 0.1), "variance": (0.5, 1.5), "scale": (0.75, 1.25), "bias": (-0.1, 0.1)}[weight]
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def variance_problem(variance: np.ndarray, epsilon: float) -> str | None:
    """Message when some ``variance + epsilon`` is not positive (the result would be NaN or infinite)."""
    bad = np.flatnonzero(~(np.asarray(variance, dtype=np.float64) + epsilon > 0))
    if bad.size == 0:
        return None
    i = int(bad[0])
    return (f"variance[{i}] = {float(variance[i]):g} with epsilon {epsilon:g} is not positive "
            f"({bad.size} channel(s)); variance + epsilon must be > 0")
