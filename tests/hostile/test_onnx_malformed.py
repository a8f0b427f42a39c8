"""Malformed and hostile ONNX files: ``layerlab import`` ends with exit status 2 and one line naming what is wrong
(never 3), and the hostile but valid ones still import."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.hostile.inprocess import layerlab
from tests.hostile.onnx_models import chain, model, save, small_net

X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)


def _conv(w: TensorProto, **attrs) -> object:
    return model([helper.make_node("Conv", ["x", w.name], ["y"], name="conv", **attrs)], [X], [Y], [w])


def _w(shape=(4, 4, 1, 1)) -> TensorProto:
    return numpy_helper.from_array(np.ones(shape, np.float32), "w")


def _huge() -> object:
    w = helper.make_tensor("w", TensorProto.FLOAT, [4], b"\0" * 16, raw=True)
    del w.dims[:]
    w.dims.extend([100000, 100000, 10, 10])
    return _conv(w)


def _raw_short() -> object:
    w = _w()
    w.raw_data = w.raw_data[:-4]
    return _conv(w)


def _typed(kind: int) -> object:
    w = _w()
    w.data_type = kind
    return _conv(w)


def _negative_dims() -> object:
    w = _w()
    del w.dims[:]
    w.dims.extend([4, -4, 1, 1])
    return _conv(w)


def _cycle() -> object:
    a = helper.make_node("Relu", ["x"], ["a"], name="a")
    b = helper.make_node("Add", ["a", "c"], ["b"], name="b")
    c = helper.make_node("Relu", ["b"], ["c"], name="c")
    return model([a, b, c], [X], [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)])


def _wrong_attr_type() -> object:
    m = _conv(_w())
    m.graph.node[0].attribute.append(helper.make_attribute("group", 1.0))
    return m


CASES = {
    "initializer claiming 10^12 values in 16 bytes": (_huge, "claims 100000x100000x10x10"),
    "Conv group not dividing the channels": (lambda: _conv(_w((4, 4, 1, 1)), group=3), "group 3"),
    "attribute of the wrong type": (_wrong_attr_type, "attribute 'group'"),
    "unknown attribute": (lambda: _conv(_w(), colour="red"), "attribute 'colour'"),
    "missing input": (lambda: model([helper.make_node("Conv", ["x"], ["y"], name="conv")], [X], [Y]), "1 input"),
    "dangling input": (lambda: model([helper.make_node("Relu", ["nowhere"], ["y"], name="r")], [X], [Y]),
                       "'nowhere'"),
    "duplicated output": (lambda: model([helper.make_node("Relu", ["x"], ["y"], name="a"),
                                         helper.make_node("Relu", ["x"], ["y"], name="b")], [X], [Y]),
                          "produced twice"),
    "raw data too short": (_raw_short, "holds 60 bytes"),
    "string weights": (lambda: _typed(TensorProto.STRING), "element type STRING"),
    "unknown element type": (lambda: _typed(99), "unknown element type"),
    "negative dims": (_negative_dims, "negative dims"),
    "graph cycle": (_cycle, "cycle"),
    "opset 99": (lambda: model([helper.make_node("Relu", ["x"], ["y"])], [X], [Y], opset=99), "opset 99"),
    "Constant without a value": (lambda: model([helper.make_node("Constant", [], ["k"], name="k"),
                                                helper.make_node("Add", ["x", "k"], ["y"], name="add")], [X], [Y]),
                                 "Constant"),
}


@pytest.mark.parametrize("name", CASES)
def test_malformed_onnx_fails_in_one_line(name, tmp_path):
    make, culprit = CASES[name]
    path = save(make(), tmp_path / "m.onnx")
    res = layerlab(["import", path, "-o", tmp_path / "m.lnet"])
    errors = [line for line in res.err.splitlines() if line.startswith("layerlab: ")]
    assert res.rc == 2 and len(errors) == 1 and culprit in errors[0], res.err
    assert not (tmp_path / "m.lnet").exists()


def test_truncated_protobuf(tmp_path):
    data = small_net().SerializeToString()
    for cut in (1, 10, len(data) // 3, len(data) // 2, len(data) - 7):
        path = tmp_path / "m.onnx"
        path.write_bytes(data[:cut])
        res = layerlab(["import", path, "-o", tmp_path / "m.lnet", "--no-clean"])
        assert res.rc == 2 and "internal error" not in res.err, (cut, res.err)


def test_node_limit_refuses_before_work_and_the_flag_raises_it(tmp_path):
    path = save(chain(30), tmp_path / "c.onnx")
    res = layerlab(["import", path, "-o", tmp_path / "c.lnet", "--max-nodes", "20"])
    assert res.rc == 2 and "30 nodes, more than the import's limit of 20 (raise it with --max-nodes)" in res.err
    assert layerlab(["import", path, "-o", tmp_path / "c.lnet", "--max-nodes", "30"]).rc == 0


def test_nodes_out_of_order_hostile_names_and_nan_weights_import(tmp_path):
    m = chain(40)
    nodes = list(m.graph.node)
    for n in nodes:
        n.name = "/same/name"  # every node named alike
    del m.graph.node[:]
    m.graph.node.extend(reversed(nodes))  # not in topological order
    m.graph.initializer[0].raw_data = np.full(16, np.nan, np.float32).tobytes()
    res = layerlab(["import", save(m, tmp_path / "m.onnx"), "-o", tmp_path / "m.lnet"])
    assert res.rc == 0, res.err
    assert "42 layers" in res.out


def test_a_deep_chain_imports_without_recursion(tmp_path):
    """2,000 nodes (a RecursionError in the layout before it was iterative)."""
    res = layerlab(["import", save(chain(2000), tmp_path / "m.onnx"), "-o", tmp_path / "m.lnet"], timeout=300)
    assert res.rc == 0 and "2002 layers" in res.out, res.err
