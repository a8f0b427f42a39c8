"""The designer's Precision and Layout: parameter window rows, the layer right-click menu, undo, the canvas badge."""
from __future__ import annotations

from app import layer_format as lf


def choose(combo, text):
    combo.setCurrentText(text)
    combo.activated.emit(combo.currentIndex())


def test_precision_and_layout_rows_set_the_layer_format_undoably(window, sample_path):
    doc = window.files.open_path(sample_path)
    doc.canvas.select_layers(["conv1"])
    precision = window.params.rows["precision"].editor.combo
    assert precision.currentText() == "network default"
    choose(precision, "fp32")
    assert doc.model.layers["conv1"].format == "fp32"
    badge = doc.canvas.nodes["conv1"].format_badge
    assert badge.isVisible() and badge.text() == "fp32"
    choose(window.params.rows["layout"].editor.combo, "NCHW")
    assert doc.model.layers["conv1"].format == "fp32 nchw" and badge.text() == "fp32 NCHW"
    doc.model.undo()
    assert doc.model.layers["conv1"].format == "fp32"
    doc.model.undo()
    assert doc.model.layers["conv1"].format == "" and not badge.isVisible()
    assert window.params.rows["precision"].editor.combo.currentText() == "network default"


def test_the_right_click_menu_pins_every_selected_layer_in_one_step(window, sample_path):
    doc = window.files.open_path(sample_path)
    names = [n for n in doc.model.layers if n.startswith("conv")][:2]
    doc.canvas.select_layers(names)
    labels = {text: action for text, action in window.editing.format_menu_items()}
    assert set(labels) == {*(f"Precision: {c}" for c in lf.PRECISION_CHOICES), *(f"Layout: {c}" for c in lf.LAYOUT_CHOICES)}
    assert doc.canvas.context_command("Precision: fp32") is not None
    labels["Precision: fp32"].trigger()
    assert all(doc.model.layers[n].format == "fp32" for n in names)
    labels["Layout: NHWC"].trigger()
    assert all(doc.model.layers[n].format == "fp32 nhwc" for n in names)
    labels["Precision: network default"].trigger()
    assert all(doc.model.layers[n].format == "nhwc" for n in names)
    doc.model.undo()
    assert all(doc.model.layers[n].format == "fp32 nhwc" for n in names)


def test_choice_helpers_round_trip():
    assert lf.with_precision("nhwc", "fp32") == "fp32 nhwc"
    assert lf.with_precision("fp32 nhwc", "network default") == "nhwc"
    assert lf.with_layout("fp16", "NCHW") == "fp16 nchw" and lf.with_layout("fp16 nchw", "default") == "fp16"
    assert lf.precision_choice("fp32 nchw") == "fp32" and lf.layout_choice("fp32 nchw") == "NCHW"
    assert lf.precision_choice("") == "network default" and lf.layout_choice("") == "default"
