"""noise against a float64 NumPy reference on every backend and format; its runtime options.

The noise pattern is specified as drawn from numpy.random.default_rng(seed) in NCHW order (gaussian:
standard_normal; uniform: uniform(-1, 1); salt and pepper: random() compared with the amplitude)."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ParameterError
from engine.tensor import FORMATS, Precision
from tests.harness import assert_close, each_backend_and_format, round_like, run_layer
from tests.plugins.analysis_helpers import chain_net, option


def ref_noise(x, kind, amplitude, seed, clip=False):
    rng = np.random.default_rng(seed)
    x = x.astype(np.float64)
    if kind == "gaussian":
        y = x + amplitude * rng.standard_normal(x.shape, dtype=np.float32).astype(np.float64)
    elif kind == "uniform":
        y = x + amplitude * rng.uniform(-1.0, 1.0, size=x.shape).astype(np.float32).astype(np.float64)
    else:
        r = rng.random(x.shape, dtype=np.float32).astype(np.float64)
        y = x.copy()
        y[r < amplitude / 2] = 0.0
        y[(r >= amplitude / 2) & (r < amplitude)] = 1.0
    return np.clip(y, 0, 1) if clip else y


@each_backend_and_format
@pytest.mark.parametrize("params", [
    dict(kind="gaussian", amplitude=0.2, seed=3),
    dict(kind="uniform", amplitude=0.5, seed=11, clip="true"),
    dict(kind="salt_and_pepper", amplitude=0.3, seed=1),
])
def test_noise_matches_reference(backend, fmt, params):
    x = np.random.default_rng(6).random((2, 3, 9, 7)).astype(np.float32)
    out, _, _ = run_layer("noise", params, [x], fmt, backend)
    ref = ref_noise(round_like(x, fmt), params["kind"], params["amplitude"], params["seed"],
                    params.get("clip") == "true")
    if params["kind"] == "salt_and_pepper" and fmt.precision is Precision.FP16:
        # the threshold is compared in fp16 on the GPU: values within one fp16 step of it may flip
        r = np.random.default_rng(params["seed"]).random(x.shape, dtype=np.float32)
        a = params["amplitude"]
        near = (np.abs(r - a) < 1e-3) | (np.abs(r - a / 2) < 1e-3)
        out, ref = out[~near], ref[~near]
    assert_close(out, ref, fmt, f"noise {params}")


def test_salt_and_pepper_replaces_the_stated_fraction():
    x = np.full((1, 1, 100, 100), 0.5, np.float32)
    out, _, _ = run_layer("noise", dict(kind="salt_and_pepper", amplitude=0.2, seed=2), [x], FORMATS[0])
    assert abs(np.mean(out == 0.0) - 0.1) < 0.015 and abs(np.mean(out == 1.0) - 0.1) < 0.015
    assert np.mean(out == 0.5) > 0.77


def test_noise_options_change_pattern_and_rerun_affected():
    net = chain_net("noise", {"amplitude": 0.1, "seed": 5})
    net.run()
    x = net.output("pre0")
    np.testing.assert_allclose(net.output("L"), ref_noise(x, "gaussian", 0.1, 5), rtol=1e-5, atol=1e-5)
    net.set_runtime_option("L", "seed", "6")
    assert net.run() == ["L", "post", "out"]
    np.testing.assert_allclose(net.output("L"), ref_noise(x, "gaussian", 0.1, 6), rtol=1e-5, atol=1e-5)
    net.set_runtime_option("L", "kind", "uniform")
    net.set_runtime_option("L", "amplitude", 0.4)
    assert net.run() == ["L", "post", "out"]
    np.testing.assert_allclose(net.output("L"), ref_noise(x, "uniform", 0.4, 6), rtol=1e-5, atol=1e-5)
    assert option(net, "L", "seed") | {"tooltip": ""} == {
        "name": "seed", "text": "Seed", "type": "int", "value": 6, "default": 0, "min": 0, "max": 2**31 - 1,
        "step": 1, "tooltip": ""}
    with pytest.raises(ParameterError, match=r"noise L: parameter seed: '-1' is not an integer in \[0, 2147483647\]"):
        net.set_runtime_option("L", "seed", -1)
    with pytest.raises(ParameterError, match=r"parameter seed: '2.5' is not an integer"):
        net.set_runtime_option("L", "seed", "2.5")
    with pytest.raises(ParameterError, match=r"parameter kind: 'pink' is not one of gaussian, uniform, salt_and_pepper"):
        net.set_runtime_option("L", "kind", "pink")


def test_noise_follows_a_new_input_size():
    net = chain_net("noise", {"amplitude": 0.3, "seed": 9})
    net.run()
    net.set_input("in0", np.random.default_rng(0).random((1, 3, 12, 6)).astype(np.float32))
    net.run()
    x = net.output("pre0")
    assert x.shape == (1, 3, 12, 6)
    np.testing.assert_allclose(net.output("L"), ref_noise(x, "gaussian", 0.3, 9), rtol=1e-5, atol=1e-5)
