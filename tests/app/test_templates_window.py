"""Templates in the designer, through its real widgets: group from the canvas's right-click menu with the
name dialog, ungroup, undo/redo, the palette's Templates category, exposed parameters in the parameter
window, Import Model as Template, the documentation page, reports naming expanded layers, and a screenshot
of a window showing an instance."""
from __future__ import annotations

import io
import os
import shutil

import numpy as np
import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from engine import modelfile
from engine.model import Model
from engine.network import Network
from engine.templates import get_template
from engine.weights import RandomWeights, WeightsFolder
from tests.app.test_main_window import double_click, wait_checked
from tests.app.test_screenshot import assert_nodes_visible_and_apart, render_window
from tests.canvas.conftest import model_view, right_click

TYPE_ROLE = QtCore.Qt.ItemDataRole.UserRole + 1


@pytest.fixture
def sample(sample_path, tmp_path):
    path = tmp_path / "denoiser.lnet"
    shutil.copy(sample_path, path)
    return path


def grouped(window, sample, name="feat"):
    doc = window.files.open_path(sample)
    doc.canvas.select_layers(["conv2", "conv3"])
    assert window.templates.group_selection(name) == f"{name}_1"
    return doc


def test_group_from_the_context_menu_with_the_name_dialog(window, sample, registry, qtbot):
    doc = window.files.open_path(sample)
    before = doc.model.content()
    want = Network(doc.model, registry).infer()["output"]
    doc.canvas.select_layers(["conv2", "conv3"])
    entries = dict(right_click(doc.canvas, "conv3", "Group as Template…"))
    assert entries["Group as Template…"] and not entries["Ungroup"] and entries["Delete"]
    dlg = window.templates.template_dialog
    assert dlg.isVisible() and dlg.textValue() == "template1"  # open(): the menu action returned at once
    dlg.setTextValue("feat")
    dlg.accept()
    m = doc.model
    assert list(m.layers) == ["input", "conv1", "feat_1", "residual", "denoised", "output"]
    assert m.layers["feat_1"].type == "template:feat" and m.layers["residual"].inputs == ["feat_1"]
    assert doc.canvas.selected_layers() == ["feat_1"] and doc.canvas.snapshot() == model_view(m)
    wait_checked(qtbot, doc)
    assert doc.diagnostics == [] and doc.shapes["feat_1"] == doc.shapes["conv1"]
    assert "→ 1×16×96×128" in doc.canvas.nodes["feat_1"].info.get_value()
    assert Network(m, registry).infer()["output"].shape == want.shape
    assert window.act_undo.text() == "&Undo Group conv2, conv3 as template feat"
    window.act_undo.trigger()
    assert m.content() == before and doc.canvas.snapshot() == model_view(m)
    window.act_redo.trigger()
    assert "feat_1" in doc.canvas.nodes and doc.canvas.snapshot() == model_view(m)


def test_ungroup_from_the_context_menu_and_the_edit_menu(window, sample):
    doc = grouped(window, sample)
    m = doc.model
    doc.canvas.select_layers(["conv1"])
    entries = dict(right_click(doc.canvas, "feat_1", "Ungroup"))  # right-click outside the selection selects it
    assert entries["Ungroup"]
    assert list(m.layers) == ["input", "conv1", "conv2", "conv3", "residual", "denoised", "output"]
    assert doc.canvas.selected_layers() == ["conv2", "conv3"] and doc.canvas.snapshot() == model_view(m)
    window.act_undo.trigger()
    doc.canvas.select_layers(["feat_1", "conv1"])
    assert window.act_ungroup.isEnabled()
    window.act_ungroup.trigger()
    assert "feat_1" not in m.layers and "conv3" in m.layers
    edit = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Edit")
    assert {window.act_group, window.act_ungroup, window.act_import_template} <= set(edit.actions())


def test_group_refusal_is_a_message_that_does_not_block(window, sample):
    doc = window.files.open_path(sample)
    before = doc.model.content()
    doc.canvas.select_layers(["residual", "output"])
    assert window.templates.group_selection("bad") is None
    box = window.context.message_box
    assert box.isVisible() and "input and output layers stay in the network" in box.text()
    assert doc.model.content() == before
    box.close()
    doc.canvas.select_layers([])
    assert not window.act_group.isEnabled() and not window.act_ungroup.isEnabled()


def test_palette_lists_the_templates_of_the_current_model(window, sample, qtbot):
    doc = grouped(window, sample)
    item = window.palette.item_for("template:feat")
    assert item is not None and item.parent().text(0) == "Templates"
    window.palette.tree.scrollToItem(item)
    double_click(qtbot, window.palette.tree, item)
    assert doc.model.layers["feat_2"].type == "template:feat" and doc.canvas.selected_layers() == ["feat_2"]
    assert [p.name() for p in doc.canvas.nodes["feat_2"].input_ports()] == ["conv1"]
    window.workspace.new_model()
    assert window.palette.item_for("template:feat") is None
    window.tabs.setCurrentIndex(0)
    assert window.palette.item_for("template:feat") is not None
    window.act_undo.trigger()
    window.act_undo.trigger()
    assert window.palette.item_for("template:feat") is None  # the template went with the group's undo


def test_exposed_parameter_edit_is_undoable(window, sample, registry):
    doc = grouped(window, sample)
    doc.canvas.select_layers(["feat_1"])
    rows = window.params.rows
    assert {"param.conv2.num_output_channels", "param.conv3.kernel_size"} <= set(rows)
    spin = rows["param.conv2.num_output_channels"].editor.box
    assert spin.value() == 16 and spin.minimum() == 1
    spin.setValue(8)
    assert doc.model.layers["feat_1"].params == {"conv2.num_output_channels": "8"}
    assert "conv2.num_output_channels: <b>8</b>" in doc.canvas.nodes["feat_1"].info.get_value()
    net = Network(doc.model, registry)
    net.infer()
    assert net.dims("feat_1__conv2").c == 8
    window.act_undo.trigger()
    assert doc.model.layers["feat_1"].params == {} and rows["param.conv2.num_output_channels"].editor.box.value() == 16


def test_exposed_parameters_dialog_changes_the_template(window, sample):
    doc = grouped(window, sample)
    doc.canvas.select_layers(["feat_1"])
    window.params.exposed_button.click()
    dlg = window.params.exposed_dialog
    assert dlg.isVisible()
    items = dlg.items()
    assert items["conv2.num_output_channels"].checkState() == QtCore.Qt.CheckState.Checked
    for key, item in items.items():
        item.setCheckState(QtCore.Qt.CheckState.Checked if key == "conv3.stride" else QtCore.Qt.CheckState.Unchecked)
    dlg.accept()
    assert [e.key for e in get_template(doc.model, "feat").exposed] == ["conv3.stride"]
    assert set(k for k in window.params.rows if k.startswith("param.")) == {"param.conv3.stride"}
    assert "conv3.stride" in doc.canvas.nodes["feat_1"].info.get_value()
    window.act_undo.trigger()
    assert "param.conv2.num_output_channels" in window.params.rows


def test_import_model_as_template(window, sample, tmp_path, monkeypatch, registry):
    part = Model("stage")
    part.add_layer("input", "x", params={"dimensions": "1x16x8x8"})
    part.add_layer("convolution", "c", params={"num_output_channels": "16"}, inputs=["x"], activation="relu")
    part.add_layer("output", "y", inputs=["c"])
    modelfile.save(part, tmp_path / "stage.lnet")
    doc = window.files.open_path(sample)
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (str(tmp_path / "stage.lnet"), "")))
    window.act_import_template.trigger()
    assert "stage" in doc.model.templates and window.palette.item_for("template:stage") is not None
    assert "Imported stage.lnet as template stage" in window.statusBar().currentMessage()
    name = window.editing.add_layer("template:stage")
    doc.model.connect("conv1", name, 0)
    assert Network(doc.model, registry).infer()  # runs with the new instance
    part.add_layer("output", "y2", inputs=["x"])
    modelfile.save(part, tmp_path / "two.lnet")
    assert window.templates.import_template(tmp_path / "two.lnet") is None
    assert "2 output layers" in window.context.message_box.text()


def test_docs_browser_has_the_template_page(window, sample):
    doc = grouped(window, sample)
    doc.canvas.select_layers(["feat_1"])
    browser = window.help.show_docs()
    assert "layer:template:feat" in browser.visible_keys()
    text = browser.page.toPlainText()
    assert "feat" in text and "conv2" in text and "conv2.num_output_channels" in text


def test_report_rows_of_expanded_layers_select_the_instance(window, sample, tmp_path):
    from app.cli import main

    doc = grouped(window, sample)
    window.files.save(doc)
    assert main(["profile", str(sample), "-b", "numpy", "-n", "1", "-r", str(tmp_path / "rep")], out=io.StringIO()) == 0
    view = window.reports.open_report(tmp_path / "rep.json")
    view.layer_selected.emit("feat_1__conv3")
    assert doc.canvas.selected_layers() == ["feat_1"]
    doc.canvas.select_layers(["conv1"])
    doc.canvas.select_layers(["feat_1"])  # the instance selects its output layer's row
    assert view.selected_layer() == "feat_1__conv3"


def test_save_and_reopen_keeps_templates(window, sample, registry):
    doc = grouped(window, sample)
    doc.canvas.select_layers(["feat_1"])
    window.params.rows["param.conv3.num_output_channels"].editor.box.setValue(12)
    assert window.files.save(doc)
    saved = doc.model.content()
    window.files.close_document(doc)
    again = window.files.open_path(sample)
    assert again.model.content() == saved and "feat" in again.model.templates
    assert modelfile.load(sample, registry) == again.model


def test_render_main_window_with_a_template_instance(make_window, sample, tmp_path, qtbot):
    out = os.environ.get("LAYERLAB_TEMPLATE_SCREENSHOT") or str(tmp_path / "template_window.png")
    w, doc = render_window(make_window, qtbot, lambda w: grouped(w, sample), ["feat_1"], out)
    rects = assert_nodes_visible_and_apart(doc.canvas)
    viewer = doc.canvas.viewer()
    img = QtGui.QImage(out)
    node = rects["feat_1"]
    centre = doc.canvas.widget.mapTo(w, viewer.mapFromScene(node.center()))
    colour = img.pixelColor(centre.x() + 2, centre.y() + 2)
    assert colour.red() > colour.blue() + 30  # the gold template body
    assert any(box.title() == "Template" for box in w.params.findChildren(QtWidgets.QGroupBox))


def test_templates_come_first_in_the_palette(window, sample):
    grouped(window, sample)
    assert window.palette.tree.topLevelItem(0).text(0) == "Templates"
    window.palette.grouping.setCurrentText("Collection")
    assert window.palette.item_for("template:feat").parent().text(0) == "network denoiser"


def test_file_export_preprocessed_expands_the_templates(window, sample, tmp_path, qtbot, registry):
    from tests.app.test_export_dialog import click_export

    doc = grouped(window, sample)
    window.export_actions["preprocessed"].trigger()
    dlg = window.export_dialog
    dlg.output.setText(str(tmp_path / "pre.lnet"))
    result = click_export(qtbot, dlg)
    assert result.ok and "1 template instance(s) expanded" in result.message_texts()[0]
    pre = modelfile.load(tmp_path / "pre.lnet", registry)
    assert "feat_1__conv2" in pre.layers and not pre.templates
    got = Network(pre, registry, weights=WeightsFolder(tmp_path / "pre_weights")).infer()["output"]
    np.testing.assert_array_equal(got, Network(doc.model, registry, weights=RandomWeights(0)).infer()["output"])


def test_palette_template_menu_deletes_unused_templates(window, sample, qtbot):
    doc = grouped(window, sample)
    tree = window.palette.tree
    item = window.palette.item_for("template:feat")
    tree.scrollToItem(item)
    tree.customContextMenuRequested.emit(tree.visualItemRect(item).center())
    menu = window.palette.menu
    assert menu.isVisible()  # popup(): shown without blocking
    actions = {a.text(): a for a in menu.actions() if a.text()}
    assert list(actions) == ["Add Instance", "Exposed Parameters…", "Rename Template…", "Edit Template", "Delete Template"]
    actions["Delete Template"].trigger()
    menu.close()
    assert "feat" in doc.model.templates and "still used by feat_1" in window.context.message_box.text()
    window.palette.template_menu("feat").actions()[0].trigger()
    assert doc.model.layers["feat_2"].type == "template:feat"
    window.palette.template_menu("feat").actions()[1].trigger()
    assert window.params.exposed_dialog.isVisible()
    window.params.exposed_dialog.reject()
    doc.canvas.select_layers(["feat_1", "feat_2"])
    window.editing.act_delete.trigger()
    assert window.templates.delete_template("feat")
    assert window.palette.item_for("template:feat") is None and "feat" not in doc.model.templates
    window.act_undo.trigger()
    assert window.palette.item_for("template:feat") is not None


def test_rename_template_from_the_palette_menu(window, sample, qtbot):
    doc = grouped(window, sample)
    instance = "feat_1"
    menu = window.palette.template_menu("feat")
    rename = next(a for a in menu.actions() if a.text() == "Rename Template…")
    rename.trigger()  # opens the name dialog without blocking
    dlg = window.templates.template_dialog
    assert dlg.isVisible() and dlg.textValue() == "feat"
    dlg.setTextValue("features")
    dlg.accept()
    qtbot.waitUntil(lambda: "features" in doc.model.templates)
    assert doc.model.layers[instance].type == "template:features" and "feat" not in doc.model.templates
    assert window.palette.item_for("template:features") is not None and window.palette.item_for("template:feat") is None
    doc.model.undo()
    assert doc.model.layers[instance].type == "template:feat" and window.palette.item_for("template:feat") is not None
