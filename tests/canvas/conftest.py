from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from engine.model import Model

if TYPE_CHECKING:  # the canvas needs Qt: imported where used, so this folder collects (and skips) without it
    from canvas.graph import ModelCanvas


def model_view(model: Model) -> dict:
    """What the canvas must show for ``model``."""
    out = {}
    for name, spec in model.layers.items():
        links = list(spec.inputs)
        while links and links[-1] is None:
            links.pop()
        out[name] = {"type": spec.type, "inputs": links,
                     "position": (round(spec.position[0], 3), round(spec.position[1], 3)), "title": name}
    return out


def small_model() -> Model:
    m = Model("demo")
    m.add_layer("input", "inp", position=(0, 0))
    m.add_layer("convolution", "conv1", inputs=["inp"], activation="relu", position=(250, 0))
    m.add_layer("convolution", "conv2", params={"num_output_channels": "3"}, inputs=["conv1"], position=(500, 0))
    m.add_layer("element_wise", "add", inputs=["conv2", "inp"], position=(750, 0))
    m.add_layer("output", "out", inputs=["add"], position=(1000, 0))
    m.mark_clean()
    m.clear_undo()
    return m


@contextlib.contextmanager
def shown_canvas(qtbot, registry, model: Model, size: tuple[int, int] = (1000, 500)) -> Iterator[ModelCanvas]:  # noqa: ANN001
    """A canvas of ``model`` through its own bridge, shown at ``size``; disposed afterwards."""
    from canvas.bridge import ModelBridge
    from canvas.graph import ModelCanvas

    c = ModelCanvas(model, registry, ModelBridge(model))
    qtbot.addWidget(c.widget)
    c.widget.resize(*size)
    c.widget.show()
    yield c
    dispose(c)


@pytest.fixture
def canvas(qtbot, registry):
    with shown_canvas(qtbot, registry, small_model()) as c:
        yield c


def mouse_drag(qtbot, widget, start, end) -> None:  # noqa: ANN001
    """Press the left button at ``start``, move through the middle to ``end`` and release there."""
    from PySide6 import QtCore

    qtbot.mousePress(widget, QtCore.Qt.MouseButton.LeftButton, pos=start)
    qtbot.mouseMove(widget, pos=(start + end) / 2)
    qtbot.mouseMove(widget, pos=end)
    qtbot.mouseRelease(widget, QtCore.Qt.MouseButton.LeftButton, pos=end)


def dispose(c: ModelCanvas) -> None:
    """Delete the graph's Qt objects now, while the QApplication exists (not at interpreter exit)."""
    from PySide6 import QtCore

    c.widget.close()
    c.widget.deleteLater()
    c.deleteLater()
    QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)


def right_click(canvas: ModelCanvas, layer: str | None, label: str | None = None) -> list[tuple[str, bool]] | None:
    """Right-click ``layer``'s node (None: the empty canvas) with real mouse and context-menu events; returns
    the (text, enabled) entries of the menu that opens and, with ``label``, triggers that entry."""
    from PySide6 import QtCore, QtGui, QtWidgets

    viewer = canvas.viewer()
    vp = viewer.viewport()
    if layer is not None:
        pos = viewer.mapFromScene(canvas.nodes[layer].view.sceneBoundingRect().center())
    else:
        pos = QtCore.QPoint(4, vp.height() - 4)
    seen: dict[str, list[tuple[str, bool]]] = {}

    def pick() -> None:
        menu = QtWidgets.QApplication.activePopupWidget()
        if menu is None:
            return
        seen["entries"] = [(a.text(), a.isEnabled()) for a in menu.actions() if a.text() and a.isVisible()]
        if label is not None:
            next(a for a in menu.actions() if a.text() == label).trigger()
        menu.close()

    QtCore.QTimer.singleShot(0, pick)
    glob = QtCore.QPointF(vp.mapToGlobal(pos))
    for kind, buttons in ((QtCore.QEvent.Type.MouseButtonPress, QtCore.Qt.MouseButton.RightButton),
                          (QtCore.QEvent.Type.MouseButtonRelease, QtCore.Qt.MouseButton.NoButton)):
        QtWidgets.QApplication.sendEvent(vp, QtGui.QMouseEvent(kind, QtCore.QPointF(pos), glob, QtCore.Qt.MouseButton.RightButton,
                                                               buttons, QtCore.Qt.KeyboardModifier.NoModifier))
    QtWidgets.QApplication.sendEvent(vp, QtGui.QContextMenuEvent(QtGui.QContextMenuEvent.Reason.Mouse, pos, glob.toPoint()))
    return seen.get("entries")


def links_behind_boxes(canvas: ModelCanvas) -> list[tuple[str, str]]:
    """The links as drawn now (along their route, else straight between their ports) that run behind a box other
    than their ends' (a layer shown or a collapsed group's box)."""
    from engine.routing import BoxGrid, route_clear

    geoms = {n: canvas._shown_geometry(n) for n in canvas._shown_names()}
    grid = BoxGrid({n: (g.rect.x(), g.rect.y(), g.rect.width(), g.rect.height()) for n, g in geoms.items()})
    row = {n: i for i, n in enumerate(grid.names)}
    behind = []
    for src, dst, index in canvas._shown_links():
        a, b = geoms[src], geoms[dst]
        if a.out is None or index >= len(b.ins):
            continue
        start, end = (a.out.x(), a.out.y()), (b.ins[index].x(), b.ins[index].y())
        if not route_clear(start, canvas.link_route(src, dst) or [], end, grid, {row[src], row[dst]}):
            behind.append((src, dst))
    return behind
