"""upsample against onnxruntime's Resize (by integer scales) on every backend and format, and PyTorch's Upsample."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ParameterError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, ort_run, round_like, run_layer
from tests.plugins.group_b_refs import resize_node


def onnx_upsample(x, fh, fw, method):
    return ort_run([resize_node("x", "y", method, scales="s")], {"x": x}, {"s": np.array([1, 1, fh, fw], np.float32)})[0]


CASES = [((1, 3, 5, 4), "2", (2, 2)), ((2, 2, 4, 7), "3x2", (3, 2)), ((1, 1, 6, 3), "1x4", (1, 4)), ((2, 3, 1, 1), "5", (5, 5))]


@each_backend_and_format
@pytest.mark.parametrize("method", ["nearest", "bilinear"])
@pytest.mark.parametrize("shape,factor,fhw", CASES)
def test_upsample_matches_onnxruntime(backend, fmt, method, shape, factor, fhw):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, _, net = run_layer("upsample", dict(factor=factor, method=method), [x], fmt, backend)
    ref = onnx_upsample(round_like(x, fmt), *fhw, method)
    assert_close(out, ref, fmt, f"upsample {factor} {method}")
    assert tuple(net.dims("L")) == ref.shape


@pytest.mark.parametrize("method", ["nearest", "bilinear"])
def test_upsample_matches_pytorch_as_documented(method):
    import torch

    x = np.random.default_rng(2).standard_normal((2, 2, 5, 6)).astype(np.float32)
    out, _, _ = run_layer("upsample", dict(factor="3x2", method=method), [x], FORMATS[0], activation="relu")
    extra = {"align_corners": False} if method == "bilinear" else {}
    ref = torch.nn.Upsample(scale_factor=(3, 2), mode=method, **extra)(torch.from_numpy(x)).numpy()
    assert_close(out, np.maximum(ref, 0), FORMATS[0])


def test_documented_example_row():
    out, _, _ = run_layer("upsample", dict(method="bilinear"), [np.array([[[[1.0, 5.0]]]], np.float32)], FORMATS[0])
    np.testing.assert_allclose(out[0, 0, 0], [1, 2, 4, 5], atol=1e-6)
    out, _, _ = run_layer("upsample", {}, [np.array([[[[1.0, 5.0]]]], np.float32)], FORMATS[0])
    np.testing.assert_array_equal(out[0, 0, 0], [1, 1, 5, 5])


def test_upsample_bad_factor_is_named():
    x = np.zeros((1, 1, 3, 3), np.float32)
    with pytest.raises(ParameterError, match=r"upsample L: parameter factor: 0x2: each factor must be an integer in \[1, 1024\]"):
        run_layer("upsample", dict(factor="0x2"), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"upsample L: parameter factor: '1.5' is not dimensions"):
        run_layer("upsample", dict(factor="1.5"), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"upsample L: parameter method: 'bicubic' is not one of nearest, bilinear"):
        run_layer("upsample", dict(method="bicubic"), [x], FORMATS[0])
