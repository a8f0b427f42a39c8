"""The designer driven through its real widgets (pytest-qt)."""
from __future__ import annotations

import shutil

import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from engine import modelfile


def answer(monkeypatch, button):
    asked = []

    def question(*args, **kwargs):
        asked.append(args[2])
        return button
    monkeypatch.setattr(QtWidgets.QMessageBox, "question", staticmethod(question))
    return asked


def double_click(qtbot, tree, item):
    """A real double-click: press/release, then the double-click event (Qt needs the pressed index)."""
    pos = tree.visualItemRect(item).center()
    qtbot.mouseClick(tree.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)
    qtbot.mouseDClick(tree.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)


def wait_checked(qtbot, doc):
    with qtbot.waitSignal(doc.checked, timeout=2000):
        pass


# ---- palette -------------------------------------------------------------------------------------------
def test_palette_lists_all_layers_and_filters(window, registry):
    pal = window.palette
    assert {i.data(0, QtCore.Qt.ItemDataRole.UserRole + 1) for i in pal.layer_items()} == set(registry.layer_names)
    pal.filter.setText("CONV")
    types = {i.data(0, QtCore.Qt.ItemDataRole.UserRole + 1) for i in pal.layer_items()}
    assert "convolution" in types and "input" not in types
    pal.grouping.setCurrentText("Name")
    assert pal.tree.topLevelItem(0).data(0, QtCore.Qt.ItemDataRole.UserRole + 1) in types
    assert "convolution" in pal.item_for("convolution").toolTip(0).lower()


def test_drag_from_palette_creates_node(window, qtbot):
    doc = window.workspace.new_model()
    item = window.palette.item_for("convolution")
    mime = window.palette.tree.mimeData([item])
    viewer = doc.canvas.viewer()
    pos = QtCore.QPointF(200, 150)
    for kind in (QtCore.QEvent.Type.DragEnter, QtCore.QEvent.Type.Drop):
        cls = QtGui.QDragEnterEvent if kind == QtCore.QEvent.Type.DragEnter else QtGui.QDropEvent
        ev = cls(pos.toPoint() if cls is QtGui.QDragEnterEvent else pos, QtCore.Qt.DropAction.CopyAction, mime,
                 QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.KeyboardModifier.NoModifier)
        QtWidgets.QApplication.sendEvent(viewer.viewport(), ev)
    assert list(doc.model.layers) == ["convolution_1"]
    scene_pos = viewer.mapToScene(pos.toPoint())
    assert doc.model.layers["convolution_1"].position == pytest.approx((scene_pos.x(), scene_pos.y()), abs=1)
    assert doc.canvas.selected_layers() == ["convolution_1"]
    assert doc.canvas.snapshot()["convolution_1"]["type"] == "convolution"


def test_double_click_palette_adds_at_centre_and_undo(window, qtbot):
    doc = window.workspace.new_model()
    item = window.palette.item_for("element_wise")
    window.palette.tree.scrollToItem(item)
    double_click(qtbot, window.palette.tree, item)
    assert list(doc.model.layers) == ["element_wise_1"]
    window.act_undo.trigger()
    assert doc.model.layers == {} and doc.canvas.nodes == {}
    window.act_redo.trigger()
    assert list(doc.canvas.nodes) == ["element_wise_1"]


# ---- parameter window --------------------------------------------------------------------------------
def test_parameter_edits_valid_and_invalid(window, sample_path, qtbot):
    doc = window.files.open_path(sample_path)
    doc.canvas.select_layers(["conv1"])
    rows = window.params.rows
    spin = rows["param.num_output_channels"].editor.box
    assert spin.value() == 16 and spin.minimum() == 1
    spin.setValue(24)
    assert doc.model.layers["conv1"].params["num_output_channels"] == "24"
    assert "24" in doc.canvas.nodes["conv1"].info.get_value()
    dims = window.params.rows["param.kernel_size"].editor
    assert len(dims.boxes) == 2  # a spatial parameter: H x W only
    dims.boxes[0].setValue(5)
    assert modelfile  # noqa: B018
    assert doc.model.layers["conv1"].params["kernel_size"] == "5x3"
    # padding_end: -1 ("same") by default, i.e. the same as padding; a value makes the padding asymmetric
    end = window.params.rows["param.padding_end"].editor
    assert [b.value() for b in end.boxes] == [-1, -1] and end.boxes[0].text() == "same"
    assert "padding_end" not in doc.model.layers["conv1"].params  # showing it writes nothing
    end.boxes[1].setValue(0)
    assert doc.model.layers["conv1"].params["padding_end"] == "-1x0"
    # invalid name: red with the reason, not applied
    name_row = window.params.rows["name"]
    name_row.editor.edit.setText("9lives")
    name_row.editor.edit.editingFinished.emit()
    assert name_row.has_error and "not a valid layer name" in name_row.error.text()
    assert "conv1" in doc.model.layers
    name_row.editor.edit.setText("conv2")
    name_row.editor.edit.editingFinished.emit()
    assert "already exists" in name_row.error.text()
    name_row.editor.edit.setText("features")
    name_row.editor.edit.editingFinished.emit()
    assert "features" in doc.model.layers and doc.canvas.nodes["features"].name() == "features"
    assert window.params.names == ["features"]


def test_invalid_float_shown_in_red(window, sample_path):
    doc = window.files.open_path(sample_path)
    doc.canvas.select_layers(["input"])
    row = window.params.rows["param.scale"]
    row.editor.edit.setText("abc")
    row.editor.edit.editingFinished.emit()
    assert row.has_error and "not a number" in row.error.text()
    assert "scale" not in doc.model.layers["input"].params
    assert "e05050" in row.editor.edit.styleSheet()
    row.editor.edit.setText("0.5")
    row.editor.edit.editingFinished.emit()
    assert not row.has_error and doc.model.layers["input"].params["scale"] == "0.5"


def test_activation_and_coefficients(window, sample_path):
    doc = window.files.open_path(sample_path)
    doc.canvas.select_layers(["conv1"])
    combo = window.params.rows["activation"].editor.combo
    combo.setCurrentText("leaky_relu")
    combo.activated.emit(combo.currentIndex())
    assert doc.model.layers["conv1"].activation == "leaky_relu"
    coef = window.params.rows["coef.alpha"]
    coef.editor.edit.setText("x")
    coef.editor.edit.editingFinished.emit()
    assert coef.has_error and doc.model.layers["conv1"].act_coefs == {}
    coef.editor.edit.setText("0.2")
    coef.editor.edit.editingFinished.emit()
    assert doc.model.layers["conv1"].act_coefs == {"alpha": "0.2"}
    assert "leaky_relu" in doc.canvas.nodes["conv1"].info.get_value()


def test_multi_select_edit_is_one_undo_step(window, sample_path):
    doc = window.files.open_path(sample_path)
    doc.canvas.select_layers(["conv1", "conv2", "conv3"])
    assert "name" not in window.params.rows  # no rename with several layers
    window.params.rows["param.num_output_channels"].editor.box.setValue(8)
    assert all(doc.model.layers[n].params["num_output_channels"] == "8" for n in ("conv1", "conv2", "conv3"))
    window.act_undo.trigger()
    assert all(doc.model.layers[n].params["num_output_channels"] == "16" for n in ("conv1", "conv2", "conv3"))
    doc.canvas.select_layers(["conv1", "denoised"])  # different types: only what they share (activation)
    assert not any(k.startswith("param.") for k in window.params.rows) and "activation" in window.params.rows


def test_network_parameters_when_nothing_selected(window, sample_path):
    doc = window.files.open_path(sample_path)
    doc.canvas.select_layers([])
    row = window.params.rows["network.name"]
    row.editor.edit.setText("bad name")
    row.editor.edit.editingFinished.emit()
    assert row.has_error and doc.model.name == "denoiser"
    row.editor.edit.setText("denoiser_v2")
    row.editor.edit.editingFinished.emit()
    assert doc.model.name == "denoiser_v2"
    window.params.rows["network.version"].editor.edit.setText("2.0")
    window.params.rows["network.version"].editor.edit.editingFinished.emit()
    assert doc.model.version == "2.0"
    assert "denoiser_v2 2.0" in window.status_label.text()


# ---- type check list ---------------------------------------------------------------------------------
def test_type_check_list_updates_and_selects(window, sample_path, qtbot):
    doc = window.files.open_path(sample_path)
    assert window.checks.tree.topLevelItemCount() == 0
    doc.model.set_param("residual", "num_output_channels", "5")
    wait_checked(qtbot, doc)
    tree = window.checks.tree
    assert tree.topLevelItemCount() >= 1
    item = tree.topLevelItem(0)
    assert item.text(1) == "denoised" and "differ" in item.text(2)
    assert doc.canvas.badge_severity("denoised") == "error"
    double_click(qtbot, tree, item)
    assert doc.canvas.selected_layers() == ["denoised"]
    assert window.params.names == ["denoised"]
    doc.model.undo()
    wait_checked(qtbot, doc)
    assert tree.topLevelItemCount() == 0 and doc.canvas.badge_severity("denoised") == ""


# ---- files -------------------------------------------------------------------------------------------
def test_save_and_reopen_gives_same_model_and_positions(window, sample_path, tmp_path, monkeypatch, registry):
    doc = window.files.open_path(sample_path)
    doc.canvas.add_layer("convolution", (123.0, 456.0))
    assert window.isWindowModified() and window.tabs.tabText(0).endswith("*")
    target = tmp_path / "copy.lnet"
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(target), "")))
    window.act_save_as.trigger()
    assert target.exists() and not window.isWindowModified()
    assert window.windowTitle().startswith("copy.lnet")
    expected = doc.model.content()
    window.act_close.trigger()
    assert window.docs == []
    reopened = window.files.open_path(target)
    assert reopened.model.content() == expected
    assert reopened.canvas.snapshot()["convolution_1"]["position"] == (123.0, 456.0)
    assert str(target.resolve()) in window.recent.files()


def test_open_bad_file_shows_error(window, tmp_path, monkeypatch):
    bad = tmp_path / "bad.lnet"
    bad.write_text("<network><layers><layer name='x'/></layers></network>")
    shown = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "critical", staticmethod(lambda *a: shown.append(a[2])))
    assert window.files.open_path(bad) is None
    assert shown and "bad.lnet" in shown[0]


def test_unsaved_changes_prompt(window, sample_path, monkeypatch, tmp_path):
    path = tmp_path / "m.lnet"
    shutil.copy(sample_path, path)
    doc = window.files.open_path(path)
    doc.model.set_param("conv1", "num_output_channels", "4")
    asked = answer(monkeypatch, QtWidgets.QMessageBox.StandardButton.Cancel)
    window.act_close.trigger()
    assert asked and window.docs == [doc]
    answer(monkeypatch, QtWidgets.QMessageBox.StandardButton.Save)
    window.act_close.trigger()
    assert window.docs == [] and 'value="4"' in path.read_text()
    doc = window.files.open_path(path)
    doc.model.set_param("conv1", "num_output_channels", "5")
    answer(monkeypatch, QtWidgets.QMessageBox.StandardButton.Discard)
    assert window.close()
    assert 'value="5"' not in path.read_text()


def test_edit_menu_cut_copy_paste_delete_select_all(window, sample_path):
    doc = window.files.open_path(sample_path)
    doc.canvas.select_layers(["conv2"])
    window.editing.act_copy.trigger()
    window.editing.act_paste.trigger()
    assert "conv2_1" in doc.model.layers
    window.editing.act_select_all.trigger()
    assert len(doc.canvas.selected_layers()) == len(doc.model.layers)
    window.editing.act_delete.trigger()
    assert doc.model.layers == {}
    window.act_undo.trigger()
    assert len(doc.model.layers) == 8
    doc.canvas.select_layers(["conv3"])
    window.editing.act_cut.trigger()
    assert "conv3" not in doc.model.layers
    window.editing.act_paste.trigger()
    assert "conv3_1" in doc.model.layers


def test_tabs_grid_and_layouts(window, sample_path):
    a = window.files.open_path(sample_path)
    b = window.workspace.new_model()
    assert window.tabs.count() == 2 and window.current is b
    window.tabs.setCurrentIndex(0)
    assert window.current is a and window.params.doc is a
    window.editing.act_grid.trigger()
    assert not a.canvas.grid_shown and not b.canvas.grid_shown
    window.check_dock.hide()
    window.act_save_layout.trigger()
    window.act_reset_layout.trigger()
    assert window.check_dock.isVisible()
    window.act_apply_layout.trigger()
    assert not window.check_dock.isVisible()


def test_last_layout_restored_at_start(make_window):
    w = make_window()
    w.palette_dock.hide()
    w.close()
    w2 = make_window()
    assert not w2.palette_dock.isVisible() and w2.params_dock.isVisible()


def test_docs_browser_searchable(window):
    browser = window.help.show_docs("layer:convolution")
    assert "Convolution" in browser.page.toPlainText() and "num_output_channels" in browser.page.toPlainText()
    browser.search.setText("LeakyRelu")
    assert browser.visible_keys() == ["activation:leaky_relu"]
    assert "alpha" in browser.page.toPlainText()
    window.act_about.trigger()


# ---- autosave ----------------------------------------------------------------------------------------
def test_autosave_and_recovery(make_window, sample_path, tmp_path, monkeypatch):
    import app.designer.autosave as autosave

    w = make_window()
    doc = w.files.open_path(sample_path)
    doc.model.set_param("conv1", "num_output_channels", "7")
    w.autosave.autosave_now()
    files = list((tmp_path / "autosave").glob("*.lnet"))
    assert len(files) == 1
    # simulate a crash: the writing process is gone
    dead = files[0].with_name("999999999-1.lnet")
    files[0].rename(dead)
    files[0].with_suffix(".json").rename(dead.with_suffix(".json"))
    monkeypatch.setattr(autosave, "_alive", lambda pid: pid != 999999999)
    w2 = make_window()
    asked = answer(monkeypatch, QtWidgets.QMessageBox.StandardButton.Yes)
    recovered = w2.autosave.offer_recovery()
    assert asked and len(recovered) == 1
    rec = recovered[0]
    assert rec.model.layers["conv1"].params["num_output_channels"] == "7"
    assert rec.modified and rec.path == str(sample_path)
    assert not dead.exists()
    assert w2.windowTitle().startswith("denoiser.lnet") and w2.isWindowModified()
    answer(monkeypatch, QtWidgets.QMessageBox.StandardButton.Discard)  # let the teardown close both windows


def test_keyboard_delete_and_undo(window, sample_path, qtbot):
    doc = window.files.open_path(sample_path)
    window.activateWindow()
    viewer = doc.canvas.viewer()
    viewer.setFocus()
    doc.canvas.select_layers(["conv2"])
    qtbot.keyClick(viewer, QtCore.Qt.Key.Key_Delete)
    assert "conv2" not in doc.model.layers
    qtbot.keyClick(viewer, QtCore.Qt.Key.Key_Z, QtCore.Qt.KeyboardModifier.ControlModifier)
    assert "conv2" in doc.model.layers and doc.model.layers["conv3"].inputs == ["conv2"]
    qtbot.keyClick(viewer, QtCore.Qt.Key.Key_Z,
                   QtCore.Qt.KeyboardModifier.ControlModifier | QtCore.Qt.KeyboardModifier.ShiftModifier)
    assert "conv2" not in doc.model.layers


def test_first_start_compiles_the_cpu_kernels_in_another_process(window, qtbot, monkeypatch):
    from engine.backends.cpu import warmup

    class Process:
        rc = None

        def poll(self):
            return self.rc

    proc = Process()
    monkeypatch.setattr(warmup, "start_in_background", lambda: proc)
    window.warmup.start()
    assert window.warmup.process is proc and "Compiling the CPU kernels" in window.statusBar().currentMessage()
    qtbot.wait(600)
    assert "Compiling the CPU kernels" in window.statusBar().currentMessage()  # still running
    proc.rc = 0
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "CPU kernels compiled", timeout=5000)


def test_kernel_warmup_says_nothing_when_compiled_and_reports_a_failure(window, qtbot, monkeypatch):
    from engine.backends.cpu import warmup

    monkeypatch.setattr(warmup, "start_in_background", lambda: None)
    window.statusBar().showMessage("ready")
    window.warmup.start()
    assert window.warmup.process is None and window.statusBar().currentMessage() == "ready"

    class Failed:
        def poll(self):
            return 3

    monkeypatch.setattr(warmup, "start_in_background", lambda: Failed())
    window.warmup.start()
    qtbot.waitUntil(lambda: "failed (exit status 3)" in window.statusBar().currentMessage(), timeout=5000)
