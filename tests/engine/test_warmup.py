"""engine/backends/warmup.py: the small network that compiles every CPU kernel path ahead of use."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from engine.backends import warmup
from engine.backends.numpy_backend import NumpyBackend
from engine.network import Network
from engine.tensor import TensorFormat

ck = pytest.importorskip("engine.backends.cpu_kernels", reason="Numba is not installed")


@pytest.mark.parametrize("fmt", ["fp32 nhwc", "fp32 nchw"])
def test_the_warmup_network_takes_every_kernel_path_and_computes_right(monkeypatch, registry, fmt):
    launches = []
    real = ck._launch
    monkeypatch.setattr(ck, "_launch", lambda kernel, *args: launches.append((kernel.__name__, args[:3])) or real(
        kernel, *args))
    x = np.random.default_rng(1).random((1, 3, 40, 40), dtype=np.float32)
    net = Network(warmup.warmup_model(), registry, NumpyBackend(), TensorFormat.parse(fmt))
    net.set_input("input", x)
    net.run()
    got = net.output("output")
    kinds = {(name, args[2]) if name in ("_wino_par", "_conv_par") else (name, None) for name, args in launches}
    assert {("_wino_par", -1), ("_wino_par", 0), ("_wino_par", 1), ("_wino_par", 2)} <= kinds  # blocks, steps
    if fmt.endswith("nhwc"):  # im2col convolutions, pooling and element-wise kernels are NHWC ones
        assert {("_conv_par", 0), ("_conv_par", 1), ("_conv_par", 2), ("_pool", None), ("_element_wise", None)} <= kinds
    assert ("_upsample", None) in kinds
    monkeypatch.setenv("LAYERLAB_CPU_KERNELS", "off")
    plain = Network(warmup.warmup_model(), registry, NumpyBackend(), TensorFormat.parse(fmt))
    plain.set_input("input", x)
    plain.run()
    ref = plain.output("output")
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5


def test_start_in_background_only_when_needed(monkeypatch):
    started = []
    monkeypatch.setattr(warmup.subprocess, "Popen", lambda argv, **kw: started.append(argv) or "process")
    monkeypatch.setattr(warmup, "needed", lambda: False)
    assert warmup.start_in_background() is None and not started
    monkeypatch.setattr(warmup, "needed", lambda: True)
    assert warmup.start_in_background() == "process"
    assert started == [[sys.executable, "-m", "engine.backends.warmup"]]


def test_main_says_when_there_is_nothing_to_do(monkeypatch, capsys):
    monkeypatch.setattr(warmup, "needed", lambda: False)
    assert warmup.main() == 0 and "compiled already" in capsys.readouterr().out
    monkeypatch.setattr(warmup, "needed", lambda: True)
    monkeypatch.setattr(warmup, "warm", lambda: 12.3)
    assert warmup.main() == 0 and "done in 12 s" in capsys.readouterr().out
