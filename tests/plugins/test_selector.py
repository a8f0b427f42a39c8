"""selector: passes input i of n on every backend and format; changing i reruns only the selector's
downstream, and reshapes the network when the selected input has another size."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ParameterError
from engine.model import Model
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, round_like, run_layer
from tests.plugins.analysis_helpers import chain_net, option


@each_backend_and_format
@pytest.mark.parametrize("index", [0, 2])
def test_selector_passes_the_selected_input(backend, fmt, index):
    rng = np.random.default_rng(11)
    xs = [rng.standard_normal((1, 2, 3, 4)).astype(np.float32) for _ in range(3)]
    out, _, _ = run_layer("selector", {"index": index}, xs, fmt, backend)
    assert_close(out, round_like(xs[index], fmt).astype(np.float64), fmt, "selector")


def test_selector_index_beyond_the_inputs_is_named():
    xs = [np.zeros((1, 1, 2, 2), np.float32)] * 2
    with pytest.raises(ParameterError, match=r"selector L: parameter index: 5 selects no connected input \(inputs 0..1\)"):
        run_layer("selector", {"index": 5}, xs, FORMATS[0])


def test_selector_option_reruns_affected_and_validates_against_inputs():
    net = chain_net("selector", n_inputs=3)
    net.run()
    assert option(net, "L", "index")["max"] == 2
    pre = [net.output(f"pre{i}") for i in range(3)]
    net.set_runtime_option("L", "index", 1)
    assert net.run() == ["L", "post", "out"]
    np.testing.assert_array_equal(net.output("L"), pre[1])
    with pytest.raises(ParameterError, match=r"selector L: parameter index: 3 selects no connected input \(inputs 0..2\)"):
        net.set_runtime_option("L", "index", "3")
    assert option(net, "L", "index")["value"] == 1
    assert net.run() == []


def test_selector_size_change_reshapes_downstream():
    m = Model("sel")
    m.add_layer("input", "small", params={"dimensions": "1x3x4x4"})
    m.add_layer("input", "big", params={"dimensions": "1x3x6x8"})
    m.add_layer("selector", "sel", inputs=["small", "big"])
    m.add_layer("convolution", "conv", params={"num_output_channels": "2"}, inputs=["sel"])
    m.add_layer("output", "out", inputs=["conv"])
    net = Network(m, default_registry())
    net.run()
    assert net.output("out").shape == (1, 2, 4, 4)
    loads, conv_reshapes = net.weights_loads, net.layer("conv").reshape_count
    net.set_runtime_option("sel", "index", 1)
    net.run()
    assert net.output("out").shape == (1, 2, 6, 8)
    assert net.layer("conv").reshape_count == conv_reshapes + 1
    assert net.weights_loads == loads  # reshaped, weights not reloaded
    np.testing.assert_array_equal(net.output("sel"), net.output("big"))
