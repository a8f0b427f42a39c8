"""Helpers shared by the analysis layer tests: a small network around one analysis layer that counts
layer evaluations, to check that a runtime option change reruns only the affected layers."""
from __future__ import annotations

from typing import Any

from engine.model import Model
from engine.network import Network
from engine.plugins import default_registry
from tests.harness import backend_param


def chain_net(layer_type: str, params: dict[str, Any] | None = None, n_inputs: int = 1,
              dims: str = "1x3x8x10", reuse_buffers: bool = False) -> Network:
    """in0..inK -> pre_i (convolution) ; pre_* -> L -> post (convolution) -> out, plus an untouched
    branch side (convolution on in0) -> side_out. Only L, post and out depend on L. Buffers are not
    recycled by default (as in analysis mode), so a rerun computes exactly the affected layers."""
    m = Model("opts")
    pres = []
    for i in range(n_inputs):
        m.add_layer("input", f"in{i}", params={"dimensions": dims})
        m.add_layer("convolution", f"pre{i}", params={"num_output_channels": "3"}, inputs=[f"in{i}"])
        pres.append(f"pre{i}")
    m.add_layer(layer_type, "L", params={k: str(v) for k, v in (params or {}).items()}, inputs=pres)
    m.add_layer("convolution", "post", params={"num_output_channels": "3"}, inputs=["L"])
    m.add_layer("output", "out", inputs=["post"])
    m.add_layer("convolution", "side", params={"num_output_channels": "2"}, inputs=["in0"])
    m.add_layer("output", "side_out", inputs=["side"])
    return Network(m, default_registry(), backend_param("numpy"), reuse_buffers=reuse_buffers)


def option(net: Network, layer: str, name: str) -> dict[str, Any]:
    """The JSON description of one runtime option."""
    return next(o for o in net.runtime_options()[layer] if o["name"] == name)
