"""deconvolution against onnxruntime's ConvTranspose on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ParameterError, ShapeError
from engine.tensor import FORMATS
from tests.harness import FORMAT_IDS, assert_close, each_backend_and_format, ort_run, round_like, run_layer

CASES = [
    # (N, C, H, W), params
    ((1, 3, 5, 6), dict(num_output_channels=4)),  # defaults: kernel 4, stride 2, padding 1 -> 2x
    ((2, 4, 7, 5), dict(num_output_channels=6, kernel_size="3x2", stride="2x3", padding="1x0", output_padding="1x2")),
    ((1, 6, 4, 4), dict(num_output_channels=9, groups=3, kernel_size=3, stride=1, padding=1, dilation=2)),
    ((2, 4, 6, 3), dict(num_output_channels=4, groups=4, kernel_size=3, stride=2, padding=0, bias="false")),
    ((1, 5, 3, 4), dict(num_output_channels=2, kernel_size=1, stride=1, padding=0)),
    ((1, 2, 4, 5), dict(num_output_channels=3, kernel_size=3, stride=3, padding=2, output_padding=1, dilation=2)),
    # asymmetric padding (ONNX pads begin != end, e.g. auto_pad SAME_UPPER / SAME_LOWER)
    ((1, 3, 5, 6), dict(num_output_channels=4, kernel_size=3, stride=2, padding=1, padding_end=0)),
    ((2, 4, 4, 5), dict(num_output_channels=2, kernel_size="4x3", stride=2, padding="1x0", padding_end="2x-1",
                        output_padding="1x0", groups=2)),
]


def onnx_deconv(x, w, b, params):
    def pair(name, default):
        v = str(params.get(name, default)).split("x")
        return [int(v[0]), int(v[-1])]
    pads = pair("padding", 1)
    end = [p if e < 0 else e for p, e in zip(pads, pair("padding_end", -1))]
    attrs = dict(kernel_shape=pair("kernel_size", 4), strides=pair("stride", 2), pads=pads + end,
                 output_padding=pair("output_padding", 0), dilations=pair("dilation", 1), group=int(params.get("groups", 1)))
    inits = {"w": w} | ({"b": b} if b is not None else {})
    node = helper.make_node("ConvTranspose", ["x", "w"] + (["b"] if b is not None else []), ["y"], **attrs)
    return ort_run([node], {"x": x}, inits)[0]


@each_backend_and_format
@pytest.mark.parametrize("shape,params", CASES)
def test_deconvolution_matches_onnxruntime(backend, fmt, shape, params):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, w, net = run_layer("deconvolution", params, [x], fmt, backend)
    assert tuple(net.dims("L")) == out.shape
    g = int(params.get("groups", 1))
    assert w["weights"].shape[:2] == (shape[1], params["num_output_channels"] // g)  # (C_in, C_out/groups, ...)
    ref = onnx_deconv(round_like(x, fmt), round_like(w["weights"], fmt),
                      round_like(w["bias"], fmt) if "bias" in w else None, params)
    assert_close(out, ref, fmt, f"deconvolution {params}")


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_weights_from_secondary_inputs_and_activation(fmt):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 2, 4, 5)).astype(np.float32)
    w = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    b = rng.standard_normal((1, 3, 1, 1)).astype(np.float32)
    params = dict(num_output_channels=3)
    out, used, _ = run_layer("deconvolution", params, [x, w, b], fmt, activation="leaky_relu", coefs={"alpha": 0.1})
    assert used == {}
    ref = onnx_deconv(round_like(x, fmt), round_like(w, fmt), round_like(b, fmt).reshape(3), params)
    assert_close(out, np.where(ref >= 0, ref, 0.1 * ref), fmt)


def test_bad_parameters_are_named():
    x = np.zeros((1, 4, 3, 3), np.float32)
    with pytest.raises(ParameterError, match=r"deconvolution L: parameter output_padding: 2x0: the height 2 must be "
                                             r"smaller than the stride 2 or the dilation 1"):
        run_layer("deconvolution", dict(output_padding="2x0"), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"deconvolution L: parameter groups: num_output_channels 5 is not a multiple"):
        run_layer("deconvolution", dict(num_output_channels=5, groups=2), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"deconvolution L: parameter stride: 0x0 must be at least 1x1"):
        run_layer("deconvolution", dict(stride=0), [x], FORMATS[0])
    with pytest.raises(ShapeError, match=r"deconvolution L: input has 4 channels, not a multiple of groups 3"):
        run_layer("deconvolution", dict(num_output_channels=3, groups=3), [x], FORMATS[0])
    with pytest.raises(ShapeError, match=r"deconvolution L: padding 3x3 removes the whole output: the unpadded output "
                                         r"of input 1x1 is 4x4"):
        run_layer("deconvolution", dict(padding=3), [np.zeros((1, 4, 1, 1), np.float32)], FORMATS[0])


def test_flops_count_every_multiply_add():
    x = np.zeros((2, 4, 3, 5), np.float32)
    params = dict(num_output_channels=6, groups=2, kernel_size=3, bias="false")
    _, _, net = run_layer("deconvolution", params, [x], FORMATS[0])
    # every input value meets C_out/groups x 3 x 3 weights
    assert net.layer("L").flops([net.dims("in0")], net.dims("L")) == 2 * (2 * 4 * 3 * 5) * 3 * 9
