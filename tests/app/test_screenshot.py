"""Render the main window with the sample model (offscreen) and check it is a finished, readable layout.

Set LAYERLAB_SCREENSHOT=path to also keep the PNG (the documentation's screenshot is made this way)."""
from __future__ import annotations

import os

from PySide6 import QtCore, QtGui, QtWidgets


def render_window(make_window, qtbot, open_doc, selected: list[str], out: str):
    """A themed 1500x900 designer showing the document ``open_doc(window)`` returns, fitted to the view, with
    ``selected`` selected, saved as the PNG ``out``; returns (window, document)."""
    from app.gui import apply_theme

    apply_theme(QtWidgets.QApplication.instance())
    w = make_window()
    w.resize(1500, 900)
    doc = open_doc(w)
    qtbot.wait(50)
    doc.canvas.fit()
    doc.canvas.select_layers(selected)
    qtbot.wait(20)
    assert w.grab().save(out)
    return w, doc


def test_render_main_window_with_sample(make_window, sample_path, tmp_path, qtbot):
    out = os.environ.get("LAYERLAB_SCREENSHOT") or str(tmp_path / "main_window.png")
    w, doc = render_window(make_window, qtbot, lambda w: w.files.open_path(sample_path), ["conv1"], out)
    img = QtGui.QImage(out)
    assert img.width() >= 1400 and img.height() >= 850
    # docks sit beside the canvas, never on top of it
    central = w.centralWidget().geometry()
    for dock in (w.palette_dock, w.params_dock, w.check_dock):
        assert dock.isVisible()
        assert not dock.geometry().intersects(central), dock.objectName()
    assert_nodes_visible_and_apart(doc.canvas)
    # the canvas region is not blank: it has node colours, not only the background
    colours = {img.pixelColor(x, y).name() for x in range(300, 1100, 7) for y in range(150, 650, 7)}
    assert len(colours) > 20
    assert QtCore.QFile.exists(out)


def assert_nodes_visible_and_apart(canvas) -> dict:
    """Every node is inside the visible canvas (after Fit) and no two nodes overlap; returns their scene rects."""
    viewer = canvas.viewer()
    visible = viewer.mapToScene(viewer.viewport().rect()).boundingRect()
    rects = {n: node.view.sceneBoundingRect() for n, node in canvas.nodes.items()}
    for name, r in rects.items():
        assert visible.contains(r), name
    names = list(rects)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not rects[a].adjusted(2, 2, -2, -2).intersects(rects[b]), (a, b)
    return rects
