"""The automatic mixed precision search (engine/precision.py) on networks with planted fp16 trouble."""
from __future__ import annotations

import numpy as np
import pytest

from engine.analysis import Variant, layer_drift
from engine.model import Model
from engine.network import Network
from engine.precision import fix_precision, precision_pins, time_mixed, with_pins
from engine.profiling import Cancelled
from engine.run import RunSpec
from engine.tensor import TensorFormat
from tests.harness import BACKENDS, backend_param

X = np.random.default_rng(1).uniform(8, 16, (1, 2, 6, 6)).astype(np.float32)


def planted(middle: bool = False, tiny_branch: bool = False) -> Model:
    """'amp' multiplies c2 by 1e5: beyond the fp16 range. ``middle``: 'shrink' scales it back before c3.
    ``tiny_branch``: a branch of values below fp16's smallest numbers that the network output does not feel."""
    m = Model("planted")
    m.add_layer("input", "inp", params={"dimensions": "1x2x6x6"})
    m.add_layer("convolution", "c1", params={"num_output_channels": "4"}, inputs=["inp"])
    src = "c1"
    if tiny_branch:
        m.add_layer("linear_blend", "tiny", params={"weight_a": "1e-9"}, inputs=["c1"])
        m.add_layer("element_wise", "s", params={"operation": "sum"}, inputs=["c1", "tiny"])
        src = "s"
    m.add_layer("convolution", "c2", params={"num_output_channels": "4"}, inputs=[src])
    m.add_layer("linear_blend", "amp", params={"weight_a": "1e5"}, inputs=["c2"])
    last = "amp"
    if middle:
        m.add_layer("linear_blend", "shrink", params={"weight_a": "1e-5"}, inputs=["amp"])
        m.add_layer("convolution", "c3", params={"num_output_channels": "4"}, inputs=["shrink"])
        last = "c3"
    m.add_layer("output", "out", inputs=[last])
    return m


def test_the_planted_overflow_is_fixed_by_pinning_exactly_that_layer(registry):
    fix = fix_precision(planted(), registry, {"inp": X}, threshold=1e-2)
    assert fix.pins == ["amp"]
    assert fix.satisfied and fix.before.outputs["out"] == np.inf
    assert fix.after.outputs["out"] <= 1e-2


def test_an_overflow_read_by_the_next_layer_needs_both_pinned(registry):
    fix = fix_precision(planted(middle=True), registry, {"inp": X}, threshold=1e-2)
    assert fix.pins == ["amp", "shrink"]  # amp's fp32 output rounded back to fp16 would overflow again
    assert fix.satisfied and fix.after.max_output_error <= 1e-2


def test_pins_the_output_does_not_need_are_pruned(registry):
    fix = fix_precision(planted(tiny_branch=True), registry, {"inp": X}, threshold=1e-2)
    assert any(line.startswith("pin tiny") for line in fix.log)  # greedy took it first ...
    assert "unpin tiny" in " ".join(fix.log)  # ... and pruning removed it
    assert fix.pins == ["amp"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_pinned_network_matches_all_fp32_within_the_threshold(registry, backend):
    be = backend_param(backend)
    model = planted(middle=True)
    cand = Variant(backend, TensorFormat.parse("fp16 nhwc"))
    fix = fix_precision(model, registry, {"inp": X}, candidate=cand, threshold=5e-3)
    assert fix.satisfied
    ref = Network(model, registry, be, TensorFormat.parse("fp32 nchw")).infer({"inp": X})
    mixed_net = Network(with_pins(model, fix.pins), registry, be, TensorFormat.parse("fp16 nhwc"))
    mixed = mixed_net.infer({"inp": X})
    assert set(mixed_net.pinned) >= set(fix.pins)
    for name, value in ref.items():
        assert layer_drift(name, "", value, mixed[name]).rel_error <= 5e-3


def test_with_pins_sets_exactly_those_and_keeps_layouts():
    m = planted(middle=True)
    m.set_layer_format("c1", "fp32 nhwc")
    m.set_layer_format("c3", "fp32")
    pinned = with_pins(m, ["amp"])
    assert precision_pins(pinned) == ["amp"]
    assert pinned.layers["c1"].format == "nhwc" and pinned.layers["c3"].format == ""
    assert m.layers["c3"].format == "fp32"  # the model itself is unchanged


def test_the_search_reports_progress_and_can_be_cancelled(registry):
    seen: list[float] = []
    fix_precision(planted(), registry, {"inp": X}, progress=lambda f, _m: seen.append(f))
    assert seen[0] == 0.0 and seen[-1] == 1.0 and seen == sorted(seen)
    with pytest.raises(Cancelled):
        fix_precision(planted(), registry, {"inp": X}, cancelled=lambda: True)


def test_bad_search_settings_are_refused(registry):
    from engine.errors import LayerLabError

    with pytest.raises(LayerLabError, match="threshold"):
        fix_precision(planted(), registry, threshold=0)
    with pytest.raises(LayerLabError, match="not fp16"):
        fix_precision(planted(), registry, candidate="fp32")


def test_time_mixed_runs_the_three_variants(registry):
    times = time_mixed(planted(), registry, ["amp"], RunSpec(backend="numpy", format="fp16 nchw", iterations=2))
    assert [t.label for t in times] == ["mixed", "all fp16", "all fp32"]
    assert times[0].pins == 1 and times[0].conversions == 1 and all(t.ms > 0 for t in times)
    assert times[0].fused == 0  # linear_blend (an analysis layer) takes no fused conversion
