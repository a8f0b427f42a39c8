"""mix against a float64 NumPy reference on every backend and format; its runtime options."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ParameterError, ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, round_like, run_layer
from tests.plugins.analysis_helpers import chain_net, option


def ref_mix(a, b, factor, blend, divider=0.5, orientation="vertical", line=True):
    a, b = np.broadcast_arrays(a.astype(np.float64), b.astype(np.float64))
    if blend == "split":
        out = b.copy()
        size = a.shape[3] if orientation == "vertical" else a.shape[2]
        cut = min(max(int(round(divider * size)), 0), size)
        if orientation == "vertical":
            out[:, :, :, :cut] = a[:, :, :, :cut]
            if line and 0 < cut < size:
                out[:, :, :, cut] = 1.0
        else:
            out[:, :, :cut, :] = a[:, :, :cut, :]
            if line and 0 < cut < size:
                out[:, :, cut, :] = 1.0
        return out
    other = {"linear": b, "difference": np.abs(a - b), "multiply": a * b, "screen": 1 - (1 - a) * (1 - b)}[blend]
    return a + factor * (other - a)


CASES = [
    ((1, 3, 7, 9), (1, 3, 7, 9), dict(blend="linear", factor=0.25)),
    ((2, 3, 5, 6), (2, 3, 5, 6), dict(blend="difference", factor=1)),
    ((1, 2, 6, 5), (1, 2, 6, 5), dict(blend="multiply", factor=0.7)),
    ((1, 3, 6, 5), (1, 1, 6, 5), dict(blend="screen", factor=0.4)),
    ((1, 3, 6, 10), (1, 3, 6, 10), dict(blend="split", divider=0.3)),
    ((1, 2, 9, 4), (1, 2, 9, 4), dict(blend="split", divider=0.5, orientation="horizontal", divider_line="false")),
    ((1, 1, 4, 4), (1, 1, 4, 4), dict(blend="split", divider=1.0)),
]


@each_backend_and_format
@pytest.mark.parametrize("sa,sb,params", CASES)
def test_mix_matches_reference(backend, fmt, sa, sb, params):
    rng = np.random.default_rng(4)
    a, b = rng.random(sa).astype(np.float32), rng.random(sb).astype(np.float32)
    out, _, _ = run_layer("mix", params, [a, b], fmt, backend)
    p = {"factor": 0.5, "divider": 0.5, "orientation": "vertical", "divider_line": "true"} | params
    ref = ref_mix(round_like(a, fmt), round_like(b, fmt), float(p["factor"]), p["blend"], float(p["divider"]),
                  p["orientation"], str(p["divider_line"]) == "true")
    assert_close(out, ref, fmt, f"mix {params}")


def test_mix_shape_mismatch_is_named():
    with pytest.raises(ShapeError, match=r"mix L: inputs a 1x3x4x4 and b 1x3x5x4 differ in H \(4 vs 5\)"):
        run_layer("mix", {}, [np.zeros((1, 3, 4, 4), np.float32), np.zeros((1, 3, 5, 4), np.float32)], FORMATS[0])


def test_mix_runtime_options_are_described():
    net = chain_net("mix", {"factor": 0.2}, n_inputs=2)
    opts = net.runtime_options()["L"]
    assert [o["name"] for o in opts] == ["blend", "factor", "divider", "orientation", "divider_line"]
    f = option(net, "L", "factor")
    assert f == {"name": "factor", "text": "Mix factor", "type": "float", "value": 0.2, "default": 0.5,
                 "min": 0.0, "max": 1.0, "step": 0.01, "tooltip": f["tooltip"], "slider": True}
    assert option(net, "L", "blend")["values"] == ["linear", "difference", "multiply", "screen", "split"]
    assert option(net, "L", "divider_line")["type"] == "bool"


@pytest.mark.parametrize("name,value,message", [
    ("factor", "1.5", r"mix L: parameter factor: '1.5' is not a number in \[0, 1\]"),
    ("factor", "abc", r"mix L: parameter factor: 'abc' is not a number in \[0, 1\]"),
    ("factor", -0.1, r"'-0.1' is not a number in \[0, 1\]"),
    ("blend", "overlay", r"mix L: parameter blend: 'overlay' is not one of linear, difference, multiply, screen, split"),
    ("divider_line", "maybe", r"'maybe' is not true or false"),
    ("opacity", "1", r"mix L: parameter opacity: mix has no runtime option 'opacity' \(it has: blend, factor"),
])
def test_mix_runtime_option_validation(name, value, message):
    net = chain_net("mix", n_inputs=2)
    net.run()
    before = net.output("out")
    with pytest.raises(ParameterError, match=message):
        net.set_runtime_option("L", name, value)
    assert net.run() == []  # nothing became affected
    np.testing.assert_array_equal(net.output("out"), before)
    assert option(net, "L", "factor")["value"] == 0.5


def test_mix_option_change_reruns_only_affected_layers():
    net = chain_net("mix", n_inputs=2)
    first = net.run()
    assert set(first) == set(net.order)
    a, b = net.output("pre0"), net.output("pre1")
    net.set_runtime_option("L", "factor", "0.75")  # as text, like the vendor API
    assert net.run() == ["L", "post", "out"]
    np.testing.assert_allclose(net.output("L"), ref_mix(a, b, 0.75, "linear"), rtol=1e-5, atol=1e-6)
    net.set_runtime_option("L", "blend", "difference")
    assert net.run() == ["L", "post", "out"]
    np.testing.assert_allclose(net.output("L"), ref_mix(a, b, 0.75, "difference"), rtol=1e-5, atol=1e-6)
    net.set_runtime_option("L", "factor", 0.75)  # unchanged value: still re-evaluated, never reshaped
    reshapes = net.layer("L").reshape_count
    assert net.run() == ["L", "post", "out"]
    assert net.layer("L").reshape_count == reshapes
    assert option(net, "L", "blend")["value"] == "difference"
