"""The CPU's expansion + depthwise kernel against the two convolutions it replaces (each by the CPU's own kernel, and
the float64 reference): shapes with partial panels and channel vectors, strides, filter sizes, paddings, batches,
activations fused or applied in passes, steps of one output row, one or two threads; its refusals; its replay."""
from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu.backend import NumpyBackend
from plugins.standard._common_conv import conv2d

pytest.importorskip("engine.backends.cpu.ops", reason="Numba is not installed")
from engine.backends.cpu import expand_depthwise, runtime  # noqa: E402
from engine.backends.cpu.epilogue import FUSED_EPILOGUES, epilogue_alpha  # noqa: E402
from engine.backends.cpu.microkernel import panels_available  # noqa: E402

pytestmark = pytest.mark.skipif(not panels_available(), reason="no FMA vectors on this CPU")


def _nhwc(rng: np.random.Generator, n: int, c: int, h: int, w: int) -> np.ndarray:
    """A logical NCHW view of NHWC memory."""
    return rng.standard_normal((n, h, w, c)).astype(np.float32).transpose(0, 3, 1, 2)


def _empty(n: int, c: int, h: int, w: int) -> np.ndarray:
    return np.full((n, h, w, c), np.nan, np.float32).transpose(0, 3, 1, 2)


ACTIVATIONS = {"none": (None, {}), "relu": ("relu", {}), "relu6": ("clamp", {"min": 0.0, "max": 6.0}),
               "hardswish": ("hardswish", {}), "silu": ("silu", {}), "sigmoid": ("sigmoid", {})}


def _act(y: np.ndarray, name: str) -> np.ndarray:
    if name == "relu":
        return np.maximum(y, 0)
    if name == "relu6":
        return np.clip(y, 0, 6)
    if name == "hardswish":
        return y * np.clip(y + 3, 0, 6) / 6
    if name == "silu":
        return y / (1 + np.exp(-y))
    if name == "sigmoid":
        return 1 / (1 + np.exp(-y))
    return y


def _reference(x, w1, b1, act1, w2, b2, act2, stride, pad):
    k = w1.shape[0]
    mid = _act(conv2d(np, x.astype(np.float64), w1.astype(np.float64), b1.astype(np.float64), (1, 1), (0, 0),
                      (1, 1), 1), act1)
    y = conv2d(np, mid, w2.astype(np.float64), b2.astype(np.float64), (stride, stride), (pad, pad), (1, 1), k)
    return _act(y, act2)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


CASES = [  # (n, c, k, h, w, filter, stride, padding)
    (1, 16, 96, 23, 20, 3, 2, 1), (1, 24, 144, 17, 15, 3, 1, 1), (2, 8, 72, 14, 13, 5, 2, 2),
    (1, 40, 120, 9, 11, 5, 1, 2), (1, 16, 40, 12, 12, 7, 2, 3), (1, 24, 20, 10, 9, 3, 1, 0), (1, 3, 16, 7, 7, 3, 2, 1),
    (1, 32, 600, 7, 7, 5, 1, 2)]  # (600 channels: blocks of channels, the last with a partial vector)


@pytest.mark.parametrize("acts", [("relu6", "relu6"), ("hardswish", "none"), ("silu", "sigmoid"), ("none", "relu")],
                         ids=lambda a: "-".join(a))
@pytest.mark.parametrize("n,c,k,h,w,f,s,p", CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("steps", ["one-row", "whole"])
@pytest.mark.parametrize("cores,cut", [(1, "-"), (2, "rows"), (2, "channels")])
def test_the_pair_in_one_kernel_matches_the_two_convolutions(monkeypatch, n, c, k, h, w, f, s, p, acts, steps, cores,
                                                             cut):
    monkeypatch.setattr(runtime, "cores", lambda: cores)
    # two cores: each image cut in bands of rows, or in runs of channels (where it has two blocks of channels)
    monkeypatch.setattr(expand_depthwise, "BAND_MIN_ROWS", 1 if cut == "rows" else 1 << 20)
    if steps == "one-row":  # a buffer of one output row's windows: every step keeps rows of the last one
        monkeypatch.setattr(expand_depthwise, "BAND_BYTES", 1)
    rng = np.random.default_rng(n + c + k + h + f + s)
    x = _nhwc(rng, n, c, h, w)
    w1 = (rng.standard_normal((k, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    b1 = rng.standard_normal(k).astype(np.float32)
    w2 = (rng.standard_normal((k, 1, f, f)) / f).astype(np.float32)
    b2 = rng.standard_normal(k).astype(np.float32)
    ho, wo = (h + 2 * p - f) // s + 1, (w + 2 * p - f) // s + 1
    out = _empty(n, k, ho, wo)
    (e1, c1), (e2, c2) = ACTIVATIONS[acts[0]], ACTIVATIONS[acts[1]]
    kernel = NumpyBackend().kernel("expand_depthwise")
    done = kernel(x, w1, b1, e1, c1, w2, b2, e2, c2, out, (s, s), (p, p), {})
    assert done is not None and done.candidate == "expand_depthwise"
    ref = _reference(x, w1, b1, acts[0], w2, b2, acts[1], s, p)
    assert _rel(out, ref) < 1e-5
    # the CPU's two kernels one after the other: the same sums (bit for bit where the expansion runs on the panels;
    # the selector may have timed another candidate for it, whose sums round otherwise)
    mid = _empty(n, k, h, w)
    conv = NumpyBackend().kernel("conv2d")
    assert conv(x, w1, b1, mid, (1, 1), (0, 0), (1, 1), 1, e1, c1, None)
    apart = _empty(n, k, ho, wo)
    assert conv(mid, w2, b2, apart, (s, s), (p, p), (1, 1), k, e2, c2, None)
    np.testing.assert_allclose(out, apart, rtol=1e-5, atol=1e-5)


def test_the_prepared_call_replays_on_new_data():
    rng = np.random.default_rng(3)
    x = _nhwc(rng, 1, 16, 20, 20)
    w1 = rng.standard_normal((48, 16, 1, 1)).astype(np.float32) / 4
    w2 = rng.standard_normal((48, 1, 3, 3)).astype(np.float32) / 3
    b1, b2 = np.zeros(48, np.float32), np.ones(48, np.float32)
    out, cache = _empty(1, 48, 10, 10), {}
    kernel = NumpyBackend().kernel("expand_depthwise")
    relu = ("relu", {})
    first = kernel(x, w1, b1, *relu, w2, b2, *relu, out, (2, 2), (1, 1), cache)
    assert first.replay is not None
    x[...] = rng.standard_normal(x.shape)
    first.replay()
    np.testing.assert_allclose(out, _reference(x, w1, b1, "relu", w2, b2, "relu", 2, 1), rtol=1e-5, atol=1e-5)
    again = kernel(x, w1, b1, *relu, w2, b2, *relu, out, (2, 2), (1, 1), cache)
    assert again.replay is first.replay  # the same arrays: no new plan


def test_what_the_kernel_does_not_take_is_refused():
    rng = np.random.default_rng(4)
    x = _nhwc(rng, 1, 8, 9, 9)
    w1, b1 = rng.standard_normal((16, 8, 1, 1)).astype(np.float32), np.zeros(16, np.float32)
    w2, b2 = rng.standard_normal((16, 1, 3, 3)).astype(np.float32), np.zeros(16, np.float32)
    kernel = NumpyBackend().kernel("expand_depthwise")
    none = (None, {})
    out = _empty(1, 16, 9, 9)
    assert kernel(x, w1, b1, *none, w2, b2, *none, out, (1, 1), (1, 1), None) is not None
    assert kernel(x, w1, b1, *none, rng.standard_normal((16, 1, 3, 5)).astype(np.float32), b2, *none,
                  _empty(1, 16, 9, 7), (1, 1), (1, 1), None) is None  # not square
    assert kernel(x, rng.standard_normal((16, 8, 3, 3)).astype(np.float32), b1, *none, w2, b2, *none, out, (1, 1),
                  (1, 1), None) is None  # the expansion is no 1x1 convolution
    assert kernel(np.ascontiguousarray(x), w1, b1, *none, w2, b2, *none, out, (1, 1), (1, 1), None) is None
    assert kernel(x, w1, b1, "softmax", {}, w2, b2, *none, out, (1, 1), (1, 1), None) is None  # no epilogue
    assert FUSED_EPILOGUES["clamp"] and epilogue_alpha("clamp", {"min": 0.0, "max": 6.0}) == (0.0, 6.0)


def test_small_images_are_cut_by_channels_and_large_ones_by_rows():
    assert expand_depthwise.cut(1, 7, 8, 2) == (1, 2)  # 7 rows: two bands would expand 11 rows of 7 (5x5)
    assert expand_depthwise.cut(1, 56, 8, 2) == (2, 1)
    assert expand_depthwise.cut(1, 7, 1, 2) == (2, 1)  # one block of channels: rows all the same
    assert expand_depthwise.cut(4, 7, 8, 2) == (1, 1)  # images enough


def test_blocks_of_channels_share_out_evenly():
    assert expand_depthwise.even_chunk(72, 2) == 6  # 6 + 6 blocks, where blocks of 8 went 4 + 5
    assert expand_depthwise.even_chunk(24, 2) == 6  # 2 + 2, where blocks of 8 went 1 + 2
    assert expand_depthwise.even_chunk(60, 2) == 6 and expand_depthwise.even_chunk(15, 2) == 8


@pytest.mark.parametrize("stride,pad", [((2, 1), (1, 1)), ((1, 2), (1, 0)), ((1, 1), (0, 1))])
def test_strides_and_paddings_that_differ_by_axis(stride, pad):
    rng = np.random.default_rng(9)
    x = _nhwc(rng, 1, 8, 11, 13)
    w1 = (rng.standard_normal((32, 8, 1, 1)) / 3).astype(np.float32)
    w2 = (rng.standard_normal((32, 1, 3, 3)) / 3).astype(np.float32)
    b1, b2 = rng.standard_normal(32).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    ho, wo = (11 + 2 * pad[0] - 3) // stride[0] + 1, (13 + 2 * pad[1] - 3) // stride[1] + 1
    out = _empty(1, 32, ho, wo)
    done = NumpyBackend().kernel("expand_depthwise")(x, w1, b1, "relu", {}, w2, b2, None, {}, out, stride, pad, None)
    assert done is not None
    mid = _act(conv2d(np, x.astype(np.float64), w1.astype(np.float64), b1.astype(np.float64), (1, 1), (0, 0), (1, 1),
                      1), "relu")
    ref = conv2d(np, mid, w2.astype(np.float64), b2.astype(np.float64), stride, pad, (1, 1), 32)
    assert _rel(out, ref) < 1e-5
