"""resize against onnxruntime's Resize on every backend and format."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import ParameterError, ShapeError
from engine.tensor import FORMATS
from tests.harness import assert_close, each_backend_and_format, ort_run, round_like, run_layer
from tests.plugins.group_b_refs import int64_const, resize_node


def onnx_resize(x, mode, coords, size=None, scales=None):
    """ONNX Resize by sizes (int64 N, C, H, W) or by scales."""
    if size is not None:
        nodes = [int64_const("sz", [x.shape[0], x.shape[1], *size]), resize_node("x", "y", mode, coords, sizes="sz")]
        return ort_run(nodes, {"x": x}, {})[0]
    return ort_run([resize_node("x", "y", mode, coords, scales="s")], {"x": x}, {"s": np.array([1, 1, *scales], np.float32)})[0]


CASES = [
    # (N, C, H, W), params (size or scales)
    ((1, 3, 5, 7), dict(scale_h=2, scale_w=2)),
    ((2, 2, 6, 4), dict(scale_h=1.5, scale_w=3)),
    ((1, 2, 9, 8), dict(scale_h=0.5, scale_w=0.75)),
    ((2, 1, 7, 6), dict(size="11x4")),
    ((1, 2, 8, 9), dict(size="3")),
    ((1, 1, 4, 5), dict(size="1x9")),
]


@each_backend_and_format
@pytest.mark.parametrize("coords", ["half_pixel", "align_corners"])
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
@pytest.mark.parametrize("shape,params", CASES)
def test_resize_matches_onnxruntime(backend, fmt, mode, coords, shape, params):
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    params = dict(params, mode=mode, coordinate_mode=coords)
    out, _, net = run_layer("resize", params, [x], fmt, backend)
    if "size" in params:
        parts = [int(p) for p in str(params["size"]).split("x")]
        size = parts * 2 if len(parts) == 1 else parts
        ref = onnx_resize(round_like(x, fmt), mode, coords, size=size)
    else:
        ref = onnx_resize(round_like(x, fmt), mode, coords, scales=[params["scale_h"], params["scale_w"]])
    assert_close(out, ref, fmt, f"resize {params}")
    assert tuple(net.dims("L")) == ref.shape


def onnx_resize_attrs(x, params, target):
    """ONNX Resize with every attribute of these layer parameters; ``target`` = ("sizes", [h, w]) or ("scales", [sh, sw])."""
    from onnx import helper

    mode = {"nearest": "nearest", "bilinear": "linear", "bicubic": "cubic"}[params["mode"]]
    attrs = dict(mode=mode, coordinate_transformation_mode=params.get("coordinate_mode", "half_pixel"),
                 nearest_mode=params.get("nearest_mode", "round_prefer_floor"),
                 cubic_coeff_a=float(params.get("cubic_coeff_a", -0.75)),
                 exclude_outside=int(str(params.get("exclude_outside", "false")) == "true" and mode == "cubic"))
    kind, values = target
    if kind == "sizes":
        nodes = [int64_const("sz", [x.shape[0], x.shape[1], *values]),
                 helper.make_node("Resize", ["x", "", "", "sz"], ["y"], **attrs)]
        return ort_run(nodes, {"x": x}, {})[0]
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], **attrs)
    return ort_run([node], {"x": x}, {"s": np.array([1, 1, *values], np.float32)})[0]


# the modes the PyTorch and TensorFlow exporters write (ONNX Resize attributes)
EXPORTER_MODES = [
    dict(mode="nearest", coordinate_mode="asymmetric", nearest_mode="floor"),  # PyTorch nearest
    dict(mode="nearest", coordinate_mode="half_pixel", nearest_mode="round_prefer_ceil"),  # nearest-exact
    dict(mode="nearest", coordinate_mode="align_corners", nearest_mode="ceil"),
    dict(mode="nearest", coordinate_mode="pytorch_half_pixel", nearest_mode="round_prefer_floor"),
    dict(mode="nearest", coordinate_mode="asymmetric", nearest_mode="round_prefer_ceil"),
    dict(mode="bilinear", coordinate_mode="pytorch_half_pixel"),  # PyTorch bilinear, align_corners=False
    dict(mode="bilinear", coordinate_mode="asymmetric"),  # TensorFlow 1, ONNX Upsample linear
    dict(mode="bicubic", coordinate_mode="half_pixel", cubic_coeff_a=-0.5, exclude_outside="true"),  # TensorFlow 2
    dict(mode="bicubic", coordinate_mode="asymmetric", cubic_coeff_a=-0.5),
    dict(mode="bicubic", coordinate_mode="pytorch_half_pixel", cubic_coeff_a=-0.75, exclude_outside="true"),
    # bilinear taps are never both outside the input: exclude_outside equals edge clamping (ONNX Runtime
    # refuses the attribute for linear without antialiasing, so the reference leaves it out)
    dict(mode="bilinear", coordinate_mode="half_pixel", exclude_outside="true"),
]
TARGETS = [("scales", [2.0, 3.0]), ("scales", [0.5, 1.5]), ("sizes", [7, 1]), ("sizes", [1, 4]), ("sizes", [11, 5])]


@each_backend_and_format
@pytest.mark.parametrize("target", TARGETS, ids=[f"{k}={v}" for k, v in TARGETS])
@pytest.mark.parametrize("params", EXPORTER_MODES, ids=["-".join(str(v) for v in m.values()) for m in EXPORTER_MODES])
def test_exporter_modes_match_onnxruntime(backend, fmt, params, target):
    x = np.random.default_rng(9).standard_normal((2, 2, 6, 5)).astype(np.float32)
    kind, values = target
    layer_params = dict(params, **({"size": f"{values[0]}x{values[1]}"} if kind == "sizes" else
                                   {"scale_h": values[0], "scale_w": values[1]}))
    out, _, net = run_layer("resize", layer_params, [x], fmt, backend)
    ref = onnx_resize_attrs(round_like(x, fmt), params, target)
    assert_close(out, ref, fmt, f"resize {layer_params}")
    assert tuple(net.dims("L")) == ref.shape


def test_old_files_keep_round_prefer_floor_and_a_of_minus_0_75():
    from engine.plugins import default_registry

    values, _ = default_registry().find_layer("resize").parse_params("L", {"mode": "nearest"})
    assert values["nearest_mode"] == "round_prefer_floor" and values["cubic_coeff_a"] == -0.75
    assert values["exclude_outside"] is False and values["coordinate_mode"] == "half_pixel"


def test_pytorch_nearest_is_asymmetric_floor():
    import torch
    import torch.nn.functional as F

    x = np.random.default_rng(3).standard_normal((1, 2, 5, 7)).astype(np.float32)
    for size in [(9, 3), (10, 14), (4, 11)]:
        out, _, _ = run_layer("resize", dict(mode="nearest", coordinate_mode="asymmetric", nearest_mode="floor",
                                             size=f"{size[0]}x{size[1]}"), [x], FORMATS[0])
        np.testing.assert_array_equal(out, F.interpolate(torch.from_numpy(x), size=size, mode="nearest").numpy())


def test_resize_fuses_activation():
    x = np.random.default_rng(6).standard_normal((1, 2, 5, 5)).astype(np.float32)
    fmt = FORMATS[0]
    out, _, _ = run_layer("resize", dict(mode="bicubic"), [x], fmt, activation="relu")
    assert_close(out, np.maximum(onnx_resize(x, "bicubic", "half_pixel", scales=[2, 2]), 0), fmt)


def test_resize_errors_are_named():
    x = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(ParameterError, match=r"resize L: parameter size: 8x0: give both the height and the width"):
        run_layer("resize", dict(size="8x0"), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"resize L: parameter scale_h: '0' is not a number in \[0.01, 1024\]"):
        run_layer("resize", dict(scale_h=0), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"resize L: parameter mode: 'linear' is not one of nearest, bilinear, bicubic"):
        run_layer("resize", dict(mode="linear"), [x], FORMATS[0])
    with pytest.raises(ShapeError, match=r"resize L: scaling the input 4x4 by 0.2x1 gives 0x4; the output must be at least 1x1"):
        run_layer("resize", dict(scale_h=0.2, scale_w=1), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"resize L: parameter nearest_mode: 'round' is not one of round_prefer_floor, "):
        run_layer("resize", dict(nearest_mode="round"), [x], FORMATS[0])
    with pytest.raises(ParameterError, match=r"resize L: parameter cubic_coeff_a: '0.5' is not a number in \[-1, 0\]"):
        run_layer("resize", dict(cubic_coeff_a=0.5), [x], FORMATS[0])


# PyTorch nearest has no align_corners and rounds differently from ONNX: they agree on integer upscaling only
@pytest.mark.parametrize("mode,coords,size", [
    ("bilinear", "half_pixel", (12, 5)), ("bilinear", "align_corners", (12, 5)),
    ("bicubic", "half_pixel", (12, 5)), ("bicubic", "align_corners", (4, 13)), ("nearest", "half_pixel", (12, 18)),
])
def test_resize_to_size_matches_pytorch_as_documented(mode, coords, size):
    import torch
    import torch.nn.functional as F

    x = np.random.default_rng(7).standard_normal((2, 2, 6, 9)).astype(np.float32)
    fmt = FORMATS[0]
    out, _, _ = run_layer("resize", dict(mode=mode, coordinate_mode=coords, size=f"{size[0]}x{size[1]}"), [x], fmt)
    extra = {} if mode == "nearest" else {"align_corners": coords == "align_corners"}
    ref = F.interpolate(torch.from_numpy(x), size=size, mode=mode, **extra)
    assert_close(out, ref.numpy(), fmt, f"{mode} {coords}")


def test_resize_follows_new_input_sizes():
    fmt = FORMATS[0]
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((1, 2, 4, 6)).astype(np.float32), rng.standard_normal((2, 2, 7, 3)).astype(np.float32)
    _, _, net = run_layer("resize", dict(mode="bicubic", scale_h=1.5, scale_w=2), [a], fmt)
    net.set_input("in0", b)
    net.run()
    assert_close(net.output("out"), onnx_resize(b, "bicubic", "half_pixel", scales=[1.5, 2]), fmt, "after reshape")


@pytest.mark.parametrize("mode,layer_mode", [("linear", "bilinear"), ("nearest", "nearest")])
def test_onnx_upsample_op_is_resize_asymmetric(mode, layer_mode):
    """The deprecated ONNX Upsample (opset 9) is Resize with asymmetric coordinates (nearest: floor): the
    resize layer computes it (the upsample layer's bilinear uses half-pixel centres, like torch.nn.Upsample)."""
    from onnx import helper

    x = np.random.default_rng(4).standard_normal((1, 2, 4, 5)).astype(np.float32)
    node = helper.make_node("Upsample", ["x", "s"], ["y"], mode=mode)
    ref = ort_run([node], {"x": x}, {"s": np.array([1, 1, 2, 3], np.float32)}, opset=9)[0]
    out, _, _ = run_layer("resize", dict(mode=layer_mode, coordinate_mode="asymmetric", nearest_mode="floor",
                                         scale_h=2, scale_w=3), [x], FORMATS[0])
    assert_close(out, ref, FORMATS[0], f"Upsample {mode}")


@pytest.mark.gpu
@pytest.mark.parametrize("nhwc", [True, False])
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_the_gpu_resizes_in_one_kernel_as_the_array_code_does(nhwc, mode):
    cupy = pytest.importorskip("cupy")
    from engine.backends.cuda.resize import resize_taps
    from plugins.standard._common_resample import axis_taps, device_taps, resample

    x = np.random.default_rng(4).standard_normal((2, 5, 7, 9)).astype(np.float32)  # N x C x H x W
    th = device_taps(cupy, axis_taps(7, 20, mode), cupy.float32)
    tw = device_taps(cupy, axis_taps(9, 13, mode, "align_corners"), cupy.float32)
    ref = cupy.asnumpy(resample(cupy, cupy.asarray(x), th, tw))
    physical = cupy.ascontiguousarray(cupy.asarray(x.transpose(0, 2, 3, 1) if nhwc else x))
    out = cupy.full((2, 20, 13, 5) if nhwc else (2, 5, 20, 13), np.nan, np.float32)
    assert resize_taps(physical, out, th, tw, nhwc) is not None
    got = cupy.asnumpy(out)
    np.testing.assert_allclose(got.transpose(0, 3, 1, 2) if nhwc else got, ref, rtol=1e-5, atol=1e-5)
    assert resize_taps(physical, out.astype(cupy.float16), th, tw, nhwc) is None  # one dtype only
