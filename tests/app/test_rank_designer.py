"""Tensors of any rank in the designer, through its real widgets: the input's dimensions editor sets a rank-1 to 6
shape, nodes and the parameter window show shapes of any rank, a transpose edit shows what it makes, and saving and
reopening keeps every rank; a rank mismatch is listed in the Type Check panel naming both layers."""
from __future__ import annotations

from PySide6 import QtWidgets

from tests.app.test_main_window import wait_checked


def _tokens_model(doc) -> None:
    """input (1x49x96 tokens) -> layer_normalization -> transpose -> reshape to N x C x H x W -> convolution."""
    m = doc.model
    m.add_layer("input", "tokens", params={"dimensions": "1x49x96"})
    m.add_layer("layer_normalization", "norm", inputs=["tokens"])
    m.add_layer("transpose", "channels_first", params={"perm": "0,2,1"}, inputs=["norm"])
    m.add_layer("reshape", "image", params={"shape": "0,96,7,7"}, inputs=["channels_first"])
    m.add_layer("convolution", "conv", params={"num_output_channels": "8"}, inputs=["image"])
    m.add_layer("output", "out", inputs=["conv"])


def test_nodes_show_shapes_of_every_rank(window, qtbot):
    doc = window.workspace.new_model()
    _tokens_model(doc)
    wait_checked(qtbot, doc)
    info = {n: doc.canvas.nodes[n].info.get_value() for n in doc.model.layers}
    assert "→ 1×49×96" in info["tokens"] and "1×49×96" in info["tokens"].replace("→ 1×49×96", "")
    assert "→ 1×96×49" in info["channels_first"]
    assert "→ 1×96×7×7" in info["image"] and "→ 1×8×7×7" in info["conv"]
    assert not doc.diagnostics


def test_input_dims_editor_sets_any_rank_and_the_file_keeps_it(window, qtbot, tmp_path, monkeypatch, registry):
    doc = window.workspace.new_model()
    _tokens_model(doc)
    doc.canvas.select_layers(["tokens"])
    dims = window.params.rows["param.dimensions"].editor
    assert dims.rank_box.value() == 3 and [b.value() for b in dims.boxes if not b.isHidden()] == [1, 49, 96]
    # rank 5: two more sizes (1 each), then one of them set
    dims.rank_box.setValue(5)
    assert not window.params.rows["param.dimensions"].has_error, window.params.rows["param.dimensions"].error.text()
    assert doc.model.layers["tokens"].params["dimensions"] == "1x49x96x1x1"
    dims.boxes[4].setValue(2)
    assert doc.model.layers["tokens"].params["dimensions"] == "1x49x96x1x2"
    assert [b.isHidden() for b in dims.boxes] == [False] * 5 + [True]
    # rank 1 and rank 6 are the ends; undo goes back step by step
    dims.rank_box.setValue(1)
    assert doc.model.layers["tokens"].params["dimensions"] == "1"
    dims.rank_box.setValue(6)
    assert doc.model.layers["tokens"].params["dimensions"] == "1x1x1x1x1x1"
    for _ in range(4):
        doc.model.undo()
    assert doc.model.layers["tokens"].params["dimensions"] == "1x49x96"
    assert dims.rank_box.value() == 3 and [b.value() for b in dims.boxes[:3]] == [1, 49, 96]
    # a rank-4 input keeps its N x C x H x W boxes, named so
    dims.rank_box.setValue(4)
    assert dims.boxes[1].toolTip() == "C (channels)" and dims.boxes[4].isHidden()
    doc.model.undo()
    # saved and reopened: the rank-3 input and the shapes behind it are unchanged
    target = tmp_path / "tokens.lnet"
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(target), "")))
    window.act_save_as.trigger()
    assert 'value="1x49x96"' in target.read_text()
    again = window.files.open_path(target)
    wait_checked(qtbot, again)
    assert again.model.layers["tokens"].params["dimensions"] == "1x49x96"
    assert "→ 1×96×49" in again.canvas.nodes["channels_first"].info.get_value()
    again.canvas.select_layers(["tokens"])
    assert window.params.rows["param.dimensions"].editor.rank_box.value() == 3


def test_shape_row_follows_a_transpose_edit(window, qtbot):
    doc = window.workspace.new_model()
    _tokens_model(doc)
    wait_checked(qtbot, doc)
    doc.canvas.select_layers(["channels_first"])
    assert window.params.shape_label.text() == "1×49×96 → 1×96×49"
    perm = window.params.rows["param.perm"]
    perm.editor.edit.setText("1,0,2")
    perm.editor.edit.editingFinished.emit()
    assert doc.model.layers["channels_first"].params["perm"] == "1,0,2"
    wait_checked(qtbot, doc)
    assert window.params.shape_label.text() == "1×49×96 → 49×1×96"
    # a permutation of the wrong length is refused by the layer; one of another rank is a shape error
    perm.editor.edit.setText("0,0,1")
    perm.editor.edit.editingFinished.emit()
    assert perm.has_error and "not a permutation" in perm.error.text()
    assert doc.model.layers["channels_first"].params["perm"] == "1,0,2"
    doc.canvas.select_layers(["image"])
    assert window.params.shape_label.text().startswith("49×1×96 → ?")


def test_rank_mismatch_in_the_type_check_panel_names_both_layers(window, qtbot):
    doc = window.workspace.new_model()
    m = doc.model
    m.add_layer("input", "tokens", params={"dimensions": "1x49x96"})
    m.add_layer("convolution", "conv2", params={"num_output_channels": "4"}, inputs=["tokens"])
    wait_checked(qtbot, doc)
    tree = window.checks.tree
    rows = [(tree.topLevelItem(i).text(1), tree.topLevelItem(i).text(2)) for i in range(tree.topLevelItemCount())]
    assert rows == [("conv2", "input 0 (from layer tokens) is a tensor of rank 3 (1x49x96), but convolution takes "
                              "tensors of rank 4 (N x C x H x W)")]
    assert doc.canvas.badge_severity("conv2") == "error"


def test_imported_swin_block_renders_with_its_channels_last_shapes(make_window, qtbot, tmp_path):
    """A Swin block (PyTorch, opset 17) imported and opened: its channels-last tokens show N x H x W x C shapes on
    the nodes; rendered to PNG (LAYERLAB_SHOTS=dir keeps it). (A ConvNeXt block imports on N x C x H x W.)"""
    import os
    from pathlib import Path

    from engine import modelfile
    from engine.importers.onnx import import_onnx
    from tests.app.test_screenshot import render_window
    from tests.engine.importers.architectures import export

    export("swin_block", str(tmp_path / "block.onnx"))
    result = import_onnx(tmp_path / "block.onnx")
    modelfile.save(result.model, tmp_path / "block.lnet")
    folder = Path(os.environ.get("LAYERLAB_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    _w, doc = render_window(make_window, qtbot, lambda w: w.files.open_path(tmp_path / "block.lnet"), [],
                            str(folder / "designer_swin_block.png"))
    assert not [d for d in doc.diagnostics if d.severity == "error"]  # checked when opened
    shapes = set(doc.shapes.values())
    assert (1, 8, 12, 8) in shapes  # the tokens, channels last
    # the MLP's hidden layer: on the tokens, or on their rows where the import keeps the Linear on rows
    assert (1, 8, 12, 16) in shapes or (8 * 12, 16) in shapes
    info = " ".join(node.info.get_value() for node in doc.canvas.nodes.values())
    assert "→ 1×8×12×8" in info and "→ 1×8×8×12" in info
    norm = next(n for n, s in doc.model.layers.items() if s.type == "layer_normalization")
    doc.canvas.focus_layer(norm)  # zoomed in: the shapes under the nodes are drawn
    qtbot.wait(20)
    assert doc.canvas.viewer().grab().save(str(folder / "designer_swin_block_zoomed.png"))
