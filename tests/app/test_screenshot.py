"""Render the main window with the sample model (offscreen) and check it is a finished, readable layout.

Set LAYERLAB_SCREENSHOT=path to also keep the PNG (the README's screenshot is made this way)."""
from __future__ import annotations

import os

from PySide6 import QtCore, QtGui, QtWidgets


def test_render_main_window_with_sample(make_window, sample_path, tmp_path, qtbot):
    from app.gui import apply_theme

    apply_theme(QtWidgets.QApplication.instance())
    w = make_window()
    w.resize(1500, 900)
    doc = w.open_path(sample_path)
    qtbot.wait(50)
    doc.canvas.fit()
    doc.canvas.select_layers(["conv1"])
    qtbot.wait(20)
    out = os.environ.get("LAYERLAB_SCREENSHOT") or str(tmp_path / "main_window.png")
    assert w.grab().save(out)
    img = QtGui.QImage(out)
    assert img.width() >= 1400 and img.height() >= 850
    # docks sit beside the canvas, never on top of it
    central = w.centralWidget().geometry()
    for dock in (w.palette_dock, w.params_dock, w.check_dock):
        assert dock.isVisible()
        assert not dock.geometry().intersects(central), dock.objectName()
    # every node is inside the visible canvas after Fit, and nodes do not overlap each other
    viewer = doc.canvas.viewer()
    visible = viewer.mapToScene(viewer.viewport().rect()).boundingRect()
    rects = {n: node.view.sceneBoundingRect() for n, node in doc.canvas.nodes.items()}
    for name, r in rects.items():
        assert visible.contains(r), name
    names = list(rects)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not rects[a].adjusted(2, 2, -2, -2).intersects(rects[b]), (a, b)
    # the canvas region is not blank: it has node colours, not only the background
    colours = {img.pixelColor(x, y).name() for x in range(300, 1100, 7) for y in range(150, 650, 7)}
    assert len(colours) > 20
    assert QtCore.QFile.exists(out)
