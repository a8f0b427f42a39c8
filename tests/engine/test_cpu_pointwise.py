"""The NumPy backend's 1x1 convolutions on the panel micro-kernel (engine/backends/cpu/panels.py): any image size
and output count (the last panel part-filled), and the epilogues the micro-kernel applies itself (ReLU, the
clamps, hard-swish), against float64 references built from the activations' own implementations."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from engine.backends import cpu
from engine.backends.cpu.backend import NumpyBackend
from plugins.standard._common_conv import conv2d

pytest.importorskip("engine.backends.cpu.ops", reason="Numba is not installed")
pytestmark = pytest.mark.skipif(not cpu.microkernel.panels_available(), reason="no AVX2 or AVX-512 FMA vectors")
EPILOGUES = cpu.epilogue.FUSED_EPILOGUES
#: coefficients other than the defaults, so that they reach the kernels
COEFS = {"clamp": {"min": -0.5, "max": 0.75}, "leaky_relu": {"alpha": 0.1}}


def _activation(name: str | None, y: np.ndarray) -> np.ndarray:
    """The activation plugin's own implementation, in float64."""
    if name is None:
        return y
    impl = importlib.import_module(f"plugins.activations.{name}").ACTIVATION
    return impl.apply(np, y, impl.desc.coefficient_values(COEFS.get(name, {})))


def _case(seed: int, n: int, c: int, k: int, h: int, w: int, bias: bool):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, h, w, c)).astype(np.float32).transpose(0, 3, 1, 2)
    wt = (rng.standard_normal((k, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32) if bias else None
    return rng, x, wt, b


def _reference(x, wt, b, stride, act, residual=None):
    y = conv2d(np, x.astype(np.float64), wt.astype(np.float64), None if b is None else b.astype(np.float64),
               stride, (0, 0), (1, 1), 1)
    if residual is not None:
        y = y + residual
    return _activation(act, y)


def _out(n, k, h, w):
    return np.full((n, h, w, k), np.nan, np.float32).transpose(0, 3, 1, 2)


def _rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


@pytest.mark.parametrize("n,c,k,size,stride", [
    (1, 16, 96, (23, 19), (1, 1)),    # whole panels, a large image (one block), rows no multiple of a tile
    (1, 16, 64, (70, 63), (1, 1)),    # a large image in blocks of several rows, a block's pixels no multiple of a tile
    (1, 24, 40, (17, 18), (1, 1)),    # the last panel part-filled
    (2, 7, 20, (9, 11), (2, 2)),      # two images, strided, odd channel counts
    (1, 32, 8, (30, 30), (1, 1)),     # fewer outputs than one panel
    (1, 40, 24, (5, 5), (1, 1)),      # a small image (whole), the last panel part-filled
    (1, 24, 40, (40, 37), (2, 2)),    # strided, a large image by output rows: strips of windows 2 pixels apart
    (1, 600, 40, (9, 8), (1, 1)),     # many input channels (a whole panel's weights larger than L1)
])
@pytest.mark.parametrize("act,bias", [(None, True), ("relu", False), ("clamp", True), ("hardswish", True),
                                      ("leaky_relu", True), ("sigmoid", False), ("silu", True), ("gelu", True)])
def test_pointwise_panels_match_the_reference(n, c, k, size, stride, act, bias):
    """Every activation: the micro-kernel's own in its epilogue, the others by passes over the panel's columns
    (a last panel part-filled: its columns inside K read and written under a mask)."""
    _, x, wt, b = _case(5 + c + k, n, c, k, *size, bias)
    ref = _reference(x, wt, b, stride, act)
    out = _out(n, k, *ref.shape[2:])
    code = EPILOGUES[act]
    alpha = cpu.epilogue.epilogue_alpha(act, COEFS.get(act, {}))
    cpu.panels.conv_panels(x, cpu.panels.panel_weights(wt), (1, 1), b, out, stride, (0, 0), (1, 1), code, alpha)
    assert np.isfinite(out).all(), "every output value written"
    assert _rel(out, ref) < 1e-5


@pytest.mark.parametrize("k", [16, 20, 24, 48])
@pytest.mark.parametrize("act", ["relu", "gelu"])
@pytest.mark.parametrize("h,w", [(13, 15), (19, 17)], ids=["whole", "large"])
@pytest.mark.parametrize("c", [12, 700])
@pytest.mark.parametrize("window", [1, 3])
def test_panels_add_a_residual_before_the_activation(k, act, h, w, c, window):
    """A small image as one block; a large one (more than PANEL_MAX_PIXELS pixels) panel by panel where the
    micro-kernel applies the activation (ReLU: the sums start from bias + residual, the epilogue before the only
    store), by output rows where it does not (GELU: each row's panels then activated as one run); a 3x3 window
    (padded) the same, its tiles from bias + residual by passes. Written over the residual itself (as the memory plan
    gives it), the result is the same."""
    rng, x, _, b = _case(31, 1, c, k, h, w, True)
    wt = (rng.standard_normal((k, c, window, window)) / np.sqrt(c * window * window)).astype(np.float32)
    residual = rng.standard_normal((1, h, w, k)).astype(np.float32).transpose(0, 3, 1, 2)
    pad = window // 2
    ref = conv2d(np, x.astype(np.float64), wt.astype(np.float64), b.astype(np.float64), (1, 1), (pad, pad), (1, 1), 1)
    ref = _activation(act, ref + residual)
    out = _out(1, k, h, w)
    over = residual.copy(order="K")
    for target, start in ((out, residual), (over, over)):
        cpu.panels.conv_panels_plan(x, cpu.panels.panel_weights(wt), (window, window), b, target, (1, 1), (pad, pad),
                                    (1, 1), EPILOGUES[act], 0.0, start)()
        assert _rel(target, ref) < 1e-5
    np.testing.assert_array_equal(over, out)


def test_fused_epilogues_keep_nan_and_infinities():
    """The micro-kernel's clamp, gate and SiLU treat NaN and infinities as the activations do: a 1x1 convolution of
    unit weights from one input channel is the activation itself."""
    values = np.array([np.nan, np.inf, -np.inf, 0.0, -3.0, -1.0, 0.5, 2.0, 3.0, 7.0, -7.0, 1e30], np.float32)
    k = cpu.microkernel.PANEL
    x = values.reshape(1, 1, values.size, 1)
    wt = np.ones((k, 1, 1, 1), np.float32)
    for act in ("relu", "clamp", "hardswish", "silu", None):
        out = _out(1, k, 1, values.size)
        alpha = cpu.epilogue.epilogue_alpha(act, COEFS.get(act, {}))
        cpu.panels.conv_panels(x.transpose(0, 3, 1, 2), cpu.panels.panel_weights(wt), (1, 1), None, out, (1, 1),
                               (0, 0), (1, 1), EPILOGUES[act], alpha)
        with np.errstate(all="ignore"):
            ref = _activation(act, values.astype(np.float64))
        got = out[0, 0, 0].astype(np.float64)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref), err_msg=str(act))
        if act == "silu":  # v * sigmoid(v), the sigmoid within SIGMOID_ERROR of float64's (an absolute bound)
            both = np.isfinite(ref)
            np.testing.assert_array_equal(got[~both], ref[~both])
            v = values[both].astype(np.float64)
            assert np.all(np.abs(got[both] - ref[both]) <= 1e-6 * np.abs(ref[both]) + SIGMOID_ERROR * np.abs(v))
        else:
            np.testing.assert_allclose(got, ref, rtol=1e-6, equal_nan=True, err_msg=str(act))


def _microkernel_and_pass(values: np.ndarray, act: str) -> tuple[np.ndarray, np.ndarray]:
    """``act`` of ``values`` by the micro-kernel's epilogue (a 1x1 convolution of unit weights from one input channel,
    every panel column the same) and by the CPU's activation pass, equal within float32 rounding of the
    multiply-adds, NaN where the other is NaN."""
    k = cpu.microkernel.PANEL
    x = values.reshape(1, 1, values.size, 1).transpose(0, 3, 1, 2)
    out = _out(1, k, 1, values.size)
    cpu.panels.conv_panels(x, cpu.panels.panel_weights(np.ones((k, 1, 1, 1), np.float32)), (1, 1), None, out, (1, 1),
                           (0, 0), (1, 1), EPILOGUES[act], 0.0)
    got = out[0, 0, 0]
    np.testing.assert_array_equal(out[0, :, 0], np.broadcast_to(got, out[0, :, 0].shape))  # every panel column
    passed = np.empty_like(values)
    cpu.pointwise.activation(values.copy(), passed, act, {})
    np.testing.assert_array_equal(np.isnan(got), np.isnan(passed))
    np.testing.assert_allclose(got, passed, rtol=2e-7, atol=1e-30, equal_nan=True)
    return got, passed


#: the sigmoid's absolute error bound (``epilogue.SIGMOID_P``): three float32 ulps of 1
SIGMOID_ERROR = 1.8e-7


def test_the_micro_kernels_silu_is_the_activation_pass():
    """SiLU in the micro-kernel's epilogue computes what the CPU's activation pass does, step for step (the same
    clamp, the same rational form of the sigmoid): over -30..30, NaN and infinities, within float32 rounding of the
    multiply-adds. Against float64: the sigmoid within SIGMOID_ERROR everywhere and 1.5e-5 relative above -5, in
    [0, 1]; SiLU within SIGMOID_ERROR * |v|."""
    values = np.concatenate([np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 18.0, -18.0, 1e30, -1e30], np.float32),
                             np.linspace(-30, 30, 6001, dtype=np.float32)])
    _, passed = _microkernel_and_pass(values, "silu")
    assert np.isnan(passed[2]), "-inf * sigmoid(-inf) = -inf * 0"
    finite = np.isfinite(values) & (np.abs(values) < 1e6)
    v = values[finite].astype(np.float64)
    with np.errstate(over="ignore"):
        exact = 1 / (1 + np.exp(-v))
    assert np.all(np.abs(passed[finite] - v * exact) <= SIGMOID_ERROR * np.abs(v))
    sigmoid = np.empty_like(values)
    cpu.pointwise.activation(values.copy(), sigmoid, "sigmoid", {})
    assert np.isnan(sigmoid[0]) and sigmoid[1] == 1 and sigmoid[2] == 0
    s = sigmoid[finite].astype(np.float64)
    assert s.min() >= 0 and s.max() <= 1
    assert np.abs(s - exact).max() <= SIGMOID_ERROR
    assert (np.abs(s - exact) / exact)[v > -5].max() <= 1.5e-5


def test_the_micro_kernels_gelu_is_the_activation_pass():
    """GELU in the micro-kernel's epilogue computes what the CPU's activation pass does, step for step (the same
    clamp, the same rational form of erf, the same saturation): over -12..12, NaN and infinities, within float32
    rounding of the multiply-adds; and within the activation's tolerance of its float64 definition."""
    values = np.concatenate([np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.921875, -0.921875, 3.92 * 2 ** 0.5,
                                       -3.92 * 2 ** 0.5, 1e30, -1e30], np.float32),
                             np.linspace(-12, 12, 4001, dtype=np.float32)])
    got, passed = _microkernel_and_pass(values, "gelu")
    finite = np.isfinite(values) & (np.abs(values) < 1e6)
    np.testing.assert_allclose(got[finite], _activation("gelu", values[finite].astype(np.float64)), rtol=2e-6,
                               atol=1e-6)


def test_fused_epilogue_refuses_other_codes():
    with pytest.raises(ValueError, match="epilogue code"):
        cpu.microkernel.fused_epilogue(EPILOGUES["sigmoid"], 0.0)


def test_backend_takes_the_panels_for_1x1_convolutions_of_any_size(monkeypatch):
    be = NumpyBackend()
    calls, real = [], cpu.panels.conv_panels_plan
    monkeypatch.setattr(cpu.panels, "conv_panels_plan", lambda *a, **kw: calls.append(a[0].shape) or real(*a, **kw))
    monkeypatch.setattr(cpu.panels, "LARGE_PANELS", False)  # (AVX-512's large panels take the others too)
    _, x, wt, b = _case(41, 1, 24, 36, 40, 40, True)
    out, cache = _out(1, 36, 40, 40), {}
    assert be.kernel("conv2d")(x, wt, b, out, (1, 1), (0, 0), (1, 1), 1, "clamp", {"min": 0.0, "max": 6.0}, cache)
    assert calls == [(1, 24, 40, 40)] and cache["gemm_panels"][0] is wt
    assert _rel(out, _reference(x, wt, b, (1, 1), None).clip(0, 6)) < 1e-5
    # a 3x3 convolution of a large image and an activation the micro-kernel does not apply keep their paths;
    # without FMA vectors the 1x1 one goes to OpenBLAS
    rng = np.random.default_rng(2)
    w3 = rng.standard_normal((36, 24, 3, 3)).astype(np.float32)
    assert be.kernel("conv2d")(x, w3, None, _out(1, 36, 40, 40), (1, 1), (1, 1), (1, 1), 1, None, {})
    assert be.kernel("conv2d")(x, wt, b, _out(1, 36, 40, 40), (1, 1), (0, 0), (1, 1), 1, "sigmoid", {})
    monkeypatch.setattr(cpu.microkernel, "panels_available", lambda: False)
    assert be.kernel("conv2d")(x, wt, b, _out(1, 36, 40, 40), (1, 1), (0, 0), (1, 1), 1, None, {})
    assert len(calls) == 1


@pytest.mark.parametrize("k", [24, 20, 32])
def test_a_dilated_1x1_convolution_is_the_plain_one(k):
    """A 1x1 window's dilation changes nothing: the backend gives the undilated result (its last panel part-filled
    had gone through the im2col path, whose panels are whole, and written past the output's rows)."""
    _, x, wt, b = _case(43, 1, 16, k, 20, 20, True)
    out = _out(1, k, 20, 20)
    assert NumpyBackend().kernel("conv2d")(x, wt, b, out, (1, 1), (0, 0), (2, 2), 1, "relu", {}, {})
    assert _rel(out, _reference(x, wt, b, (1, 1), "relu")) < 1e-5



@pytest.mark.parametrize("kernel", [1, 3])
@pytest.mark.parametrize("residual", [False, True])
def test_a_small_image_of_an_odd_panel_count_is_cut_in_blocks_of_tiles(monkeypatch, kernel, residual):
    """Five panels over two threads would leave one idle for a fifth of the layer: the image's 49 pixels go in
    blocks of whole tiles (each job one block and one panel), the same sums as one block."""
    monkeypatch.setattr(cpu.runtime, "threads", lambda: 2)
    panel, rows = cpu.microkernel.PANEL, cpu.microkernel.PANEL_ROWS
    assert cpu.panels.small_image_step(49, 5, 1) == -(-25 // rows) * rows
    assert cpu.panels.small_image_step(49, 4, 1) == 49  # even: whole
    assert cpu.panels.small_image_step(49, 9, 1) == 49  # many panels: whole
    rng = np.random.default_rng(kernel)
    k = 5 * panel - 8
    x = rng.standard_normal((1, 7, 7, 40)).astype(np.float32).transpose(0, 3, 1, 2)
    wt = rng.standard_normal((k, 40, kernel, kernel)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32)
    res = rng.standard_normal((1, 7, 7, k)).astype(np.float32).transpose(0, 3, 1, 2) if residual else None
    outs = []
    for blocks in (True, False):
        monkeypatch.setattr(cpu.panels, "SMALL_IMAGE_BLOCKS", blocks)
        out = _out(1, k, 7, 7)
        pad = kernel // 2
        cpu.panels.conv_panels_plan(x, cpu.panels.panel_weights(wt), (kernel, kernel), b, out, (1, 1), (pad, pad),
                                    (1, 1), EPILOGUES["relu"], 0.0, res)()
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    ref = conv2d(np, x.astype(np.float64), wt.astype(np.float64), b.astype(np.float64), (1, 1), (pad, pad), (1, 1), 1)
    if residual:
        ref = ref + res
    assert _rel(outs[0], np.maximum(ref, 0)) < 1e-5


@pytest.mark.parametrize("n,c,h,w", [(1, 3, 224, 224), (2, 3, 5, 7), (1, 1, 9, 4), (3, 4, 6, 5), (1, 8, 3, 3)])
def test_an_image_into_channels_last_memory_is_numpys_copy(n, c, h, w):
    """The input layer's copy of an NCHW image into NHWC memory: one pass (over the cores where large), the same
    values as NumPy's transposing copy, NaN and infinities included; more than 8 channels, fp16 and other layouts
    are declined (the caller copies)."""
    rng = np.random.default_rng(c * h)
    data = rng.standard_normal((n, c, h, w)).astype(np.float32)
    data[0, 0, 0, 0], data[-1, -1, -1, -1] = np.nan, np.inf
    mem = np.full((n, h, w, c), -1.0, np.float32)
    kernel = NumpyBackend().kernel("to_channels_last")
    assert kernel(data, mem.transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(mem, data.transpose(0, 2, 3, 1))
    if c > 1:
        assert not kernel(data, np.empty((n, c, h, w), np.float32))  # NCHW memory
    assert not kernel(data.astype(np.float16), mem.astype(np.float16).transpose(0, 3, 1, 2))
    assert not kernel(data[:, :, :, ::-1], mem.transpose(0, 3, 1, 2))  # not C-contiguous
    wide = rng.standard_normal((1, 9, 4, 4)).astype(np.float32)
    assert not kernel(wide, np.empty((1, 4, 4, 9), np.float32).transpose(0, 3, 1, 2))


def test_an_input_tensor_is_made_channels_last_by_the_kernel(monkeypatch):
    """``Network.set_input`` of an fp32 NCHW image for an fp32 NHWC network on the CPU: converted by the kernel (the
    same values as NumPy's conversion), the network's output the image itself."""
    from engine.model import Model
    from engine.network import Network
    from engine.plugins import default_registry
    from engine.tensor import TensorFormat

    calls = []
    real = cpu.pointwise.to_channels_last
    monkeypatch.setattr(cpu.pointwise, "to_channels_last", lambda x, y: calls.append(x.shape) or real(x, y))
    m = Model("copy")
    m.add_layer("input", "input", params={"dimensions": "1x3x20x24"})
    m.add_layer("output", "output", inputs=["input"])
    net = Network(m, default_registry(), NumpyBackend(), TensorFormat.parse("fp32 nhwc"))
    image = np.random.default_rng(1).standard_normal((1, 3, 20, 24)).astype(np.float32)
    net.set_input("input", image)
    net.run()
    assert calls == [(1, 3, 20, 24)]
    np.testing.assert_array_equal(net.output("output"), image)
