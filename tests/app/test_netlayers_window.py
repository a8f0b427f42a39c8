"""Network layers in the designer (pytest-qt): Edit > Import Model as Layer, double-click opens the referenced
model in its own tab, and a changed referenced file re-checks the model using it."""
from __future__ import annotations

import os

from PySide6 import QtCore, QtWidgets

from engine.model import Model
from engine.modelfile import save


def block(path, channels="4", inputs=1):
    m = Model("block")
    names = []
    for i in range(inputs):
        names.append(m.add_layer("input", f"x{i}", params={"dimensions": "1x3x8x8"}))
    m.add_layer("convolution", "c1", params={"num_output_channels": channels}, inputs=[names[0]])
    m.add_layer("output", "y", inputs=["c1"])
    save(m, path)
    return path


def touch_later(path):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def test_import_model_as_layer_from_the_edit_menu_then_double_click_opens_it(window, qtbot, tmp_path, monkeypatch):
    ref = block(tmp_path / "block.lnet")
    outer = Model("outer")
    outer.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    save(outer, tmp_path / "outer.lnet")
    doc = window.files.open_path(tmp_path / "outer.lnet")
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(ref), "")))
    edit = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Edit")
    action = next(a for a in edit.actions() if a.text() == "Import Model as &Layer…")
    action.trigger()
    assert doc.model.layers["block_1"].type == "network:block.lnet"
    doc.model.connect("inp", "block_1", 0)
    doc.run_check()
    assert not [d for d in doc.diagnostics if d.severity == "error"], doc.diagnostics
    assert doc.shapes["block_1"] == (1, 4, 8, 8)

    node = doc.canvas.nodes["block_1"]
    viewer = doc.canvas.viewer()
    pos = viewer.mapFromScene(node.view.sceneBoundingRect().center())
    qtbot.mouseDClick(viewer.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)
    opened = window.current
    assert opened is not doc and opened.path == str(ref.resolve()) and list(opened.model.layers) == ["x0", "c1", "y"]


def test_a_changed_referenced_file_is_noticed_and_checked_again(window, qtbot, tmp_path):
    ref = block(tmp_path / "block.lnet")
    outer = Model("outer")
    outer.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    save(outer, tmp_path / "outer.lnet")
    doc = window.files.open_path(tmp_path / "outer.lnet")
    layer = window.netlayers.import_layer(ref)
    doc.model.connect("inp", layer, 0)
    doc.run_check()
    assert str(ref.resolve()) in window.netlayers.watcher.files()
    block(ref, channels="6", inputs=2)  # a second input: the layer now misses one; 6 channels
    touch_later(ref)
    with qtbot.waitSignal(doc.checked, timeout=5000):
        pass
    assert doc.shapes[layer] == (1, 6, 8, 8)
    assert len(doc.canvas.nodes[layer].input_ports()) == 2  # the node follows the file's ports
    errors = [d for d in doc.diagnostics if d.severity == "error" and d.layer == layer]
    assert errors and "not connected: 1" in errors[0].message

    os.remove(ref)
    window.netlayers.file_changed(str(ref))
    errors = [d for d in doc.diagnostics if d.severity == "error" and d.layer == layer]
    assert errors and "block.lnet not found" in errors[0].message  # an error naming the file, no crash


def test_the_designer_runs_a_model_with_a_network_layer_and_logs_it(window, qtbot, tmp_path, monkeypatch):
    from tests.app.test_runs import run_and_wait

    (tmp_path / "sub").mkdir()
    ref = block(tmp_path / "sub" / "block.lnet")
    outer = Model("outer")
    outer.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    outer.set_setting("backend", "numpy")
    save(outer, tmp_path / "outer.lnet")
    doc = window.files.open_path(tmp_path / "outer.lnet")
    layer = window.netlayers.import_layer(ref)
    doc.model.connect("inp", layer, 0)
    doc.model.add_layer("output", "out", inputs=[layer])
    monkeypatch.chdir(tmp_path / "sub")  # the worker runs a copy of the model: references still resolve
    run_and_wait(window, qtbot, doc)
    qtbot.waitUntil(lambda: any("network layer block_1: expanded" in t for t in window.log_panel.messages()),
                    timeout=3000)


def test_an_imported_network_layer_never_lands_on_a_layer_in_the_view_centre(window, tmp_path):
    ref = block(tmp_path / "block.lnet")
    outer = Model("outer")
    outer.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    save(outer, tmp_path / "outer.lnet")
    doc = window.files.open_path(tmp_path / "outer.lnet")
    canvas = doc.canvas
    canvas.focus_layer("inp")  # the view centred on a layer: the centre is taken
    layer = window.netlayers.import_layer(ref)
    assert not canvas.node_rect(layer).intersects(canvas.node_rect("inp"))
    added = canvas.add_layer("convolution")  # the palette's way in: the same rule
    assert not any(canvas.node_rect(added).intersects(canvas.node_rect(n)) for n in ("inp", layer))
