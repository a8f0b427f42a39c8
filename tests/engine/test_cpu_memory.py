"""engine/backends/cpu/memory.py: the NumPy backend's tensors and the CPU kernels' weights start a cache line."""
from __future__ import annotations

import mmap

import numpy as np
import pytest

from engine.backends.cpu import memory
from engine.backends.cpu.backend import NumpyBackend
from engine.backends.cpu.memory import CACHE_LINE, HUGE_PAGE, aligned_copy, aligned_empty, aligned_zeros
from engine.model import Model
from engine.network import Network
from engine.tensor import TensorFormat


def _starts_a_line(a: np.ndarray) -> bool:
    return a.ctypes.data % CACHE_LINE == 0


@pytest.mark.parametrize("shape", [1, 7, (3, 5), (2, 3, 4, 5), (0,), (1000, 17)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint8, np.int64])
def test_aligned_arrays_start_a_cache_line_and_hold_what_they_should(shape, dtype):
    rng = np.random.default_rng(0)
    for _ in range(8):  # NumPy's own allocations of these sizes mostly start 16 to 48 bytes into a line
        e = aligned_empty(shape, dtype)
        assert e.shape == np.empty(shape).shape and e.dtype == np.dtype(dtype) and e.flags.c_contiguous
        assert e.flags.writeable and (e.size == 0 or _starts_a_line(e))
        z = aligned_zeros(shape, dtype)
        assert not z.any() and (z.size == 0 or _starts_a_line(z))
    src = rng.standard_normal(np.empty(shape).shape).astype(np.float64)
    c = aligned_copy(src.T if src.ndim == 2 else src, dtype)  # a strided source too
    assert c.dtype == np.dtype(dtype) and c.flags.c_contiguous and (c.size == 0 or _starts_a_line(c))
    np.testing.assert_array_equal(c, (src.T if src.ndim == 2 else src).astype(dtype))


def _mapping_flags(address: int) -> set[str] | None:
    """The VmFlags of this process's memory mapping holding ``address`` (Linux), None where there is no smaps."""
    try:
        text = open("/proc/self/smaps").read()
    except OSError:
        return None
    inside = False
    for line in text.splitlines():
        head = line.split()[0] if line.split() else ""
        if "-" in head and ":" not in head:  # a mapping's first line: start-end perms ...
            lo, hi = (int(v, 16) for v in head.split("-"))
            inside = lo <= address < hi
        elif inside and line.startswith("VmFlags:"):
            return set(line.split()[1:])
    return None


@pytest.mark.parametrize("nbytes", [HUGE_PAGE, 3 * HUGE_PAGE + 4 * 1000, 5 * HUGE_PAGE // 2])
def test_large_arrays_start_a_huge_page_and_ask_for_huge_pages(nbytes):
    """An array of at least a huge page starts one, and its mapping carries the advice for transparent huge pages
    (``hg`` in Linux's VmFlags); it is an ordinary, writable, C-contiguous array of what was asked for, filled like
    any other; smaller arrays, or with the setting off, come from NumPy's allocator (a cache line apart)."""
    a = aligned_empty(nbytes // 4)
    assert a.shape == (nbytes // 4,) and a.flags.c_contiguous and a.flags.writeable
    assert a.ctypes.data % HUGE_PAGE == 0
    a[:] = np.arange(a.size, dtype=np.float32)
    assert a[-1] == a.size - 1
    z = aligned_zeros((2, nbytes // 8))
    assert not z.any() and z.ctypes.data % HUGE_PAGE == 0
    flags = _mapping_flags(a.ctypes.data)
    if flags is not None and hasattr(mmap, "MADV_HUGEPAGE"):
        assert "hg" in flags
    c = aligned_copy(np.ones((nbytes // 16, 4), np.float64))
    assert c.dtype == np.float32 and c.ctypes.data % HUGE_PAGE == 0 and (c == 1).all()


def _mapped(a: np.ndarray) -> bool:
    """Whether ``a``'s memory is a map of its own (the huge page path) rather than NumPy's allocation."""
    base = a
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None) if isinstance(base, np.ndarray) else getattr(base, "obj", None)
    return base is not None


def test_smaller_arrays_and_the_setting_off_take_numpys_allocator(monkeypatch):
    assert _mapped(aligned_empty(HUGE_PAGE // 4)) == hasattr(mmap, "MADV_HUGEPAGE")
    small = aligned_empty(HUGE_PAGE // 4 - 1)
    assert _starts_a_line(small) and not _mapped(small)
    monkeypatch.setattr(memory, "HUGE_PAGES", False)
    off = aligned_empty(4 * HUGE_PAGE // 4)
    assert _starts_a_line(off) and not _mapped(off)


def test_a_networks_tensors_start_a_cache_line(registry):
    m = Model("aligned")
    m.add_layer("input", "input", params={"dimensions": "1x5x9x9"})
    m.add_layer("convolution", "conv", params={"num_output_channels": "20", "kernel_size": "3", "padding": "1"},
                inputs=["input"], activation="relu")
    m.add_layer("convolution", "conv2", params={"num_output_channels": "12", "kernel_size": "1"}, inputs=["conv"])
    m.add_layer("output", "output", inputs=["conv2"])
    for fmt in ("fp32 nhwc", "fp32 nchw", "fp16 nhwc"):
        net = Network(m, registry, NumpyBackend(), TensorFormat.parse(fmt))
        net.run()
        assert net._slots and all(_starts_a_line(s) for s in net._slots)
        assert np.isfinite(net.output("output")).all()


def test_a_fused_layers_inner_buffer_starts_a_cache_line(registry):
    """A convolution + pooling layer's convolution result, kept by the layer between runs, comes from the backend as
    the tensors do."""
    m = Model("inner")
    m.add_layer("input", "input", params={"dimensions": "1x3x20x20"})
    m.add_layer("conv_pool", "stem", params={"num_output_channels": "20", "kernel_size": "3", "padding": "1"},
                inputs=["input"], activation="relu")
    m.add_layer("output", "output", inputs=["stem"])
    for fmt in ("fp32 nhwc", "fp32 nchw"):
        net = Network(m, registry, NumpyBackend(), TensorFormat.parse(fmt))
        net.run()
        inner = net.layer("stem").__dict__["_inner_buffer"]
        assert inner.shape[1:] in ((20, 20, 20),) and _starts_a_line(inner)
        assert np.isfinite(net.output("output")).all()


def test_the_kernels_weights_start_a_cache_line():
    pytest.importorskip("numba", reason="the CPU kernels need Numba")
    from engine.backends.cpu import depthwise, few_outputs, im2col, panels, winograd

    rng = np.random.default_rng(1)
    w = rng.standard_normal((40, 24, 3, 3)).astype(np.float32)
    dw = rng.standard_normal((48, 1, 3, 3)).astype(np.float32)
    few = rng.standard_normal((3, 24, 3, 3)).astype(np.float32)
    u = winograd.transform_weights(w[:32])
    made = {
        "panels": (panels.panel_weights(w), None),
        "gemm": (im2col.gemm_weights(w), w.transpose(2, 3, 1, 0).reshape(-1, 40)),
        "depthwise": (depthwise.depthwise_weights(dw), dw[:, 0].transpose(1, 2, 0)),
        "tiled": (depthwise.tiled_weights(depthwise.depthwise_weights(dw), 2), None),
        "winograd": (u, None),
        "winograd panels": (winograd.winograd_panels(u), None),
        "few outputs": (few_outputs.few_output_weights(few), None),
    }
    for name, (got, want) in made.items():
        assert got.dtype == np.float32 and got.flags.c_contiguous and _starts_a_line(got), name
        if want is not None:
            np.testing.assert_array_equal(got, want, err_msg=name)
    # the panels hold the weights in order, the last panel's columns past K zero
    p = made["panels"][0]
    np.testing.assert_array_equal(p.transpose(1, 0, 2).reshape(p.shape[1], -1)[:, :40], made["gemm"][0])
    assert not p[-1, :, 40 - 32:].any()
