"""Groups in the model document: membership per layer, the file's optional <group> element, undo, and groups made
from node-name scopes."""
from __future__ import annotations

import pytest

from engine import modelfile
from engine.errors import ModelFileError
from engine.groups import GroupError, groups_of, initial_collapsed, outermost_collapsed, scope_groups
from engine.model import Model


def grouped() -> Model:
    m = Model("g")
    m.add_layer("input", "inp")
    m.add_layer("convolution", "a", inputs=["inp"])
    m.add_layer("convolution", "b", inputs=["a"])
    m.add_layer("convolution", "c", inputs=["b"])
    m.set_group(["a", "b"], "stage1/block1")
    m.set_group(["c"], "stage1")
    return m


def test_groups_follow_the_layers_paths() -> None:
    g = groups_of(grouped().layers)
    assert list(g) == ["stage1", "stage1/block1"]
    assert g["stage1"].members == ["a", "b", "c"] and g["stage1"].children == ["stage1/block1"]
    assert g["stage1/block1"].parent == "stage1" and g["stage1/block1"].name == "block1"
    assert outermost_collapsed("stage1/block1", {"stage1/block1", "stage1"}) == "stage1"
    assert outermost_collapsed("stage1", {"stage1/block1"}) is None


def test_set_group_is_one_undo_step() -> None:
    m = grouped()
    m.undo()
    assert m.layers["c"].group == "" and m.layers["a"].group == "stage1/block1"
    m.undo()
    assert groups_of(m.layers) == {}
    with pytest.raises(GroupError, match="empty step"):
        m.set_group(["a"], "stage1//x")


def test_groups_survive_save_and_reopen(tmp_path) -> None:
    m = grouped()
    text = modelfile.dumps(m)
    assert '<group path="stage1/block1" />' in text or '<group path="stage1/block1"/>' in text
    modelfile.save(m, tmp_path / "g.lnet")
    back = modelfile.load(tmp_path / "g.lnet")
    assert back == m and back.layers["b"].group == "stage1/block1"
    # a file without groups (older) loads with none
    old = text.replace('<group path="stage1/block1" />', "").replace('<group path="stage1" />', "")
    assert groups_of(modelfile.loads(old).layers) == {}


def test_bad_group_path_names_the_line() -> None:
    text = modelfile.dumps(grouped()).replace('path="stage1"', 'path="/stage1"')
    with pytest.raises(ModelFileError, match="layer c: group path"):
        modelfile.loads(text)


def test_scopes_of_node_names_become_groups() -> None:
    scopes = {"c1": "/features/denseblock3/denselayer12/conv1/Conv",
              "c2": "/features/denseblock3/denselayer12/conv2/Conv",
              "cat": "/features/denseblock3/denselayer12/Concat",
              "c3": "/features/denseblock3/denselayer13/conv1/Conv",
              "fc": "/classifier/Gemm", "flat": "/Flatten"}
    groups = scope_groups(scopes)
    assert groups["c1"] == groups["c2"] == groups["cat"] == "features/denseblock3/denselayer12"
    assert groups["c3"] == "features/denseblock3"  # alone in its scopes below: no group of one layer
    assert "fc" not in groups and "flat" not in groups


def test_large_networks_open_with_few_boxes_one_level_at_a_time() -> None:
    m = Model("big")
    m.add_layer("input", "inp")
    for b in range(4):
        for layer in range(10):
            m.add_layer("convolution", f"b{b}_l{layer}", inputs=["inp"])
            m.set_group([f"b{b}_l{layer}"], f"features/block{b}/layer{layer // 2}")
    m.add_layer("convolution", "tail", inputs=["inp"])
    m.set_group(["tail"], "features/tail")
    groups = groups_of(m.layers)
    assert initial_collapsed(groups, loose=1, limit=3) == {"features"}
    # features opened: its 5 groups together (the one-layer group opens no further than its siblings)
    assert initial_collapsed(groups, loose=1, limit=8) == {f"features/block{b}" for b in range(4)} | {"features/tail"}
    assert initial_collapsed(groups, loose=1, limit=30) == {f"features/block{b}/layer{i}" for b in range(4)
                                                            for i in range(5)}
