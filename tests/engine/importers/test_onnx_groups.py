"""The ONNX import groups layers by the module scopes of their node names."""
from __future__ import annotations

from onnx import helper

from engine import modelfile
from engine.groups import groups_of
from engine.importers.onnx import import_onnx
from engine.layout import grouped_positions, overlaps
from tests.engine.importers.helpers import save_graph, tensor


def test_import_makes_groups_from_node_names(tmp_path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="/stem/act/Relu"),
             helper.make_node("Sigmoid", ["a"], ["b"], name="/stage1/block1/gate/Sigmoid"),
             helper.make_node("Relu", ["b"], ["c"], name="/stage1/block1/act/Relu"),
             helper.make_node("Sigmoid", ["c"], ["d"], name="/stage1/block2/gate/Sigmoid"),
             helper.make_node("Relu", ["d"], ["y"], name="/head/Relu")]
    path = save_graph(tmp_path / "m.onnx", nodes, [tensor("x", [1, 2, 4, 4])], [tensor("y", [1, 2, 4, 4])])
    model = import_onnx(path).model
    groups = {s.note.rpartition(" ")[2]: s.group for s in model.layers.values() if s.note.startswith("ONNX ")}
    assert groups["/stage1/block1/gate/Sigmoid"] == groups["/stage1/block1/act/Relu"] == "stage1/block1"
    assert groups["/stage1/block2/gate/Sigmoid"] == "stage1"  # alone in block2: no group of one layer
    assert groups["/stem/act/Relu"] == "" and groups["/head/Relu"] == ""
    assert set(groups_of(model.layers)) == {"stage1", "stage1/block1"}
    back = modelfile.loads(modelfile.dumps(model))
    assert {n: s.group for n, s in back.layers.items()} == {n: s.group for n, s in model.layers.items()}
    # laid out with stage1 collapsed, its layers are together: no other layer inside their area
    sizes = {n: (100.0, 60.0) for n in model.layers}
    pos = grouped_positions(model.layers, sizes, {"stage1"})
    assert not overlaps(pos, sizes)
    inside = [n for n, s in model.layers.items() if s.group.startswith("stage1")]
    left = min(pos[n][0] for n in inside)
    right = max(pos[n][0] + 100 for n in inside)
    assert all(not (left <= pos[n][0] < right) for n in model.layers if n not in inside)


def test_short_labels_leave_out_the_shared_operator_ending_where_names_stay_distinct():
    from engine.groups import short_labels

    names = ["input", "layer1_0_conv1_Conv", "layer1_0_conv2_Conv", "layer1_0_Add", "layer1_0", "fc_Gemm", "x_y"]
    labels = short_labels(names)
    assert labels["layer1_0_conv1_Conv"] == "layer1_0_conv1" and labels["layer1_0_conv2_Conv"] == "layer1_0_conv2"
    assert labels["layer1_0_Add"] == "layer1_0_Add"  # its short form is another layer's name: kept whole
    assert labels["fc_Gemm"] == "fc" and labels["input"] == "input" and labels["x_y"] == "x_y"
    assert len(set(labels.values())) == len(names)


def test_short_labels_leave_out_pytorchs_repeated_scope_steps():
    """torchvision's names repeat each scope step (``features_features_3_block_block_1_block_1_0_Conv``): cut at its
    start, such a name kept only words every layer of a stage shares; the label says each step once, so the stage
    and block numbers stay near its end, and labels stay distinct."""
    from engine.groups import short_labels

    names = [f"features_features_{s}_features_{s}_{b}_block_block_{i}_block_{i}_0_Conv"
             for s in (2, 3) for b in (0, 1) for i in (0, 1)]
    names += ["features_features_3_features_3_1_block_block_1_1_Conv", "features_features_3_features_3_1_Add"]
    labels = short_labels(names)
    assert labels[names[0]] == "features_2_0_block_0_0"
    assert labels["features_features_3_features_3_1_block_block_1_1_Conv"] == "features_3_1_block_1_1"  # 1_1 stays
    assert labels["features_features_3_features_3_1_Add"] == "features_3_1"
    assert len(set(labels.values())) == len(names)


def test_compact_labels_keep_the_numbers_that_tell_layers_apart():
    """A box too narrow for its label: the label's shortest distinct end, its words before the last cut to their
    numbers; where two compact forms would be equal, the distinct end stays whole."""
    from engine.groups import compact_labels

    labels = {"a": "features_3_1_block_2_fc1", "b": "features_4_1_block_2_fc1", "c": "features_3_1_block_2",
              "d": "features_denseblock3_denselayer12_conv2", "e": "features_denseblock2_denselayer12_conv2",
              "f": "input", "g": "x_1_y", "h": "z_1_y"}
    compact = compact_labels(labels)
    assert compact["a"] == "3_1_2_fc1" and compact["b"] == "4_1_2_fc1" and compact["c"] == "3_1_2"
    assert compact["d"] == "3_12_conv2" and compact["e"] == "2_12_conv2" and compact["f"] == "input"
    assert compact["g"] == "x_1_y" and compact["h"] == "z_1_y"  # "1_y" twice: their distinct ends, uncut
    assert len(set(compact.values())) == len(labels)
