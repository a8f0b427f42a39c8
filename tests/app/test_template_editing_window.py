"""Edit Template in place, through the designer (pytest-qt): a double-click on an instance opens the definition in its
own tab; File > Save updates every instance in the open models holding that template, one undo step per model, and
lists the exposed parameters that were dropped; the palette's right-click menu opens it too."""
from __future__ import annotations

import shutil

from PySide6 import QtCore

from engine.templates import get_template, set_exposed


def grouped(window, path, registry):
    doc = window.files.open_path(path)
    doc.canvas.select_layers(["conv2", "conv3"])
    instance = window.templates.group_selection("feat")
    set_exposed(doc.model, "feat", ["conv2.num_output_channels", "conv3.kernel_size"], registry)
    doc.model.set_param(instance, "conv3.kernel_size", "5")
    return doc, instance


def double_click_node(qtbot, doc, layer):
    viewer = doc.canvas.viewer()
    pos = viewer.mapFromScene(doc.canvas.nodes[layer].view.sceneBoundingRect().center())
    qtbot.mouseDClick(viewer.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)


def test_double_click_edit_and_save_updates_every_open_model(window, qtbot, sample_path, tmp_path, registry):
    first, second = tmp_path / "a.lnet", tmp_path / "b.lnet"
    shutil.copy(sample_path, first)
    shutil.copy(sample_path, second)
    doc_b, _ = grouped(window, second, registry)
    doc_a, inst = grouped(window, first, registry)  # the same definition in both models
    assert doc_a.model.templates["feat"] == doc_b.model.templates["feat"]
    undo_a, undo_b = doc_a.model.undo_text(), doc_b.model.undo_text()

    double_click_node(qtbot, doc_a, inst)
    tab = window.current
    assert tab is not doc_a and window.templates.handles(tab)
    assert list(tab.model.layers) == ["conv1", "conv2", "conv3", "output"]  # input conv1 of the template
    assert tab.model.layers["conv1"].params["dimensions"] == "1x16x96x128"  # what feeds the instance
    double_click_node(qtbot, doc_a, inst)  # the same tab again, not a second one
    assert window.current is tab and len(window.docs) == 3

    tab.model.remove_layers(["conv3"])  # conv3.kernel_size is exposed: it is dropped
    tab.model.connect("conv2", "output", 0)
    tab.model.set_param("conv2", "num_output_channels", "8")
    window.tabs.setCurrentWidget(tab.canvas.widget)
    window.act_save.trigger()
    assert not tab.model.modified
    for doc in (doc_a, doc_b):
        defn = get_template(doc.model, "feat")
        assert list(defn.layers) == ["conv2"] and [e.key for e in defn.exposed] == ["conv2.num_output_channels"]
        assert doc.model.undo_text() == "Edit template feat"
    assert "conv3.kernel_size" in window.context.message_box.text() and "dropped" in window.context.message_box.text()
    assert doc_a.model.layers[inst].params == {}
    qtbot.waitUntil(lambda: doc_a.shapes.get(inst) is not None and doc_a.shapes[inst][1] == 8, timeout=3000)
    doc_a.model.undo()  # one undo step per model
    assert doc_a.model.undo_text() == undo_a and list(get_template(doc_a.model, "feat").layers) == ["conv2", "conv3"]
    assert doc_b.model.undo_text() == "Edit template feat" and undo_b


def test_palette_right_click_edit_template(window, sample_path, tmp_path, registry):
    path = tmp_path / "c.lnet"
    shutil.copy(sample_path, path)
    doc, _ = grouped(window, path, registry)
    menu = window.palette.template_menu("feat")
    next(a for a in menu.actions() if a.text() == "Edit Template").trigger()
    tab = window.current
    assert window.templates.handles(tab) and "conv3" in tab.model.layers
    tab.model.add_layer("output", "second", inputs=["conv2"])  # two outputs: cannot be a template
    window.act_save.trigger()
    assert "2 output layers" in window.context.message_box.text() and tab.model.modified
    assert "conv3" in get_template(doc.model, "feat").layers
