"""lrn against onnxruntime's LRN on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ParameterError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, ort_run, round_like, run_layer

CASES = [
    # (N, C, H, W), params (defaults: size 5, alpha 1e-4, beta 0.75, bias 1)
    ((1, 7, 5, 6), dict()),
    ((2, 6, 4, 3), dict(size=3, alpha=0.5, beta=0.6, bias=2)),
    ((1, 3, 7, 7), dict(size=1, alpha=1, beta=1, bias=1)),
    ((2, 2, 3, 5), dict(size=7, alpha=2, beta=0.5, bias=0.5)),  # window wider than the channels
    ((1, 9, 2, 2), dict(size=9, alpha=1e-2, beta=1.5)),
]


def onnx_lrn(x, params):
    attrs = dict(size=int(params.get("size", 5)), alpha=float(params.get("alpha", 1e-4)),
                 beta=float(params.get("beta", 0.75)), bias=float(params.get("bias", 1.0)))
    return ort_run([helper.make_node("LRN", ["x"], ["y"], **attrs)], {"x": x}, {})[0]


@each_backend_and_format
@pytest.mark.parametrize("shape,params", CASES)
def test_lrn_matches_onnxruntime(backend, fmt, shape, params):
    x = (np.random.default_rng(1).standard_normal(shape) * 2).astype(np.float32)
    out, _, _ = run_layer("lrn", params, [x], fmt, backend)
    assert_close(out, onnx_lrn(round_like(x, fmt), params), fmt, f"lrn {params}")


def test_lrn_matches_pytorch_as_documented():
    import torch

    x = np.random.default_rng(3).standard_normal((2, 8, 3, 4)).astype(np.float32)
    out, _, _ = run_layer("lrn", dict(size=5, alpha=0.1, beta=0.75, bias=1.5), [x], FORMATS[0])
    ref = torch.nn.LocalResponseNorm(5, alpha=0.1, beta=0.75, k=1.5)(torch.from_numpy(x)).numpy()
    assert_close(out, ref, FORMATS[0])


def test_lrn_documented_example_and_fused_activation():
    x = np.random.default_rng(2).standard_normal((1, 3, 4, 4)).astype(np.float32)
    out, _, _ = run_layer("lrn", dict(size=1, alpha=1, beta=1, bias=1), [x], FORMATS[0], activation="tanh")
    x64 = x.astype(np.float64)
    assert_close(out, np.tanh(x64 / (1 + x64 * x64)), FORMATS[0])


@pytest.mark.parametrize("params, message", [
    (dict(bias=0), r"lrn L: parameter bias: 0: must be greater than 0"),
    (dict(size=4), r"lrn L: parameter size: 4: must be odd"),
    (dict(size=0), r"lrn L: parameter size: '0' is not an integer in \[1, 255\]"),
    (dict(beta=0), r"lrn L: parameter beta: 0: must be greater than 0"),
    (dict(alpha=-1), r"lrn L: parameter alpha: '-1' is not a number >= 0"),
])
def test_lrn_bad_parameters_are_named(params, message):
    with pytest.raises(ParameterError, match=message):
        run_layer("lrn", params, [np.zeros((1, 3, 4, 4), np.float32)], FORMATS[0])
