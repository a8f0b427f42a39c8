"""space_to_depth: DCR against onnxruntime's SpaceToDepth; CRD against the inverse of onnxruntime's
DepthToSpace in CRD mode and the documented index formula."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, ort_run, round_like, run_layer


def onnx_s2d(x, block):
    return ort_run([helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=block)], {"x": x}, {})[0]


def onnx_d2s(x, block, mode):
    return ort_run([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=block, mode=mode)], {"x": x}, {})[0]


SHAPES = [((1, 3, 4, 6), 2), ((2, 2, 6, 9), 3), ((2, 1, 8, 8), 4), ((1, 3, 5, 3), 1)]


@each_backend_and_format
@pytest.mark.parametrize("shape,block", SHAPES)
def test_dcr_matches_onnxruntime_space_to_depth(backend, fmt, shape, block):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, _, net = run_layer("space_to_depth", dict(block_size=block, mode="DCR"), [x], fmt, backend)
    assert tuple(net.dims("L")) == out.shape
    assert_close(out, onnx_s2d(round_like(x, fmt), block), fmt)


@each_backend_and_format
@pytest.mark.parametrize("shape,block", SHAPES)
def test_crd_is_inverted_by_onnxruntime_depth_to_space_crd(backend, fmt, shape, block):
    x = round_like(np.random.default_rng(2).standard_normal(shape).astype(np.float32), fmt)
    out, _, _ = run_layer("space_to_depth", dict(block_size=block, mode="CRD"), [x], fmt, backend)
    n, c, h, w = shape
    assert out.shape == (n, c * block * block, h // block, w // block)
    np.testing.assert_array_equal(onnx_d2s(out, block, "CRD"), x)  # a permutation: exact


def test_documented_channel_orderings():
    """Input (c, h*b+i, w*b+j) goes to channel (i*b+j)*C + c (DCR) or c*b*b + i*b + j (CRD)."""
    b, c_in = 2, 3
    x = np.random.default_rng(3).standard_normal((1, c_in, 4, 6)).astype(np.float32)
    for mode, k_of in (("DCR", lambda c, i, j: (i * b + j) * c_in + c), ("CRD", lambda c, i, j: c * b * b + i * b + j)):
        out, _, _ = run_layer("space_to_depth", dict(block_size=b, mode=mode), [x], FORMATS[0])
        for c in range(c_in):
            for i in range(b):
                for j in range(b):
                    np.testing.assert_array_equal(out[0, k_of(c, i, j)], x[0, c, i::b, j::b])


def test_activation():
    x = np.random.default_rng(4).standard_normal((2, 2, 4, 4)).astype(np.float32)
    out, _, _ = run_layer("space_to_depth", {}, [x], FORMATS[3], activation="relu")
    assert_close(out, np.maximum(onnx_s2d(round_like(x, FORMATS[3]), 2), 0), FORMATS[3])


def test_sizes_not_multiple_of_block_are_named():
    with pytest.raises(ShapeError, match=r"space_to_depth L: input 5x6 \(H x W\) is not a multiple of block_size 2 in H$"):
        run_layer("space_to_depth", {}, [np.zeros((1, 1, 5, 6), np.float32)], FORMATS[0])
    with pytest.raises(ShapeError, match=r"input 5x7 \(H x W\) is not a multiple of block_size 3 in H and W"):
        run_layer("space_to_depth", dict(block_size=3), [np.zeros((1, 1, 5, 7), np.float32)], FORMATS[0])
