"""The NumPy backend's Numba kernels (engine/backends/cpu/): Winograd and im2col convolutions
and upsampling against float64 references and against the generic NumPy path they replace."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.backends import cpu
from engine.backends.cpu import backend as cpu_backend
from engine.backends.cpu.backend import NumpyBackend, cpu_kernels
from engine.backends.cpu.epilogue import kernel_alpha
from engine.backends.cpu.microkernel import panels_available
from plugins.standard._common_conv import conv2d
from plugins.standard._common_resample import resample, upsample_taps

pytest.importorskip("engine.backends.cpu.ops", reason="Numba is not installed")
EPILOGUES = cpu.epilogue.FUSED_EPILOGUES


def _ref_conv(x, w, b, stride, padding, dilation, act=None, alpha=0.0):
    y = conv2d(np, x.astype(np.float64), w.astype(np.float64), None if b is None else b.astype(np.float64),
               stride, padding, dilation, 1)
    if act == "relu":
        y = np.maximum(y, 0)
    elif act == "leaky_relu":
        y = np.where(y > 0, y, alpha * y)
    elif act == "silu":
        y = y / (1 + np.exp(-y))
    elif act == "hardswish":
        y = y * np.clip(y / 6 + 0.5, 0, 1)
    return y


def _tensors(rng, n, c, h, w, nhwc):
    """A random input (logical NCHW view) in NCHW or NHWC memory."""
    if nhwc:
        return rng.standard_normal((n, h, w, c)).astype(np.float32).transpose(0, 3, 1, 2)
    return rng.standard_normal((n, c, h, w)).astype(np.float32)


def _out(n, k, h, w, nhwc):
    return np.full((n, h, w, k), np.nan, np.float32).transpose(0, 3, 1, 2) if nhwc else np.full((n, k, h, w), np.nan,
                                                                                                  np.float32)


def _rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _spy(monkeypatch, module, name):
    """The calls (input shapes) of kernel ``name`` of ``module``, with the panel kernels available."""
    monkeypatch.setattr(cpu.microkernel, "panels_available", lambda: True)
    calls, real = [], getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **kw: calls.append(a[0].shape) or real(*a, **kw))
    return calls


def _assert_matches_reference(call, seed, n, c, k, size, kernel, stride, padding, dilation, act, bias):
    """``call(x, w, b, out)`` (a kernel on a random NHWC input) against the float64 reference convolution."""
    rng = np.random.default_rng(seed)
    x = _tensors(rng, n, c, *size, nhwc=True)
    wt = rng.standard_normal((k, c, *kernel)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32) if bias else None
    ref = _ref_conv(x, wt, b, stride, padding, dilation, act, 0.2)
    out = _out(n, k, *ref.shape[2:], nhwc=True)
    call(x, wt, b, out)
    assert np.isfinite(out).all(), "every output pixel written"
    assert _rel(out, ref) < 1e-5


#: the Winograd forms: F(4x4, 3x3) products by OpenBLAS (either layout), and for NHWC F(2x2, 3x3) and the products
#: on the panel micro-kernel (weights in panels)
WINOGRAD_FORMS = {
    "F4": lambda wt, nhwc: cpu.winograd.transform_weights(wt, nhwc),
    "F2": lambda wt, nhwc: cpu.winograd.transform_weights(wt, True, 2),
    "F4-panels": lambda wt, nhwc: cpu.winograd.winograd_panels(cpu.winograd.transform_weights(wt, True)),
    "F2-panels": lambda wt, nhwc: cpu.winograd.winograd_panels(cpu.winograd.transform_weights(wt, True, 2)),
}


def _winograd_form(form: str, wt: np.ndarray, nhwc: bool) -> np.ndarray:
    return WINOGRAD_FORMS[form](wt, nhwc)


#: (form, NHWC memory): the NCHW kernels take F(4x4) weights only; panels where this CPU has the micro-kernel
FORM_LAYOUTS = [("F4", False), ("F4", True), ("F2", True)] + (
    [("F4-panels", True), ("F2-panels", True)] if cpu.microkernel.panels_available() else [])
FORM_IDS = [f"{f}-{'nhwc' if n else 'nchw'}" for f, n in FORM_LAYOUTS]
#: (n, c, k, h, w, padding): odd sizes, no padding and 2, a 14x13 image (F(2x2)'s size), batches
WINOGRAD_SHAPES = [(1, 16, 24, 17, 23, 1), (2, 32, 8, 20, 20, 0), (1, 20, 20, 9, 31, 2), (1, 64, 64, 64, 64, 1),
                   (1, 24, 32, 14, 13, 1), (2, 16, 48, 7, 10, 0)]
#: the panel forms take outputs in whole panels
WINOGRAD_CASES = [pytest.param(form, nhwc, *shape, id=f"{fid}-{'x'.join(map(str, shape))}")
                  for (form, nhwc), fid in zip(FORM_LAYOUTS, FORM_IDS) for shape in WINOGRAD_SHAPES
                  if not form.endswith("panels") or shape[2] % cpu.microkernel.PANEL == 0]


@pytest.mark.parametrize("form,nhwc,n,c,k,h,w,pad", WINOGRAD_CASES)
@pytest.mark.parametrize("act", [None, "relu", "leaky_relu"])
def test_winograd_matches_the_direct_convolution(form, nhwc, n, c, k, h, w, pad, act):
    rng = np.random.default_rng(1)
    x = _tensors(rng, n, c, h, w, nhwc)
    wt = (rng.standard_normal((k, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32)
    ho, wo = h + 2 * pad - 2, w + 2 * pad - 2
    out = _out(n, k, ho, wo, nhwc)
    cpu.winograd.winograd_conv3x3(x, _winograd_form(form, wt, nhwc), b, out, (pad, pad), EPILOGUES[act], 0.1)
    ref = _ref_conv(x, wt, b, (1, 1), (pad, pad), (1, 1), act, 0.1)
    assert np.isfinite(out).all(), "every output pixel written"
    assert _rel(out, ref) < 1e-5


@pytest.mark.parametrize("kernel,stride,padding,dilation,c", [
    ((7, 7), (2, 2), (3, 3), (1, 1), 3),     # a ResNet stem
    ((3, 3), (2, 2), (1, 1), (1, 1), 16),    # strided
    ((1, 1), (1, 1), (0, 0), (1, 1), 24),    # 1x1: no im2col
    ((1, 1), (2, 2), (0, 0), (1, 1), 8),     # 1x1 strided: im2col
    ((3, 5), (1, 2), (2, 1), (2, 1), 5),     # rectangular, dilated, asymmetric stride
    ((3, 3), (1, 1), (1, 1), (1, 1), 3),     # few channels
])
def test_im2col_nhwc_matches_the_reference(kernel, stride, padding, dilation, c):
    rng = np.random.default_rng(2)
    x = _tensors(rng, 2, c, 19, 22, nhwc=True)
    wt = rng.standard_normal((12, c, *kernel)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    ref = _ref_conv(x, wt, b, stride, padding, dilation, "relu")
    out = _out(2, 12, *ref.shape[2:], nhwc=True)
    cpu.im2col.conv_nhwc(x, cpu.im2col.gemm_weights(wt), kernel, b, out, stride, padding, dilation, EPILOGUES["relu"])
    assert _rel(out, ref) < 1e-5


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("kernel,stride,padding,dilation,c", [
    ((3, 3), (1, 1), (1, 1), (1, 1), 64),    # dncnn's output layer
    ((1, 1), (1, 1), (0, 0), (1, 1), 32),    # U-Net's output layer
    ((5, 3), (2, 1), (2, 0), (1, 1), 8),     # rectangular, strided, padded on one axis only
    ((3, 3), (1, 2), (2, 2), (2, 2), 12),    # dilated: every tap gathered
])
@pytest.mark.parametrize("act,bias", [(None, True), ("relu", False), ("leaky_relu", True)])
def test_few_output_convolution_matches_the_reference(k, kernel, stride, padding, dilation, c, act, bias):
    def call(x, wt, b, out):
        cpu.few_outputs.conv_few_outputs(x, cpu.few_outputs.few_output_weights(wt), kernel, b, out, stride, padding, dilation,
                            EPILOGUES[act], 0.2)
    _assert_matches_reference(call, 3, 2, c, k, (21, 18), kernel, stride, padding, dilation, act, bias)


@pytest.mark.parametrize("n,c,k,size,kernel,stride,padding,dilation", [
    (1, 40, 64, 7, (3, 3), (1, 1), (1, 1), (1, 1)),     # resnet's last stage, smaller
    (2, 24, 32, 14, (3, 3), (2, 2), (1, 1), (1, 1)),    # strided, two images
    (1, 160, 96, 5, (3, 3), (1, 1), (1, 1), (1, 1)),    # 1440 inputs: two passes of PANEL_KBLOCK; 25 rows
    (1, 64, 64, 6, (1, 1), (1, 1), (0, 0), (1, 1)),     # 1x1 of stride 1: no im2col
    (2, 16, 32, 9, (1, 1), (2, 2), (0, 0), (1, 1)),     # 1x1 strided
    (1, 8, 32, 9, (3, 3), (1, 1), (2, 2), (2, 2)),      # dilated
])
@pytest.mark.parametrize("act,bias", [(None, True), ("relu", False), ("leaky_relu", True)])
def test_panel_product_convolution_matches_the_reference(n, c, k, size, kernel, stride, padding, dilation, act, bias):
    def call(x, wt, b, out):
        cpu.panels.conv_panels(x, cpu.panels.panel_weights(wt), kernel, b, out, stride, padding, dilation, EPILOGUES[act],
                       0.2)
    _assert_matches_reference(call, 8, n, c, k, (size, size), kernel, stride, padding, dilation, act, bias)


@pytest.mark.parametrize("m", [1, 2, 3, 5, 6, 7, 8, 9, 10, 13, 49])
def test_panel_product_tiles_every_row_count_exactly(m):
    """Rows cut into full tiles and an exact last one (1 to PANEL_ROWS rows, a short remainder shared with the
    tile before it): every row of ``y`` written once, rows outside it left alone."""
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, 40)).astype(np.float32)
    w = rng.standard_normal((2 * cpu.microkernel.PANEL, 40, 1, 1)).astype(np.float32)
    b = rng.standard_normal(2 * cpu.microkernel.PANEL).astype(np.float32)
    y = np.full((m + 1, 2 * cpu.microkernel.PANEL), np.nan, np.float32)  # one row more than the product writes
    cpu.panels._panel_par(a, cpu.panels.panel_weights(w), y[:m], y[:m], False, b, 0, kernel_alpha(0.0))
    ref = a.astype(np.float64) @ w[:, :, 0, 0].T.astype(np.float64) + b
    assert _rel(y[:m], ref) < 1e-6
    assert np.isnan(y[m]).all()
    sizes, left = [], m
    while left:
        sizes.append(cpu.microkernel.tile_rows(left))
        left -= sizes[-1]
    assert max(sizes) <= cpu.microkernel.PANEL_ROWS and (m < 3 or min(sizes) >= 3)  # no tile of one or two rows but where m is


@pytest.mark.parametrize("n,c,k,size,kernel,stride,padding", [
    (1, 3, 64, (30, 23), (7, 7), (2, 2), (3, 3)),   # a ResNet stem, odd sizes: the last tile of a row part-filled
    (2, 4, 32, (11, 17), (5, 3), (1, 2), (2, 0)),   # rectangular, two images, padding on one axis
    (1, 3, 96, (9, 9), (3, 3), (1, 1), (0, 0)),     # no padding
    (1, 3, 32, (37, 29), (3, 3), (2, 2), (1, 1)),   # a MobileNet stem of 19x15 pixels: by output rows
    (1, 3, 16, (37, 29), (3, 3), (2, 2), (1, 1)),   # a MobileNet v3 stem: 16 outputs, part of a panel (AVX-512)
    (1, 3, 24, (30, 23), (7, 7), (2, 2), (3, 3)),   # outputs no multiple of a vector: the last one under a mask
])
@pytest.mark.parametrize("act,bias", [(None, True), ("relu", False), ("leaky_relu", True), ("silu", True)])
def test_direct_panel_convolution_matches_the_reference(n, c, k, size, kernel, stride, padding, act, bias):
    def call(x, wt, b, out):
        cpu.panels.conv_panels(x, cpu.panels.panel_weights(wt), kernel, b, out, stride, padding, (1, 1), EPILOGUES[act], 0.2)
    _assert_matches_reference(call, 10, n, c, k, size, kernel, stride, padding, (1, 1), act, bias)


@pytest.mark.parametrize("width", range(1, 14))
@pytest.mark.parametrize("act,bias", [(None, True), ("relu", True), ("relu", False)])
@pytest.mark.parametrize("k", ["panels", "and-a-part", "half-a-vector"])
def test_direct_panels_start_from_the_bias_and_activate_in_the_micro_kernel_for_every_tile_size(width, act, bias, k):
    """Without a residual and with no activation or a ReLU, the direct panels start the micro-kernel's
    accumulators from the bias and apply the ReLU before its store (no passes over the output panel): every
    tile size (1 to PANEL_ROWS rows: an image of one row of ``width`` pixels) against the reference, for whole
    panels, a last panel of one vector and a half (its second under a mask) and one of half a vector."""
    panel, vector = cpu.microkernel.PANEL, cpu.microkernel.PANEL_VECTOR
    outputs = {"panels": 2 * panel, "and-a-part": panel + vector + vector // 2, "half-a-vector": vector // 2}[k]

    def call(x, wt, b, out):
        cpu.panels.conv_panels(x, cpu.panels.panel_weights(wt), (3, 3), b, out, (1, 1), (1, 1), (1, 1), EPILOGUES[act], 0.0)
    _assert_matches_reference(call, 20 + width, 1, 6, outputs, (1, width), (3, 3), (1, 1), (1, 1), (1, 1), act, bias)


def test_backend_takes_the_direct_panels_for_an_rgb_stem_only(monkeypatch):
    """Without the large panels (AVX2's choice; AVX-512's is the test below) only an RGB stem's large image."""
    be = NumpyBackend()
    rng = np.random.default_rng(11)
    calls = _spy(monkeypatch, cpu.panels, "conv_panels_plan")
    monkeypatch.setattr(cpu.panels, "LARGE_PANELS", False)
    stem = rng.standard_normal((64, 3, 7, 7)).astype(np.float32)
    x = _tensors(rng, 1, 3, 40, 40, nhwc=True)
    out = _out(1, 64, 20, 20, nhwc=True)
    assert be.kernel("conv2d")(x, stem, None, out, (2, 2), (3, 3), (1, 1), 1, "relu", {})
    assert calls == [(1, 3, 40, 40)]
    assert _rel(out, _ref_conv(x, stem, None, (2, 2), (3, 3), (1, 1), "relu")) < 1e-5
    # a 3x3 RGB window (27 values) takes them too; a one-channel 3x3 window (9 values) and dilated windows keep im2col
    small = rng.standard_normal((64, 3, 3, 3)).astype(np.float32)
    assert be.kernel("conv2d")(x, small, None, _out(1, 64, 20, 20, nhwc=True), (2, 2), (1, 1), (1, 1), 1, "silu", {})
    assert calls == [(1, 3, 40, 40)] * 2
    # so does a stem of outputs no multiple of a panel (mobilenet_v3's 16, hard-swish)
    out16 = _out(1, 16, 20, 20, nhwc=True)
    assert be.kernel("conv2d")(x, small[:16], None, out16, (2, 2), (1, 1), (1, 1), 1, "hardswish", {})
    assert calls == [(1, 3, 40, 40)] * 3
    assert _rel(out16, _ref_conv(x, small[:16], None, (2, 2), (1, 1), (1, 1), "hardswish")) < 1e-5
    gray = rng.standard_normal((64, 1, 3, 3)).astype(np.float32)
    gray_x = _tensors(rng, 1, 1, 40, 40, nhwc=True)
    assert be.kernel("conv2d")(gray_x, gray, None, _out(1, 64, 40, 40, nhwc=True), (1, 1), (1, 1), (1, 1), 1, None, {})
    assert be.kernel("conv2d")(x, stem, None, _out(1, 64, 17, 17, nhwc=True), (2, 2), (3, 3), (2, 2), 1, None, {})
    assert len(calls) == 3


def test_panel_product_keeps_nan_and_leaves_other_pixels_alone():
    x = np.zeros((1, 7, 7, 32), np.float32)
    x[0, 3, 3, 5] = np.nan
    wt = np.ones((32, 32, 3, 3), np.float32)
    out = _out(1, 32, 7, 7, nhwc=True)
    cpu.panels.conv_panels(x.transpose(0, 3, 1, 2), cpu.panels.panel_weights(wt), (3, 3), None, out, (1, 1), (1, 1), (1, 1),
                   EPILOGUES["relu"])
    assert np.isnan(out[0, :, 2:5, 2:5]).all()
    assert (out[0, :, 0, 0] == 0).all() and (out[0, :, 6, 6] == 0).all()


@pytest.mark.parametrize("large", [True, False], ids=["large-panels", "without"])
def test_large_panels_take_the_large_images_winograd_leaves(monkeypatch, large):
    """With the large panels (AVX-512's choice, forced here on any CPU with FMA vectors) the panels take large
    images of any convolution but a dilated one, in place of im2col + OpenBLAS, and a 3x3 one of stride 1 before
    Winograd only where it has at most one panel's width of inputs; without them those keep their paths."""
    if not cpu.microkernel.panels_available():
        pytest.skip("no FMA vectors")
    monkeypatch.setattr(cpu.panels, "LARGE_PANELS", large)
    monkeypatch.setattr(cpu.ops, "WINOGRAD_BEFORE_PANELS", False)  # AVX-512's order, where the large panels are
    be = NumpyBackend()
    rng = np.random.default_rng(12)
    cases = [  # (c, k, size, kernel, stride, dilation, taken by the large panels)
        (16, 24, 33, 3, 2, 1, True),     # strided 3x3, outputs no multiple of a panel
        (8, 40, 24, 5, 1, 1, True),      # 5x5
        (cpu.microkernel.PANEL, 48, 24, 3, 1, 1, True),  # one panel's width of inputs: before Winograd
        (48, cpu.microkernel.PANEL, 24, 3, 1, 1, False),  # of outputs alone: Winograd's
        (64, 64, 24, 3, 1, 1, False),    # Winograd's
        (16, 32, 24, 3, 1, 2, False),    # dilated
    ]
    for c, k, size, ks, st, dil, taken in cases:
        x = _tensors(rng, 1, c, size, size, nhwc=True)
        wt = rng.standard_normal((k, c, ks, ks)).astype(np.float32)
        pad = ks // 2 * dil
        ho = (size + 2 * pad - dil * (ks - 1) - 1) // st + 1
        out = _out(1, k, ho, ho, nhwc=True)
        done = be.kernel("conv2d")(x, wt, None, out, (st, st), (pad, pad), (dil, dil), 1, "relu", {})
        assert done and (done.candidate == "panels") == (taken and large), (c, k, ks, st, dil, done.candidate)
        assert _rel(out, _ref_conv(x, wt, None, (st, st), (pad, pad), (dil, dil), "relu")) < 1e-5


def test_backend_takes_the_panel_product_for_small_nhwc_images(monkeypatch):
    be = NumpyBackend()
    rng = np.random.default_rng(9)
    calls = _spy(monkeypatch, cpu.panels, "conv_panels_plan")
    monkeypatch.setattr(cpu.ops, "WINOGRAD_BEFORE_PANELS", False)  # AVX2 sends this 14x14 3x3 to Winograd (see below)
    wt = rng.standard_normal((64, 48, 3, 3)).astype(np.float32)
    x = _tensors(rng, 1, 48, 14, 14, nhwc=True)
    out, cache = _out(1, 64, 14, 14, nhwc=True), {}
    assert be.kernel("conv2d")(x, wt, None, out, (1, 1), (1, 1), (1, 1), 1, "relu", {}, cache)
    assert calls == [(1, 48, 14, 14)] and cache["gemm_panels"][0] is wt
    assert _rel(out, _ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1), "relu")) < 1e-5
    # larger images, output counts that are no multiple of 32 and NCHW memory keep their paths
    big = _tensors(rng, 1, 48, 20, 20, nhwc=True)
    assert be.kernel("conv2d")(big, wt, None, _out(1, 64, 20, 20, nhwc=True), (1, 1), (1, 1), (1, 1), 1, None, {})
    assert be.kernel("conv2d")(x, wt[:40], None, _out(1, 40, 14, 14, nhwc=True), (1, 1), (1, 1), (1, 1), 1, None, {})
    assert be.kernel("conv2d")(np.ascontiguousarray(x), wt, None, _out(1, 64, 14, 14, nhwc=False), (1, 1), (1, 1),
                               (1, 1), 1, None, {})
    assert len(calls) == 1
    # where Winograd goes first (AVX2), a 3x3 stride-1 image of enough tiles takes it; a 7x7 one keeps the panels
    monkeypatch.setattr(cpu.ops, "WINOGRAD_BEFORE_PANELS", True)
    assert be.kernel("conv2d")(x, wt, None, _out(1, 64, 14, 14, nhwc=True), (1, 1), (1, 1), (1, 1), 1, None, {})
    small = _tensors(rng, 1, 48, 7, 7, nhwc=True)
    assert be.kernel("conv2d")(small, wt, None, _out(1, 64, 7, 7, nhwc=True), (1, 1), (1, 1), (1, 1), 1, None, {})
    assert calls == [(1, 48, 14, 14), (1, 48, 7, 7)]
    # no FMA vectors (neither AVX-512 nor AVX2): OpenBLAS as before
    monkeypatch.setattr(cpu.microkernel, "panels_available", lambda: False)
    assert be.kernel("conv2d")(x, wt, None, out, (1, 1), (1, 1), (1, 1), 1, None, {})
    assert len(calls) == 2


@pytest.mark.parametrize("c,k,winograd", [(128, 128, True), (256, 128, True), (128, 64, False), (64, 256, False)])
def test_small_images_of_many_channels_go_to_winograd_before_the_panels(monkeypatch, c, k, winograd):
    """Where the panels would come first (AVX-512's order), a 14x14 3x3 layer of stride 1 with at least
    WINOGRAD_BEFORE_PANELS_MIN_CHANNELS inputs and outputs takes Winograd's F(2x2, 3x3); fewer of either keeps the
    panels. Both match the reference; a stride-2 layer of as many channels keeps the panels."""
    monkeypatch.setattr(cpu.ops, "WINOGRAD_BEFORE_PANELS", False)
    if not cpu.microkernel.panels_available():
        pytest.skip("no FMA vectors: no panels to go before")
    be = NumpyBackend()
    rng = np.random.default_rng(c + k)
    x = _tensors(rng, 1, c, 14, 14, nhwc=True)
    wt = (rng.standard_normal((k, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    out, cache = _out(1, k, 14, 14, nhwc=True), {}
    done = be.kernel("conv2d")(x, wt, None, out, (1, 1), (1, 1), (1, 1), 1, "relu", {}, cache)
    assert done.candidate == ("winograd_f2x2" if winograd else "panels")
    assert _rel(out, _ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1), "relu")) < 1e-5
    strided = _out(1, k, 7, 7, nhwc=True)
    assert be.kernel("conv2d")(x, wt, None, strided, (2, 2), (1, 1), (1, 1), 1, None, {}).candidate == "panels"
    monkeypatch.setattr(cpu.ops, "WINOGRAD_BEFORE_PANELS_MIN_CHANNELS", 1 << 20)  # the rule off: the panels
    assert be.kernel("conv2d")(x, wt, None, out, (1, 1), (1, 1), (1, 1), 1, "relu", {}).candidate == "panels"


def test_few_output_convolution_keeps_nan_and_inf():
    x = np.zeros((1, 12, 12, 16), np.float32)
    x[0, 5, 5, 3] = np.nan
    x[0, 9, 2, 0] = np.inf
    xv = x.transpose(0, 3, 1, 2)
    wt = np.ones((3, 16, 3, 3), np.float32)
    out = _out(1, 3, 12, 12, nhwc=True)
    cpu.few_outputs.conv_few_outputs(xv, cpu.few_outputs.few_output_weights(wt), (3, 3), None, out, (1, 1), (1, 1), (1, 1),
                        EPILOGUES["relu"])
    assert np.isnan(out[0, :, 4:7, 4:7]).all()
    assert np.isposinf(out[0, :, 8:11, 1:4]).all()
    assert (out[0, :, 0, 8] == 0).all()


def test_backend_takes_the_few_output_kernel_for_nhwc_only(monkeypatch):
    be = NumpyBackend()
    rng = np.random.default_rng(6)
    wt = rng.standard_normal((3, 64, 3, 3)).astype(np.float32)
    calls = []
    real = cpu.few_outputs.conv_few_outputs_plan
    monkeypatch.setattr(cpu.few_outputs, "conv_few_outputs_plan", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    x = _tensors(rng, 1, 64, 30, 30, nhwc=True)
    out, cache = _out(1, 3, 30, 30, nhwc=True), {}
    assert be.kernel("conv2d")(x, wt, None, out, (1, 1), (1, 1), (1, 1), 1, "relu", {}, cache)
    assert calls == [1] and cache["few_outputs"][0] is wt
    assert _rel(out, _ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1), "relu")) < 1e-5
    # NCHW memory keeps Winograd; five outputs and too few input channels keep their paths too
    assert be.kernel("conv2d")(np.ascontiguousarray(x), wt, None, _out(1, 3, 30, 30, nhwc=False), (1, 1), (1, 1),
                               (1, 1), 1, None, {})
    five = rng.standard_normal((5, 64, 3, 3)).astype(np.float32)
    assert be.kernel("conv2d")(x, five, None, _out(1, 5, 30, 30, nhwc=True), (1, 1), (1, 1), (1, 1), 1, None, {})
    thin = _tensors(rng, 1, 3, 30, 30, nhwc=True)
    assert be.kernel("conv2d")(thin, wt[:, :3], None, _out(1, 3, 30, 30, nhwc=True), (1, 1), (1, 1), (1, 1), 1, None,
                               {})
    assert calls == [1]


def test_relu_keeps_nan_in_both_kernels():
    x = np.zeros((1, 16, 12, 12), np.float32)
    x[0, 3, 5, 5] = np.nan
    wt = np.ones((4, 16, 3, 3), np.float32)
    out = _out(1, 4, 12, 12, nhwc=False)
    cpu.winograd.winograd_conv3x3(x, cpu.winograd.transform_weights(wt, False), None, out, (1, 1), EPILOGUES["relu"])
    assert np.isnan(out[0, :, 5, 5]).all()
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    outh = _out(1, 4, 12, 12, nhwc=True)
    cpu.im2col.conv_nhwc(xh, cpu.im2col.gemm_weights(wt), (3, 3), None, outh, (1, 1), (1, 1), (1, 1), EPILOGUES["relu"])
    assert np.isnan(outh[0, :, 5, 5]).all()
    assert not np.isnan(outh[0, :, 0, 0]).any()


@pytest.mark.parametrize("nhwc", [False, True])
@pytest.mark.parametrize("method", ["nearest", "bilinear"])
@pytest.mark.parametrize("factor", [(2, 2), (3, 1), (1, 4)])
def test_upsample_matches_the_generic_resampling(nhwc, method, factor):
    rng = np.random.default_rng(3)
    shape = (2, 7, 9, 5) if nhwc else (2, 5, 7, 9)
    x = rng.standard_normal(shape).astype(np.float32)
    h, w = (shape[1], shape[2]) if nhwc else (shape[2], shape[3])
    ho, wo = h * factor[0], w * factor[1]
    out = np.empty((2, ho, wo, 5) if nhwc else (2, 5, ho, wo), np.float32)
    cpu.upsample.upsample(x, out, factor, method == "bilinear", nhwc)
    taps = (upsample_taps(np, h, ho, factor[0], method, np.float32), upsample_taps(np, w, wo, factor[1], method, np.float32))
    ref = resample(np, x, *taps, (1, 2) if nhwc else (2, 3))
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def test_backend_picks_a_kernel_or_declines():
    be = NumpyBackend()
    rng = np.random.default_rng(4)
    x = _tensors(rng, 1, 32, 40, 40, nhwc=False)
    wt = rng.standard_normal((16, 32, 3, 3)).astype(np.float32)
    out = _out(1, 16, 40, 40, nhwc=False)
    cache: dict = {}
    assert be.kernel("conv2d")(x, wt, None, out, (1, 1), (1, 1), (1, 1), 1, "relu", {}, cache)
    assert "winograd4_nchw" in cache and cache["winograd4_nchw"][0] is wt
    assert _rel(out, _ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1), "relu")) < 1e-5
    # NCHW with no Winograd case: the generic path
    assert not be.kernel("conv2d")(x, wt[:, :, :1, :1], None, out, (1, 1), (0, 0), (1, 1), 1, None, {})
    # every fused epilogue (engine.epilogues) is the kernels' own: sigmoid too
    assert be.kernel("conv2d")(x, wt, None, out, (1, 1), (1, 1), (1, 1), 1, "sigmoid", {})
    assert _rel(out, 1 / (1 + np.exp(-_ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1))))) < 1e-5
    # grouped convolutions and fp16: declined
    assert not be.kernel("conv2d")(x, wt[:, :16], None, out, (1, 1), (1, 1), (1, 1), 2, None, {})
    conv = be.kernel("conv2d")
    assert not conv(x.astype(np.float16), wt.astype(np.float16), None, out.astype(np.float16), (1, 1), (1, 1), (1, 1),
                    1, None, {})


def test_new_weights_replace_the_cached_transform():
    be = NumpyBackend()
    rng = np.random.default_rng(5)
    x = _tensors(rng, 1, 16, 24, 24, nhwc=True)
    cache: dict = {}
    for _ in range(2):
        wt = rng.standard_normal((8, 16, 3, 3)).astype(np.float32)
        out = _out(1, 8, 24, 24, nhwc=True)
        assert be.kernel("conv2d")(x, wt, None, out, (1, 1), (1, 1), (1, 1), 1, None, {}, cache)
        assert _rel(out, _ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1))) < 1e-5


def test_kernels_can_be_switched_off_or_missing(monkeypatch):
    assert cpu_kernels() is cpu.runtime
    be = NumpyBackend()
    made = be.kernel("upsample")  # made while the kernels are in use
    x = np.ones((1, 16, 20, 20), np.float32)
    monkeypatch.setenv("LAYERLAB_CPU_KERNELS", "off")
    assert cpu_kernels() is None
    assert be.kernel("conv2d") is None  # the plain NumPy path
    assert made(x, np.empty((1, 16, 40, 40), np.float32), (2, 2), True, False) is None  # switched off at once
    monkeypatch.delenv("LAYERLAB_CPU_KERNELS")
    monkeypatch.setitem(sys.modules, "engine.backends.cpu.runtime", None)  # as if Numba could not be imported
    assert cpu_backend.cpu_kernels() is None
    assert NumpyBackend().kernel("conv2d") is None and NumpyBackend().kernel("upsample") is None
    with pytest.raises(ValueError, match="unknown kernel operation"):
        NumpyBackend().kernel("conv3d")


@pytest.mark.parametrize("net", ["dncnn", "unet", "resnet18"])
@pytest.mark.parametrize("fmt", ["fp32 nchw", "fp32 nhwc"])
def test_reference_networks_agree_with_and_without_kernels(monkeypatch, net, fmt):
    from engine.network import Network
    from engine.plugins import default_registry
    from engine.tensor import Dims, TensorFormat
    from tests.bench.networks import NETWORKS

    dims = Dims(1, 3, 64, 64)
    reg = default_registry()
    x = np.random.default_rng(6).random((1, 3, 64, 64), np.float32)
    outs = []
    for mode in ("on", "off"):
        monkeypatch.setenv("LAYERLAB_CPU_KERNELS", mode)
        network = Network(NETWORKS[net](dims), reg, NumpyBackend(), TensorFormat.parse(fmt))
        network.set_input("input", x)
        network.run()
        outs.append(np.asarray(network.output("output"), np.float64))
    assert _rel(outs[0], outs[1]) < 1e-5


@pytest.mark.parametrize("cores", [2, 3, 4])
@pytest.mark.parametrize("k,kernel,stride", [(40, (3, 3), (1, 1)), (100, (1, 1), (2, 2)), (512, (3, 3), (2, 2)),
                                             (64, (1, 1), (1, 1))])
def test_small_layers_split_by_output_channels_match(monkeypatch, cores, k, kernel, stride):
    """One block of pixels (a 7x7 image) is cut by output channels over the cores instead."""
    monkeypatch.setattr(cpu.runtime, "cores", lambda: cores)
    rng = np.random.default_rng(5)
    c = 24
    x = _tensors(rng, 1, c, 7, 7, nhwc=True)
    wt = (rng.standard_normal((k, c, *kernel)) / np.sqrt(c * kernel[0] * kernel[1])).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32)
    pad = (kernel[0] // 2, kernel[1] // 2)
    ref = _ref_conv(x, wt, b, stride, pad, (1, 1), "leaky_relu", 0.2)
    out = _out(1, k, *ref.shape[2:], nhwc=True)
    parts = cpu.im2col.share_columns(k)
    assert 1 < len(parts) <= cores and all((s.stop - s.start) % 16 == 0 for s in parts[:-1])
    assert parts[0].start == 0 and parts[-1].stop == k and all(a.stop == b.start for a, b in zip(parts, parts[1:]))
    cpu.im2col.conv_nhwc(x, cpu.im2col.gemm_weights(wt), kernel, b, out, stride, pad, (1, 1), EPILOGUES["leaky_relu"], 0.2)
    assert _rel(out, ref) < 1e-5


@pytest.mark.parametrize("form,nhwc", FORM_LAYOUTS, ids=FORM_IDS)
@pytest.mark.parametrize("cores", [1, 2])
def test_winograd_of_one_block_matches_on_one_or_more_threads(monkeypatch, nhwc, cores, form):
    """A 7x7 image is one block: on one thread it runs as such, on more each of its three steps (transforms by
    tile rows, the 36 or 16 products) is shared out over the threads instead; with a residual added."""
    monkeypatch.setattr(cpu.runtime, "cores", lambda: cores)
    rng = np.random.default_rng(6)
    x = _tensors(rng, 1, 32, 7, 7, nhwc)
    wt = (rng.standard_normal((64, 32, 3, 3)) / np.sqrt(9 * 32)).astype(np.float32)  # whole panels of 16 or 32
    b = rng.standard_normal(64).astype(np.float32)
    out = _out(1, 64, 7, 7, nhwc)
    r = _tensors(rng, 1, 64, 7, 7, nhwc)
    cpu.winograd.winograd_conv3x3(x, _winograd_form(form, wt, nhwc), b, out, (1, 1), EPILOGUES["relu"], residual=r)
    ref = np.maximum(_ref_conv(x, wt, b, (1, 1), (1, 1), (1, 1), None) + r, 0)
    assert _rel(out, ref) < 1e-5


def test_panel_and_small_image_winograd_weights_refuse_nchw_tensors():
    rng = np.random.default_rng(7)
    x = _tensors(rng, 1, 16, 8, 8, nhwc=False)
    wt = rng.standard_normal((64, 16, 3, 3)).astype(np.float32)
    transform = cpu.winograd.transform_weights
    for u in (transform(wt, True, 2), cpu.winograd.winograd_panels(transform(wt, True))):
        with pytest.raises(ValueError, match="NHWC"):
            cpu.winograd.winograd_conv3x3(x, u, None, _out(1, 64, 8, 8, nhwc=False), (1, 1))


@pytest.mark.parametrize("size,key", [(14, "winograd2"), (28, "winograd4")])
@pytest.mark.parametrize("k", [40, 64])
def test_backend_takes_f2_winograd_for_small_nhwc_images(monkeypatch, size, key, k):
    """A 14x14 image (16 tiles of F(4x4)) runs F(2x2, 3x3), a 28x28 one F(4x4); products on the micro-kernel
    where there is one and the outputs fill its panels (64), by OpenBLAS otherwise (40). Where the micro-kernel
    goes before Winograd (AVX-512) a 14x14 image with whole panels takes it instead. (Without the large panels:
    AVX-512's take these 32-input layers before Winograd, the test below.)"""
    monkeypatch.setattr(cpu.panels, "LARGE_PANELS", False)
    be = NumpyBackend()
    rng = np.random.default_rng(9)
    x = _tensors(rng, 1, 32, size, size, nhwc=True)
    wt = rng.standard_normal((k, 32, 3, 3)).astype(np.float32)
    out = _out(1, k, size, size, nhwc=True)
    cache: dict = {}
    assert be.kernel("conv2d")(x, wt, None, out, (1, 1), (1, 1), (1, 1), 1, "relu", {}, cache)
    panels = cpu.microkernel.panels_available() and k % cpu.microkernel.PANEL == 0
    if panels and size == 14 and not cpu.ops.WINOGRAD_BEFORE_PANELS:
        assert "gemm_panels" in cache
    else:
        expected = f"{key}_panels" if panels else f"{key}_nhwc"
        assert expected in cache and cache[expected][1].shape[0] == (16 if key == "winograd2" else 36)
    assert _rel(out, _ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1), "relu")) < 1e-5


def test_the_kernels_call_the_blas_numpy_uses():
    sgemm = cpu.runtime.blas_sgemm()
    assert sgemm is not None, "NumPy's BLAS exports no 64-bit cblas_sgemm: every fast convolution is off"
    rng = np.random.default_rng(8)
    x = _tensors(rng, 1, 8, 9, 9, nhwc=True)
    wt = rng.standard_normal((16, 8, 1, 1)).astype(np.float32)
    out = _out(1, 16, 9, 9, nhwc=True)
    cpu.im2col.conv_nhwc(x, cpu.im2col.gemm_weights(wt), (1, 1), None, out, (1, 1), (0, 0), (1, 1))  # a bare product
    assert _rel(out, _ref_conv(x, wt, None, (1, 1), (0, 0), (1, 1))) < 1e-6


def test_an_output_that_is_not_contiguous_nhwc_takes_the_generic_convolution():
    rng = np.random.default_rng(13)
    x = _tensors(rng, 1, 8, 9, 9, nhwc=True)
    wt = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    wide = np.zeros((1, 9, 9, 32), np.float32)  # e.g. a slice of a wider tensor
    out = wide[:, :, :, :16].transpose(0, 3, 1, 2)
    assert not NumpyBackend().kernel("conv2d")(x, wt, None, out, (2, 2), (1, 1), (1, 1), 1, None, {})


def test_without_a_cblas_the_backend_uses_the_generic_convolution(monkeypatch):
    monkeypatch.setattr(cpu.runtime, "blas_sgemm", lambda: None)
    rng = np.random.default_rng(9)
    x = _tensors(rng, 1, 16, 12, 12, nhwc=True)
    wt = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    out = _out(1, 16, 12, 12, nhwc=True)
    assert not NumpyBackend().kernel("conv2d")(x, wt, None, out, (1, 1), (1, 1), (1, 1), 1, None, {})


def test_concurrent_inferences_from_two_threads_are_each_right():
    """Launches from two Python threads at once (the GUI's worker and a command, say) take turns."""
    import threading

    rng = np.random.default_rng(10)
    cases = []
    for seed in range(2):
        x = _tensors(np.random.default_rng(seed), 1, 32, 30, 30, nhwc=True)
        wt = (rng.standard_normal((32, 32, 3, 3)) / np.sqrt(9 * 32)).astype(np.float32)
        cases.append((x, wt, _ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1))))
    errors = []

    def work(x, wt, ref):
        u, wm = cpu.winograd.transform_weights(wt, True), cpu.im2col.gemm_weights(wt)
        for i in range(20):
            out = _out(1, 32, 30, 30, nhwc=True)
            if i % 2:
                cpu.winograd.winograd_conv3x3(x, u, None, out, (1, 1))
            else:
                cpu.im2col.conv_nhwc(x, wm, (3, 3), None, out, (1, 1), (1, 1), (1, 1))
            errors.append(_rel(out, ref))

    threads = [threading.Thread(target=work, args=case) for case in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 40 and max(errors) < 1e-5


@pytest.mark.parametrize("op", ["sum", "product", "max", "min", "sub"])
@pytest.mark.parametrize("act", [None, "relu", "leaky_relu"])
@pytest.mark.parametrize("size", [37, 3 * (1 << 16) + 5])
def test_element_wise_matches_numpy(op, act, size):
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((2, size)).astype(np.float32)
    a[3], b[5] = np.nan, np.nan
    ref = {"sum": a + b, "product": a * b, "max": np.maximum(a, b), "min": np.minimum(a, b), "sub": a - b}[op]
    if act == "relu":
        ref = np.where(ref > 0, ref, ref * 0)
    elif act == "leaky_relu":
        ref = np.where(ref > 0, ref, ref * np.float32(0.1))
    out = np.full(size, 7.0, np.float32)
    cpu.elementwise.element_wise(a, b, out, cpu.elementwise.ELEMENT_WISE_OPS[op], EPILOGUES[act], 0.1)
    np.testing.assert_array_equal(out, ref)  # NaN where NumPy has NaN
    b_kept = b.copy()
    cpu.elementwise.element_wise(a, b, b, cpu.elementwise.ELEMENT_WISE_OPS[op], EPILOGUES[act], 0.1)  # over input 1
    np.testing.assert_array_equal(b, ref)  # (a difference keeps its order)
    cpu.elementwise.element_wise(a, b_kept, a, cpu.elementwise.ELEMENT_WISE_OPS[op], EPILOGUES[act], 0.1)  # over 0
    np.testing.assert_array_equal(a, ref)


def test_backend_element_wise_declines_what_it_cannot_do():
    be = NumpyBackend()
    a = np.ones((1, 4, 4, 8), np.float32)
    assert be.kernel("element_wise")("sum", a, a, np.empty_like(a), "relu", {})
    assert be.kernel("element_wise")("sum", a, a, np.empty_like(a), "sigmoid", {})  # every epilogue is fused
    assert not be.kernel("element_wise")("sum", a, a, np.empty_like(a), "softmax", {})  # not an epilogue
    assert not be.kernel("element_wise")("sum", a, a[:, :, :, :1], np.empty_like(a), None, {})  # broadcasting
    assert not be.kernel("element_wise")("sum", a, a.astype(np.float16), np.empty_like(a), None, {})
    assert not be.kernel("element_wise")("sum", a, a.transpose(0, 3, 1, 2), np.empty_like(a).transpose(0, 3, 1, 2), None, {})


def test_blas_is_held_to_one_thread_during_an_inference_only():
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads():  # NumPy's BLAS, the one the kernels and the generic path call (SciPy may load its own)
        return [i["num_threads"] for i in threadpoolctl.threadpool_info()
                if i["user_api"] == "blas" and "numpy" in i["filepath"]]

    before = blas_threads()
    with NumpyBackend().running():
        assert set(blas_threads()) <= {1}
        with cpu.runtime.single_threaded_blas():  # nested: still held
            assert set(blas_threads()) <= {1}
        assert set(blas_threads()) <= {1}
    assert blas_threads() == before


@pytest.mark.parametrize("pool_type", ["max", "average"])
@pytest.mark.parametrize("kernel,stride,padding,include_pad", [((3, 3), (2, 2), (1, 1), False), ((2, 2), (2, 2), (0, 0), False),
                                                                ((3, 2), (1, 2), (1, 1), True), ((5, 5), (3, 3), (2, 2), False),
                                                                ((3, 3), (1, 1), (1, 1), False), ((3, 3), (1, 1), (0, 0), False),
                                                                ((3, 3), (2, 2), (0, 0), True), ((3, 3), (3, 2), (2, 1), False)])
def test_pool_nhwc_matches_the_generic_pooling(pool_type, kernel, stride, padding, include_pad):
    """(3x3 max poolings take their own kernel: windows inside the image nine cells at once, the border ones cell by
    cell; padding 2 makes windows with a single cell inside.)"""
    from plugins.standard._common_pool import pool2d

    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 37, 41, 24)).astype(np.float32)
    x[0, 5, 6, 3] = np.nan
    x[1, 10, 10, 5], x[1, 20, 20, :] = np.inf, -np.inf
    ref = pool2d(np, x, pool_type, kernel, stride, padding, include_pad, axes=(1, 2))
    out = np.full(ref.shape, -7.0, np.float32)
    cpu.pooling.pool_nhwc(x, out, pool_type == "max", kernel, stride, padding, include_pad)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)  # NaN where the reference has NaN
    assert np.isnan(out[0]).any() and not np.isnan(out[1]).any()


def test_backend_pools_nhwc_float32_only():
    pool = NumpyBackend().kernel("pool2d")
    x = np.zeros((1, 8, 8, 4), np.float32)
    assert pool(x, np.zeros((1, 4, 4, 4), np.float32), True, (2, 2), (2, 2), (0, 0), False, True)
    assert not pool(x, np.zeros((1, 4, 4, 4), np.float32), True, (2, 2), (2, 2), (0, 0), False, False)
    assert not pool(x.astype(np.float16), np.zeros((1, 4, 4, 4), np.float16), True, (2, 2), (2, 2), (0, 0), False, True)


def test_the_compile_notice_comes_only_when_numba_compiles():
    import io

    import numba

    from engine.backends import get_backend

    x, u, _, out_w, pad = _small_winograd()
    cpu.winograd.winograd_conv3x3(x, u, None, out_w, pad)  # compiled (or loaded from the disk cache) by now
    out = io.StringIO()
    get_backend("numpy", notice=out)
    cpu.winograd.winograd_conv3x3(x, u, None, out_w, pad)
    assert "compiling" not in out.getvalue()  # nothing compiled: nothing said

    @numba.njit
    def fresh(v):  # pragma: no cover - compiled
        return v + 1
    fresh(1)  # a real compile
    fresh(2.0)  # another one: said once
    assert out.getvalue().count("layerlab: compiling the CPU kernels") == 1


def _small_winograd():
    rng = np.random.default_rng(12)
    x = _tensors(rng, 1, 16, 12, 12, nhwc=True)
    wt = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    return x, cpu.winograd.transform_weights(wt, True), None, _out(1, 16, 12, 12, nhwc=True), (1, 1)


@pytest.mark.parametrize("kernel,stride", [((3, 3), (1, 1)), ((3, 3), (2, 2)), ((1, 1), (1, 1))])
def test_fp16_convolutions_run_the_float32_kernels_and_round_once(kernel, stride):
    """The CPU's fp16 format stores float16 and computes in float32 (weights float32): the backend converts
    the input, runs the kernels and rounds the output once: the float32 result rounded to float16."""
    rng = np.random.default_rng(14)
    x = _tensors(rng, 1, 32, 20, 20, nhwc=True)
    wt = (rng.standard_normal((32, 32, *kernel)) / np.sqrt(32 * kernel[0] * kernel[1])).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    pad = (kernel[0] // 2, kernel[1] // 2)
    ref = _ref_conv(x.astype(np.float16), wt, b, stride, pad, (1, 1), "relu")
    out = np.full((1, *ref.shape[2:], 32), np.nan, np.float16).transpose(0, 3, 1, 2)
    assert NumpyBackend().kernel("conv2d")(x.astype(np.float16), wt, b, out, stride, pad, (1, 1), 1, "relu", {})
    assert out.dtype == np.float16 and np.isfinite(out).all()
    np.testing.assert_allclose(out, ref.astype(np.float16), rtol=2e-3, atol=2e-3)


def test_kernels_avoid_an_openmp_runtime_started_before_them():
    """With PyTorch imported first, its OpenMP runtime (started with the default spin count) would run Numba's
    parallel kernels with threads spinning against BLAS: the kernels take Numba's work-queue threads instead, and
    still compute the same convolution."""
    import subprocess

    pytest.importorskip("torch")
    code = (
        "import torch, numpy as np, numba\n"
        "from engine.network import Network\n"
        "from engine.plugins import default_registry\n"
        "from engine.backends import get_backend\n"
        "from engine.model import Model\n"
        "from engine.tensor import TensorFormat\n"
        "m = Model('m'); m.add_layer('input', 'inp', params={'dimensions': '1x8x16x16'})\n"
        "m.add_layer('convolution', 'c', params={'num_output_channels': '8'}, inputs=['inp'])\n"
        "m.add_layer('output', 'out', inputs=['c'])\n"
        "net = Network(m, default_registry(), get_backend('numpy', notice=None), TensorFormat.parse('fp32 nhwc'))\n"
        "y = net.infer({'inp': np.ones((1, 8, 16, 16), np.float32)})['out']\n"
        "print(numba.threading_layer(), float(np.abs(y).sum()) > 0)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_THREADING_LAYER", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                         cwd=str(Path(__file__).resolve().parents[2]))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["workqueue", "True"], out.stdout



def test_a_private_openmp_copy_loaded_first_keeps_the_openmp_threads():
    """igraph (the importer's layout) loads its own renamed copy of GNU OpenMP, a runtime Numba's layer does not
    share: the kernels keep the threading layer they take without it (`layerlab infer model.onnx` had run on the
    slower work-queue threads)."""
    import subprocess

    pytest.importorskip("igraph")
    code = ("{}import numpy as np, numba\n"
            "import engine.backends.cpu.runtime as rt\n"
            "from engine.backends.cpu.elementwise import element_wise\n"
            "a = np.ones(1 << 20, np.float32); element_wise(a, a, a, 0)\n"
            "print(numba.threading_layer(), float(a[0]))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_THREADING_LAYER", "OMP_WAIT_POLICY")}
    layers = []
    for first in ("", "import igraph\n"):
        out = subprocess.run([sys.executable, "-c", code.format(first)], capture_output=True, text=True, timeout=300,
                             env=env, cwd=str(Path(__file__).resolve().parents[2]))
        assert out.returncode == 0, out.stderr[-2000:]
        layers.append(out.stdout.split())
    assert layers[0] == layers[1] and layers[0][1] == "2.0", layers

# ---- prepared calls (the per-layer Python work done once) and the residual epilogues --------------------------

@pytest.mark.parametrize("form,nhwc", FORM_LAYOUTS, ids=FORM_IDS)
@pytest.mark.parametrize("size", [7, 20], ids=["one-block", "blocks"])
def test_winograd_writes_its_output_over_its_residual(nhwc, form, size):
    """The output may be the residual's own array (a residual sum written over its residual's buffer): each output
    value is computed from the residual's value at its place before it is written."""
    rng = np.random.default_rng(size)
    x = _tensors(rng, 1, 32, size, size, nhwc)
    wt = (rng.standard_normal((64, 32, 3, 3)) / np.sqrt(9 * 32)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    r = _tensors(rng, 1, 64, size, size, nhwc)
    ref = np.maximum(_ref_conv(x, wt, b, (1, 1), (1, 1), (1, 1), None) + r, 0)
    cpu.winograd.winograd_conv3x3(x, _winograd_form(form, wt, nhwc), b, r, (1, 1), EPILOGUES["relu"], residual=r)
    assert _rel(r, ref) < 1e-5


@pytest.mark.parametrize("candidate,size,c,kernel,stride,pad", [
    ("panels", 7, 16, 3, 1, 1), ("panels", 16, 16, 1, 1, 0), ("panels", 17, 8, 1, 1, 1), ("panels", 40, 24, 5, 2, 2),
    ("panels", 56, 64, 1, 1, 0), ("winograd_f4x4", 20, 16, 3, 1, 1), ("winograd_f2x2", 14, 16, 3, 1, 1),
    ("im2col", 20, 16, 3, 2, 1), ("im2col", 12, 16, 1, 2, 0)],
    ids=["panels-small", "panels-strip", "panels-padded-1x1", "panels-large-rows", "panels-large-strip",
         "winograd-f4", "winograd-f2", "im2col", "im2col-1x1-s2"])
def test_a_convolution_with_its_residual_writes_over_the_residual(monkeypatch, candidate, size, c, kernel, stride, pad):
    """Every convolution candidate that takes a residual computes act(conv(x) + b + r) into r itself (the memory
    plan gives a residual sum its residual's buffer where it reads it last), as into an array of its own."""
    monkeypatch.setattr(cpu.microkernel, "panels_available", lambda: True)
    monkeypatch.setattr(cpu.ops, "CONV2D_CANDIDATES", [row for row in cpu.ops.CONV2D_CANDIDATES if row.name == candidate])
    if candidate != "panels":
        monkeypatch.setattr(cpu.ops, "_panels_applies", lambda p: False)
    be = NumpyBackend()
    conv = be.kernel("conv2d_sum")
    rng = np.random.default_rng(size + 3 * kernel + stride)
    wt = (rng.standard_normal((32, c, kernel, kernel)) / np.sqrt(kernel * kernel * c)).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    ho = (size + 2 * pad - kernel) // stride + 1
    x = _tensors(rng, 1, c, size, size, nhwc=True)
    r = _tensors(rng, 1, 32, ho, ho, nhwc=True)
    ref = np.maximum(_ref_conv(x, wt, b, (stride, stride), (pad, pad), (1, 1)) + r, 0)
    own = _out(1, 32, ho, ho, nhwc=True)
    apart = conv(x, wt, b, r, own, (stride, stride), (pad, pad), (1, 1), 1, "relu", {}, {})
    over = conv(x, wt, b, r, r, (stride, stride), (pad, pad), (1, 1), 1, "relu", {}, {})
    assert apart and over and over.candidate == apart.candidate == candidate
    assert _rel(own, ref) < 1e-5
    assert _rel(r, ref) < 1e-5


@pytest.mark.parametrize("size,kernel,stride", [(7, 3, 1), (20, 3, 1), (20, 3, 2), (16, 1, 1), (12, 1, 2)],
                         ids=["panels", "winograd", "im2col", "direct", "im2col-1x1-s2"])
@pytest.mark.parametrize("residual", [False, True])
def test_a_prepared_call_replays_on_new_data_and_is_remade_for_other_arrays(monkeypatch, size, kernel, stride,
                                                                             residual):
    """The conv2d kernel keeps the call it prepared while the same arrays come back (a network's buffers): the second
    call makes no plan and computes the new input's result; other arrays (or weights) get a new plan."""
    be = NumpyBackend()
    conv = be.kernel("conv2d_sum" if residual else "conv2d")
    rng = np.random.default_rng(size + stride)
    plans = []
    for module, name in ((cpu.panels, "conv_panels_plan"), (cpu.winograd, "winograd_plan"),
                         (cpu.im2col, "conv_nhwc_plan")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, **kw: plans.append(1) or _real(*a, **kw))
    monkeypatch.setattr(cpu.microkernel, "panels_available", lambda: True)
    wt = rng.standard_normal((32, 16, kernel, kernel)).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    pad = kernel // 2
    ho = (size + 2 * pad - kernel) // stride + 1
    x = _tensors(rng, 1, 16, size, size, nhwc=True)
    out, cache = _out(1, 32, ho, ho, nhwc=True), {}
    r = _tensors(rng, 1, 32, ho, ho, nhwc=True) if residual else None

    def call(xv, ov, w=wt):
        args = (xv, w, b) + ((r,) if residual else ()) + (ov, (stride, stride), (pad, pad), (1, 1), 1, "relu", {}, cache)
        assert conv(*args)

    def ref(xv, w=wt):
        y = _ref_conv(xv, w, b, (stride, stride), (pad, pad), (1, 1))
        return np.maximum(y + (r if residual else 0), 0)

    for step in range(3):
        x[...] = rng.standard_normal(x.shape)  # the same array, new values
        call(x, out)
        assert _rel(out, ref(x)) < 1e-5, step
    assert len(plans) == 1
    other = _out(1, 32, ho, ho, nhwc=True)
    call(x, other)
    assert len(plans) == 2 and _rel(other, ref(x)) < 1e-5
    w2 = wt * 2
    call(x, other, w2)
    assert len(plans) == 3 and _rel(other, ref(x, w2)) < 1e-5


def test_a_prepared_launch_cuts_its_work_again_only_when_the_thread_count_changes(monkeypatch):
    """A launch prepared on fixed arrays (``runtime.Launch``) computes the right result for any thread count, and
    works out its thread-dependent arguments again only when that count changes; inside a network's run
    (``single_threaded_blas``) the count is the one the run began with."""
    from engine.backends.cpu import elementwise
    from engine.backends.cpu import runtime as rt

    size = elementwise.ELEMENT_WISE_SPLIT_MIN * 2 + 5  # large enough to be cut over the threads
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(size).astype(np.float32), rng.standard_normal(size).astype(np.float32)
    out = np.zeros(size, np.float32)
    count = [2]
    monkeypatch.setattr(rt, "threads", lambda: count[0])
    launch = elementwise.element_wise_plan(a, b, out, elementwise.ELEMENT_WISE_OPS["sub"])
    assert isinstance(launch, rt.Launch)
    cuts: list[int] = []
    real = launch.per_threads
    launch.per_threads = lambda t: cuts.append(t) or real(t)
    for threads in (2, 2, 1, 1, 2):
        count[0] = threads
        out[...] = 0
        launch()
        np.testing.assert_array_equal(out, a - b)
    assert cuts == [2, 1, 2]
    count[0] = 1
    with rt.single_threaded_blas():  # inside a network's run: no BLAS context, the thread count the run began with
        count[0] = 2  # asked again at the next run only
        out[...] = 0
        launch()
    np.testing.assert_array_equal(out, a - b)
    assert cuts == [2, 1, 2, 1]


def test_a_prepared_padded_call_reads_each_new_input():
    """A padded layer's plan reads its input at every call (in place, or copied inside a zero border): a new input
    gives its own output."""
    rng = np.random.default_rng(2)
    x = _tensors(rng, 1, 16, 7, 7, nhwc=True)
    wt = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    out = _out(1, 32, 7, 7, nhwc=True)
    run = cpu.panels.conv_panels_plan(x, cpu.panels.panel_weights(wt), (3, 3), None, out, (1, 1), (1, 1), (1, 1), 0)
    for _ in range(2):
        x[...] = rng.standard_normal(x.shape) * 1e3
        run()
        assert _rel(out, _ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1))) < 1e-5


@pytest.mark.parametrize("n,c,k,hw,kernel,stride,pad,act,residual", [
    (1, 3, 16, (29, 31), 3, 2, 1, "hardswish", False),  # an RGB stem of one vector of outputs, bottom rows padded
    (2, 3, 40, (22, 17), 7, 2, 3, "relu", False),  # a 7x7 stem, images of their own, a part-filled last panel
    (1, 24, 72, (20, 20), 5, 2, 2, None, True),  # 5x5 stride 2 with a residual (large: blocks of rows)
    (1, 40, 48, (9, 7), 3, 1, 1, "relu", False),  # a small image: most tiles cross an edge
    (1, 16, 24, (6, 6), 3, 1, 2, None, False),  # padding wider than the window's reach: whole rows of zeros
    (1, 8, 32, (17, 19), 1, 1, 1, None, True),  # a padded 1x1 layer: its border pixels are the bias (+ residual)
])
@pytest.mark.parametrize("in_place", [True, False])
def test_panels_on_a_padded_layer_match_the_reference(monkeypatch, n, c, k, hw, kernel, stride, pad, act, residual,
                                                      in_place):
    """A padded layer's windows read in place, a tile with a window over the image's edge from a copy of its windows
    with zeros outside (``in_place``), or from a copy of the whole input inside a zero border made by the launch's
    threads at each call: every geometry of edges matches the reference both ways, and a second call sees the
    input's new values."""
    monkeypatch.setattr(cpu.panels, "edge_values", lambda *a: 0 if in_place else 1 << 40)
    rng = np.random.default_rng(kernel * 7 + c)
    h, w = hw
    x = _tensors(rng, n, c, h, w, nhwc=True)
    wt = rng.standard_normal((k, c, kernel, kernel)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32)
    ho, wo = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
    res = _tensors(rng, n, k, ho, wo, nhwc=True) if residual else None
    out = _out(n, k, ho, wo, nhwc=True)
    code = {None: 0, "relu": EPILOGUES["relu"], "hardswish": EPILOGUES["hardswish"]}[act]
    run = cpu.panels.conv_panels_plan(x, cpu.panels.panel_weights(wt), (kernel, kernel), b, out, (stride, stride),
                                      (pad, pad), (1, 1), code, 0.0, res)
    assert isinstance(run, cpu.runtime.Launch)  # one prepared launch, replayable
    copied, read = run.args[:2]
    assert copied.shape == ((0,) if in_place else (n,)) + (h, w, c)
    assert read.shape == (n, h, w, c) if in_place else (n, h + 2 * pad, w + 2 * pad, c)
    out[...] = np.nan
    run()
    x[...] = rng.standard_normal(x.shape).astype(np.float32)  # the same memory, new values: the next call's
    run()
    ref = conv2d(np, x.astype(np.float64), wt.astype(np.float64), b.astype(np.float64), (stride, stride), (pad, pad),
                 (1, 1), 1)
    if residual:
        ref = ref + res
    if act == "relu":
        ref = np.maximum(ref, 0)
    elif act == "hardswish":
        ref = ref * np.clip(ref / 6 + 0.5, 0, 1)
    assert not np.isnan(out).any()
    assert _rel(out, ref) < 1e-5


@pytest.mark.parametrize("in_place", [True, False])
def test_panels_on_a_strided_input_match_the_reference(monkeypatch, in_place):
    """An input whose NHWC memory is not one block (the first channels of a wider tensor), padded: read in place from
    a contiguous copy, or copied once inside the zero border; a second call sees the input's new values."""
    monkeypatch.setattr(cpu.panels, "edge_values", lambda *a: 0 if in_place else 1 << 40)
    rng = np.random.default_rng(4)
    wide = _tensors(rng, 1, 48, 15, 13, nhwc=True)
    x = wide[:, :24]
    assert not x.transpose(0, 2, 3, 1).flags.c_contiguous
    wt = rng.standard_normal((32, 24, 3, 3)).astype(np.float32)
    out = _out(1, 32, 15, 13, nhwc=True)
    run = cpu.panels.conv_panels_plan(x, cpu.panels.panel_weights(wt), (3, 3), None, out, (1, 1), (1, 1), (1, 1), 0)
    for _ in range(2):
        run()
        assert _rel(out, _ref_conv(x, wt, None, (1, 1), (1, 1), (1, 1))) < 1e-5
        wide[...] = rng.standard_normal(wide.shape).astype(np.float32)


def test_padded_layers_are_read_in_place_where_few_windows_cross_the_edge():
    """The windows copied per panel: the top and bottom rows whole, a tile at each end of the other rows; an RGB stem
    (27-value windows, one panel) is read in place, a 3x3 layer of 512 channels on a 7x7 image (every tile over an
    edge, sixteen panels) copies its input inside a zero border instead."""
    panels = cpu.panels
    rows = panels.PANEL_ROWS
    assert panels.edge_values(4, 20, 20, 20, 20, (3, 3), (1, 1), (1, 1)) == (2 * 20 + 18 * min(20, 2 * rows)) * 36
    assert panels.edge_values(4, 20, 20, 18, 18, (3, 3), (1, 1), (0, 0)) == 0
    assert panels.edge_values(3, 224, 224, 112, 112, (3, 3), (2, 2), (1, 1)) == (112 + 111 * rows) * 27  # left only

    def plan(c, k, size, stride):
        x = np.zeros((1, size, size, c), np.float32).transpose(0, 3, 1, 2)
        out = _out(1, k, -(-size // stride), -(-size // stride), nhwc=True)
        wt = np.zeros((k, c, 3, 3), np.float32)
        return panels.conv_panels_plan(x, panels.panel_weights(wt), (3, 3), None, out, (stride, stride), (1, 1),
                                       (1, 1), 0)
    stem, deep = plan(3, 16, 224, 2), plan(512, 512, 7, 1)
    assert stem.args[0].shape[0] == 0 and stem.args[1].shape == (1, 224, 224, 3)  # nothing copied: read in place
    assert deep.args[0].shape == (1, 7, 7, 512) and deep.args[1].shape == (1, 9, 9, 512)  # copied inside a border


def _activated(ref: np.ndarray, act: str | None) -> np.ndarray:
    """``ref`` through ``act`` as the product kernels' tests apply it (leaky ReLU 0.1, clamp to 0..6)."""
    if act == "relu":
        return np.maximum(ref, 0)
    if act == "leaky_relu":
        return np.where(ref > 0, ref, 0.1 * ref)
    if act == "clamp":
        return np.clip(ref, 0.0, 6.0)
    if act == "gelu":
        from scipy.special import erf
        return ref * 0.5 * (1 + erf(ref / np.sqrt(2)))
    return ref


@pytest.mark.parametrize("kernel,rows,k,o", [("dense", 1, 512, 1000), ("dense", 3, 100, 7), ("dense", 8, 2048, 64),
                                             ("dense", 2, 240, 963), ("dense", 1, 15, 5), ("dense", 5, 17, 1),
                                             ("linear", 3136, 96, 384), ("linear", 49, 768, 3072),
                                             ("linear", 5, 1024, 512)])
@pytest.mark.parametrize("act", [None, "relu", "leaky_relu", "clamp", "gelu"])
def test_product_kernels_match_the_matrix_product(kernel, rows, k, o, act):
    """dense (weights O x K, a few items: four outputs' dot products at a time, K's last part vector under a mask)
    and linear (weights K x O, the rows shared out over the cores): act(x @ w + b); a NaN spoils its own item or row
    only."""
    rng = np.random.default_rng(rows + o)
    x, w = rng.standard_normal((rows, k)).astype(np.float32), rng.standard_normal((k, o)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    y = np.full((rows, o), np.nan, np.float32)
    weights = np.ascontiguousarray(w.T) if kernel == "dense" else w
    alpha = 0.1 if act == "leaky_relu" else (0.0, 6.0)
    with cpu.runtime.single_threaded_blas():
        getattr(cpu.dense, kernel)(x, weights, b, y, EPILOGUES[act], alpha)
    assert _rel(y, _activated(x.astype(np.float64) @ w.astype(np.float64) + b, act)) < 1e-5
    x[rows // 2, 3] = np.nan
    getattr(cpu.dense, kernel)(x, weights, None, y, 0)
    assert np.isnan(y[rows // 2]).all() and np.isfinite(np.delete(y, rows // 2, axis=0)).all()


@pytest.mark.parametrize("rows,k,o", [(3136, 96, 384), (49, 768, 3072), (1001, 40, 72), (4001, 24, 20)])
@pytest.mark.parametrize("act", [None, "relu", "clamp", "hardswish", "silu", "gelu", "sigmoid"])
def test_the_linear_operation_packs_its_weights_once_and_matches_the_product(rows, k, o, act):
    """With a cache, the backend's ``linear`` runs over weights packed once in panels where the micro-kernel applies
    the activation (any row and output count: tiles and panels part-filled), else the rows shared out over OpenBLAS;
    the same arrays again replay the prepared call on their new values; the packed weights are kept while the weights
    are the same array, packed again for a new one; a NaN spoils its own row only."""
    kernel = NumpyBackend().kernel("linear")
    rng = np.random.default_rng(rows + o)
    x, w = rng.standard_normal((rows, k)).astype(np.float32), rng.standard_normal((k, o)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    coefs = {"min": 0.0, "max": 6.0} if act == "clamp" else {}
    cache: dict = {}
    y = np.full((rows, o), np.nan, np.float32)
    with cpu.runtime.single_threaded_blas():
        done = kernel(x, w, b, y, act, coefs, cache)
    panels = cpu.microkernel.panels_available() and EPILOGUES[act] in cpu.microkernel.MICROKERNEL_EPILOGUES
    assert done is not None and done.candidate == ("linear_panels" if panels else "linear")
    ref = x.astype(np.float64) @ w.astype(np.float64) + b
    sigmoid = 1 / (1 + np.exp(-ref))
    expected = {"hardswish": ref * np.clip(ref / 6 + 0.5, 0, 1), "silu": ref * sigmoid, "sigmoid": sigmoid}.get(
        act, _activated(ref, act))
    assert _rel(y, expected) < 1e-5
    if panels:
        packed = cache["linear_panels"][1]
        x[...] = rng.standard_normal(x.shape)  # the same arrays, new values: the prepared call again
        assert kernel(x, w, b, y, act, coefs, cache) is done
        assert cache["linear_panels"][1] is packed  # the same weights: packed once
        ref = x.astype(np.float64) @ w.astype(np.float64) + b
        sigmoid = 1 / (1 + np.exp(-ref))
        assert _rel(y, {"hardswish": ref * np.clip(ref / 6 + 0.5, 0, 1), "silu": ref * sigmoid}.get(
            act, _activated(ref, act))) < 1e-5
        w2 = -w
        kernel(x, w2, None, y, None, {}, cache)
        assert cache["linear_panels"][1] is not packed  # a new weights array: packed again
        assert _rel(y, x.astype(np.float64) @ w2.astype(np.float64)) < 1e-5
    x[rows // 2, 3] = np.nan
    kernel(x, w, None, y, None, {}, cache)
    assert np.isnan(y[rows // 2]).all() and np.isfinite(np.delete(y, rows // 2, axis=0)).all()


@pytest.mark.parametrize("layer,params,kernel,shapes,served", [
    # fully connected: the dense kernel for small batches; batch 9 is BLAS's blocked product
    ("fully_connected", {"num_outputs": "5"}, "dense", [(1, 6, 3, 2), (9, 6, 3, 2)], (1, 36)),
    # a matrix product with weights (a transformer's projection) of at least LINEAR_SPLIT_MIN multiply-adds: over
    # weights packed in panels where the CPU has the micro-kernel (the rows as a one-column image), else the rows
    # shared out, bias and activation fused; a small one stays one BLAS call
    ("matmul", {"num_outputs": "128", "bias": "true"}, "linear", [(1, 400, 96), (1, 3, 96)], (400, 96)),
])
def test_product_layers_on_the_cpu_take_their_kernel_where_it_pays(monkeypatch, layer, params, kernel, shapes, served):
    from engine.tensor import FORMATS
    from tests.harness import run_layer

    calls = []
    module, name = cpu.dense, f"{kernel}_plan" if kernel == "dense" else kernel
    if kernel == "linear" and cpu.microkernel.panels_available():
        module, name, served = cpu.panels, "conv_panels_plan", (1, served[1], served[0], 1)
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **kw: calls.append(a[0].shape) or real(*a, **kw))
    rng = np.random.default_rng(8)
    formats = [f for f in FORMATS if f.precision.name == "FP32"]
    for fmt in formats:
        for shape in shapes:
            x = rng.standard_normal(shape).astype(np.float32)
            out, w, _ = run_layer(layer, params, [x], fmt, activation="relu")
            weights = w["weights"].T if layer == "fully_connected" else w["weights"]
            rows = x.reshape(shape[0], -1) if layer == "fully_connected" else x
            ref = np.maximum(rows @ weights + w["bias"], 0)
            assert _rel(out.reshape(ref.shape), ref) < 1e-5, (fmt, shape)
    assert calls == [served] * len(formats)


def _layer_norm_ref(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * scale + bias


@pytest.mark.parametrize("rows,n", [(3136, 96), (49, 768), (3, 40)])
@pytest.mark.parametrize("act", [None, "gelu"])
def test_layer_norm_rows_match_the_reference(rows, n, act):
    rng = np.random.default_rng(rows + n)
    x = (rng.standard_normal((rows, n)) * 3 + 5).astype(np.float32)  # an offset: the variance's cancellation
    scale, bias = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    y = np.full_like(x, np.nan)
    cpu.pointwise.layer_norm_rows(x, scale, bias, y, 1e-5, EPILOGUES[act])
    assert _rel(y, _activated(_layer_norm_ref(x, scale, bias, 1e-5), act)) < 1e-5
    x[rows // 2, 1] = np.nan  # a NaN spoils its own row only
    cpu.pointwise.layer_norm_rows(x, scale, bias, x, 1e-5)  # in place
    assert np.isnan(x[rows // 2]).all() and np.isfinite(np.delete(x, rows // 2, axis=0)).all()


def test_layer_normalization_on_the_cpu_takes_the_row_kernel(monkeypatch):
    """The trailing form in every fp32 format, and the channels form (ConvNeXt's) where the channels are the rows of
    NHWC memory; the channels of NCHW memory stay on NumPy."""
    from engine.tensor import FORMATS
    from tests.harness import run_layer

    calls = []
    real = cpu.pointwise.layer_norm_rows
    monkeypatch.setattr(cpu.pointwise, "layer_norm_rows", lambda *a, **kw: calls.append(a[0].shape) or real(*a, **kw))
    rng = np.random.default_rng(4)
    served = []
    for fmt in (f for f in FORMATS if f.precision.name == "FP32"):
        for over, shape in (("trailing", (1, 50, 64)), ("channels", (1, 24, 6, 5))):
            x = rng.standard_normal(shape).astype(np.float32)
            out, w, _ = run_layer("layer_normalization", {"over": over}, [x], fmt, activation="relu")
            moved = x if over == "trailing" else x.transpose(0, 2, 3, 1)
            ref = np.maximum(_layer_norm_ref(moved, w["scale"].reshape(-1), w["bias"].reshape(-1), 1e-5), 0)
            got = out if over == "trailing" else out.transpose(0, 2, 3, 1)
            assert _rel(got.reshape(ref.shape), ref) < 1e-5, (fmt, over)
            if over == "trailing" or fmt.layout.name == "NHWC":
                served.append((shape[1], shape[2]) if over == "trailing" else (30, 24))
    assert calls == served


def test_layer_normalization_over_read_only_weights_runs_the_same_compiled_kernel(monkeypatch):
    """An imported model's weights may be read-only arrays (straight from the file), another type to Numba: the
    kernel gets writeable copies, so one compile serves both, with the same result."""
    be = NumpyBackend()
    norm = be.kernel("layer_norm")
    seen = []
    real = cpu.pointwise.layer_norm_rows
    monkeypatch.setattr(cpu.pointwise, "layer_norm_rows", lambda *a: seen.append(a[1:3]) or real(*a))
    rng = np.random.default_rng(6)
    x = rng.standard_normal((40, 96)).astype(np.float32)
    scale, bias = rng.standard_normal(96).astype(np.float32), rng.standard_normal(96).astype(np.float32)
    outs = []
    for writeable in (True, False):
        s, b = scale.copy(), bias.copy()
        s.flags.writeable = b.flags.writeable = writeable
        out = np.empty_like(x)
        assert norm(x, s, b, out, 96, 1, 1e-5, None, {})
        outs.append(out)
    assert all(a.flags.writeable for pair in seen for a in pair) and len(seen) == 2
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[1], _layer_norm_ref(x, scale, bias, 1e-5), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("others,expected", [(0.0, 4), (0.3, 4), (0.7, 3), (1.0, 3), (2.2, 2), (9.0, 1)])
def test_cores_left_to_other_busy_processes(monkeypatch, others, expected):
    """The kernels share their work over the cores this process may use less those other processes kept busy
    (more than half of one) since the last look: CPU ticks of the whole machine less this process's own time."""
    clock = {"now": 100.0, "ticks": 50_000, "own": 3.0}
    monkeypatch.setattr(cpu.runtime.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(cpu.runtime.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(cpu.runtime, "_busy_ticks", lambda: clock["ticks"])
    monkeypatch.setattr(cpu.runtime.os, "times", lambda: (clock["own"], 0.0, 0.0, 0.0, 0.0))
    monkeypatch.setattr(cpu.runtime, "_cores_seen", [0.0, -1e9])
    monkeypatch.setattr(cpu.runtime, "_load_seen", [])
    assert cpu.runtime.cores() == 4  # the first look has nothing to compare with
    clock["now"] += 2.0  # two seconds: this process used 1.5 CPU seconds, the others `others` cores' worth
    clock["own"] += 1.5
    clock["ticks"] += round((1.5 + 2.0 * others) * cpu.runtime._CLOCK_TICKS)
    assert cpu.runtime.cores() == expected
    clock["now"] += 0.1 * cpu.runtime.CORES_TTL  # within the time a count is kept: not looked at again
    clock["ticks"] += 10**6
    assert cpu.runtime.cores() == expected


def test_cores_without_proc_stat_are_the_affinity(monkeypatch):
    monkeypatch.setattr(cpu.runtime, "_busy_ticks", lambda: None)
    monkeypatch.setattr(cpu.runtime, "_cores_seen", [0.0, -1e9])
    monkeypatch.setattr(cpu.runtime.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert cpu.runtime.cores() == 3
    assert cpu.runtime._cores_taken() == 0.0


@pytest.mark.parametrize("a_shape,b_shape,transpose_b", [
    ((64, 3, 49, 32), (64, 3, 32, 49), False),   # window attention's scores
    ((64, 3, 49, 49), (64, 3, 49, 32), False),   # and its product with v
    ((2, 1, 40, 24), (1, 5, 24, 30), True),     # leading axes broadcast both ways, k given transposed
    ((300, 64), (64, 48), True),                # one matrix: blocks of its rows over the cores
])
def test_stacked_matrix_products_match_numpy(a_shape, b_shape, transpose_b):
    """The CPU's products of stacks of matrices (``dense.matmul``): operands read in place, a transposed view read
    as BLAS's transpose, a strided view of a larger tensor (a q of a joint q, k, v), the scale applied; declined for
    sizes too small to share out and for float64."""
    from engine.backends.cpu import dense

    rng = np.random.default_rng(21)
    qkv = rng.standard_normal((3, *a_shape)).astype(np.float32)
    a = qkv[1]  # a view at an offset of a larger array
    b = rng.standard_normal(b_shape).astype(np.float32)
    if transpose_b:
        b = np.ascontiguousarray(np.swapaxes(b, -1, -2)).swapaxes(-1, -2)  # stored as its transpose
        assert not b.flags.c_contiguous
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out = np.full((*batch, a.shape[-2], b.shape[-1]), np.nan, np.float32)
    assert dense.matmul(a, b, out, 0.5)
    ref = 0.5 * np.matmul(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert not dense.matmul(a[..., :2, :2], b[..., :2, :2], out[..., :2, :2].copy())  # too small to share
    assert not dense.matmul(a.astype(np.float64), b.astype(np.float64), out)


@pytest.mark.skipif(not panels_available(), reason="needs the micro-kernel's FMA vectors")
@pytest.mark.parametrize("q_shape,k_rows,dv,bias_shape,k_transposed", [
    ((64, 3, 49, 32), 49, 32, (1, 3, 49, 49), False),  # Swin's windows: a position bias repeated over the windows
    ((4, 3, 49, 32), 49, 32, (4, 3, 49, 49), True),    # a bias per window (a shifted window's mask), k given as k^T
    ((1, 2, 50, 20), 37, 24, (37,), False),            # few matrices (rows shared out), odd sizes, a bias row
    ((3, 1, 7, 5), 70, 5, None, False),                # no bias, D and Dv not whole panels, S over four panels
    ((2, 96, 17), 96, 40, (2, 1, 96), True),            # rank 3, a bias broadcast over the rows
])
def test_attention_in_one_pass_matches_the_reference(q_shape, k_rows, dv, bias_shape, k_transposed):
    """The CPU's attention kernel (``attention.attention``) against the layer's array code in float64: q, k and v
    read in place as strided views of a joint q, k, v tensor (Swin's), k given transposed, biases broadcast over
    windows and rows, matrices fewer than the cores; a NaN spreads over its row only; declined for float64 and for
    a read-only operand."""
    from engine.backends.cpu import attention
    from plugins.standard.attention import attention as reference

    rng = np.random.default_rng(23)
    lead, (m, d) = q_shape[:-2], q_shape[-2:]
    width = max(d, dv)
    qkv = rng.standard_normal((*lead, max(m, k_rows), 3, width)).astype(np.float32)  # one projection's output
    q = qkv[..., :m, 0, :d]
    k = qkv[..., :k_rows, 1, :d]
    v = qkv[..., :k_rows, 2, :dv]
    if k_transposed:
        k = np.ascontiguousarray(np.swapaxes(k, -1, -2))
    bias = None if bias_shape is None else rng.standard_normal(bias_shape).astype(np.float32)
    out = np.full((*lead, m, dv), np.nan, np.float32)
    assert attention.attention(q, k, v, bias, out, 0.3, k_transposed)
    ref = reference(np, q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), 0.3,
                    None if bias is None else bias.astype(np.float64), np.float64, k_transposed)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)
    q[(0,) * len(lead) + (1, 0)] = np.nan
    assert attention.attention(q, k, v, bias, out, 0.3, k_transposed)
    first = out[(0,) * len(lead)]
    assert np.isnan(first[1]).all() and not np.isnan(np.delete(first, 1, axis=0)).any()
    assert not attention.attention(q.astype(np.float64), k, v, bias, out, 0.3, k_transposed)
    frozen = v.copy()
    frozen.flags.writeable = False
    assert not attention.attention(q, k, frozen, bias, out, 0.3, k_transposed)


@pytest.mark.skipif(not panels_available(), reason="needs the micro-kernel's FMA vectors")
def test_attention_operation_keeps_its_prepared_call_for_the_same_arrays():
    """The backend's ``attention`` with a layer's cache: the same arrays again run the kept call on their new
    values (no new preparation), other arrays prepare a new one; each result equals the reference."""
    from plugins.standard.attention import attention as reference

    kernel = NumpyBackend().kernel("attention")
    rng = np.random.default_rng(29)
    q, k, v = (rng.standard_normal((6, 4, 49, 32)).astype(np.float32) for _ in range(3))
    bias = rng.standard_normal((1, 4, 49, 49)).astype(np.float32)
    out = np.empty_like(q)
    cache: dict = {}
    first = kernel(q, k, v, bias, out, 0.25, False, cache)
    assert first is not None and cache["attention_call"][1] is first
    q[...] = rng.standard_normal(q.shape)  # new values in the same array
    assert kernel(q, k, v, bias, out, 0.25, False, cache) is first
    np.testing.assert_allclose(out, reference(np, q, k, v, 0.25, bias), rtol=2e-5, atol=2e-5)
    other = np.empty_like(out)
    again = kernel(q, k, v, bias, other, 0.25, False, cache)
    assert again is not first and cache["attention_call"][1] is again
    np.testing.assert_array_equal(other, out)


@pytest.mark.parametrize("nhwc", [False, True])
@pytest.mark.parametrize("mode,coords,size", [("bilinear", "half_pixel", (64, 48)), ("nearest", "asymmetric", (7, 11)),
                                              ("bicubic", "align_corners", (40, 21)), ("bilinear", "half_pixel", (5, 3))])
def test_resize_by_taps_matches_the_separable_reference(nhwc, mode, coords, size):
    """The CPU's one-pass resampling (``upsample.resize_taps``) against the layer's separable NumPy resampling, up and
    down, in both layouts; taps that point outside the input are declined."""
    from engine.backends.cpu import upsample
    from plugins.standard._common_resample import axis_taps, device_taps, resample

    rng = np.random.default_rng(31)
    x = rng.standard_normal((2, 5, 13, 9)).astype(np.float32)
    extra = {"nearest_mode": "floor"} if mode == "nearest" else {}
    th, tw = (device_taps(np, axis_taps(n, m, mode, coords, m / n, **extra), np.float32)
              for n, m in ((13, size[0]), (9, size[1])))
    ref = resample(np, x.astype(np.float64), th, tw)
    phys = np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if nhwc else x
    out = np.full((2, *size, 5) if nhwc else (2, 5, *size), np.nan, np.float32)
    assert upsample.resize_taps(phys, out, th.index, th.weight, tw.index, tw.weight, nhwc)
    np.testing.assert_allclose(out.transpose(0, 3, 1, 2) if nhwc else out, ref, rtol=1e-5, atol=1e-5)
    bad = th.index.copy()
    bad[0, -1] = 13
    assert not upsample.resize_taps(phys, out, bad, th.weight, tw.index, tw.weight, nhwc)


@pytest.mark.parametrize("wo,ho,c,k,panels,images", [(28, 28, 144, 32, 1, 1), (56, 56, 96, 24, 1, 1),
                                                      (56, 56, 64, 24, 1, 1), (28, 28, 72, 40, 2, 1),
                                                      (28, 28, 144, 32, 1, 3), (112, 112, 16, 96, 3, 1)])
def test_a_strips_few_jobs_share_out_evenly_over_two_cores(monkeypatch, wo, ho, c, k, panels, images):
    """A 1x1 layer's blocks of rows on a large image: where its jobs (blocks x panels x images) are fewer than
    PANEL_JOB_SHARES a thread, as many as make them a multiple of the thread count (144 -> 32 at 28x28 had gone as
    three jobs to two cores), each no larger than STRIP_BLOCK_BYTES of input and output."""
    monkeypatch.setattr(cpu.runtime, "cores", lambda: 2)
    rows = cpu.panels.strip_rows(wo, ho, c, k, False, panels, images)
    jobs = -(-ho // rows) * panels * images
    assert jobs % 2 == 0 or jobs >= cpu.panels.PANEL_JOB_SHARES * 2
    assert rows * wo * (c + k) * 4 <= max(cpu.panels.STRIP_BLOCK_BYTES, wo * (c + k) * 4)
    monkeypatch.setattr(cpu.panels, "STRIP_EVEN_JOBS", False)
    assert cpu.panels.strip_rows(wo, ho, c, k, False, panels, images) >= rows
