from __future__ import annotations

import io
import sys
import types

import numpy as np
import pytest

import engine.backends as backends
from engine.errors import BackendError


@pytest.fixture
def no_probe_cache(monkeypatch):
    monkeypatch.setattr(backends, "_cupy_probe", None)


def test_cupy_installed_without_driver_is_detected_not_crashed(monkeypatch, no_probe_cache, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # a machine that has not seen the notice yet
    fake = types.ModuleType("cupy")

    class Runtime:
        @staticmethod
        def getDeviceCount():
            raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")
    fake.cuda = types.SimpleNamespace(runtime=Runtime)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    ok, reason = backends.cupy_status()
    assert not ok and "no usable CUDA GPU" in reason and "insufficient" in reason
    note = io.StringIO()
    b = backends.get_backend("auto", notice=note)
    assert b.name == "numpy"
    assert note.getvalue().count("\n") == 1 and "using the numpy backend" in note.getvalue()
    with pytest.raises(BackendError, match="the cupy backend cannot be used here: no usable CUDA GPU"):
        backends.get_backend("cupy")


def test_cupy_not_installed(monkeypatch, no_probe_cache):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import fails
    assert backends.cupy_status() == (False, "cupy is not installed (pip install 'layerlab[gpu]')")


def test_unknown_backend_and_numpy():
    with pytest.raises(BackendError, match="unknown backend 'tpu'"):
        backends.get_backend("tpu")
    b = backends.get_backend("numpy")
    assert b.xp is np and "CPU" in b.device_name


@pytest.mark.gpu
def test_cupy_backend_when_usable():
    b = backends.get_backend("auto", notice=None)
    assert b.name == "cupy"
    x = b.to_device(np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(b.to_host(x * 2), np.arange(6) * 2)
    t = b.timer()
    t.start()
    _ = x + 1
    t.stop()
    assert t.elapsed_ms() >= 0
