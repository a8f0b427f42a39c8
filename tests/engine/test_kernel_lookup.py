"""Hand-written kernels by operation name: looked up on first use, memoized per backend; an activation's
declared fused epilogue is what kernels see, so a new activation is fused without editing engine files."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.backends import NumpyBackend
from engine.backends.base import CPU_OPERATIONS, GPU_OPERATIONS, KERNEL_OPERATIONS, Backend
from engine.backends.cpu import ops
from engine.descriptors import ActivationDesc, CoefDesc
from engine.model import Model
from engine.network import Network
from engine.plugins import load_plugins
from engine.registry import PluginMeta
from plugins.activations.relu import Relu


def test_a_backend_offers_every_operation_it_has_and_memoizes_it(monkeypatch):
    made: list[str] = []
    original = ops.pool2d

    def counting(backend):
        made.append("pool2d")
        return original(backend)

    monkeypatch.setattr(ops, "pool2d", counting)
    be = NumpyBackend()
    assert made == []  # nothing is made before it is asked for
    first = be.kernel("pool2d")
    assert be.kernel("pool2d") is first and made == ["pool2d"]
    assert NumpyBackend().kernel("pool2d") is not first and made == ["pool2d", "pool2d"]
    assert all(callable(be.kernel(op)) for op in KERNEL_OPERATIONS if op not in GPU_OPERATIONS)
    assert all(be.kernel(op) is None for op in GPU_OPERATIONS)
    assert be.device_kind == "cpu" and not be.supports_graphs


@pytest.mark.gpu
def test_the_gpu_backend_offers_the_gpu_operations_and_none_of_the_cpu_only_ones():
    from engine.backends import get_backend

    be = get_backend("cupy", notice=None)
    assert all(callable(be.kernel(op)) for op in GPU_OPERATIONS)
    assert all(be.kernel(op) is None for op in CPU_OPERATIONS)


def test_an_unknown_operation_names_the_known_ones_and_a_bare_backend_has_none():
    with pytest.raises(ValueError, match="unknown kernel operation 'upscale_concat'.*upsample_concat"):
        NumpyBackend().kernel("upscale_concat")
    bare = Backend()
    assert all(bare.kernel(op) is None for op in KERNEL_OPERATIONS)
    with pytest.raises(NotImplementedError, match="cannot capture graphs"):
        bare.capture_graph(lambda: None)


def test_epilogues_are_checked_on_the_descriptor():
    with pytest.raises(ValueError, match="unknown fused epilogue 'swish'"):
        ActivationDesc("s", "S", "s", epilogue="swish")
    with pytest.raises(ValueError, match="needs a coefficient named alpha"):
        ActivationDesc("l", "L", "l", epilogue="leaky_relu", coefficients=(CoefDesc("slope", 0.1),))


def test_a_new_activation_declaring_an_epilogue_is_fused_by_the_kernels(monkeypatch):
    class MyRelu(Relu):
        desc = replace(Relu.desc, name="my_relu", display_name="My ReLU", legacy_names=())

    reg = load_plugins()
    reg.register_plugin(PluginMeta("mine", "1", "tests", "an activation of its own"), lambda r: r.activation(MyRelu), "tests")
    seen: list[str | None] = []
    make = ops.element_wise

    def spy_factory(backend):
        kernel = make(backend)

        def spy(op, a, b, out, epilogue, coefs):
            seen.append(epilogue)
            return kernel(op, a, b, out, epilogue, coefs)
        return spy

    monkeypatch.setattr(ops, "element_wise", spy_factory)
    m = Model("m")
    m.add_layer("input", "inp", params={"dimensions": "1x4x6x6"})
    m.add_layer("element_wise", "add", params={"operation": "sub"}, inputs=["inp", "inp"], activation="my_relu")
    x = {"inp": np.random.default_rng(0).standard_normal((1, 4, 6, 6)).astype(np.float32)}
    out = Network(m, reg, NumpyBackend()).infer(x)["add"]
    assert seen == ["relu"] and np.all(out == 0)
