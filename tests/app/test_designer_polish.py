"""Designer behaviours easy to get wrong, each driven through the real widgets: shortcuts and undo labels, read-only moves,
zoom-independent node sizes, link clicks, free-port placement, paste at the cursor, the File line after Save As,
cancelled Ctrl+W, invalid parameters, rounded positions, the zoomed-out overview."""
from __future__ import annotations

import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from engine import modelfile


def _shortcut_keys(window, seq: str) -> list:
    """Enabled actions of the window bound to key sequence ``seq``."""
    key = QtGui.QKeySequence(seq)
    return [a for a in window.findChildren(QtGui.QAction) if key in a.shortcuts()]


def test_redo_shortcuts_are_bound_once_each_and_work(window, sample_path, qtbot):
    doc = window.files.open_path(sample_path)
    assert _shortcut_keys(window, "Ctrl+Shift+Z") == [window.act_redo]
    assert _shortcut_keys(window, "Ctrl+Y") == [window.act_redo]
    doc.model.set_param("conv1", "num_output_channels", "24")
    doc.model.undo()
    doc.canvas.widget.setFocus()
    qtbot.keyClick(doc.canvas.viewer(), QtCore.Qt.Key.Key_Y, QtCore.Qt.KeyboardModifier.ControlModifier)
    assert doc.model.layers["conv1"].params["num_output_channels"] == "24"
    doc.model.undo()
    qtbot.keyClick(doc.canvas.viewer(), QtCore.Qt.Key.Key_Z,
                   QtCore.Qt.KeyboardModifier.ControlModifier | QtCore.Qt.KeyboardModifier.ShiftModifier)
    assert doc.model.layers["conv1"].params["num_output_channels"] == "24"


def test_undo_labels_follow_every_edit_and_the_toolbar_keeps_short_texts(window, sample_path, qtbot):
    doc = window.files.open_path(sample_path)
    doc.canvas.select_layers(["conv1"])
    dims = window.params.rows["param.kernel_size"].editor
    dims.boxes[0].setValue(5)  # a dimensions edit from the parameter window
    qtbot.waitUntil(lambda: "kernel_size" in window.act_undo.text())
    toolbar = window.findChild(QtWidgets.QToolBar, "MainToolBar")
    button = toolbar.widgetForAction(window.act_undo)
    assert button.text() == "Undo" and "kernel_size" in button.toolTip()
    width = toolbar.sizeHint().width()
    window.act_undo.trigger()
    qtbot.waitUntil(lambda: "kernel_size" in window.act_redo.text())
    assert window.act_redo.isEnabled() and toolbar.widgetForAction(window.act_redo).text() == "Redo"
    assert toolbar.sizeHint().width() == width  # no re-flow
    doc.model.move_layer("conv1", (10.0, 20.0))
    doc.model.undo()  # undoing a move
    qtbot.waitUntil(lambda: window.act_redo.text() == "&Redo Move conv1")
    assert window.act_undo.text().startswith("&Undo") and "Move" not in window.act_undo.text()


def test_read_only_model_refuses_a_drag_without_traceback(window, sample_path, qtbot):
    doc = window.files.open_path(sample_path)
    canvas = doc.canvas
    before = canvas.net_model.layers["conv1"].position
    doc.model.read_only = "while analysis runs"
    view = canvas.nodes["conv1"].view
    old = tuple(view.xy_pos)
    view.xy_pos = [old[0] + 150.0, old[1] + 40.0]
    canvas.viewer().moved_nodes.emit({view: old})  # what the viewer reports when a drag ends
    assert doc.model.layers["conv1"].position == before
    assert tuple(canvas.nodes["conv1"].pos()) == before  # the node went back
    assert "Move refused" in window.statusBar().currentMessage()


def test_node_sizes_do_not_depend_on_the_zoom(window, sample_path, qtbot):
    doc = window.files.open_path(sample_path)
    canvas = doc.canvas
    sizes = {n: node.view.boundingRect().size() for n, node in canvas.nodes.items()}
    canvas.zoom(-14)  # far out: nodes are drawn as boxes
    canvas.viewer().viewport().repaint()
    qtbot.wait(10)
    doc.model.set_param("conv1", "num_output_channels", "17")
    doc.model.undo()
    doc.run_check()
    canvas.viewer().viewport().repaint()
    assert {n: node.view.boundingRect().size() for n, node in canvas.nodes.items()} == sizes


def test_zoomed_out_canvas_draws_an_overview_and_keeps_selection_working(window, sample_path, qtbot):
    doc = window.files.open_path(sample_path)
    canvas = doc.canvas
    canvas.zoom(-14)
    canvas.viewer().viewport().repaint()
    qtbot.waitUntil(lambda: canvas.overview.active)
    assert canvas.nodes["conv1"].view.drawn_by_overview
    canvas.select_layers(["conv1"])
    assert canvas.selected_layers() == ["conv1"]
    canvas.zoom_to("conv1", 1.0)

    def detailed() -> bool:
        canvas.viewer().viewport().repaint()
        return not canvas.overview.active and canvas.nodes["conv1"].view.detailed

    qtbot.waitUntil(detailed)
    assert not canvas.nodes["conv1"].view.drawn_by_overview


def _click(qtbot, canvas, scene_pos: QtCore.QPointF) -> None:
    viewer = canvas.viewer()
    pos = viewer.mapFromScene(scene_pos)
    qtbot.mouseClick(viewer.viewport(), QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.KeyboardModifier.NoModifier, pos)


def test_a_click_on_a_link_selects_it_and_delete_removes_it(window, sample_path, qtbot):
    doc = window.files.open_path(sample_path)
    canvas = doc.canvas
    canvas.focus_layer("conv1")
    canvas.clear_selection()
    src = doc.model.layers["conv1"].inputs[0]
    pipe = canvas.port_of("conv1", 0).view.connected_pipes[0]
    canvas.viewer().centerOn(pipe.path().pointAtPercent(0.5))
    _click(qtbot, canvas, pipe.path().pointAtPercent(0.5))
    assert pipe.isSelected() and canvas.selected_layers() == []
    canvas.delete_selection()
    assert doc.model.layers["conv1"].inputs[:1] in ([], [None]) and src in doc.model.layers


def test_free_port_double_click_places_the_new_layer_in_free_space(window, qtbot):
    doc = window.workspace.new_model()
    m = doc.model
    conv = m.add_layer("convolution", "conv", position=(0.0, 0.0))
    m.add_layer("convolution", "blocker_left", position=(-240.0, -30.0))
    m.add_layer("convolution", "blocker_right", position=(240.0, -30.0))
    canvas = doc.canvas
    new_in = canvas.add_layer_at_port(canvas.port_of(conv, 0).view)
    new_out = canvas.add_layer_at_port(canvas.port_of(conv, None).view)
    rects = {n: node.view.sceneBoundingRect() for n, node in canvas.nodes.items()}
    for new in (new_in, new_out):
        assert not any(rects[new].intersects(r) for n, r in rects.items() if n != new), new
    assert rects[new_in].right() < rects[conv].left() and rects[new_out].left() > rects[conv].right()
    assert abs(rects[new_in].center().y() - rects[conv].center().y()) < 400  # next to the port, not far away


def test_paste_goes_to_the_cursor_or_beside_the_originals(window, sample_path, qtbot, monkeypatch):
    doc = window.files.open_path(sample_path)
    canvas = doc.canvas
    canvas.select_layers(["conv1"])
    text = canvas.copy_selection()
    names = canvas.paste(text, at=(1234.0, 567.0))
    assert doc.model.layers[names[0]].position == (1234.0, 567.0)
    monkeypatch.setattr(QtGui.QCursor, "pos", staticmethod(lambda: QtCore.QPoint(-5000, -5000)))  # off the canvas
    names = canvas.paste(text)
    rects = {n: node.view.sceneBoundingRect() for n, node in canvas.nodes.items()}
    assert not rects[names[0]].intersects(rects["conv1"])


def test_file_line_follows_save_as(window, tmp_path):
    doc = window.workspace.new_model()
    window.params.set_target(doc, [])
    labels = lambda: [w.text() for w in window.params.findChildren(QtWidgets.QLabel)]  # noqa: E731
    assert any("not saved yet" in t for t in labels())
    target = tmp_path / "saved.lnet"
    assert window.files.save_as(doc, str(target))
    assert not any("not saved yet" in t for t in labels()) and any(str(target.resolve()) in t for t in labels())


def test_cancelled_close_leaves_no_ctrl_mode(window, sample_path, qtbot, monkeypatch):
    doc = window.files.open_path(sample_path)
    doc.model.set_param("conv1", "num_output_channels", "20")
    viewer = doc.canvas.viewer()
    viewer.CTRL_state = True  # what the viewer's own Ctrl press handler sets, with its hint shown
    viewer._cursor_text.setVisible(True)
    monkeypatch.setattr(QtWidgets.QMessageBox, "question",
                        staticmethod(lambda *a, **k: QtWidgets.QMessageBox.StandardButton.Cancel))
    assert not window.files.close_document(doc)
    assert not viewer.CTRL_state and not viewer._cursor_text.isVisible()


def test_invalid_kernel_size_is_shown_and_not_applied(window, sample_path):
    doc = window.files.open_path(sample_path)
    doc.canvas.select_layers(["conv1"])
    before = doc.model.layers["conv1"].params.get("kernel_size")
    row = window.params.rows["param.kernel_size"]
    row.editor.boxes[0].setValue(0)
    assert row.has_error and "kernel_size" in row.error.text()
    assert doc.model.layers["conv1"].params.get("kernel_size") == before


def test_dragged_positions_are_saved_rounded(window, sample_path, tmp_path):
    doc = window.files.open_path(sample_path)
    view = doc.canvas.nodes["conv1"].view
    old = tuple(view.xy_pos)
    view.xy_pos = [old[0] + 10.123456789012, old[1] + 3.98765432109876]
    doc.canvas.viewer().moved_nodes.emit({view: old})
    x, y = doc.model.layers["conv1"].position
    assert (x, y) == (round(old[0] + 10.123456789012, 1), round(old[1] + 3.98765432109876, 1))
    out = tmp_path / "r.lnet"
    assert window.files.save_as(doc, str(out))
    assert "10.123456" not in out.read_text() and modelfile.load(out, window.registry).layers["conv1"].position == (x, y)


@pytest.mark.parametrize("n", [120])
def test_a_large_model_opens_with_every_node_and_link(window, qtbot, tmp_path, n):
    from tests.bench.bench_canvas import chain_model

    path = tmp_path / "chain.lnet"
    modelfile.save(chain_model(n), path)
    doc = window.files.open_path(path)
    canvas = doc.canvas
    assert len(canvas.nodes) == len(doc.model.layers) >= n
    assert canvas.snapshot()["output"]["inputs"] == [list(doc.model.layers)[-2]]
    sizes = {node.view.boundingRect().size().toTuple() for name, node in canvas.nodes.items() if name.endswith("_b")}
    assert len(sizes) == 1  # laid out once, all alike


def test_arrange_lays_out_without_overlaps_as_one_undo_step(window, qtbot):
    from engine.layout import overlaps

    doc = window.workspace.new_model()
    m = doc.model
    m.add_layer("input", "inp", position=(500.0, 500.0))
    m.add_layer("convolution", "a", inputs=["inp"], position=(510.0, 505.0))  # piled up
    m.add_layer("convolution", "b", inputs=["inp"], position=(520.0, 510.0))
    m.add_layer("element_wise", "add", inputs=["a", "b"], position=(505.0, 515.0))
    before = {n: s.position for n, s in m.layers.items()}
    window.editing.act_arrange.trigger()
    canvas = doc.canvas
    rects = {n: node.view.sceneBoundingRect() for n, node in canvas.nodes.items()}
    pos = {n: (r.x(), r.y()) for n, r in rects.items()}
    sizes = {n: (r.width(), r.height()) for n, r in rects.items()}
    assert overlaps(pos, sizes) == []
    assert rects["inp"].right() < rects["a"].left() and rects["a"].right() < rects["add"].left()
    qtbot.waitUntil(lambda: window.act_undo.text().startswith("&Undo Arrange"))
    window.act_undo.trigger()
    assert {n: s.position for n, s in m.layers.items()} == before


def test_type_check_rows_carry_the_whole_message_in_tooltips(window):
    from engine.typecheck import Diagnostic

    long = "the input has 3 channels but this layer's weights expect 16; " * 4
    window.checks.show_diagnostics([Diagnostic("error", "conv_with_a_long_name", long)])
    item = window.checks.tree.topLevelItem(0)
    assert all(long in item.toolTip(c) and "conv_with_a_long_name" in item.toolTip(c) for c in range(3))


def test_docs_browser_tree_shows_whole_names(window, qtbot):
    browser = window.help.show_docs()
    qtbot.waitExposed(browser)
    tree = browser.tree
    widest = max(tree.visualItemRect(it).width() for it in tree.findItems("", QtCore.Qt.MatchFlag.MatchContains
                                                                          | QtCore.Qt.MatchFlag.MatchRecursive))
    metrics = tree.fontMetrics()
    it = QtWidgets.QTreeWidgetItemIterator(tree)
    while it.value():
        item = it.value()
        assert tree.columnWidth(0) >= metrics.horizontalAdvance(item.text(0)), item.text(0)  # never cut
        if item.data(0, QtCore.Qt.ItemDataRole.UserRole + 1):
            assert item.toolTip(0)
        it += 1
    assert widest > 0


def _a_report(window, qtbot, tmp_path, sample_path):
    """Run the sample (small) once and return its report view."""
    import shutil

    from tests.app.test_runs import open_small, run_and_wait

    dst = tmp_path / "models" / "denoiser.lnet"
    dst.parent.mkdir()
    shutil.copy(sample_path, dst)
    open_small(window, dst)
    run_and_wait(window, qtbot)
    return window.reports.current_report


def test_opening_a_report_keeps_the_window_size_and_open_html_says_why_it_fails(window, qtbot, tmp_path,
                                                                               sample_path, monkeypatch):
    window.resize(1500, 900)
    qtbot.wait(20)
    size = window.size()
    view = _a_report(window, qtbot, tmp_path, sample_path)
    qtbot.wait(50)
    assert window.size() == size
    assert view.title.toolTip().startswith("Inference report")
    monkeypatch.setattr(QtGui.QDesktopServices, "openUrl", staticmethod(lambda url: False))  # no browser here
    assert not view.open_html()
    box = view.html_message
    assert box is not None and box.isVisible() and "No web browser" in box.text()
    assert box.informativeText().endswith(".html")
    copy = next(b for b in box.buttons() if b.text() == "Copy Path")
    copy.click()
    assert QtWidgets.QApplication.clipboard().text() == box.informativeText()


def test_roofline_labels_do_not_overlap():
    from app.designer.charts import label_without_overlaps

    pts = [(0.0, 0.0, "conv1", 5.0, False), (0.01, 0.0, "residual", 9.0, False), (3.0, 3.0, "far", 1.0, False),
           (0.02, 0.01, "chosen", 1.0, True)]
    chosen = label_without_overlaps(pts, (-1.0, 4.0), (-1.0, 4.0))
    assert chosen == {2, 3}  # the selected point and the far one; the two under the selected label get none
    assert label_without_overlaps(pts[:2], (-1.0, 4.0), (-1.0, 4.0)) == {1}  # two points on top of each other: one name
    assert label_without_overlaps([]) == set()


def test_ctrl_z_in_a_parameter_field_undoes_the_model_edit(window, sample_path, qtbot):
    """Focus stays in the field after an edit; Ctrl+Z there undoes the edit in the model (and Ctrl+Y redoes
    it), while typing not yet committed is still the field's own to undo."""
    doc = window.files.open_path(sample_path)
    doc.canvas.select_layers(["conv1"])
    before = doc.model.layers["conv1"].params["num_output_channels"]
    box = window.params.rows["param.num_output_channels"].editor.box
    window.activateWindow()
    box.setFocus()
    qtbot.waitUntil(box.hasFocus)
    box.lineEdit().selectAll()
    qtbot.keyClicks(box, "7")
    qtbot.keyClick(box, QtCore.Qt.Key.Key_Return)
    assert doc.model.layers["conv1"].params["num_output_channels"] == "7"
    box = window.params.rows["param.num_output_channels"].editor.box
    box.setFocus()
    qtbot.waitUntil(box.hasFocus)
    qtbot.keyClick(box, QtCore.Qt.Key.Key_Z, QtCore.Qt.KeyboardModifier.ControlModifier)
    assert doc.model.layers["conv1"].params["num_output_channels"] == before
    assert window.params.rows["param.num_output_channels"].editor.box.value() == int(before)
    box = window.params.rows["param.num_output_channels"].editor.box
    box.setFocus()
    qtbot.waitUntil(box.hasFocus)
    qtbot.keyClick(box, QtCore.Qt.Key.Key_Y, QtCore.Qt.KeyboardModifier.ControlModifier)
    assert doc.model.layers["conv1"].params["num_output_channels"] == "7"


def test_type_check_reports_stored_weights_of_the_wrong_shape_after_a_channel_change(window):
    """The trained sample's weights were stored for 16 channels: setting conv1 to 24 is reported by the type check
    (conv1's own weights and conv2's, whose input grew), before any run."""
    from resources import SAMPLES

    doc = window.files.open_path(SAMPLES / "denoiser_trained.lnet")
    doc.run_check()
    assert not [d for d in doc.diagnostics if d.severity == "error"]
    doc.canvas.select_layers(["conv1"])
    window.params.rows["param.num_output_channels"].editor.box.setValue(24)
    doc.run_check()
    errors: dict[str, str] = {}
    for d in doc.diagnostics:
        if d.severity == "error":
            errors[d.layer] = errors.get(d.layer, "") + d.message + "\n"
    assert "conv1" in errors and "conv2" in errors, errors
    assert "(16, 3, 3, 3)" in errors["conv1"] and "(24, 3, 3, 3)" in errors["conv1"]
    assert "conv1_weights.npy" in errors["conv1"]
    window.act_undo.trigger()
    doc.run_check()
    assert not [d for d in doc.diagnostics if d.severity == "error"]
