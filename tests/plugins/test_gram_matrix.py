"""gram_matrix against a float64 NumPy reference (no ONNX operator) on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ParameterError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, round_like, run_layer


def reference_gram(x, normalization):
    """The documented formula, in float64: G[n, 0, i, j] = sum_hw x[n,i,h,w] x[n,j,h,w] / D."""
    n, c, h, w = x.shape
    g = np.einsum("nihw,njhw->nij", x.astype(np.float64), x.astype(np.float64))
    return (g / {"hw": h * w, "chw": c * h * w, "none": 1}[normalization])[:, None]


@each_backend_and_format
@pytest.mark.parametrize("normalization", ["hw", "chw", "none"])
@pytest.mark.parametrize("shape", [(1, 3, 5, 7), (2, 4, 6, 6), (3, 1, 1, 9), (2, 6, 3, 2)])
def test_gram_matrix_matches_reference(backend, fmt, normalization, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, _, net = run_layer("gram_matrix", dict(normalization=normalization), [x], fmt, backend)
    ref = reference_gram(round_like(x, fmt), normalization)
    assert_close(out, ref, fmt, f"gram_matrix {normalization}")
    assert tuple(net.dims("L")) == (shape[0], 1, shape[1], shape[1])


def test_documented_example_and_fused_activation():
    x = np.array([[[[1.0, 2.0]], [[3.0, 4.0]]]], np.float32)  # 1x2x1x2
    out, _, _ = run_layer("gram_matrix", {}, [x], FORMATS[0])
    np.testing.assert_allclose(out, [[[[2.5, 5.5], [5.5, 12.5]]]], rtol=1e-6)
    out, _, _ = run_layer("gram_matrix", dict(normalization="none"), [x], FORMATS[0], activation="leaky_relu",
                          coefs={"alpha": "0.5"})
    np.testing.assert_allclose(out, [[[[5.0, 11.0], [11.0, 25.0]]]], rtol=1e-6)
    out, _, _ = run_layer("gram_matrix", {}, [-x], FORMATS[0], activation="sigmoid")  # sign-free: G(-x) = G(x)
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-np.array([[[[2.5, 5.5], [5.5, 12.5]]]]))), rtol=1e-5)


def test_bad_normalization_is_named():
    with pytest.raises(ParameterError, match=r"gram_matrix L: parameter normalization: 'mean' is not one of hw, chw, none"):
        run_layer("gram_matrix", dict(normalization="mean"), [np.zeros((1, 2, 3, 3), np.float32)], FORMATS[0])
