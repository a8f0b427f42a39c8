"""The NumPy backend's grouped convolutions (more than one group, not depthwise: RegNet's and ResNeXt's layers) on
the panel micro-kernel, against a float64 reference; the convolution table choosing them and declining what they do
not serve."""
from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu.backend import NumpyBackend
from plugins.standard._common_conv import conv2d

pytest.importorskip("engine.backends.cpu.ops", reason="Numba is not installed")
from engine.backends import cpu  # noqa: E402  (after the skip: imports Numba)
from engine.backends.cpu.epilogue import FUSED_EPILOGUES  # noqa: E402
from engine.plugins import default_registry  # noqa: E402

pytestmark = pytest.mark.skipif(not cpu.microkernel.panels_available(), reason="no FMA vectors: the generic path")


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _case(seed, n, c, k, groups, size, kernel, bias=True):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, *size, c)).astype(np.float32).transpose(0, 3, 1, 2)  # NHWC memory
    w = rng.standard_normal((k, c // groups, *kernel)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32) if bias else None
    return x, w, b


def _reference(x, w, b, stride, padding, dilation, groups):
    return conv2d(np, x.astype(np.float64), w.astype(np.float64), None if b is None else b.astype(np.float64),
                  stride, padding, dilation, groups)


def _conv(x, w, b, out, stride, padding, dilation, groups, epilogue=None, coefs=None, residual=None, cache=None):
    return NumpyBackend().kernel("conv2d")(x, w, b, out, stride, padding, dilation, groups, epilogue, coefs or {},
                                           cache, residual=residual)


def _out(n, k, ho, wo):
    return np.full((n, ho, wo, k), np.nan, np.float32).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("n,c,k,groups,size,kernel,stride,padding,dilation,bias", [
    (1, 48, 48, 6, (30, 29), (3, 3), (1, 1), (1, 1), (1, 1), True),     # RegNet's groups of 8
    (2, 104, 104, 13, (15, 17), (3, 3), (2, 2), (1, 1), (1, 1), False),  # strided, two images, 104 = 3 panels + 8
    (1, 64, 128, 32, (12, 12), (3, 3), (1, 1), (1, 1), (1, 1), True),    # ResNeXt's: 2 inputs, 4 outputs a group
    (1, 72, 72, 3, (10, 9), (3, 3), (1, 1), (1, 1), (1, 1), True),       # 24 outputs a group: panels across groups
    (1, 128, 128, 2, (9, 9), (3, 3), (1, 1), (1, 1), (1, 1), True),      # 64 outputs a group: panels inside one
    (1, 24, 24, 3, (11, 11), (3, 3), (1, 1), (2, 2), (2, 2), True),      # dilated
    (1, 40, 60, 5, (11, 7), (1, 1), (1, 1), (0, 0), (1, 1), True),       # 1x1: the epilogue in the one call
    (1, 32, 32, 4, (13, 10), (5, 3), (2, 1), (2, 0), (1, 1), True),      # 5x3, unequal strides and paddings
])
@pytest.mark.parametrize("blocks", [True, False], ids=["channel-blocks", "channels-in-place"])
def test_grouped_convolutions_match_the_reference(monkeypatch, n, c, k, groups, size, kernel, stride, padding,
                                                  dilation, bias, blocks):
    """Each geometry matches the float64 reference, its input copied into one block of channels per panel (where
    the panels' input runs tile the channels) or read in place."""
    from engine.backends.cpu import grouped

    monkeypatch.setattr(grouped, "GROUP_BLOCKS", blocks)
    x, w, b = _case(c + k + groups, n, c, k, groups, size, kernel, bias)
    ref = np.maximum(_reference(x, w, b, stride, padding, dilation, groups), 0)
    out = _out(n, k, *ref.shape[2:])
    done = _conv(x, w, b, out, stride, padding, dilation, groups, "relu", cache={})
    assert done is not None and done.candidate == "grouped"
    assert _rel(out, ref) < 1e-5
    out[...] = np.nan
    done.replay()  # the prepared call runs again on the same arrays
    assert _rel(out, ref) < 1e-5
    x[...] = x[..., ::-1, :]  # the same memory, new values: a padded input's copy is made again at each call
    done.replay()
    assert _rel(out, np.maximum(_reference(x, w, b, stride, padding, dilation, groups), 0)) < 1e-5


@pytest.mark.parametrize("padding", [(1, 1), (0, 0)])
def test_grouped_convolutions_read_a_strided_input(monkeypatch, padding):
    """An input whose NHWC memory is not one block (the first channels of a wider tensor) is copied contiguous
    first; padded or not, strided or not, the result matches the reference."""
    from engine.backends.cpu import grouped

    monkeypatch.setattr(grouped, "GROUP_BLOCKS", False)
    wide, w, b = _case(3, 1, 96, 48, 3, (13, 11), (3, 3))
    x = wide[:, :48]
    w = w[:, :16]
    assert not x.transpose(0, 2, 3, 1).flags.c_contiguous
    for stride in ((1, 1), (2, 2)):
        ref = _reference(x, w, b, stride, padding, (1, 1), 3)
        out = _out(1, 48, *ref.shape[2:])
        done = _conv(x, w, b, out, stride, padding, (1, 1), 3, cache={})
        assert done is not None and done.candidate == "grouped"
        assert _rel(out, ref) < 1e-5


@pytest.mark.parametrize("kernel", [(3, 3), (1, 1)], ids=["rows", "one-row"])
@pytest.mark.parametrize("epilogue", [name for name in FUSED_EPILOGUES if name is not None])
def test_grouped_convolutions_apply_every_activation(epilogue, kernel):
    """The micro-kernel's epilogue where a window is one call (a 1x1 one, activations it applies), else a pass over
    each tile's rows after its calls."""
    registry = default_registry()
    desc = next(d for d in registry.activation_descs() if d.epilogue == epilogue)
    coefs = {c.name: (0.1 if c.name == "alpha" else c.default) for c in desc.coefficients}
    act = registry.activation_class(desc.name).apply
    x, w, b = _case(3, 1, 32, 48, 4, (9, 9), kernel)
    pad = kernel[0] // 2
    ref = np.asarray(act(np, _reference(x, w, b, (1, 1), (pad, pad), (1, 1), 4), coefs), np.float64)
    out = _out(1, 48, 9, 9)
    done = _conv(x, w, b, out, (1, 1), (pad, pad), (1, 1), 4, epilogue, coefs)
    assert done is not None and done.candidate == "grouped"
    assert _rel(out, ref) < 1e-5


def test_a_nan_spoils_only_the_windows_holding_it_in_its_panel():
    """A NaN input spoils the outputs of the windows that hold it, of the panel its group's outputs are in: the other
    groups of that panel too (their packed weights' zeros times NaN), no other panel, no other pixel."""
    panel = cpu.microkernel.PANEL
    c = 2 * panel  # two panels of groups of 8
    x, w, b = _case(5, 1, c, c, c // 8, (10, 10), (3, 3))
    phys = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    phys[0, 4, 5, 9] = np.nan  # channel 9: the second group, in the first panel
    x = phys.transpose(0, 3, 1, 2)
    out = _out(1, c, 10, 10)
    assert _conv(x, w, b, out, (1, 1), (1, 1), (1, 1), c // 8) is not None
    bad = np.isnan(out[0])
    assert bad[8:16, 3:6, 4:7].all()  # its own group's outputs whose windows hold it
    assert not bad[panel:].any() and not np.delete(bad.reshape(c, -1), [r * 10 + q for r in range(3, 6)
                                                                         for q in range(4, 7)], axis=1).any()
    ref = _reference(x, w, b, (1, 1), (1, 1), (1, 1), c // 8)
    keep = ~bad
    assert _rel(out[0][keep], ref[0][keep]) < 1e-5


def test_the_table_leaves_what_the_grouped_kernel_does_not_serve(monkeypatch):
    """Depthwise layers keep their kernel; a residual sum, NCHW memory and CPUs without FMA vectors keep the
    generic path."""
    x, w, b = _case(6, 1, 16, 16, 16, (8, 8), (3, 3))
    done = _conv(x, w, b, _out(1, 16, 8, 8), (1, 1), (1, 1), (1, 1), 16)
    assert done is not None and done.candidate == "depthwise"
    x, w, b = _case(7, 1, 32, 32, 4, (8, 8), (3, 3))
    residual = _out(1, 32, 8, 8)
    residual[...] = 0
    assert _conv(x, w, b, _out(1, 32, 8, 8), (1, 1), (1, 1), (1, 1), 4, residual=residual) is None
    nchw = np.ascontiguousarray(x)
    assert _conv(nchw, w, b, np.zeros((1, 32, 8, 8), np.float32), (1, 1), (1, 1), (1, 1), 4) is None
    monkeypatch.setattr(cpu.microkernel, "panels_available", lambda: False)
    assert _conv(x, w, b, _out(1, 32, 8, 8), (1, 1), (1, 1), (1, 1), 4) is None


@pytest.mark.parametrize("narrow", [True, False], ids=["narrow-panels", "whole-panels"])
def test_the_packed_weights_hold_each_outputs_own_group_only(monkeypatch, narrow):
    """Each panel (one vector of outputs where a group has fewer than a panel's, with narrow panels) holds, for each
    of its outputs, that output's filter at its group's input channels and zeros elsewhere; the panels cover every
    output once."""
    monkeypatch.setattr(cpu.grouped, "NARROW_PANELS", narrow)
    rng = np.random.default_rng(8)
    w = rng.standard_normal((48, 6, 3, 3)).astype(np.float32)  # 8 groups of 6 in, 6 out
    packed, meta = cpu.grouped.grouped_weights(w, 8)
    panel = cpu.microkernel.PANEL
    width = cpu.microkernel.PANEL_VECTOR if narrow else panel
    assert [(k0, cols) for _, _, _, k0, cols in meta] == [(k0, min(width, 48 - k0)) for k0 in range(0, 48, width)]
    for offset, cin0, cp, k0, cols in meta:
        block = packed[offset:offset + 9 * cp * panel].reshape(3, 3, cp, panel)
        assert not block[..., cols:].any()  # past the panel's outputs: zeros
        for col in range(cols):
            o = k0 + col
            rel = o // 6 * 6 - cin0
            np.testing.assert_array_equal(block[:, :, rel:rel + 6, col], w[o].transpose(1, 2, 0))
            assert not np.delete(block[..., col], range(rel, rel + 6), axis=2).any()


@pytest.mark.parametrize("narrow", [True, False], ids=["narrow-panels", "whole-panels"])
@pytest.mark.parametrize("outputs_per_group", [8, 16, 24, 64])
def test_narrow_and_whole_panels_give_the_same_convolution(monkeypatch, narrow, outputs_per_group):
    monkeypatch.setattr(cpu.grouped, "NARROW_PANELS", narrow)
    groups = 4
    c = k = groups * outputs_per_group
    x, w, b = _case(outputs_per_group, 1, c, k, groups, (9, 11), (3, 3))
    ref = np.maximum(_reference(x, w, b, (1, 1), (1, 1), (1, 1), groups), 0)
    out = _out(1, k, 9, 11)
    done = _conv(x, w, b, out, (1, 1), (1, 1), (1, 1), groups, "relu")
    assert done is not None and done.candidate == "grouped"
    assert _rel(out, ref) < 1e-5


def test_channel_blocks_where_the_panels_runs_tile_the_channels():
    """RegNet's groups of 16 (one panel a group) and of 8 (two a panel), ResNeXt's of 4 inputs and outputs: runs of
    16 channels; groups of 24 outputs, whose panels share groups' inputs, keep the channels in place."""
    from engine.backends.cpu import grouped

    def run(c, k, groups):
        _, meta = grouped.grouped_weights(np.zeros((k, c // groups, 3, 3), np.float32), groups)
        return grouped.channel_blocks(meta, c)
    vector = grouped.mk.PANEL_VECTOR
    assert run(320, 320, 20) == 16 and run(48, 48, 6) == vector and run(128, 128, 32) == vector
    assert run(72, 72, 3) == 0

