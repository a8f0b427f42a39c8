"""convolution against onnxruntime's Conv on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ParameterError, ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, ort_run, round_like, run_layer
from tests.plugins.conv_reference import onnx_conv

CASES = [
    # (N, C, H, W), params
    ((1, 3, 17, 19), dict(num_output_channels=8)),
    ((2, 4, 16, 15), dict(num_output_channels=6, kernel_size="3x5", stride="2x1", padding="1x2")),
    ((1, 6, 13, 11), dict(num_output_channels=6, groups=3, dilation=2, padding=2)),
    ((1, 4, 9, 9), dict(num_output_channels=4, groups=4, kernel_size=3, padding=0, bias="false")),
    ((2, 12, 11, 10), dict(num_output_channels=12, groups=12, kernel_size=5, stride=2, padding=2)),  # depthwise
    ((2, 5, 8, 10), dict(num_output_channels=7, kernel_size=1, padding=0)),
    ((1, 2, 7, 6), dict(num_output_channels=3, kernel_size="2", stride=3, padding=1)),
    # asymmetric padding: TensorFlow SAME (extra row/column at the end), SAME_LOWER, one axis only
    ((1, 3, 8, 9), dict(num_output_channels=4, kernel_size=3, stride=2, padding=0, padding_end=1)),
    ((2, 4, 7, 8), dict(num_output_channels=4, kernel_size=2, padding=1, padding_end=0, groups=2)),
    ((1, 3, 9, 7), dict(num_output_channels=5, kernel_size="3x4", padding="2x1", padding_end="0x-1", dilation=2)),
]


@each_backend_and_format
@pytest.mark.parametrize("shape,params", CASES)
def test_convolution_matches_onnxruntime(backend, fmt, shape, params):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, w, _ = run_layer("convolution", params, [x], fmt, backend)
    ref = onnx_conv(round_like(x, fmt), {k: round_like(v, fmt) for k, v in w.items()}, params)
    assert_close(out, ref, fmt, f"convolution {params}")


@pytest.mark.parametrize("act,coefs,onnx_op,attrs", [
    ("relu", {}, "Relu", {}),
    ("leaky_relu", {"alpha": "0.2"}, "LeakyRelu", {"alpha": 0.2}),
    ("sigmoid", {}, "Sigmoid", {}),
    ("tanh", {}, "Tanh", {}),
])
@each_backend_and_format
def test_convolution_with_fused_activation(backend, fmt, act, coefs, onnx_op, attrs):
    x = np.random.default_rng(2).standard_normal((1, 3, 9, 8)).astype(np.float32)
    params = dict(num_output_channels=5)
    out, w, _ = run_layer("convolution", params, [x], fmt, backend, activation=act, coefs=coefs)
    conv = onnx_conv(round_like(x, fmt), {k: round_like(v, fmt) for k, v in w.items()}, params)
    ref = ort_run([helper.make_node(onnx_op, ["x"], ["y"], **attrs)], {"x": conv}, {})[0]
    assert_close(out, ref, fmt, act)


def test_weights_from_secondary_input_take_precedence():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    fmt = FORMATS[0]
    out, used, _ = run_layer("convolution", dict(num_output_channels=4, bias="false"), [x, w], fmt)
    assert "weights" not in used  # nothing loaded for a weight that an input provides
    assert_close(out, onnx_conv(x, {"weights": w}, dict(bias="false")), fmt)


def test_bad_parameters_are_named():
    x = np.zeros((1, 4, 8, 8), np.float32)
    with pytest.raises(ParameterError, match=r"convolution L: parameter num_output_channels: '0' is not an integer in \[1"):
        run_layer("convolution", dict(num_output_channels=0), [x], FORMATS[0])
    with pytest.raises(ParameterError, match="groups"):
        run_layer("convolution", dict(num_output_channels=5, groups=2), [x], FORMATS[0])
    with pytest.raises(ShapeError, match=r"convolution L: kernel 9x9 \(dilated\) is larger than the padded input 6x6"):
        run_layer("convolution", dict(kernel_size=5, dilation=2, padding=0), [np.zeros((1, 4, 6, 6), np.float32)],
                  FORMATS[0])


def test_asymmetric_padding_equals_explicit_padding_then_symmetric():
    """pad_to_symmetric (how asymmetric padding reaches the backends' symmetric kernels) pads the larger side
    by the difference, in either layout."""
    from plugins.standard._common_conv import pad_to_symmetric

    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    y, common = pad_to_symmetric(np, x, (2, 0, 1, 3), (2, 3))
    assert common == (1, 0) and y.shape == (2, 3, 5, 8)
    np.testing.assert_array_equal(y, np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 3))))
    nhwc = x.transpose(0, 2, 3, 1)
    y, common = pad_to_symmetric(np, nhwc, (0, 2, 1, 1), (1, 2))
    assert common == (0, 1)
    np.testing.assert_array_equal(y, np.pad(nhwc, ((0, 0), (0, 1), (1, 0), (0, 0))))
