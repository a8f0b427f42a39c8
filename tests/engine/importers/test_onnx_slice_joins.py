"""Joins of slices of one tensor folded into one gather at import (engine.importers.onnx.slice_joins): torch.roll
as exported (Slice, Slice, Concat), on any axis and any rank, checked against onnxruntime on both storage layouts;
joins that are no reordering of one axis stay as they are."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine.importers.onnx.slice_joins import index_text
from tests.engine.importers.helpers import check_against_ort, reference, run, save_graph, tensor, types

RNG = np.random.default_rng(11)


def _slice(name: str, src: str, start: int, end: int, axis: int) -> list:
    c = {f"{name}_s": np.array([start]), f"{name}_e": np.array([end]), f"{name}_a": np.array([axis])}
    return [helper.make_node("Slice", [src, f"{name}_s", f"{name}_e", f"{name}_a"], [name])], c


def roll_graph(tmp_path, shape, axis, shift, second_axis=None):
    """x -> roll by ``shift`` along ``axis`` (and ``second_axis``) as two slices and a join each -> Relu."""
    nodes, consts, src = [], {}, "x"
    for k, ax in enumerate([axis] + ([second_axis] if second_axis is not None else [])):
        n = shape[ax]
        for part, (a, b) in (("hi", (n - shift, n)), ("lo", (0, n - shift))):
            ns, cs = _slice(f"{part}{k}", src, a, b, ax)
            nodes += ns
            consts.update(cs)
        nodes.append(helper.make_node("Concat", [f"hi{k}", f"lo{k}"], [f"r{k}"], axis=ax))
        src = f"r{k}"
    nodes.append(helper.make_node("Relu", [src], ["y"]))
    return save_graph(tmp_path / "roll.onnx", nodes, [tensor("x", shape)], [tensor("y", None)],
                      {k: v.astype(np.int64) for k, v in consts.items()})


@pytest.mark.parametrize("shape,axis,second", [((1, 8, 8, 16), 1, 2), ((1, 8, 8, 16), -1, None), ((2, 7, 5), 1, None),
                                               ((1, 6, 10, 10), 3, 2)])
@pytest.mark.parametrize("fmt", ["fp32 nchw", "fp32 nhwc"])
def test_a_roll_imports_as_gathers_and_agrees_with_onnxruntime(tmp_path, shape, axis, second, fmt):
    path = roll_graph(tmp_path, shape, axis, 3, second)
    x = RNG.standard_normal(shape).astype(np.float32)
    result = check_against_ort(path, {"x": x})
    assert "slice" not in types(result) and "concatenation" not in types(result)
    assert types(result).count("gather") == (2 if second is not None else 1)
    got, = run(result, {"x": x}, fmt=fmt)
    ref, = reference(path, {"x": x})
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-6)
    assert any("slices joined" in f and "-> gather" in f for f in result.folded)


def test_joins_that_are_no_reordering_of_one_axis_stay(tmp_path):
    # slices of two different tensors, and slices cutting another axis than the join's
    nodes, consts = [], {}
    for name, src, a, b, ax in (("p", "x", 0, 4, 1), ("q", "z", 0, 4, 1), ("u", "x", 0, 4, 2), ("v", "x", 4, 8, 2)):
        ns, cs = _slice(name, src, a, b, ax)
        nodes += ns
        consts.update(cs)
    nodes += [helper.make_node("Concat", ["p", "q"], ["y1"], axis=1),
              helper.make_node("Concat", ["u", "v"], ["y2"], axis=1)]
    path = save_graph(tmp_path / "joins.onnx", nodes, [tensor("x", (1, 8, 8, 4)), tensor("z", (1, 8, 8, 4))],
                      [tensor("y1", None), tensor("y2", None)], {k: v.astype(np.int64) for k, v in consts.items()})
    x, z = (RNG.standard_normal((1, 8, 8, 4)).astype(np.float32) for _ in range(2))
    result = check_against_ort(path, {"x": x, "z": z})
    assert types(result).count("concatenation") == 2 and "gather" not in types(result)


def test_index_runs_are_written_compactly_and_read_back():
    from plugins.standard.gather import index_list

    for indices in ([3, 4, 5, 6, 0, 1, 2], [5, 0, 1], [2, 2, 2], list(range(53, 56)) + list(range(53)), [-1, 0, 1, 2]):
        text = index_text(indices)
        assert index_list(text) == indices
    assert index_text(list(range(3, 56)) + [0, 1, 2]) == "3:56,0:3"
    for bad in ("3:1", "-2:4", "a:3", "1:2:3", "0:70000", "0:99999999999999", "1,2,0:65535"):
        with pytest.raises(ValueError):
            index_list(bad)
