"""linear_blend against a float64 NumPy reference on every backend and format; its runtime options."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ParameterError
from tests.harness import assert_close, each_backend_and_format, round_like, run_layer
from tests.plugins.analysis_helpers import chain_net, option


@each_backend_and_format
@pytest.mark.parametrize("sb,params", [
    ((1, 3, 5, 7), dict(weight_a=0.3, weight_b=-1.5, bias=0.25)),
    ((2, 1, 5, 7), dict()),
    (None, dict(weight_a=2, bias=-0.5)),
])
def test_linear_blend_matches_reference(backend, fmt, sb, params):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2 if sb and sb[0] == 2 else 1, 3, 5, 7)).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32) if sb else None
    out, _, _ = run_layer("linear_blend", params, [a, b], fmt, backend)
    p = {"weight_a": 0.5, "weight_b": 0.5, "bias": 0.0} | params
    ref = float(p["weight_a"]) * round_like(a, fmt).astype(np.float64) + float(p["bias"])
    if b is not None:
        ref = ref + float(p["weight_b"]) * round_like(b, fmt).astype(np.float64)
    assert_close(out, ref, fmt, f"linear_blend {params}")


def test_linear_blend_options_validate_and_rerun_affected():
    net = chain_net("linear_blend", n_inputs=2)
    net.run()
    a, b = net.output("pre0"), net.output("pre1")
    assert [o["name"] for o in net.runtime_options()["L"]] == ["weight_a", "weight_b", "bias"]
    assert option(net, "L", "bias")["min"] == -1e6
    with pytest.raises(ParameterError, match=r"linear_blend L: parameter weight_b: '1e9' is not a number in"):
        net.set_runtime_option("L", "weight_b", "1e9")
    with pytest.raises(ParameterError, match=r"parameter bias: 'True' is not a number"):
        net.set_runtime_option("L", "bias", True)
    net.set_runtime_option("L", "weight_b", "-2")
    net.set_runtime_option("L", "bias", 0.5)
    assert net.run() == ["L", "post", "out"]
    np.testing.assert_allclose(net.output("L"), 0.5 * a - 2.0 * b + 0.5, rtol=1e-5, atol=1e-5)
