"""Compare Precision's "Pin Diverging Layers to fp32": the search in the worker with a progress bar, the comparison
re-run with the pins, before/after errors and times side by side, and the pins applied to the model (undoable)."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from engine.model import Model
from engine.run import RunSpec
from tests.harness import drift_model

WAIT = 60000


def planted() -> Model:
    """'amp' multiplies c2 by 1e6: beyond the fp16 range."""
    return drift_model("1x2x8x8", "1e6", name="planted")


def test_pin_diverging_layers_then_compare_again_and_apply(qtbot, ctl, registry):
    model = planted()
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT):
        ctl.launch(model, registry, RunSpec(backend="numpy"))
    panel = ctl.precision
    assert not panel.pin_button.isEnabled()  # nothing compared yet
    with qtbot.waitSignal(ctl.proxy.drift, timeout=WAIT):
        ctl.compare_precision("fp16", 1e-2)
    assert ctl.drift_result.first_over.name == "amp" and panel.pin_button.isEnabled()
    progress: list[float] = []
    ctl.proxy.fix_progress.connect(lambda f, _m: progress.append(f))
    with qtbot.waitSignal(ctl.proxy.precision_fixed, timeout=WAIT) as blocker:
        qtbot.mouseClick(panel.pin_button, QtCore.Qt.MouseButton.LeftButton)
    report = blocker.args[0]
    assert report.fix.pins == ["amp"]
    assert progress and progress == sorted(progress) and progress[-1] == 1.0
    qtbot.waitUntil(lambda: panel.table.rowCount() == 3, timeout=WAIT)
    assert not panel.progress.isVisible()
    assert "Pinned to fp32: amp" in panel.summary.text()
    row = [panel.table.item(0, c).text() for c in range(3)]
    assert row[0] == "error out" and row[1] == "inf" and float(row[2]) <= 1e-2
    assert "mixed" in panel.table.item(1, 2).text() and "all fp16" in panel.table.item(1, 1).text()
    assert ctl.drift_result.first_over is None  # the comparison ran again with the pins
    messages: list[str] = []
    ctl.message.connect(messages.append)
    model.read_only = "while analysis runs"
    qtbot.mouseClick(panel.apply_button, QtCore.Qt.MouseButton.LeftButton)
    assert model.layers["amp"].format == "" and "Stop Analysis" in messages[-1]
    model.read_only = None
    qtbot.mouseClick(panel.apply_button, QtCore.Qt.MouseButton.LeftButton)
    assert model.layers["amp"].format == "fp32" and "amp" in messages[-1]
    model.undo()
    assert model.layers["amp"].format == ""


def test_the_analysis_window_docks_the_precision_panel_and_shows_it_after_a_comparison(qtbot, ctl, registry):
    from app.analysis.window import AnalysisWindow

    win = AnalysisWindow(ctl)
    qtbot.addWidget(win)
    win.show()
    assert win.precision_dock.widget() is ctl.precision
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT):
        ctl.launch(planted(), registry, RunSpec(backend="numpy"))
    assert ctl.precision.visibleRegion().isEmpty()  # behind the Parameter Editor until a comparison
    with qtbot.waitSignal(ctl.proxy.drift, timeout=WAIT):
        ctl.compare_precision("fp16", 1e-2)
    qtbot.waitUntil(lambda: not ctl.precision.visibleRegion().isEmpty(), timeout=WAIT)
    assert ctl.precision.pin_button.isEnabled()
    with qtbot.waitSignal(ctl.proxy.stopped, timeout=WAIT):
        win.close()


def inner_drift() -> Model:
    """'tiny' scales c1 into fp16's subnormal range (a large relative error there); the output adds c1 back, so the
    error does not reach it."""
    m = Model("inner")
    m.add_layer("input", "inp", params={"dimensions": "1x2x8x8"})
    m.add_layer("convolution", "c1", params={"num_output_channels": "4"}, inputs=["inp"])
    m.add_layer("linear_blend", "tiny", params={"weight_a": "1e-7"}, inputs=["c1"])
    m.add_layer("element_wise", "total", params={"operation": "sum"}, inputs=["c1", "tiny"])
    m.add_layer("output", "out", inputs=["total"])
    return m


def test_a_layer_over_the_threshold_whose_error_does_not_reach_the_outputs_is_explained(qtbot, ctl, registry):
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT):
        ctl.launch(inner_drift(), registry, RunSpec(backend="numpy"))
    with qtbot.waitSignal(ctl.proxy.drift, timeout=WAIT):
        ctl.compare_precision("fp16", 1e-2)
    panel = ctl.precision
    assert ctl.drift_result.first_over.name == "tiny"
    assert "every network output" in panel.summary.text()
    with qtbot.waitSignal(ctl.proxy.precision_fixed, timeout=WAIT) as blocker:
        qtbot.mouseClick(panel.pin_button, QtCore.Qt.MouseButton.LeftButton)
    assert blocker.args[0].fix.pins == []
    qtbot.waitUntil(lambda: "none needed" in panel.summary.text(), timeout=WAIT)
    assert ctl.drift_result.first_over.name == "tiny"  # the comparison still marks it ...
    assert not panel.note.isHidden()  # ... and the panel says why no pin is needed
    assert "tiny" in panel.note.text() and "outputs" in panel.note.text()
    assert not panel.apply_button.isEnabled()


def test_pins_found_in_the_designer_are_applied_with_the_mouse(make_window, qtbot, tmp_path):
    from engine import modelfile

    path = tmp_path / "planted.lnet"
    modelfile.save(planted(), path)
    window = make_window()
    doc = window.files.open_path(path)
    mode = window.analysis
    with qtbot.waitSignal(mode.proxy.ran, timeout=WAIT):
        mode.act_launch.trigger()
    ctl = mode.ctl
    mode.act_compare.trigger()
    dialog = ctl.precision_dialog
    compare = dialog.findChild(QtWidgets.QDialogButtonBox).button(QtWidgets.QDialogButtonBox.StandardButton.Ok)
    with qtbot.waitSignal(mode.proxy.drift, timeout=WAIT):
        qtbot.mouseClick(compare, QtCore.Qt.MouseButton.LeftButton)
    panel = ctl.precision
    qtbot.waitUntil(panel.pin_button.isEnabled, timeout=WAIT)
    with qtbot.waitSignal(mode.proxy.precision_fixed, timeout=WAIT):
        qtbot.mouseClick(panel.pin_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(panel.apply_button.isEnabled, timeout=WAIT)
    assert doc.model.read_only  # analysis runs: the button stops it first
    qtbot.mouseClick(panel.apply_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not mode.active, timeout=WAIT)
    assert doc.model.layers["amp"].format == "fp32" and not doc.model.read_only
    assert "amp" in window.statusBar().currentMessage()
    window.act_undo.trigger()
    assert doc.model.layers["amp"].format == ""
