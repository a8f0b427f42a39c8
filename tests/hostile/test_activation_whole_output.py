"""Wrong numbers are a defect too: an activation that is not element-wise (softmax) must be applied to a layer's
whole output. For every layer and every activation, the layer with the activation must equal the layer without
it followed by the activation alone (applied to the whole NCHW output), with fusing rules on and off, in every
tensor format. The concatenation + softmax case is also checked through the upsample + concatenation chain that
the ``upscale_concat`` fusing rule replaces."""
from __future__ import annotations

import numpy as np
import pytest

from engine.backends import get_backend
from engine.descriptors import InputKind
from engine.layer import BoundActivation
from engine.model import Model
from engine.network import Network
from engine.plugins import load_plugins
from engine.tensor import FORMATS, Dims, TensorFormat

REGISTRY = load_plugins(entry_point_plugins=False)
#: layers that need other inputs or parameters than 2 inputs of 1x4x8x8 with their defaults
CONFIG: dict[str, dict] = {
    "mono_to_rgb": {"channels": 1},
    "color_conversion": {"channels": 3},
    "mono_four_stack": {"channels": 1},
    "zero_embed": {"params": {"size": "1x4x10x12"}},
    "upscale_concat": {"dims": [(1, 4, 4, 4), (1, 4, 8, 8)]},
    "upscale_concat_two": {"dims": [(1, 4, 4, 4), (1, 4, 8, 8), (1, 4, 8, 8)]},
    "upscale_sum": {"dims": [(1, 4, 4, 4), (1, 4, 8, 8)]},
    "conv_sum": {"params": {"num_output_channels": "4"}},  # the residual has the convolution's 4 channels
    "conv_bn_sum": {"params": {"num_output_channels": "4"}},
}
SKIP = {"input", "output", "placeholder"}  # no computation of their own (a placeholder refuses to run)
#: layers documented to apply their activation in the middle of their computation (conv_pool pools the activated
#: convolution); their exporters say so with ``exports_activation``
LAYERS = [n for n in REGISTRY.layer_names if n not in SKIP and not REGISTRY.layer_class(n).exports_activation]
ACTIVATIONS = ["none", *REGISTRY.activation_names]
BACKENDS = ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)]


def _model(layer_type: str, activation: str) -> Model:
    desc = REGISTRY.find_layer(layer_type)
    assert desc is not None
    cfg = CONFIG.get(layer_type, {})
    n_inputs = sum(1 for i in desc.inputs if i.kind is InputKind.PRIMARY)
    if desc.infinite_input:
        n_inputs += 2
    dims = cfg.get("dims") or [(1, cfg.get("channels", 4), 8, 8)] * n_inputs
    m = Model("probe")
    for i, d in enumerate(dims):
        m.add_layer("input", f"in{i}", params={"dimensions": str(Dims(*d))})
    m.add_layer(layer_type, "L", params=cfg.get("params", {}), inputs=[f"in{i}" for i in range(len(dims))],
                activation=activation)
    m.add_layer("output", "out", inputs=["L"])
    return m


def _run(model: Model, fmt: TensorFormat, fusing: str, backend: str = "numpy") -> np.ndarray:
    net = Network(model, REGISTRY, get_backend(backend, notice=None), fmt, fusing=fusing, seed=3, graph_capture=False)
    for i, name in enumerate(net.input_names):
        d = net.input_dims(name)
        net.set_input(name, np.random.default_rng(i).standard_normal(tuple(d)).astype(np.float32))
    net.run()
    return net.output("L")


def _activation_alone(y: np.ndarray, activation: str) -> np.ndarray:
    cls = REGISTRY.activation_class(activation)
    assert cls is not None
    bound = BoundActivation(cls, cls.desc.coefficient_values({}))
    return np.asarray(bound(np, y.astype(np.float64)), dtype=np.float64)


def _tolerance(fmt: TensorFormat) -> dict:
    return {"rtol": 2e-2, "atol": 2e-2} if fmt.dtype == np.float16 else {"rtol": 1e-4, "atol": 1e-4}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layer_type", LAYERS)
def test_layer_with_activation_equals_layer_then_activation(layer_type, backend):
    checked = 0
    for fmt in FORMATS:
        if fmt not in REGISTRY.find_layer(layer_type).formats:
            continue
        for fusing in ("on", "off"):
            plain = _run(_model(layer_type, "none"), fmt, fusing, backend)
            for activation in ACTIVATIONS[1:]:
                got = _run(_model(layer_type, activation), fmt, fusing, backend)
                want = _activation_alone(plain, activation)
                np.testing.assert_allclose(got, want, **_tolerance(fmt),
                                           err_msg=f"{layer_type} + {activation}, {fmt}, fusing {fusing}")
                checked += 1
    assert checked >= len(ACTIVATIONS) - 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fusing", ["on", "off"])
@pytest.mark.parametrize("fmt", [str(f) for f in FORMATS])
def test_upsample_concatenation_softmax_is_one_softmax_over_the_joined_channels(fmt, fusing, backend):
    m = Model("probe")
    m.add_layer("input", "small", params={"dimensions": "1x3x4x4"})
    m.add_layer("input", "skip", params={"dimensions": "1x2x8x8"})
    m.add_layer("upsample", "up", params={"factor": "2"}, inputs=["small"])
    m.add_layer("concatenation", "L", inputs=["up", "skip"], activation="softmax")
    m.add_layer("output", "out", inputs=["L"])
    y = _run(m, TensorFormat.parse(fmt), fusing, backend)
    np.testing.assert_allclose(y.sum(axis=1), 1.0, **_tolerance(TensorFormat.parse(fmt)))
