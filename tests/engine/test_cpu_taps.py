"""The NumPy backend's convolutions by taps (engine/backends/cpu/taps.py): atrous convolutions whose taps mostly read
padding, each tap computed over only the output pixels whose input lies inside the image, against a float64
reference; which convolutions take that path."""
from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu.backend import NumpyBackend
from plugins.standard._common_conv import conv2d

pytest.importorskip("engine.backends.cpu.ops", reason="Numba is not installed")


def _case(seed: int, n: int, c: int, k: int, h: int, w: int, kernel: int = 3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, h, w, c)).astype(np.float32).transpose(0, 3, 1, 2)  # NHWC memory, NCHW view
    wt = (rng.standard_normal((k, c, kernel, kernel)) / np.sqrt(c * kernel * kernel)).astype(np.float32)
    return x, wt, rng.standard_normal(k).astype(np.float32)


def _out(n: int, k: int, h: int, w: int) -> np.ndarray:
    return np.full((n, h, w, k), np.nan, np.float32).transpose(0, 3, 1, 2)


def _served(be: NumpyBackend, *args) -> str | None:
    from engine.backends.selection import served_candidates

    with served_candidates() as names:
        assert be.kernel("conv2d")(*args)
    return names[-1] if names else None


@pytest.mark.parametrize("dilation,size", [(12, (32, 32)), (24, (32, 32)), (36, (32, 32)), (6, (17, 19))])
@pytest.mark.parametrize("n,act", [(1, "relu"), (2, None)])
@pytest.mark.parametrize("micro_kernel", [True, False])
def test_atrous_convolutions_by_taps_match_the_reference(monkeypatch, dilation, size, n, act, micro_kernel):
    """DeepLab's ASPP geometry (3x3, padding = dilation, on a 32x32 image; dilation 36 leaves only the centre tap)
    and an odd image, one and two images, bias and ReLU, 40 outputs (a part-filled last panel): the taps path
    serves them, by the micro-kernel where it runs them (AVX-512) or a BLAS product per tap, and matches float64."""
    from engine.backends.cpu import taps

    monkeypatch.setattr(taps, "TAP_PANELS", micro_kernel)
    x, wt, b = _case(dilation, n, 24, 40, *size)
    out = _out(n, 40, *size)
    geometry = ((1, 1), (dilation, dilation), (dilation, dilation), 1)
    served = "tap_panels" if micro_kernel and taps.tap_panels_apply() else "taps"
    assert _served(NumpyBackend(), x, wt, b, out, *geometry, act, {}, {}) == served
    ref = conv2d(np, x.astype(np.float64), wt.astype(np.float64), b.astype(np.float64), *geometry)
    if act == "relu":
        ref = np.maximum(ref, 0)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_taps_are_kept_for_convolutions_that_mostly_read_the_image():
    """A plain 3x3 convolution of a large image, a strided one and a dilated one on a large image read padding
    little or not in the taps' way, and a small image is the panels': they keep their paths."""
    from engine.backends.cpu import taps

    be = NumpyBackend()
    x, wt, b = _case(3, 1, 24, 40, 48, 48)
    by_taps = ("taps", "tap_panels")
    assert _served(be, x, wt, b, _out(1, 40, 48, 48), (1, 1), (1, 1), (1, 1), 1, None, {}, {}) not in by_taps
    assert _served(be, x, wt, b, _out(1, 40, 48, 48), (1, 1), (2, 2), (2, 2), 1, None, {}, {}) not in by_taps
    assert _served(be, x, wt, b, _out(1, 40, 24, 24), (2, 2), (1, 1), (1, 1), 1, None, {}, {}) not in by_taps
    small, ws, bs = _case(4, 1, 24, 32, 12, 12)  # 144 pixels: the panels' (packed weights, windows in place)
    assert _served(be, small, ws, bs, _out(1, 32, 12, 12), (1, 1), (6, 6), (6, 6), 1, None, {}, {}) not in by_taps
    assert taps.inside_share((32, 32), (32, 32), (3, 3), (36, 36), (36, 36)) == pytest.approx(1 / 9)
    assert taps.inside_share((48, 48), (48, 48), (3, 3), (1, 1), (1, 1)) > taps.TAPS_MAX_SHARE
