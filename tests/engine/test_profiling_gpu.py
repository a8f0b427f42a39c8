"""On the GPU: the profile's layer times, from CUPTI records of the CUDA-graph replay, add up to the plain run."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from engine import profiling as prof
from engine.network import Network
from engine.run import time_iteration
from engine.tensor import TensorFormat
from tests.bench import networks

pytestmark = pytest.mark.gpu


def check_sums(net: Network) -> None:
    pytest.importorskip("cupti")
    net.run()
    before = sorted(time_iteration(net) for _ in range(20))[10]  # the median plain run
    result = prof.profile(net, iterations=20, warmup=2, measure_device=False)
    after = sorted(time_iteration(net) for _ in range(20))[10]
    assert result.timing == prof.TIMING_CUPTI_GRAPH, result.timing
    layer_sum = sum(lp.stats()["mean"] for lp in result.layers)
    # the layers add up to the profile's own plain runs (taken minutes apart, other test processes sharing the GPU,
    # a separate measurement moves by more than the profile's error)...
    plain = float(np.median(result.network_times_ms))
    assert abs(layer_sum - plain) <= 0.05 * plain, (layer_sum, plain, result.notes)
    # ...which are plain runs as this test times them, before or after
    assert 0.9 * min(before, after) <= plain <= 1.1 * max(before, after), (plain, before, after)
    for lp in result.layers:
        if lp.times_ms:
            assert lp.stats()["mean"] == pytest.approx(sum(lp.device_ms) / len(lp.device_ms)
                                                       + sum(lp.gap_ms) / len(lp.gap_ms))
    convs = [lp for lp in result.layers if lp.type.startswith("conv")]
    assert convs and all(lp.kernels and all(k.name for k in lp.kernels) for lp in convs)
    assert all(k.grid and k.block for lp in convs for k in lp.kernels if k.kind == "kernel")


@pytest.mark.parametrize("name", ["dncnn", "unet", "resnet18"])
@pytest.mark.parametrize("fmt", ["fp16 nhwc", "fp32 nchw"])
def test_reference_networks_layer_times_add_up(registry, name, fmt):
    from engine.backends import get_backend

    net = Network(getattr(networks, name)(), registry, get_backend("cupy", notice=None), TensorFormat.parse(fmt))
    check_sums(net)


@pytest.mark.parametrize("name", ["mobilenet_v2", "efficientnet_b0", "densenet121"])
def test_zoo_networks_layer_times_add_up(registry, name):
    pytest.importorskip("torchvision")
    from engine.backends import get_backend
    from engine.importers.onnx.importer import import_onnx
    from tests.bench.zoo_kernels import export, torch_model

    path = Path(tempfile.mkdtemp()) / f"{name}.onnx"
    export(torch_model(name), 224, path)
    res = import_onnx(path, input_shapes={"input": (1, 3, 224, 224)}, registry=registry)
    net = Network(res.model, registry, get_backend("cupy", notice=None), TensorFormat.parse("fp16 nhwc"),
                  weights=res.weights_source())
    check_sums(net)
