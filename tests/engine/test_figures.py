"""Per-layer figures for the canvas, without Qt: a report's and a precision comparison's figures per canvas layer,
a group's sums, the colour scales and the hover text; parameters and FLOPs from shapes alone."""
from __future__ import annotations

import math

import pytest

from engine.analysis import DriftResult, LayerDrift
from engine.figures import DIFF, DRIFT, TIME, Scale, combine, drift_figures, profile_figures, tooltip_lines, value, value_text
from engine.modelfile import load
from engine.typecheck import layer_costs
from resources import SAMPLES


def report(times: dict[str, float], kernels: bool = True) -> dict:
    total = sum(times.values())
    return {"layers": [{"name": n, "type": "convolution", "time_ms": {"mean": t}, "share": t / total,
                        "kernels": [{"name": f"k_{n}", "kind": "kernel", "ms": t, "grid": [2, 1, 1], "block": [64, 1, 1],
                                     "candidate": "winograd"}] if kernels else []}
                       for n, t in times.items()]}


def test_report_figures_per_canvas_layer_with_a_base_and_merged_template_layers():
    figs = profile_figures(report({"a": 1.0, "t__x": 2.0, "t__y": 3.0, "gone": 1.0}), report({"a": 0.5, "t__x": 2.0}),
                           rename=lambda n: None if n == "gone" else n.split("__")[0])
    assert set(figs) == {"a", "t"}
    assert figs["a"]["diff_ms"] == pytest.approx(0.5) and figs["a"]["base_ms"] == pytest.approx(0.5)
    t = figs["t"]  # a template instance's layers are summed; the one missing from the base adds no change
    assert t["time_ms"] == 5.0 and t["share"] == pytest.approx(5 / 7) and t["diff_ms"] == 0.0 and t["layers"] == 2
    assert [k["name"] for k in t["kernels"]] == ["k_t__y", "k_t__x"]  # slowest first
    assert value(TIME, t) == pytest.approx(5 / 7) and value_text(TIME, t) == "5.000 ms · 71.4%"
    assert value_text(DIFF, figs["a"]) == "+0.500 ms (+100%)"


def test_group_sums_drift_is_the_largest_and_absent_figures_stay_absent():
    g = combine([{"time_ms": 1.0, "params": 10, "drift": 1e-3, "threshold": 0.01}, {"time_ms": 2.0, "params": 5},
                 {"drift": math.inf, "threshold": 0.01}])
    assert g["time_ms"] == 3.0 and g["params"] == 15 and g["drift"] == math.inf and g["layers"] == 3
    assert "diff_ms" not in g and "flops" not in g and value(DIFF, g) is None


def test_drift_figures_and_hover_text():
    result = DriftResult("fp32", "fp16", 1e-2, [LayerDrift("c1", "convolution", 2e-2, 0.5, 1.0, nonfinite=3)])
    fig = drift_figures(result)["c1"]
    text = "\n".join(tooltip_lines("c1", DRIFT, fig))
    assert "drift 2.000e-02 (fp16 against fp32), over the threshold 0.01" in text and "3 non-finite" in text
    text = "\n".join(tooltip_lines("c1", TIME, profile_figures(report({"c1": 1.0}))["c1"]))
    assert "time 1.0000 ms (mean), 100.0% of the layers' time" in text
    assert "k_c1 grid 2x1x1 block 64x1x1  [winograd]" in text


def test_scales_span_what_is_shown():
    share = Scale.over(TIME, [0.1, 0.5, None])
    assert (share.lo, share.hi) == (0.0, 0.5) and share.label(0.5) == "50.0%"
    assert share.colour(0.5) == share.at(1.0) != share.colour(0.0)
    change = Scale.over(DIFF, [-1.0, 3.0])
    assert (change.lo, change.hi) == (-3.0, 3.0) and change.label(3.0) == "+3.000 ms"
    assert change.colour(-3.0)[1] > change.colour(-3.0)[0] and change.colour(3.0)[0] > change.colour(3.0)[1]
    drift = Scale.over(DRIFT, [1e-5, 1e-1, 0.0], threshold=1e-2)
    assert (drift.lo, drift.hi) == (1e-5, 1e-1) and drift.position(1e-3) == pytest.approx(0.5)
    assert drift.colour(1e-1) == (220, 50, 40) and "threshold 0.01" in drift.unit


def test_layer_costs_from_shapes(registry):
    model = load(str(SAMPLES / "denoiser.lnet"), registry)
    costs = layer_costs(model, registry)
    assert costs["conv1"]["params"] == 16 * 3 * 3 * 3 + 16  # weights and bias of a 3x3 convolution, 3 -> 16
    assert costs["input"]["params"] == 0 and all(c["flops"] > 0 for c in costs.values())
