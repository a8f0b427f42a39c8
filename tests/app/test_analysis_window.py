"""The Analysis window: panels in place, inspector tab closes and reopens, closing the window stops
analysis. Rendered to PNG (LAYERLAB_SHOTS=dir keeps it)."""
from __future__ import annotations

import os
from pathlib import Path

from PySide6 import QtGui, QtWidgets

from app.analysis.controller import AnalysisController
from app.analysis.window import AnalysisWindow
from engine import modelfile
from engine.run import RunSpec
from resources import SAMPLES

WAIT = 10_000


def test_analysis_window_layout_inspector_tab_and_close(qtbot, registry, tmp_path):
    from app.gui import apply_theme

    apply_theme(QtWidgets.QApplication.instance())
    ctl = AnalysisController()
    win = AnalysisWindow(ctl)
    qtbot.addWidget(win)
    win.resize(1500, 900)
    win.show()
    model = modelfile.load(SAMPLES / "edges.lnet", registry)
    cfg = RunSpec(backend="numpy", weights=str(SAMPLES / "filters_weights"),
                         inputs=(("photo", str(SAMPLES / "scene.jpg")),))
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT):
        ctl.launch(model, registry, cfg)
    assert set(ctl.output.views) == {"edges", "overlaid"}
    for dock in (win.inputs_dock, win.overview_dock, win.params_dock):
        assert dock.isVisible() and not dock.geometry().intersects(win.centralWidget().geometry())
    with qtbot.waitSignal(ctl.proxy.layer_data, timeout=WAIT):
        ctl.overview.inspect_requested.emit("sobel")  # a double-click on the glyph
    assert win.tabs.currentWidget() is ctl.inspector
    assert ctl.inspector.wait_ready()
    assert (ctl.inspector.layout_.n, ctl.inspector.layout_.c) == (1, 4)
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT):
        ctl.params.editors[("turn", "rotation")].control.setValue(20.0)
    qtbot.wait(100)
    folder = Path(os.environ.get("LAYERLAB_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    assert win.grab().save(str(folder / "analysis_window_inspector.png"))
    win.tabs.setCurrentIndex(0)
    qtbot.wait(50)
    assert win.grab().save(str(folder / "analysis_window_output.png"))
    img = QtGui.QImage(str(folder / "analysis_window_output.png"))
    assert img.width() >= 1400
    win._close_tab(win.tabs.indexOf(ctl.inspector))
    assert win.tabs.indexOf(ctl.inspector) < 0 and win.tabs.count() == 1
    win.act_inspector.trigger()
    assert win.tabs.currentWidget() is ctl.inspector
    with qtbot.waitSignal(ctl.proxy.stopped, timeout=WAIT):
        win.close()
    assert not ctl.active
    assert ctl.proxy.shutdown()
