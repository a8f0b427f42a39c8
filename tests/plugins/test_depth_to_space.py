"""depth_to_space against onnxruntime's DepthToSpace (modes DCR and CRD) on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ParameterError, ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, ort_run, round_like, run_layer


def onnx_d2s(x, block, mode):
    return ort_run([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=block, mode=mode)], {"x": x}, {})[0]


@each_backend_and_format
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape,block", [((1, 4, 3, 5), 2), ((2, 8, 4, 4), 2), ((1, 18, 3, 2), 3), ((2, 3, 5, 4), 1)])
def test_depth_to_space_matches_onnxruntime(backend, fmt, mode, shape, block):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, _, net = run_layer("depth_to_space", dict(block_size=block, mode=mode), [x], fmt, backend)
    assert tuple(net.dims("L")) == out.shape
    assert_close(out, onnx_d2s(round_like(x, fmt), block, mode), fmt, f"{mode} b={block}")


def test_documented_channel_orderings():
    """Output pixel (c, h*b+i, w*b+j) = input (k, h, w) with k = (i*b+j)*C' + c (DCR) or c*b*b + i*b + j (CRD)."""
    b, co = 2, 3
    x = np.random.default_rng(2).standard_normal((1, co * b * b, 2, 3)).astype(np.float32)
    for mode, k_of in (("DCR", lambda c, i, j: (i * b + j) * co + c), ("CRD", lambda c, i, j: c * b * b + i * b + j)):
        out, _, _ = run_layer("depth_to_space", dict(block_size=b, mode=mode), [x], FORMATS[0])
        for c in range(co):
            for i in range(b):
                for j in range(b):
                    np.testing.assert_array_equal(out[0, c, i::b, j::b], x[0, k_of(c, i, j)])


def test_activation():
    x = np.random.default_rng(3).standard_normal((1, 8, 3, 3)).astype(np.float32)
    out, _, _ = run_layer("depth_to_space", {}, [x], FORMATS[1], activation="tanh")
    assert_close(out, np.tanh(onnx_d2s(x, 2, "DCR")), FORMATS[1])


def test_errors_are_named():
    message = r"depth_to_space L: input has 6 channels \(1x6x2x2\), not a multiple of block_size² = 4"
    with pytest.raises(ShapeError, match=message):
        run_layer("depth_to_space", {}, [np.zeros((1, 6, 2, 2), np.float32)], FORMATS[0])
    with pytest.raises(ParameterError, match=r"depth_to_space L: parameter block_size: '0' is not an integer in \[1, 64\]"):
        run_layer("depth_to_space", dict(block_size=0), [np.zeros((1, 4, 2, 2), np.float32)], FORMATS[0])
    with pytest.raises(ParameterError, match=r"parameter mode: 'RDC' is not one of DCR, CRD"):
        run_layer("depth_to_space", dict(mode="RDC"), [np.zeros((1, 4, 2, 2), np.float32)], FORMATS[0])
