"""The attention pattern, Einsum, Gather, Split and Concat of tensors of any rank, imported from small hand-made
graphs and compared with onnxruntime; what they become and what is refused."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from engine.importers.onnx import OnnxImportError, import_onnx
from tests.engine.importers.helpers import REGISTRY, check_against_ort, save_graph, tensor, types

RNG = np.random.default_rng(11)


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _graph(tmp_path: Path, nodes: list, inputs: dict[str, tuple[int, ...]], out_shape: list | None = None,
           consts: dict | None = None) -> tuple[Path, dict[str, np.ndarray]]:
    path = save_graph(tmp_path / "m.onnx", nodes, [tensor(k, list(v)) for k, v in inputs.items()],
                      [tensor("y", out_shape)], consts)
    return path, {k: _x(*v) for k, v in inputs.items()}


def _attention_nodes(softmax_axis: int = -1, bias: str | None = "b") -> list:
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Div", ["s", "d"], ["t"])]
    nodes += [helper.make_node("Add", ["t", bias], ["u"])] if bias else []
    return nodes + [helper.make_node("Softmax", ["u" if bias else "t"], ["p"], axis=softmax_axis),
                    helper.make_node("MatMul", ["p", "v"], ["y"])]


QKV = {"q": (2, 3, 7, 8), "k": (2, 3, 5, 8), "v": (2, 3, 5, 4)}


@pytest.mark.parametrize("bias", ["constant", "tensor", "none"])
def test_matmul_softmax_matmul_is_one_attention_layer(tmp_path, bias) -> None:
    inputs = dict(QKV) | ({"b": (1, 3, 7, 5)} if bias == "tensor" else {})
    consts = {"d": np.array(2.5, np.float32)} | ({"b": _x(3, 1, 5)} if bias == "constant" else {})
    path, feeds = _graph(tmp_path, _attention_nodes(bias=None if bias == "none" else "b"), inputs, None, consts)
    r = check_against_ort(path, feeds)
    assert types(r).count("attention") == 1 and "softmax" not in types(r) and "matmul" not in types(r)
    att = next(s for s in r.model.layers.values() if s.type == "attention")
    assert float(att.params["scale"]) == pytest.approx(0.4) and att.params["k_transposed"] == "false"
    assert len([i for i in att.inputs if i]) == (3 if bias == "none" else 4)
    assert "transpose" not in types(r)  # k^T of k alone: the layer reads k as it is


@pytest.mark.parametrize("form", ["swin", "maxvit", "shared"])
def test_a_scaled_q_or_k_and_a_transposed_k_fold_into_the_attention_layer(tmp_path, form) -> None:
    """Swin scales q (Mul) and transposes k before MatMul; MaxViT scales k (rank 5) before an Einsum. Where the scaled
    tensor is read elsewhere too, the scaling stays a layer of its own."""
    if form == "maxvit":
        shapes = {"q": (1, 4, 2, 6, 3), "k": (1, 4, 2, 6, 3), "v": (1, 4, 2, 6, 5)}
        nodes = [helper.make_node("Mul", ["k", "c"], ["ks"]),
                 helper.make_node("Einsum", ["q", "ks"], ["s"], equation="BGHID,BGHJD->BGHIJ"),
                 helper.make_node("Softmax", ["s"], ["p"], axis=-1),
                 helper.make_node("Einsum", ["p", "v"], ["y"], equation="BGHIJ,BGHJD->BGHID")]
    else:
        shapes = dict(QKV)
        nodes = [helper.make_node("Mul", ["q", "c"], ["qs"]), helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                 helper.make_node("MatMul", ["qs", "kt"], ["s"]), helper.make_node("Softmax", ["s"], ["p"], axis=-1),
                 helper.make_node("MatMul", ["p", "v"], ["o"])]
        nodes += [helper.make_node("Add", ["qs", "o"], ["y"])] if form == "shared" else \
            [helper.make_node("Identity", ["o"], ["y"])]
        if form == "shared":
            shapes["v"] = (2, 3, 5, 8)
    path, feeds = _graph(tmp_path, nodes, shapes, None, {"c": np.array(0.35, np.float32)})
    r = check_against_ort(path, feeds)
    att = next(s for s in r.model.layers.values() if s.type == "attention")
    assert att.params["k_transposed"] == "false" and "transpose" not in types(r)
    if form == "shared":
        assert float(att.params["scale"]) == 1.0 and att.inputs[0] not in r.input_layers.values()
    else:
        assert float(att.params["scale"]) == pytest.approx(0.35)
        assert sorted(types(r)) == ["attention", "input", "input", "input", "output"]


def test_a_softmax_over_another_axis_imports_as_pieces(tmp_path) -> None:
    path, feeds = _graph(tmp_path, _attention_nodes(softmax_axis=2), dict(QKV), None,
                         {"d": np.array(2.5, np.float32), "b": _x(3, 1, 5)})
    r = check_against_ort(path, feeds)
    assert "attention" not in types(r) and "softmax" in types(r) and types(r).count("matmul") == 2


def test_einsum_window_attention_with_a_mask_through_a_reshape_folds_into_one_bias(tmp_path) -> None:
    """MaxViT's Einsum products; Swin's shifted-window mask added to a five-axis view of the scores."""
    shapes = {"q": (4, 2, 6, 3), "k": (4, 2, 6, 3), "v": (4, 2, 6, 5)}
    nodes = [helper.make_node("Einsum", ["q", "k"], ["s"], equation="b h i d, b h j d -> b h i j"),
             helper.make_node("Mul", ["s", "c"], ["t"]), helper.make_node("Add", ["t", "bias"], ["u"]),
             helper.make_node("Reshape", ["u", "five"], ["u5"]), helper.make_node("Add", ["u5", "mask"], ["m5"]),
             helper.make_node("Reshape", ["m5", "four"], ["m"]), helper.make_node("Softmax", ["m"], ["p"], axis=-1),
             helper.make_node("Einsum", ["p", "v"], ["y"], equation="bhij,bhjd->bhid")]
    consts = {"c": np.array(0.5, np.float32), "bias": _x(2, 6, 6), "mask": (_x(1, 2, 1, 6, 6) > 0) * -100.0,
              "five": np.array([2, 2, 2, 6, 6], np.int64), "four": np.array([4, 2, 6, 6], np.int64)}
    consts["mask"] = consts["mask"].astype(np.float32)
    path, feeds = _graph(tmp_path, nodes, shapes, None, consts)
    r = check_against_ort(path, feeds)
    assert sorted(types(r)) == ["attention", "constant", "input", "input", "input", "output"]


@pytest.mark.parametrize(("equation", "a", "b"), [
    ("bgid,bgjd->bgij", (2, 3, 4, 5), (2, 3, 6, 5)),
    ("bgij,bgjd->bgid", (2, 3, 4, 6), (2, 3, 6, 5)),
    ("bij,bkj->bki", (2, 4, 5), (2, 3, 5)),
    ("nchw,nc->nhw", (2, 3, 4, 5), (2, 3)),
    ("ik,kj", (4, 5), (5, 3)),
])
def test_einsum_of_two_operands_is_a_matrix_product(tmp_path, equation, a, b) -> None:
    path, feeds = _graph(tmp_path, [helper.make_node("Einsum", ["a", "b"], ["y"], equation=equation)],
                         {"a": a, "b": b})
    r = check_against_ort(path, feeds)
    assert "matmul" in types(r)


def test_einsum_with_a_constant_operand(tmp_path) -> None:
    path, feeds = _graph(tmp_path, [helper.make_node("Einsum", ["a", "w"], ["y"], equation="bhwc,cd->bhwd")],
                         {"a": (1, 4, 5, 6)}, None, {"w": _x(6, 3)})
    assert "constant" in types(check_against_ort(path, feeds))


@pytest.mark.parametrize(("equation", "why"), [("bii,bij->bij", "repeated within one operand"),
                                               ("bij,bjk->bk", "letter i is summed within one operand"),
                                               ("...ij,...jk->...ik", "no ellipsis")])
def test_einsum_forms_without_a_product_are_refused_naming_the_equation(tmp_path, equation, why) -> None:
    shapes = {"a": (2, 3, 3), "b": (2, 3, 4)}
    path, _ = _graph(tmp_path, [helper.make_node("Einsum", ["a", "b"], ["y"], equation=equation, name="e")], shapes)
    with pytest.raises(OnnxImportError, match=rf"Einsum node 'e': equation '{equation.replace('.', '[.]')}'.*{why}"):
        import_onnx(path, registry=REGISTRY)


def test_gather_split_and_concat_of_any_rank(tmp_path) -> None:
    """q, k, v picked by scalar Gathers, a Gather of 2-D negative indices, Split and Concat on the last axis."""
    nodes = [helper.make_node("Gather", ["x", "zero"], ["g0"], axis=0),
             helper.make_node("Gather", ["x", "idx"], ["g1"], axis=-1),
             helper.make_node("Split", ["g0", "sizes"], ["s0", "s1", "s2"], axis=-1),
             helper.make_node("Gather", ["g1", "zero"], ["g3"], axis=0),
             helper.make_node("Reshape", ["g3", "flat"], ["g2"]),
             helper.make_node("Concat", ["s2", "s0", "g2"], ["y"], axis=-1)]
    consts = {"zero": np.array(0, np.int64), "idx": np.array([[0, -1], [2, 2]], np.int64),
              "sizes": np.array([2, 3, 1], np.int64), "flat": np.array([5, 4], np.int64)}
    path, feeds = _graph(tmp_path, nodes, {"x": (3, 5, 6)}, None, consts)
    r = check_against_ort(path, feeds)
    assert {"gather", "slice", "concatenation"} <= set(types(r))
