"""The NumPy backend's kernels for mobile networks (engine/backends/cpu/): depthwise convolutions, 1x1 convolutions
of a few pixels, global pooling and the per-channel gate, against float64 references; the convolution table
choosing them, and declining what they do not serve."""
from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu.backend import NumpyBackend
from engine.plugins import default_registry
from plugins.standard._common_conv import conv2d

pytest.importorskip("engine.backends.cpu.ops", reason="Numba is not installed")
from engine.backends import cpu  # noqa: E402  (after the skip: imports Numba)
from engine.backends.cpu.epilogue import FUSED_EPILOGUES  # noqa: E402

#: every fused epilogue the CPU kernels know
EPILOGUE_NAMES = [name for name in FUSED_EPILOGUES if name is not None]


def _activation(name: str | None) -> tuple[dict[str, float], object]:
    """The coefficients (defaults, alpha 0.1 where there is one) and float64 reference of the activation whose fused
    epilogue is ``name`` (the identity for None)."""
    if name is None:
        return {}, lambda y: y
    registry = default_registry()
    for desc in registry.activation_descs():
        if desc.epilogue == name:
            coefs = {c.name: (0.1 if c.name == "alpha" else c.default) for c in desc.coefficients}
            apply = registry.activation_class(desc.name).apply
            return coefs, lambda y, apply=apply, coefs=coefs: np.asarray(apply(np, y, coefs), np.float64)
    raise AssertionError(f"no activation declares the fused epilogue {name!r}")


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _nhwc(rng: np.random.Generator, n: int, c: int, h: int, w: int) -> np.ndarray:
    """A random tensor in NHWC memory, seen as logical NCHW."""
    return rng.standard_normal((n, h, w, c)).astype(np.float32).transpose(0, 3, 1, 2)


def _out_nhwc(n: int, c: int, h: int, w: int) -> np.ndarray:
    return np.full((n, h, w, c), np.nan, np.float32).transpose(0, 3, 1, 2)


def _depthwise_case(seed, n, c, size, kernel, stride, padding, dilation, bias=True):
    rng = np.random.default_rng(seed)
    x = _nhwc(rng, n, c, *size)
    w = rng.standard_normal((c, kernel[0], kernel[1], 1)).astype(np.float32).transpose(0, 3, 1, 2)  # KRSC memory
    b = rng.standard_normal(c).astype(np.float32) if bias else None
    ref = conv2d(np, x.astype(np.float64), w.astype(np.float64), None if b is None else b.astype(np.float64),
                 stride, padding, dilation, c)
    return x, w, b, ref


def _conv(x, w, b, out, stride, padding, dilation, groups, epilogue=None, coefs=None, residual=None):
    kernel = NumpyBackend().kernel("conv2d")
    return kernel(x, w, b, out, stride, padding, dilation, groups, epilogue, coefs or {}, {}, residual=residual)


@pytest.mark.parametrize("n,c,size,kernel,stride,padding,dilation,bias", [
    (1, 16, (112, 112), (3, 3), (1, 1), (1, 1), (1, 1), True),   # mobilenet_v3's first, by whole rows
    (1, 13, (9, 11), (3, 3), (1, 1), (1, 1), (1, 1), False),     # channels not a multiple of 8, odd sizes
    (2, 72, (23, 17), (5, 5), (2, 2), (2, 2), (1, 1), True),     # stride 2, two images
    (1, 20, (10, 9), (7, 7), (1, 2), (3, 1), (1, 1), True),      # 7x7, unequal strides and paddings
    (1, 24, (15, 15), (3, 3), (1, 1), (2, 2), (2, 2), True),     # dilated (a segmentation head's)
    (1, 40, (6, 6), (5, 5), (1, 1), (0, 0), (1, 1), True),       # no padding
    (1, 8, (4, 4), (7, 7), (1, 1), (3, 3), (1, 1), True),        # a filter larger than the image
    (2, 96, (64, 64), (3, 3), (2, 2), (1, 1), (1, 1), True),     # large enough to share over the cores
    (1, 72, (9, 13), (3, 3), (2, 1), (1, 2), (2, 1), True),      # 3x3 inside and on the borders, unequal geometry
    (1, 33, (1, 1), (3, 3), (1, 1), (1, 1), (1, 1), True),       # one pixel
    (1, 280, (9, 10), (5, 5), (1, 1), (2, 2), (1, 1), True),     # wide: blocks of channels, the last with a tail
])
@pytest.mark.parametrize("way", ["tiles", "tiles-unrolled", "tiles-looped", "rows", "pixels"])
def test_depthwise_matches_the_reference(monkeypatch, n, c, size, kernel, stride, padding, dilation, bias, way):
    """Every way (vector tiles where the CPU has FMA vectors, the cells of 3x3 and 5x5 windows inside the image
    unrolled with each input column loaded once, unrolled, or looped over; else stride 1 by whole output rows, or
    pixel by pixel), every geometry, on the backend's table."""
    if not way.startswith("tiles"):
        monkeypatch.setattr(cpu.depthwise, "vector_tiles_apply", lambda channels: False)
    elif not cpu.depthwise.vector_tiles_apply(c):
        pytest.skip("no FMA vectors, or fewer channels than a vector")
    monkeypatch.setattr(cpu.depthwise, "UNROLLED_CELLS", {"tiles-unrolled": 1, "tiles-looped": 0}.get(way, 2))
    if way == "pixels":
        monkeypatch.setattr(cpu.depthwise, "FLAT_MAX_BYTES", 0)
    x, w, b, ref = _depthwise_case(c + size[0], n, c, size, kernel, stride, padding, dilation, bias)
    out = _out_nhwc(n, c, *ref.shape[2:])
    done = _conv(x, w, b, out, stride, padding, dilation, c)
    assert done is not None and done.candidate == "depthwise"
    assert _rel(out, ref) < 1e-6
    out[...] = np.nan
    done.replay()  # the prepared call runs again on the same arrays
    assert _rel(out, ref) < 1e-6


@pytest.mark.parametrize("kernel", [(3, 3), (5, 5)])
@pytest.mark.parametrize("stride,dilation", [((1, 1), (1, 1)), ((2, 2), (1, 1)), ((2, 2), (2, 2)), ((1, 1), (2, 2))])
def test_depthwise_tiles_loading_each_column_once_sum_as_the_others(monkeypatch, kernel, stride, dilation):
    """The tiles that load each input column once for every cell it meets (pixels one or two cells apart: strides
    1 and 2 undilated, or a stride equal to the dilation) give the looped tiles' sums bit for bit (each pixel's cells
    in the same order); a dilation of 2 at stride 1 (pixels half a cell apart) takes the unrolled tiles. 56
    channels: on AVX-512 three vectors and a masked one of 8 channels, on AVX2 seven vectors."""
    if not cpu.depthwise.vector_tiles_apply(56):
        pytest.skip("no FMA vectors")
    pad = (kernel[0] // 2 * dilation[0], kernel[1] // 2 * dilation[1])
    x, w, b, ref = _depthwise_case(7, 1, 56, (37, 41), kernel, stride, pad, dilation)
    outs = []
    for way in (2, 1, 0):
        monkeypatch.setattr(cpu.depthwise, "UNROLLED_CELLS", way)
        out = _out_nhwc(1, 56, *ref.shape[2:])
        assert _conv(x, w, b, out, stride, pad, dilation, 56, "relu") is not None
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[2])
    np.testing.assert_array_equal(outs[1], outs[2])
    assert _rel(outs[0], np.maximum(ref, 0)) < 1e-6


@pytest.mark.parametrize("c", [24, 21, 16])
def test_depthwise_tiles_write_no_channel_past_the_last(c):
    """The last pixel's channels end the output's memory: the tiles (a masked last vector on AVX-512 where ``c`` is
    not a multiple of 16) write nothing after them, and read nothing after the input's (NaN there would not show)."""
    rng = np.random.default_rng(c)
    h = w_ = 19
    xmem = np.full(h * w_ * c + 64, np.nan, np.float32)
    xmem[: h * w_ * c] = rng.standard_normal(h * w_ * c)
    x = xmem[: h * w_ * c].reshape(1, h, w_, c).transpose(0, 3, 1, 2)
    w = rng.standard_normal((c, 3, 3, 1)).astype(np.float32).transpose(0, 3, 1, 2)
    b = rng.standard_normal(c).astype(np.float32)
    ref = conv2d(np, x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), (1, 1), (1, 1), (1, 1), c)
    ymem = np.full(h * w_ * c + 64, -7.0, np.float32)
    out = ymem[: h * w_ * c].reshape(1, h, w_, c).transpose(0, 3, 1, 2)
    assert _conv(x, w, b, out, (1, 1), (1, 1), (1, 1), c, "relu") is not None
    assert _rel(out, np.maximum(ref, 0)) < 1e-6
    np.testing.assert_array_equal(ymem[h * w_ * c:], -7.0)


@pytest.mark.parametrize("epilogue", EPILOGUE_NAMES)
@pytest.mark.parametrize("stride", [(1, 1), (2, 2)])
@pytest.mark.parametrize("tiles", [True, False], ids=["tiles", "loops"])
def test_depthwise_fuses_every_epilogue(monkeypatch, epilogue, stride, tiles):
    """The vector tiles' own epilogue (none, ReLU, the clamps, hard-swish), the others by a pass over each row."""
    if not tiles:
        monkeypatch.setattr(cpu.depthwise, "vector_tiles_apply", lambda channels: False)
    coefs, act = _activation(epilogue)
    x, w, b, ref = _depthwise_case(3, 1, 24, (14, 14), (3, 3), stride, (1, 1), (1, 1))
    out = _out_nhwc(1, 24, *ref.shape[2:])
    assert _conv(x, w, b, out, stride, (1, 1), (1, 1), 24, epilogue, coefs) is not None
    assert _rel(out, act(ref)) < 1e-5


@pytest.mark.parametrize("stride", [(1, 1), (2, 2)])
def test_depthwise_nan_spoils_only_the_windows_holding_it(stride):
    x, w, b, _ = _depthwise_case(4, 1, 16, (12, 12), (3, 3), stride, (1, 1), (1, 1))
    x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    x[0, 5, 6, 3] = np.nan
    xv = x.transpose(0, 3, 1, 2)
    ho = (12 + 2 - 3) // stride[0] + 1
    out = _out_nhwc(1, 16, ho, ho)
    assert _conv(xv, w, b, out, stride, (1, 1), (1, 1), 16, "relu") is not None
    bad = np.isnan(out)
    rows = [r for r in range(ho) if r * stride[0] - 1 <= 5 <= r * stride[0] + 1]
    cols = [q for q in range(ho) if q * stride[1] - 1 <= 6 <= q * stride[1] + 1]
    expected = np.zeros_like(bad)
    expected[0, 3, min(rows):max(rows) + 1, min(cols):max(cols) + 1] = True
    assert (bad == expected).all()


def test_the_table_declines_what_the_depthwise_kernel_does_not_serve():
    """A channel multiplier and groups other than the channel count go to the grouped kernel (with FMA vectors; else
    the generic path); filters over 7x7, NCHW memory and a residual leave the case to the generic path (None); a
    plain convolution of one channel is the depthwise case."""
    rng = np.random.default_rng(6)
    x = _nhwc(rng, 1, 8, 10, 10)
    mult = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    halves = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    for weights, groups in ((mult, 8), (halves, 2)):
        out = _out_nhwc(1, weights.shape[0], 10, 10)
        done = _conv(x, weights, None, out, (1, 1), (1, 1), (1, 1), groups)
        if not cpu.microkernel.panels_available():
            assert done is None
            continue
        assert done is not None and done.candidate == "grouped"
        ref = conv2d(np, x.astype(np.float64), weights.astype(np.float64), None, (1, 1), (1, 1), (1, 1), groups)
        assert _rel(out, ref) < 1e-6
    big = rng.standard_normal((8, 1, 9, 9)).astype(np.float32)
    assert _conv(x, big, None, _out_nhwc(1, 8, 10, 10), (1, 1), (4, 4), (1, 1), 8) is None
    w = rng.standard_normal((8, 1, 3, 3)).astype(np.float32)
    nchw = np.ascontiguousarray(x)
    assert _conv(nchw, w, None, np.empty((1, 8, 10, 10), np.float32), (1, 1), (1, 1), (1, 1), 8) is None
    out = _out_nhwc(1, 8, 10, 10)
    assert _conv(x, w, None, out, (1, 1), (1, 1), (1, 1), 8, residual=_out_nhwc(1, 8, 10, 10)) is None
    one = _nhwc(rng, 1, 1, 10, 10)
    done = _conv(one, w[:1], None, _out_nhwc(1, 1, 10, 10), (1, 1), (1, 1), (1, 1), 1)
    assert done is not None and done.candidate == "depthwise"


@pytest.mark.parametrize("n,size", [(1, (1, 1)), (2, (1, 1)), (1, (2, 2)), (2, (2, 2))])
@pytest.mark.parametrize("epilogue", [None, *EPILOGUE_NAMES])
def test_a_1x1_convolution_of_a_few_pixels_is_a_dense_product(n, size, epilogue):
    """Squeeze-excitation's 1x1 convolutions on 1x1 images: the pixels as the items of a fully connected layer."""
    rng = np.random.default_rng(n * 10 + size[0])
    coefs, act = _activation(epilogue)
    c, k = 120, 33
    x = _nhwc(rng, n, c, *size)
    w = rng.standard_normal((k, 1, 1, c)).astype(np.float32).transpose(0, 3, 1, 2)
    b = rng.standard_normal(k).astype(np.float32)
    out = _out_nhwc(n, k, *size)
    done = _conv(x, w, b, out, (1, 1), (0, 0), (1, 1), 1, epilogue, coefs)
    assert done is not None and done.candidate == "pixels_dense"
    ref = conv2d(np, x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), (1, 1), (0, 0), (1, 1), 1)
    assert _rel(out, act(ref)) < 1e-5


def test_a_1x1_convolution_of_many_pixels_or_a_3x3_one_is_no_dense_product():
    rng = np.random.default_rng(7)
    x = _nhwc(rng, 1, 32, 4, 4)
    w = rng.standard_normal((16, 32, 1, 1)).astype(np.float32)
    done = _conv(x, w, None, _out_nhwc(1, 16, 4, 4), (1, 1), (0, 0), (1, 1), 1)
    assert done is not None and done.candidate != "pixels_dense"
    w3 = rng.standard_normal((16, 32, 3, 3)).astype(np.float32)
    done = _conv(_nhwc(rng, 1, 32, 1, 1), w3, None, _out_nhwc(1, 16, 1, 1), (1, 1), (1, 1), (1, 1), 1)
    assert done is None or done.candidate != "pixels_dense"


@pytest.mark.parametrize("nhwc", [True, False], ids=["nhwc", "nchw"])
@pytest.mark.parametrize("is_max", [False, True], ids=["average", "max"])
@pytest.mark.parametrize("n,c,h,w", [(1, 960, 7, 7), (2, 13, 5, 3), (1, 40, 56, 56), (2, 24, 1, 1),
                                     (3, 16, 37, 41), (1, 32, 57, 61), (1, 144, 9, 9)])
# (three large images, pixels no multiple of 4; runs of pixels and the pixels after the last whole run)
def test_global_pool_matches_the_reference(nhwc, is_max, n, c, h, w):
    """One pass on this thread for a small tensor, runs of pixels (NHWC) or blocks of rows (NCHW) over the cores
    for a large one; NaN wins a maximum and spoils its channel's mean, in whichever run it falls."""
    rng = np.random.default_rng(c + h)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    ref = x.astype(np.float64).max(axis=(2, 3)) if is_max else x.astype(np.float64).mean(axis=(2, 3))
    x[0, 1, h // 2, w // 2] = np.nan
    ref[0, 1] = np.nan
    phys = np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if nhwc else x
    out = np.full((n, 1, 1, c) if nhwc else (n, c, 1, 1), np.inf, np.float32)
    done = NumpyBackend().kernel("global_pool")(phys, out, is_max, nhwc)
    assert done is not None and done.candidate == "global_pool"
    got = out.reshape(n, c)
    assert (np.isnan(got) == np.isnan(ref)).all()  # the NaN stays in its channel
    keep = ~np.isnan(ref)
    assert _rel(got[keep], ref[keep]) < 1e-6


@pytest.mark.parametrize("nhwc", [True, False], ids=["nhwc", "nchw"])
@pytest.mark.parametrize("epilogue", [None, *EPILOGUE_NAMES])
@pytest.mark.parametrize("n,c,h,w", [(1, 72, 28, 28), (2, 13, 5, 3), (1, 16, 112, 112), (1, 32, 57, 61)])
def test_channel_scale_matches_the_reference(nhwc, epilogue, n, c, h, w):
    """``x * act(g)``, the gate broadcast over the pixels; in place too."""
    coefs, act = _activation(epilogue)
    rng = np.random.default_rng(c + h)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    g = rng.standard_normal((n, c)).astype(np.float32)
    ref = x.astype(np.float64) * act(g.astype(np.float64))[:, :, None, None]
    phys = np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if nhwc else x
    gate = g.reshape((n, 1, 1, c) if nhwc else (n, c, 1, 1))
    kernel = NumpyBackend().kernel("channel_scale")
    out = np.full_like(phys, np.nan)
    assert kernel(phys, gate, out, nhwc, epilogue, coefs) is not None
    logical = out.transpose(0, 3, 1, 2) if nhwc else out
    assert _rel(logical, ref) < 1e-6
    assert kernel(phys, gate, phys, nhwc, epilogue, coefs) is not None  # in place
    assert _rel(phys.transpose(0, 3, 1, 2) if nhwc else phys, ref) < 1e-6


def test_global_pool_and_channel_scale_decline_what_they_do_not_serve(monkeypatch):
    backend = NumpyBackend()
    pool, scale = backend.kernel("global_pool"), backend.kernel("channel_scale")
    x = np.ones((1, 4, 4, 8), np.float32)
    assert pool(x.astype(np.float16), np.empty((1, 1, 1, 8), np.float16), False, True) is None
    assert pool(x, np.empty((1, 1, 1, 4), np.float32), False, True) is None  # not one value per channel
    assert scale(x, np.ones(4, np.float32), np.empty_like(x), True, None, {}) is None
    assert scale(x, np.ones(8, np.float32), np.empty_like(x), True, "no such epilogue", {}) is None
    monkeypatch.setenv("LAYERLAB_CPU_KERNELS", "off")
    assert NumpyBackend().kernel("global_pool") is None and NumpyBackend().kernel("channel_scale") is None


@pytest.mark.parametrize("fmt", ["fp32 nhwc", "fp32 nchw"])
def test_the_squeeze_excitation_product_takes_the_channel_scale_kernel(monkeypatch, fmt):
    """An element-wise product of a tensor and a per-image, per-channel gate without an activation of its own."""
    from engine.tensor import TensorFormat
    from tests.harness import run_layer

    calls = []
    real = cpu.channels.channel_scale_plan
    monkeypatch.setattr(cpu.channels, "channel_scale_plan", lambda *a: calls.append(a[3]) or real(*a))
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 24, 9, 7)).astype(np.float32)
    gate = rng.uniform(0, 1, (2, 24, 1, 1)).astype(np.float32)
    for order in ([x, gate], [gate, x]):
        out, _, _ = run_layer("element_wise", {"operation": "product"}, order, TensorFormat.parse(fmt))
        assert _rel(out, x.astype(np.float64) * gate) < 1e-6
    assert calls == [fmt.endswith("nhwc")] * 2


@pytest.mark.parametrize("c,size,kernel,stride,epilogue", [
    (1152, (7, 7), (5, 5), (1, 1), "relu"),       # a wide layer on a small image: blocks of 8 vectors a job
    (280, (9, 6), (3, 3), (1, 1), "silu"),        # 17 vectors and a masked tail, an activation applied after
    (600, (14, 14), (5, 5), (2, 2), "hardswish"),  # strided, 37 vectors and a tail of 8
])
def test_wide_depthwise_layers_cut_by_channels_match_the_reference(monkeypatch, c, size, kernel, stride, epilogue):
    """A small image of many channels is cut into jobs of rows and runs of channel blocks (the tail with the last
    run): the same values as jobs of whole rows, and the float64 reference."""
    if not cpu.depthwise.vector_tiles_apply(c):
        pytest.skip("no FMA vectors")
    coefs, apply = _activation(epilogue)
    pad = (kernel[0] // 2, kernel[1] // 2)
    x, w, b, ref = _depthwise_case(c, 1, c, size, kernel, stride, pad, (1, 1))
    outs, parts = [], []
    real = cpu.depthwise.channel_parts
    monkeypatch.setattr(cpu.depthwise, "channel_parts", lambda *a: parts.append(real(*a)) or parts[-1])
    for jobs in (4, 0):
        monkeypatch.setattr(cpu.depthwise, "DEPTHWISE_JOBS_PER_THREAD", jobs)
        monkeypatch.setattr(cpu.runtime, "SPLIT_MIN_PIXELS", 1)  # over the cores, however small
        out = _out_nhwc(1, c, *ref.shape[2:])
        assert _conv(x, w, b, out, stride, pad, (1, 1), c, epilogue, coefs).candidate == "depthwise"
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert _rel(outs[0], apply(ref)) < 1e-5
    if cpu.runtime.threads() > 1:
        assert parts[0] > 1 and parts[-1] == 1  # cut by channels, then by rows alone
