"""pooling against onnxruntime's MaxPool / AveragePool / GlobalMaxPool / GlobalAveragePool."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.errors import ParameterError, ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, ort_run, round_like, run_layer


def _pair(params, name, default):
    v = str(params.get(name, default)).split("x")
    return [int(v[0]), int(v[-1])]


def onnx_pool(x, params):
    """The ONNX reference of a pooling layer with these (text) parameters."""
    pool_type = params.get("pool_type", "max")
    if str(params.get("global", "false")) == "true":
        op = "GlobalMaxPool" if pool_type == "max" else "GlobalAveragePool"
        return ort_run([helper.make_node(op, ["x"], ["y"])], {"x": x}, {})[0]
    pads = _pair(params, "padding", 0)
    end = [p if e < 0 else e for p, e in zip(pads, _pair(params, "padding_end", -1))]
    attrs = dict(kernel_shape=_pair(params, "kernel_size", 2), strides=_pair(params, "stride", 2), pads=pads + end,
                 ceil_mode=int(str(params.get("ceil_mode", "false")) == "true"))
    if pool_type == "max":
        node = helper.make_node("MaxPool", ["x"], ["y"], **attrs)
    else:
        include = int(str(params.get("count_include_pad", "false")) == "true")
        node = helper.make_node("AveragePool", ["x"], ["y"], count_include_pad=include, **attrs)
    return ort_run([node], {"x": x}, {})[0]


CASES = [
    ((1, 3, 8, 8), dict()),
    ((2, 4, 9, 7), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 11, 10), dict(kernel_size="3x2", stride="1x2", padding="1x0")),
    ((2, 3, 7, 7), dict(kernel_size=3, stride=1, padding=2, count_include_pad="true")),
    ((1, 5, 6, 9), dict(kernel_size=5, stride=3, padding=2, count_include_pad="false")),
    ((2, 3, 5, 4), dict(kernel_size=1, stride=1)),
    ((2, 3, 9, 6), dict(**{"global": "true"})),
    # asymmetric padding (TensorFlow SAME, ONNX pads begin != end) and ceil mode
    ((1, 3, 8, 7), dict(kernel_size=3, stride=2, padding=0, padding_end=1)),
    ((2, 2, 7, 8), dict(kernel_size=3, stride=2, padding="1x0", padding_end="0x1")),
    ((1, 2, 9, 9), dict(kernel_size=4, stride=1, padding=2, padding_end="1x-1", count_include_pad="true")),
    ((1, 3, 7, 9), dict(kernel_size=3, stride=2, ceil_mode="true")),
    ((2, 2, 8, 10), dict(kernel_size=3, stride=2, padding=1, ceil_mode="true", count_include_pad="true")),
    ((1, 2, 8, 10), dict(kernel_size=3, stride=2, padding=1, ceil_mode="true", count_include_pad="false")),
    ((1, 2, 6, 6), dict(kernel_size=2, stride=2, ceil_mode="true")),  # ceil changes nothing: same as floor
    ((1, 2, 5, 11), dict(kernel_size="2x3", stride=3, padding="1x1", padding_end="0x2", ceil_mode="true",
                         count_include_pad="true")),
    # the last ceil window would start in the bottom padding: dropped (the input-or-left-padding rule)
    ((1, 1, 5, 5), dict(kernel_size=2, stride=2, padding=1, ceil_mode="true")),
]


@each_backend_and_format
@pytest.mark.parametrize("pool_type", ["max", "average"])
@pytest.mark.parametrize("shape,params", CASES)
def test_pooling_matches_onnxruntime(backend, fmt, pool_type, shape, params):
    params = dict(params, pool_type=pool_type)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out, _, net = run_layer("pooling", params, [x], fmt, backend)
    assert tuple(net.dims("L")) == out.shape
    assert_close(out, onnx_pool(round_like(x, fmt), params), fmt, f"pooling {params}")


def test_ceil_mode_output_sizes_follow_pytorch():
    """Output sizes equal torch's max_pool2d with ceil_mode (which drops a last window starting in the padding)."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    for size, k, s, p in [(5, 2, 2, 1), (7, 3, 2, 0), (8, 3, 2, 1), (6, 2, 2, 0), (9, 3, 3, 1), (4, 3, 2, 1)]:
        x = np.random.default_rng(size).standard_normal((1, 1, size, size)).astype(np.float32)
        out, _, _ = run_layer("pooling", dict(kernel_size=k, stride=s, padding=p, ceil_mode="true"), [x], FORMATS[0])
        ref = F.max_pool2d(torch.from_numpy(x), k, s, p, ceil_mode=True).numpy()
        assert out.shape == ref.shape, (size, k, s, p)
        np.testing.assert_array_equal(out, ref)


def test_files_without_padding_end_keep_symmetric_padding():
    """padding_end defaults to -1 (same as padding): a layer written before it existed keeps its meaning."""
    from engine.plugins import default_registry

    desc = default_registry().find_layer("pooling")
    assert desc.param("padding_end").default_text == "1x1x-1x-1"
    values, _ = desc.parse_params("L", {"padding": "1"})
    assert values["padding_end"].h == values["padding_end"].w == -1
    x = np.random.default_rng(3).standard_normal((1, 2, 7, 7)).astype(np.float32)
    old, _, _ = run_layer("pooling", dict(kernel_size=3, stride=2, padding=1), [x], FORMATS[0])
    same, _, _ = run_layer("pooling", dict(kernel_size=3, stride=2, padding=1, padding_end=1), [x], FORMATS[0])
    np.testing.assert_array_equal(old, same)


def test_count_include_pad_changes_border_averages():
    x = np.ones((1, 1, 4, 4), np.float32)
    params = dict(pool_type="average", kernel_size=3, stride=1, padding=1)
    excl, _, _ = run_layer("pooling", dict(params, count_include_pad="false"), [x], FORMATS[0])
    incl, _, _ = run_layer("pooling", dict(params, count_include_pad="true"), [x], FORMATS[0])
    np.testing.assert_allclose(excl, 1.0, rtol=1e-6)
    assert incl[0, 0, 0, 0] == pytest.approx(4 / 9) and incl[0, 0, 0, 1] == pytest.approx(6 / 9)
    assert incl[0, 0, 1, 1] == pytest.approx(1.0)


@each_backend_and_format
def test_pooling_with_activation(backend, fmt):
    x = np.random.default_rng(2).standard_normal((2, 3, 6, 5)).astype(np.float32)
    params = dict(pool_type="average", kernel_size=2, stride=1)
    out, _, _ = run_layer("pooling", params, [x], fmt, backend, activation="leaky_relu", coefs={"alpha": 0.25})
    ref = onnx_pool(round_like(x, fmt), params)
    assert_close(out, np.where(ref >= 0, ref, 0.25 * ref), fmt)


def test_kernel_larger_than_padded_input_is_a_shape_error():
    x = np.zeros((1, 2, 4, 4), np.float32)
    with pytest.raises(ShapeError, match=r"^pooling L: kernel 5 is larger than the padded input 4$"):
        run_layer("pooling", dict(kernel_size=5), [x], FORMATS[0])
    with pytest.raises(ShapeError, match=r"pooling L: kernel 3x7 is larger than the padded input 6x6"):
        run_layer("pooling", dict(kernel_size="3x7", padding=1), [x], FORMATS[0])
    out, _, _ = run_layer("pooling", dict(kernel_size=5, **{"global": "true"}), [x], FORMATS[0])
    assert out.shape == (1, 2, 1, 1)  # global pooling ignores the kernel


def test_bad_parameters_are_named():
    x = np.zeros((1, 2, 8, 8), np.float32)
    with pytest.raises(ParameterError, match=r"pooling L: parameter padding: 2x2 must be smaller than the kernel 2x2"):
        run_layer("pooling", dict(kernel_size=2, padding=2), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"pooling L: parameter stride: 0x0 must be at least 1x1"):
        run_layer("pooling", dict(stride=0), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"pooling L: parameter padding_end: 2x0 must be smaller than the kernel 2x2"):
        run_layer("pooling", dict(kernel_size=2, padding_end="2x0"), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"pooling L: parameter padding_end: '-2' is not dimensions .* \(each at least -1\)"):
        run_layer("pooling", dict(padding_end=-2), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"pooling L: parameter pool_type: 'median' is not one of max, average"):
        run_layer("pooling", dict(pool_type="median"), [x], FORMATS[0])
