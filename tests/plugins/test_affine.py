"""affine (scale * x + shift) against a float64 NumPy reference of the documented formula."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ParameterError
from engine.tensor import FORMATS
from tests.harness import FORMAT_IDS, assert_close, each_backend_and_format, round_like, run_layer


def reference(x, scale, shift):
    """y[n,c] = scale[c] * x[n,c] + shift[c] (numbers broadcast over the whole tensor)."""
    x = x.astype(np.float64)
    s = np.asarray(scale, np.float64).reshape(-1)
    t = np.asarray(shift, np.float64).reshape(-1)
    return x * s.reshape(1, -1, 1, 1) + t.reshape(1, -1, 1, 1)


@each_backend_and_format
@pytest.mark.parametrize("shape,scale,shift", [((1, 3, 8, 8), 2.5, -0.75), ((2, 4, 7, 5), -0.5, 3.0), ((1, 1, 3, 6), 1, 0)])
def test_affine_per_tensor(backend, fmt, shape, scale, shift):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, used, _ = run_layer("affine", dict(mode="per_tensor", scale=scale, shift=shift), [x], fmt, backend)
    assert used == {}  # per tensor: no weights
    assert_close(out, reference(round_like(x, fmt), scale, shift), fmt)


@each_backend_and_format
@pytest.mark.parametrize("shape", [(1, 3, 8, 8), (2, 5, 7, 9), (3, 1, 2, 3)])
def test_affine_per_channel(backend, fmt, shape):
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    out, w, _ = run_layer("affine", dict(mode="per_channel", scale=7, shift=7), [x], fmt, backend)
    assert w["scale"].shape == w["shift"].shape == (shape[1],)
    assert 0.5 <= w["scale"].min() and w["scale"].max() <= 1.5 and np.abs(w["shift"]).max() <= 0.5
    ref = reference(round_like(x, fmt), round_like(w["scale"], fmt), round_like(w["shift"], fmt))
    assert_close(out, ref, fmt)  # the per-tensor parameters (7) are ignored


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_secondary_inputs_take_precedence(fmt):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    scale = rng.standard_normal((1, 3, 1, 1)).astype(np.float32)
    out, used, _ = run_layer("affine", dict(mode="per_channel"), [x, scale], fmt)
    assert set(used) == {"shift"}
    assert_close(out, reference(round_like(x, fmt), round_like(scale, fmt), round_like(used["shift"], fmt)), fmt)
    # per tensor: a one-value input replaces the parameter
    shift = np.full((1, 1, 1, 1), -2.0, np.float32)
    out, used, _ = run_layer("affine", dict(scale=3.0, shift=5.0), [x, None, shift], fmt)
    assert used == {}
    assert_close(out, reference(round_like(x, fmt), 3.0, -2.0), fmt)


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_affine_with_activation(fmt):
    x = np.random.default_rng(4).standard_normal((1, 2, 5, 5)).astype(np.float32)
    out, _, _ = run_layer("affine", dict(scale=2, shift=0.5), [x], fmt, activation="sigmoid")
    assert_close(out, 1 / (1 + np.exp(-reference(round_like(x, fmt), 2, 0.5))), fmt)


def test_bad_mode_is_named():
    with pytest.raises(ParameterError, match=r"affine L: parameter mode: 'per_pixel' is not one of per_tensor, per_channel"):
        run_layer("affine", dict(mode="per_pixel"), [np.zeros((1, 1, 2, 2), np.float32)], FORMATS[0])
    with pytest.raises(ParameterError, match=r"affine L: parameter scale: 'big' is not a number"):
        run_layer("affine", dict(scale="big"), [np.zeros((1, 1, 2, 2), np.float32)], FORMATS[0])
