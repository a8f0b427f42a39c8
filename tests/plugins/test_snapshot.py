"""snapshot: passes through on every backend and format; holds a frozen copy while hold is on."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ParameterError
from engine.model import Model
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import FORMATS
from tests.harness import BACKENDS, FORMAT_IDS, assert_close, backend_param, each_backend_and_format, round_like, run_layer


@each_backend_and_format
def test_snapshot_passes_through(backend, fmt):
    x = np.random.default_rng(9).standard_normal((2, 3, 4, 5)).astype(np.float32)
    out, _, _ = run_layer("snapshot", {}, [x], fmt, backend)
    assert_close(out, round_like(x, fmt).astype(np.float64), fmt, "snapshot")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", FORMATS[:2], ids=FORMAT_IDS[:2])
def test_snapshot_holds_while_inputs_change(backend, fmt):
    m = Model("snap")
    m.add_layer("input", "inp", params={"dimensions": "1x2x4x4"})
    m.add_layer("snapshot", "snap", inputs=["inp"], activation="relu")
    m.add_layer("mix", "cmp", params={"blend": "difference", "factor": "1"}, inputs=["inp", "snap"])
    m.add_layer("output", "out", inputs=["cmp"])
    net = Network(m, default_registry(), backend_param(backend), fmt, reuse_buffers=True)
    rng = np.random.default_rng(10)
    frames = [rng.standard_normal((1, 2, 4, 4)).astype(np.float32) for _ in range(4)]
    net.set_input("inp", frames[0])
    net.run()
    net.set_input("inp", frames[1])
    net.run()
    net.set_runtime_option("snap", "hold", "true")
    assert net.run() == ["snap", "cmp", "out"]
    for f in frames[2:]:  # new inputs: the snapshot keeps frame 1 (relu applied on the way out)
        net.set_input("inp", f)
        net.run()
        assert_close(net.output("snap"), np.maximum(frames[1], 0), fmt, "held")
        assert_close(net.output("out"), np.abs(f - np.maximum(frames[1], 0)), fmt, "difference")
    net.set_runtime_option("snap", "hold", False)
    net.run()
    assert_close(net.output("snap"), np.maximum(frames[3], 0), fmt, "released")
    with pytest.raises(ParameterError, match=r"snapshot snap: parameter hold: 'sometimes' is not true or false"):
        net.set_runtime_option("snap", "hold", "sometimes")


def test_snapshot_hold_is_released_by_a_new_size():
    m = Model("snap")
    m.add_layer("input", "inp", params={"dimensions": "1x1x3x3"})
    m.add_layer("snapshot", "snap", params={"hold": "true"}, inputs=["inp"])
    m.add_layer("output", "out", inputs=["snap"])
    net = Network(m, default_registry())
    net.set_input("inp", np.ones((1, 1, 3, 3), np.float32))
    net.run()
    net.set_input("inp", np.full((1, 1, 5, 3), 2.0, np.float32))
    net.run()
    np.testing.assert_array_equal(net.output("out"), np.full((1, 1, 5, 3), 2.0))
    assert net.runtime_options()["snap"][0]["value"] is False
