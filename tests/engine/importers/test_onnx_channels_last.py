"""Channels-last regions rewritten on N x C x H x W at import (engine.importers.onnx.channels_last): the permutes go,
LayerNorm over the last axis becomes layer normalization over the channels, Linear layers 1x1 convolutions, and the
imported network keeps onnxruntime's values; a region a permuted value leaves stays as it is."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from engine.importers.onnx import import_onnx
from engine.importers.onnx.channels_last import entry_grid, is_exit
from engine.model import LayerSpec
from engine.tensor import Dims
from tests.engine.importers.helpers import REGISTRY, check_against_ort, reference, rel_l2, run, save_graph, tensor, types

N, C, H, W, HIDDEN = 2, 8, 5, 6, 16


def _gelu(x: str, y: str) -> list:
    """GELU as PyTorch exports it: x * 0.5 * (1 + erf(x / sqrt 2))."""
    return [helper.make_node("Div", [x, "sqrt2"], [f"{y}_d"]), helper.make_node("Erf", [f"{y}_d"], [f"{y}_e"]),
            helper.make_node("Add", [f"{y}_e", "one"], [f"{y}_a"]), helper.make_node("Mul", [x, f"{y}_a"], [f"{y}_m"]),
            helper.make_node("Mul", [f"{y}_m", "half"], [y])]


def _block(tmp_path: Path, rows: bool) -> Path:
    """A ConvNeXt block: depthwise convolution, permute to channels-last, LayerNorm, Linear, GELU, Linear, permute
    back, layer scale, residual sum (``rows``: the MLP on N*H*W x C rows, as torch.onnx writes a Linear on rank 4)."""
    rng = np.random.default_rng(0)
    consts = {"dw": rng.standard_normal((C, 1, 3, 3)).astype(np.float32) * 0.3,
              "scale": rng.uniform(0.5, 1.5, C).astype(np.float32), "bias": rng.standard_normal(C).astype(np.float32),
              "w1": rng.standard_normal((C, HIDDEN)).astype(np.float32) * 0.3,
              "b1": rng.standard_normal(HIDDEN).astype(np.float32),
              "w2": rng.standard_normal((HIDDEN, C)).astype(np.float32) * 0.3,
              "b2": rng.standard_normal(C).astype(np.float32), "gamma": rng.uniform(0.5, 1.5, (C, 1, 1)).astype(np.float32),
              "sqrt2": np.array(math.sqrt(2), np.float32), "one": np.array(1, np.float32), "half": np.array(0.5, np.float32),
              "rows": np.array([-1, C], np.int64), "pixels": np.array([N, H, W, C], np.int64)}
    nodes = [helper.make_node("Conv", ["x", "dw"], ["d"], group=C, pads=[1, 1, 1, 1]),
             helper.make_node("Transpose", ["d"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("LayerNormalization", ["t", "scale", "bias"], ["ln"], axis=-1, epsilon=1e-6)]
    src = "ln"
    if rows:
        nodes.append(helper.make_node("Reshape", ["ln", "rows"], ["ln_rows"]))
        src = "ln_rows"
    nodes += [helper.make_node("MatMul", [src, "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["a1"]),
              *_gelu("a1", "g"), helper.make_node("MatMul", ["g", "w2"], ["m2"]),
              helper.make_node("Add", ["m2", "b2"], ["a2"])]
    last = "a2"
    if rows:
        nodes.append(helper.make_node("Reshape", ["a2", "pixels"], ["a2_pixels"]))
        last = "a2_pixels"
    nodes += [helper.make_node("Transpose", [last], ["back"], perm=[0, 3, 1, 2]),
              helper.make_node("Mul", ["back", "gamma"], ["scaled"]), helper.make_node("Add", ["scaled", "x"], ["y"])]
    return save_graph(tmp_path / "block.onnx", nodes, [tensor("x", [N, C, H, W])], [tensor("y", [N, C, H, W])], consts)


def _x(seed: int = 1, shape: tuple[int, ...] = (N, C, H, W)) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("rows", [False, True])
def test_a_convnext_block_runs_on_nchw_without_permutes(tmp_path, rows) -> None:
    result = check_against_ort(_block(tmp_path, rows), {"x": _x()}, tol=1e-5)
    layers = types(result)
    assert not {"transpose", "reshape", "matmul"} & set(layers)
    assert layers.count("convolution") == 3  # the depthwise one and the two Linear layers as 1x1
    norm = next(s for s in result.model.layers.values() if s.type == "layer_normalization")
    assert norm.params["over"] == "channels"
    up = [s for s in result.model.layers.values() if s.type == "convolution"][1]
    assert up.params["kernel_size"] == "1x1x1x1" and up.params["num_output_channels"] == str(HIDDEN)
    assert up.activation == "gelu" and up.params["bias"] == "true"
    assert result.weights[up.name]["weights"].shape == (HIDDEN, C, 1, 1)
    assert any("channels-last region" in f for f in result.folded)
    assert all(layer in result.model.layers for _, _, layer in result.mapped)  # nodes credited to layers that exist
    # the layer scale is folded into the last 1x1 convolution's weights and bias: no pass of its own
    assert "affine" not in layers and any(f.startswith("affine ") for f in result.folded)
    down = [s for s in result.model.layers.values() if s.type == "convolution"][2]
    assert down.params["bias"] == "true" and down.activation == "none"


def test_the_stem_layer_norm_between_two_permutes_is_one_layer(tmp_path) -> None:
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2]),
             helper.make_node("Transpose", ["c"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("LayerNormalization", ["t", "scale", "bias"], ["ln"], axis=-1, epsilon=1e-6),
             helper.make_node("Transpose", ["ln"], ["back"], perm=[0, 3, 1, 2]), helper.make_node("Relu", ["back"], ["y"])]
    path = save_graph(tmp_path / "stem.onnx", nodes, [tensor("x", [1, 3, 12, 10])], [tensor("y", [1, C, 6, 5])],
                      {"w": rng.standard_normal((C, 3, 2, 2)).astype(np.float32),
                       "scale": rng.uniform(0.5, 1.5, C).astype(np.float32), "bias": rng.standard_normal(C).astype(np.float32)})
    result = check_against_ort(path, {"x": _x(3, (1, 3, 12, 10))}, tol=1e-5)
    assert [t for t in types(result) if t not in ("input", "output")] == ["convolution", "layer_normalization"]
    norm = result.model.layers[next(n for n, s in result.model.layers.items() if s.type == "layer_normalization")]
    assert norm.params["over"] == "channels" and norm.activation == "relu"
    assert result.weights[norm.name]["scale"].shape == (C,)


def test_a_permuted_value_read_outside_the_region_leaves_it_unchanged(tmp_path) -> None:
    """The channels-last tensor is also a graph output: the permutes and the trailing layer norm stay, values agree."""
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("LayerNormalization", ["t", "scale", "bias"], ["ln"], axis=-1),
             helper.make_node("Transpose", ["ln"], ["y"], perm=[0, 3, 1, 2])]
    path = save_graph(tmp_path / "leaves.onnx", nodes, [tensor("x", [1, C, H, W])],
                      [tensor("y", [1, C, H, W]), tensor("t", [1, H, W, C])],
                      {"scale": rng.uniform(0.5, 1.5, C).astype(np.float32), "bias": rng.standard_normal(C).astype(np.float32)})
    result = check_against_ort(path, {"x": _x(5, (1, C, H, W))}, tol=1e-5)
    assert types(result).count("transpose") == 2
    norm = next(s for s in result.model.layers.values() if s.type == "layer_normalization")
    assert norm.params["over"] == "trailing"
    assert not any("channels-last region" in f for f in result.folded)


def test_a_region_not_permuted_back_is_left_as_it_is(tmp_path) -> None:
    """Permuted to channels-last but left with another permute (0,3,2,1): no N x C x H x W form, nothing rewritten."""
    rng = np.random.default_rng(6)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("MatMul", ["t", "w"], ["m"]), helper.make_node("Transpose", ["m"], ["y"], perm=[0, 3, 2, 1])]
    path = save_graph(tmp_path / "other.onnx", nodes, [tensor("x", [1, C, H, W])], [tensor("y", [1, HIDDEN, W, H])],
                      {"w": rng.standard_normal((C, HIDDEN)).astype(np.float32)})
    result = check_against_ort(path, {"x": _x(7, (1, C, H, W))})
    assert "matmul" in types(result) and "convolution" not in types(result)


def test_vectors_on_the_last_axis_become_per_channel_layers(tmp_path) -> None:
    """x * v + u, u - x and a softmax over the last axis inside a region: affine layers per channel, softmax over the
    channels; v / x (no affine form) an element-wise layer reading v as 1 x C x 1 x 1."""
    rng = np.random.default_rng(8)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]), helper.make_node("Mul", ["t", "v"], ["a"]),
             helper.make_node("Add", ["a", "u"], ["b"]), helper.make_node("Sub", ["u", "b"], ["s"]),
             helper.make_node("Softmax", ["s"], ["sm"], axis=-1), helper.make_node("Div", ["v", "sm"], ["q"]),
             helper.make_node("Mul", ["q", "b"], ["p"]), helper.make_node("Transpose", ["p"], ["y"], perm=[0, 3, 1, 2])]
    path = save_graph(tmp_path / "vectors.onnx", nodes, [tensor("x", [N, C, H, W])], [tensor("y", [N, C, H, W])],
                      {"v": rng.uniform(0.5, 1.5, C).astype(np.float32), "u": rng.standard_normal(C).astype(np.float32)})
    result = check_against_ort(path, {"x": _x(9)}, tol=1e-5)
    specs = [s for s in result.model.layers.values() if s.type not in ("input", "output")]
    assert "transpose" not in types(result)
    assert [s.params.get("mode") for s in specs if s.type == "affine"] == ["per_channel"] * 3
    assert next(s for s in specs if s.type == "softmax").params["axis"] == "1"
    consts = [s for s in specs if s.type == "constant"]
    assert len(consts) == 1 and result.weights[consts[0].name]["value"].shape == (1, C, 1, 1)


def test_a_region_entered_twice_and_left_twice_is_rewritten_whole(tmp_path) -> None:
    """Two images permuted and summed, a layer norm, two permutes back (one of them also flattening): one region."""
    rng = np.random.default_rng(10)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Transpose", ["x"], ["t1"], perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["r"], ["t2"], perm=[0, 2, 3, 1]), helper.make_node("Add", ["t1", "t2"], ["s"]),
             helper.make_node("LayerNormalization", ["s", "scale", "bias"], ["ln"], axis=-1),
             helper.make_node("Transpose", ["ln"], ["y"], perm=[0, 3, 1, 2]),
             helper.make_node("Transpose", ["ln"], ["b"], perm=[0, 3, 1, 2]), helper.make_node("Flatten", ["b"], ["f"])]
    path = save_graph(tmp_path / "twice.onnx", nodes, [tensor("x", [N, C, H, W])],
                      [tensor("y", [N, C, H, W]), tensor("f", [N, C * H * W])],
                      {"scale": rng.uniform(0.5, 1.5, C).astype(np.float32), "bias": rng.standard_normal(C).astype(np.float32)})
    result = check_against_ort(path, {"x": _x(11)}, tol=1e-5, clean=False)
    assert "transpose" not in types(result)
    assert sum(f.startswith("channels-last region") for f in result.folded) == 1


def test_entry_and_exit_views_are_checked_on_the_values() -> None:
    dims = {"x": Dims(2, 3, 4, 5), "t": Dims(2, 4, 5, 3), "r": Dims(40, 3), "bad": Dims(2, 5, 4, 3)}
    assert entry_grid(LayerSpec("t", "transpose", {"perm": "0,2,3,1"}, inputs=["x"]), dims) == (2, 4, 5)
    assert entry_grid(LayerSpec("r", "transpose", {"perm": "0,2,3,1", "shape": "40,3"}, inputs=["x"]), dims) == (2, 4, 5)
    assert entry_grid(LayerSpec("bad", "transpose", {"perm": "0,3,2,1"}, inputs=["x"]), dims) is None
    assert entry_grid(LayerSpec("r", "reshape", {"shape": "40,3"}, inputs=["x"]), dims) is None  # no permute
    dims |= {"back": Dims(2, 3, 4, 5), "flat": Dims(2, 60), "odd": Dims(2, 3, 5, 4)}
    assert is_exit(LayerSpec("back", "transpose", {"perm": "0,3,1,2"}, inputs=["t"]), dims, (2, 4, 5))
    assert is_exit(LayerSpec("back", "transpose", {"perm": "0,2,1", "input_shape": "2,20,3", "shape": "2,3,4,5"},
                             inputs=["r"]), dims, (2, 4, 5))
    assert is_exit(LayerSpec("flat", "transpose", {"perm": "0,3,1,2", "shape": "2,60"}, inputs=["t"]), dims, (2, 4, 5))
    assert not is_exit(LayerSpec("odd", "transpose", {"perm": "0,3,2,1"}, inputs=["t"]), dims, (2, 4, 5))
    assert not is_exit(LayerSpec("t2", "reshape", {"shape": "2,4,5,3"}, inputs=["t"]), dims | {"t2": Dims(2, 4, 5, 3)},
                       (2, 4, 5))  # still channels-last
    assert is_exit(LayerSpec("back", "transpose", {"perm": "0,3,1,2"}, inputs=["t"]), dims, (2, 5, 4))  # image reshaped


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,tol", [("fp32 nchw", 1e-4), ("fp16 nhwc", 1e-2)])
def test_a_rewritten_convnext_block_on_the_gpu(tmp_path, fmt, tol) -> None:
    path = _block(tmp_path, rows=True)
    result = import_onnx(path, registry=REGISTRY)
    got, ref = run(result, {"x": _x()}, fmt, backend="cupy")[0], reference(path, {"x": _x()})[0]
    assert rel_l2(got.reshape(ref.shape), ref) < tol
