"""The untimed runs before the timed ones (the first loads or compiles the CPU kernels): followed layer by layer and
cancelled within one layer, on both timing paths."""
from __future__ import annotations

import pytest

from engine.model import Model
from engine.profiling import Cancelled
from engine.run import RunSpec, open_network, run_timed


def chain() -> Model:
    m = Model("chain")
    m.add_layer("input", "inp", params={"dimensions": "1x3x16x16"})
    m.add_layer("convolution", "c1", params={"num_output_channels": "4"}, inputs=["inp"])
    m.add_layer("convolution", "c2", params={"num_output_channels": "4"}, inputs=["c1"], activation="relu")
    m.add_layer("output", "out", inputs=["c2"])
    return m


@pytest.mark.parametrize("profiling", [True, False])
def test_warm_up_is_followed_layer_by_layer(registry, profiling):
    spec = RunSpec(backend="numpy", iterations=2, warmup=1, profiling=profiling, fusing="off")
    net = open_network(chain(), spec, registry)
    seen: list[tuple[int, int, str]] = []
    result = run_timed(net, spec, warming=lambda done, total, layer: seen.append((done, total, layer)))
    passes = 3 if profiling else 2  # the first run, (profiling: the run noting each layer's kernels,) the warm-up
    total = passes * len(net.order)
    assert [d for d, _, _ in seen] == list(range(1, total + 1))
    assert {t for _, t, _ in seen} == {total}
    assert {name for _, _, name in seen} == set(net.order)
    assert len(result.network_times_ms) == 2
    assert not net.hooks.layer_done  # the timed runs go without it


@pytest.mark.parametrize("profiling", [True, False])
def test_a_cancel_is_seen_within_one_layer_of_the_first_run(registry, profiling):
    spec = RunSpec(backend="numpy", iterations=2, warmup=1, profiling=profiling, fusing="off")
    net = open_network(chain(), spec, registry)
    seen: list[int] = []
    with pytest.raises(Cancelled):
        run_timed(net, spec, cancelled=lambda: len(seen) >= 2, warming=lambda done, _t, _l: seen.append(done))
    assert seen == [1, 2]  # the first run stopped after its second layer
