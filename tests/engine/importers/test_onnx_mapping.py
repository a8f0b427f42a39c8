"""Operator mappings and patterns on small hand-made graphs, each compared with onnxruntime, and what they
become; the documentation's operator table; the layout."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from engine.importers.onnx import OnnxImportError, import_onnx
from engine.importers.onnx.table import BEGIN, END, import_markdown
from engine.layout import layered_positions
from tests.engine.importers.helpers import REGISTRY, check_against_ort, save_graph, tensor, types

RNG = np.random.default_rng(7)
ROOT = Path(__file__).resolve().parents[3]


def _x(shape: tuple[int, ...] = (2, 4, 6, 5)) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _one(tmp_path: Path, nodes: list, out_shape: list, consts: dict | None = None, in_shape: tuple = (2, 4, 6, 5),
         opset: int = 17, tol: float = 1e-4, **options):
    path = save_graph(tmp_path / "m.onnx", nodes, [tensor("x", list(in_shape))], [tensor("y", out_shape)], consts, opset)
    return check_against_ort(path, {"x": _x(in_shape)}, tol, **options)


@pytest.mark.parametrize(("mode", "shape6", "perm"), [("CRD", [2, 2, 3, 3, 4, 5], [0, 1, 4, 2, 5, 3]),
                                                      ("DCR", [2, 3, 3, 2, 4, 5], [0, 3, 4, 1, 5, 2])])
def test_reshape_transpose_reshape_pixel_shuffle_is_depth_to_space(tmp_path, mode, shape6, perm) -> None:
    nodes = [helper.make_node("Reshape", ["x", "s6"], ["a"]), helper.make_node("Transpose", ["a"], ["b"], perm=perm),
             helper.make_node("Reshape", ["b", "s4"], ["y"])]
    consts = {"s6": np.array(shape6, np.int64), "s4": np.array([2, 2, 12, 15], np.int64)}
    r = _one(tmp_path, nodes, [2, 2, 12, 15], consts, in_shape=(2, 18, 4, 5))
    assert types(r) == ["input", "depth_to_space", "output"]
    assert r.model.layers[next(n for n, s in r.model.layers.items() if s.type == "depth_to_space")].params["mode"] == mode


def test_a_transpose_that_is_no_pixel_shuffle_is_a_transpose_layer(tmp_path) -> None:
    r = _one(tmp_path, [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 1, 3, 2])], [2, 4, 5, 6])
    assert types(r) == ["input", "transpose", "output"]


@pytest.mark.parametrize(("chain", "act"), [
    ([("Softplus", {}), ("Tanh", {})], "mish"),
    ([("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5})], "hardswish"),
    ([("Sigmoid", {})], "silu"),
])
def test_gated_activation_patterns_fold_into_the_convolution(tmp_path, chain, act) -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])]
    t = "c"
    for i, (op, attrs) in enumerate(chain):
        nodes.append(helper.make_node(op, [t], [f"g{i}"], **attrs))
        t = f"g{i}"
    nodes.append(helper.make_node("Mul", ["c", t], ["y"]))
    r = _one(tmp_path, nodes, [2, 3, 6, 5], {"w": _x((3, 4, 3, 3))})
    assert [(s.type, s.activation) for s in r.model.layers.values()][1] == ("convolution", act)
    assert len(r.model.layers) == 3


def test_activation_of_an_output_read_twice_is_a_layer_of_its_own(tmp_path) -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Add", ["c", "r"], ["y"])]
    r = _one(tmp_path, nodes, [2, 3, 6, 5], {"w": _x((3, 4, 1, 1))})
    assert [(s.type, s.activation) for s in r.model.layers.values()][1:4] == [
        ("convolution", "none"), ("affine", "relu"), ("element_wise", "none")]


@pytest.mark.parametrize(("op", "const_first", "const"), [
    ("Add", False, np.float32(0.5)), ("Mul", True, np.arange(4, dtype=np.float32).reshape(4, 1, 1) + 1),
    ("Sub", False, np.arange(4, dtype=np.float32).reshape(1, 4, 1, 1)), ("Sub", True, np.float32(2.0)),
    ("Div", False, np.array([2.0, 4.0, -1.0, 0.5], np.float32).reshape(4, 1, 1)),
])
def test_arithmetic_with_a_constant_is_affine(tmp_path, op, const_first, const) -> None:
    ins = ["k", "x"] if const_first else ["x", "k"]
    r = _one(tmp_path, [helper.make_node(op, ins, ["y"])], [2, 4, 6, 5], {"k": np.asarray(const)})
    assert types(r) == ["input", "affine", "output"]
    mode = r.model.layers[r.mapped[0][2]].params["mode"]
    assert mode == ("per_tensor" if np.asarray(const).size == 1 else "per_channel")


def test_constant_divided_by_a_tensor_and_a_per_pixel_constant_are_constant_layers(tmp_path) -> None:
    r = _one(tmp_path, [helper.make_node("Div", ["k", "x"], ["y"])], [2, 4, 6, 5], {"k": np.float32(1.5)})
    assert types(r) == ["input", "constant", "element_wise", "output"]
    r = _one(tmp_path, [helper.make_node("Add", ["x", "k"], ["y"])], [2, 4, 6, 5], {"k": _x((1, 1, 6, 5))})
    assert types(r) == ["input", "constant", "element_wise", "output"]


def test_squeeze_excitation_broadcast_product_and_division(tmp_path) -> None:
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["p"]), helper.make_node("Conv", ["p", "w"], ["q"]),
             helper.make_node("Sigmoid", ["q"], ["s"]), helper.make_node("Mul", ["x", "s"], ["m"]),
             helper.make_node("Div", ["m", "s"], ["y"])]
    r = _one(tmp_path, nodes, [2, 4, 6, 5], {"w": _x((4, 4, 1, 1))})
    assert types(r) == ["input", "pooling", "convolution", "element_wise", "element_wise", "output"]


def test_flatten_gemm_and_matmul_add_are_fully_connected(tmp_path) -> None:
    nodes = [helper.make_node("Flatten", ["x"], ["f"]),
             helper.make_node("Gemm", ["f", "b", "c"], ["g"], transB=1, alpha=0.5, beta=2.0),
             helper.make_node("MatMul", ["g", "m"], ["h"]), helper.make_node("Add", ["h", "bias"], ["s"]),
             helper.make_node("Softmax", ["s"], ["y"], axis=1)]
    consts = {"b": _x((7, 120)), "c": _x((7,)), "m": _x((7, 3)), "bias": _x((3,))}
    r = _one(tmp_path, nodes, [2, 3], consts)
    assert [(s.type, s.activation) for s in r.model.layers.values()] == [
        ("input", "none"), ("fully_connected", "none"), ("fully_connected", "softmax"), ("output", "none")]


def test_reduce_mean_over_h_and_w_then_gemm(tmp_path) -> None:
    nodes = [helper.make_node("ReduceMean", ["x"], ["r"], axes=[2, 3], keepdims=0),
             helper.make_node("Gemm", ["r", "b"], ["y"])]
    r = _one(tmp_path, nodes, [2, 5], {"b": _x((4, 5))})
    assert types(r) == ["input", "pooling", "fully_connected", "output"]
    r = _one(tmp_path, [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1])], [2, 1, 6, 5])
    assert types(r) == ["input", "reduce", "output"]  # not over H and W: the reduction of any axes


@pytest.mark.parametrize("attrs", [{"pads": [0, 1, 2, 0]}, {"auto_pad": "SAME_LOWER", "strides": [2, 2]},
                                   {"auto_pad": "SAME_UPPER", "strides": [1, 2]}])
def test_convolution_asymmetric_padding(tmp_path, attrs) -> None:
    path = save_graph(tmp_path / "m.onnx", [helper.make_node("Conv", ["x", "w", "b"], ["y"], group=2, **attrs)],
                      [tensor("x", [2, 4, 6, 5])], [tensor("y", None)], {"w": _x((6, 2, 3, 2)), "b": _x((6,))})
    check_against_ort(path, {"x": _x()})


def test_deconvolution_asymmetric_pads_and_output_shape(tmp_path) -> None:
    for attrs in ({"strides": [2, 2], "pads": [0, 1, 1, 0]}, {"strides": [2, 3], "output_shape": [13, 17]},
                  {"strides": [2, 2], "auto_pad": "SAME_UPPER"}):
        path = save_graph(tmp_path / "m.onnx", [helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)],
                          [tensor("x", [2, 4, 6, 5])], [tensor("y", None)], {"w": _x((4, 3, 3, 3))})
        check_against_ort(path, {"x": _x()})


@pytest.mark.parametrize(("op", "attrs"), [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 0, 0, 1], "count_include_pad": 1}),
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
])
def test_pooling_ceil_mode_and_asymmetric_pads(tmp_path, op, attrs) -> None:
    path = save_graph(tmp_path / "m.onnx", [helper.make_node(op, ["x"], ["y"], **attrs)],
                      [tensor("x", [2, 4, 6, 5])], [tensor("y", None)])
    check_against_ort(path, {"x": _x()})


def test_split_slice_pad_concat(tmp_path) -> None:
    nodes = [helper.make_node("Split", ["x", "parts"], ["a", "b", "c"], axis=1),
             helper.make_node("Slice", ["b", "st", "en", "ax", "sp"], ["s"]),
             helper.make_node("Pad", ["a", "pads"], ["p"], mode="reflect"),
             helper.make_node("Pad", ["c", "pads"], ["q"], mode="edge"),
             helper.make_node("Slice", ["p", "st2", "en2", "ax2"], ["p2"]),
             helper.make_node("Slice", ["q", "st2", "en2", "ax2"], ["q2"]),
             helper.make_node("Concat", ["p2", "s", "q2"], ["y"], axis=1)]
    consts = {"parts": np.array([1, 2, 1], np.int64), "st": np.array([-1, 0], np.int64),
              "en": np.array([-100, 6], np.int64), "ax": np.array([3, 2], np.int64), "sp": np.array([-1, 1], np.int64),
              "pads": np.array([0, 0, 1, 2, 0, 0, 1, 0], np.int64), "st2": np.array([1, 2], np.int64),
              "en2": np.array([7, 7], np.int64), "ax2": np.array([2, 3], np.int64)}
    r = _one(tmp_path, nodes, [2, 4, 6, 5], consts)
    assert types(r).count("slice") == 6 and types(r).count("padding") == 2


@pytest.mark.parametrize(("opset", "inputs", "attrs", "consts"), [
    (6, ["c"], {"min": -0.5, "max": 0.25}, {}),
    (17, ["c", "", "hi"], {}, {"hi": np.float32(0.3)}),
    (17, ["c", "lo", "hi"], {}, {"lo": np.float32(0.0), "hi": np.float32(6.0)}),
])
def test_clip_is_clamp(tmp_path, opset, inputs, attrs, consts) -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Clip", inputs, ["y"], **attrs)]
    r = _one(tmp_path, nodes, [2, 3, 6, 5], {"w": _x((3, 4, 1, 1)), **consts}, opset=opset)
    assert [(s.type, s.activation) for s in r.model.layers.values()][1] == ("convolution", "clamp")


def test_softmax_over_channels_is_the_activation_and_over_another_axis_the_layer(tmp_path) -> None:
    _one(tmp_path, [helper.make_node("Softmax", ["x"], ["y"], axis=1)], [2, 4, 6, 5])
    r = _one(tmp_path, [helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [2, 4, 6, 5])
    assert types(r) == ["input", "softmax", "output"]


@pytest.mark.parametrize(("attrs", "scales", "layer"), [
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, [1, 1, 2, 3],
     "upsample"),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, [1, 1, 2, 2], "resize"),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, [1, 1, 1.5, 0.6], "resize"),
    ({"mode": "cubic", "coordinate_transformation_mode": "half_pixel"}, [1, 1, 2, 2], "resize"),
    ({"mode": "cubic", "coordinate_transformation_mode": "asymmetric", "cubic_coeff_a": -0.5}, [1, 1, 2, 1.5], "resize"),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "round_prefer_ceil"},
     [1, 1, 1.5, 2.5], "resize"),
    ({"mode": "nearest", "coordinate_transformation_mode": "half_pixel", "nearest_mode": "round_prefer_floor"},
     [1, 1, 0.5, 3], "resize"),
    ({"mode": "nearest", "coordinate_transformation_mode": "align_corners", "nearest_mode": "ceil"}, [1, 1, 2, 2],
     "resize"),
    ({"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, [1, 1, 2, 2], "resize"),
    ({"mode": "cubic", "coordinate_transformation_mode": "half_pixel", "exclude_outside": 1}, [1, 1, 0.5, 2],
     "resize"),
])
def test_resize_modes(tmp_path, attrs, scales, layer) -> None:
    r = _one(tmp_path, [helper.make_node("Resize", ["x", "", "sc"], ["y"], **attrs)], None,
             {"sc": np.array(scales, np.float32)})
    assert types(r)[1] == layer


def test_group_normalization_opset_18_per_group_scale(tmp_path) -> None:
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-3)
    r = _one(tmp_path, [node], [2, 4, 6, 5], {"s": _x((2,)), "b": _x((2,))}, opset=18)
    assert types(r)[1] == "group_normalization" and r.weights[r.mapped[0][2]]["scale"].shape == (4,)


def test_prelu_per_channel_and_shared(tmp_path) -> None:
    r = _one(tmp_path, [helper.make_node("PRelu", ["x", "s"], ["y"])], [2, 4, 6, 5], {"s": _x((4, 1, 1))})
    assert types(r)[1] == "prelu"
    r = _one(tmp_path, [helper.make_node("PRelu", ["x", "s"], ["y"])], [2, 4, 6, 5], {"s": np.float32([0.2])})
    assert [(s.type, s.activation) for s in r.model.layers.values()][1] == ("affine", "leaky_relu")


def test_custom_domain_nodes_are_refused_and_kept_as_placeholders(tmp_path) -> None:
    node = helper.make_node("FancyOp", ["x"], ["y"], domain="com.example", name="fancy", alpha=2.0)
    graph = helper.make_graph([node], "g", [tensor("x", [1, 3, 4, 4])], [tensor("y", [1, 3, 4, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    import onnx

    onnx.save(model, str(tmp_path / "c.onnx"))
    with pytest.raises(OnnxImportError, match="FancyOp node 'fancy': operator domain 'com.example'"):
        import_onnx(tmp_path / "c.onnx", registry=REGISTRY)
    r = import_onnx(tmp_path / "c.onnx", registry=REGISTRY, placeholders=True)
    ph = next(s for s in r.model.layers.values() if s.type == "placeholder")
    assert ph.params["domain"] == "com.example" and '"alpha": 2.0' in ph.params["attributes"]
    assert ph.note == "ONNX FancyOp node fancy"


def test_names_become_unique_identifiers(tmp_path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="/block.1/act"), helper.make_node("Conv", ["a", "w"], ["b"],
             name="/block.1/act"), helper.make_node("Relu", ["b"], ["y"], name="9")]
    path = save_graph(tmp_path / "n.onnx", nodes, [tensor("x", [1, 2, 4, 4])], [tensor("y", [1, 2, 4, 4])],
                      {"w": _x((2, 2, 1, 1))})
    r = import_onnx(path, registry=REGISTRY)
    names = list(r.model.layers)
    assert names[:3] == ["x", "block_1_act", "block_1_act_2"] and len(set(names)) == len(names)


def test_docs_operator_table_is_current() -> None:
    text = (ROOT / "docs" / "onnx-import.md").read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "docs/onnx-import.md lacks the ONNX import table markers"
    assert text[text.index(BEGIN): text.index(END) + len(END)] == import_markdown(), \
        "docs/onnx-import.md stale: run python -m engine.importers.onnx --write docs/onnx-import.md"


def test_layout_columns_follow_the_graph() -> None:
    from engine.model import LayerSpec

    layers = {"a": LayerSpec("a", "input"), "b": LayerSpec("b", "x", inputs=["a"]), "c": LayerSpec("c", "x", inputs=["a"]),
              "d": LayerSpec("d", "x", inputs=["b", "c"]), "e": LayerSpec("e", "input"), "f": LayerSpec("f", "x", inputs=["e"])}
    pos = layered_positions(layers)
    assert pos["a"][0] < pos["b"][0] == pos["c"][0] < pos["d"][0]
    assert pos["b"][1] != pos["c"][1]
    assert len(set(pos.values())) == len(pos)


def test_consecutive_constant_arithmetic_is_one_affine_layer(tmp_path) -> None:
    """(x - mean) / std * 2 + 1, per channel then per tensor: one affine layer; with a second reader of the
    intermediate result it stays two."""
    nodes = [helper.make_node("Sub", ["x", "mean"], ["a"]), helper.make_node("Div", ["a", "std"], ["b"]),
             helper.make_node("Mul", ["b", "two"], ["c"]), helper.make_node("Add", ["c", "one"], ["y"])]
    consts = {"mean": _x((1, 4, 1, 1)), "std": np.abs(_x((4, 1, 1))) + 0.5, "two": np.float32(2), "one": np.float32(1)}
    r = _one(tmp_path, nodes, [2, 4, 6, 5], consts)
    assert types(r) == ["input", "affine", "output"] and len(r.folded) == 3
    nodes[-1] = helper.make_node("Add", ["c", "b"], ["y"])
    r = _one(tmp_path, nodes, [2, 4, 6, 5], consts)
    assert types(r) == ["input", "affine", "affine", "element_wise", "output"]


def test_nhwc_input_and_output_transposes_are_folded(tmp_path) -> None:
    """tf2onnx's layout: N x H x W x C input, Transpose to N x C x H x W, ..., Transpose back before the output.
    The LayerLab network takes and gives N x C x H x W; symbolic sizes and --input-shape follow N x C x H x W."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]), helper.make_node("Conv", ["t", "w"], ["c"]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 3, 1])]
    path = save_graph(tmp_path / "nhwc.onnx", nodes, [tensor("x", ["n", "h", "w", 3])], [tensor("y", None)],
                      {"w": _x((5, 3, 3, 3))})
    r = import_onnx(path, registry=REGISTRY, input_shapes={"x": (2, 3, 9, 7)})
    assert types(r) == ["input", "convolution", "output"] and r.model.layers["x"].params["dimensions"] == "2x3x9x7"
    assert any("N x H x W x C" in n for n in r.notices)
    x = _x((2, 9, 7, 3))
    from tests.engine.importers.helpers import reference, rel_l2, run

    want = reference(path, {"x": x})[0]
    got = run(r, {"x": x.transpose(0, 3, 1, 2)})[0]
    assert rel_l2(got.transpose(0, 2, 3, 1), want) < 1e-5


def test_progress_stages_and_the_record_of_what_happened(tmp_path) -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["y"], name="act")]
    path = save_graph(tmp_path / "p.onnx", nodes, [tensor("x", [1, 2, 4, 4])], [tensor("y", [1, 3, 4, 4])],
                      {"w": _x((3, 2, 1, 1))})
    seen: list[tuple[int, int, str]] = []
    r = import_onnx(path, registry=REGISTRY, placeholders=True, progress=lambda d, t, s: seen.append((d, t, s)))
    assert list(dict.fromkeys(s for _, _, s in seen)) == ["reading", "mapping", "layout", "done"]
    assert r.mapped == [("Conv", "conv", "conv")] and r.folded == ["Relu act -> activation relu of layer conv"]
    assert r.refused == [] and r.input_layers == {"x": "x"} and r.output_layers == {"y": "y"}
    assert r.summary().startswith("2 ONNX nodes -> 3 layers (1 folds)")
    assert r.command_line() == f"layerlab import {path} -o {path.with_suffix('.lnet')} --placeholders"


def test_a_mapping_that_computes_another_size_is_reported_as_a_bug(tmp_path, monkeypatch) -> None:
    """The imported layers' sizes are checked against ONNX shape inference: a wrong mapping cannot slip
    through as a model computing something else."""
    from engine.importers.onnx.importer import ImporterBug
    from engine.importers.onnx.mapping import OPS, OpMapping, operator_table

    operator_table()
    monkeypatch.setitem(OPS, "MaxPool", OpMapping(
        "MaxPool", "pooling", "", lambda ctx: ctx.add("pooling", {"pool_type": "max", "kernel_size": (3, 3),
                                                                 "stride": (1, 1), "padding": (0, 0)},
                                                      [ctx.tensor(ctx.node.input[0])], ctx.node.output[0])))
    path = save_graph(tmp_path / "m.onnx", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                      [tensor("x", [1, 2, 8, 8])], [tensor("y", None)])
    with pytest.raises(ImporterBug, match=r"ONNX 1x2x4x4, LayerLab 1x2x6x6"):
        import_onnx(path, registry=REGISTRY)


def test_max_and_min_with_one_value_are_one_clamp(tmp_path) -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Max", ["c", "zero"], ["m"]),
             helper.make_node("Min", ["six", "m"], ["y"])]
    r = _one(tmp_path, nodes, [2, 3, 6, 5], {"w": _x((3, 4, 1, 1)) * 8, "zero": np.float32(0), "six": np.float32(6)})
    conv = next(s for s in r.model.layers.values() if s.type == "convolution")
    assert len(r.model.layers) == 3 and conv.activation == "clamp" and conv.act_coefs == {"min": "0", "max": "6"}
