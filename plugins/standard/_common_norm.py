"""Shared by the normalization layers: the batch-normalization maths and weights (batch_normalization, conv_bn) and
the per-channel affine of instance_normalization and group_normalization (inputs, validation, weights), and the
base of the layers that scale and shift every value (affine, batch_normalization)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.descriptors import InputDesc, InputKind
from engine.layer import Layer
from engine.tensor import Dims

#: the inputs of a normalization with a per-channel affine: the tensor, and optionally its scale and bias
AFFINE_NORM_INPUTS = (
    InputDesc("input"),
    InputDesc("scale", InputKind.SECONDARY, "replaces the scale weight (C values)", weight="scale"),
    InputDesc("bias", InputKind.SECONDARY, "replaces the bias weight (C values)", weight="bias"),
)


class AffineNormBase(Layer):
    """A normalization followed by ``scale[c] * x + bias[c]``: epsilon checked, weights of C values initialised to
    the identity (scale 1, bias 0), like PyTorch's."""

    def validate(self) -> None:
        if self.p["epsilon"] <= 0:
            raise self.param_error("epsilon", f"{self.p['epsilon']:g}: must be greater than 0 (and at most 1)")

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        x = self.primary(inputs)
        return {"scale": (x.c,), "bias": (x.c,)}

    def init_weight(self, weight: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Identity affine transform (scale 1, bias 0), like PyTorch's initialisation."""
        return np.full(shape, 1.0 if weight == "scale" else 0.0, dtype=np.float32)


class ScaleShiftBase(Layer):
    """A layer computing ``x * mul + add`` element by element (affine, batch_normalization): the output has the
    input's dimensions, two operations per value (three with an activation), and precision conversions fuse into it
    (it reads through nchw/physical, widening, computes in its own precision and writes once:
    ``engine.format_conversion``)."""

    conversion_fusion = frozenset({"read", "write"})

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        return self.primary(inputs)

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return output.elements * (2 + int(self.activation is not None))


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
