"""An image viewer for the analysis panels (pyqtgraph): zoom and pan with the mouse, pixel hover, and
double-click / context-menu hooks for the panel that owns it."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from engine.analysis import heat_colours

pg.setConfigOptions(imageAxisOrder="row-major", antialias=False)


class ImageView(pg.GraphicsLayoutWidget):
    """Shows an 8-bit image (H x W gray or H x W x 3/4 RGB). ``hovered(x, y)`` gives the image pixel
    under the mouse (-1, -1 outside); ``double_clicked(x, y)`` and ``context_menu(global pos)`` let
    the owner react (open a file, show one channel)."""

    hovered = QtCore.Signal(int, int)
    double_clicked = QtCore.Signal(int, int)
    context_menu = QtCore.Signal(QtCore.QPoint)

    def __init__(self, parent: QtWidgets.QWidget | None = None, placeholder: str = "") -> None:
        super().__init__(parent)
        self.setBackground("#1e2024")
        self.ci.layout.setContentsMargins(0, 0, 0, 0)
        self.box = self.addViewBox(lockAspect=True, invertY=True, enableMenu=False)
        self.item = pg.ImageItem()
        self.box.addItem(self.item)
        self.label = pg.TextItem(placeholder, color="#9aa0a6", anchor=(0.5, 0.5))
        self.box.addItem(self.label)
        self.image: np.ndarray | None = None
        self.scene().sigMouseMoved.connect(self._moved)
        self.setMinimumSize(120, 90)

    def set_image(self, image: np.ndarray | None, keep_view: bool = True) -> None:
        """Show ``image``; the zoom is kept when the size did not change (video frames, reruns)."""
        old = self.image.shape[:2] if self.image is not None else None
        self.image = image
        if image is None:
            self.item.clear()
            self.label.setVisible(True)
            return
        self.label.setVisible(False)
        # 8-bit images as they are: with levels (0, 255) pyqtgraph would rescale every pixel on each repaint
        self.item.setImage(image, autoLevels=False, levels=None)
        if not keep_view or old != image.shape[:2]:
            self.box.autoRange(padding=0.02)

    def set_placeholder(self, text: str) -> None:
        self.label.setText(text)

    def _pixel(self, scene_pos: QtCore.QPointF) -> tuple[int, int]:
        if self.image is None:
            return -1, -1
        p = self.item.mapFromScene(scene_pos)
        x, y = int(np.floor(p.x())), int(np.floor(p.y()))
        h, w = self.image.shape[:2]
        return (x, y) if 0 <= x < w and 0 <= y < h else (-1, -1)

    def _moved(self, pos: QtCore.QPointF) -> None:
        self.hovered.emit(*self._pixel(pos))

    def mouseDoubleClickEvent(self, ev: QtGui.QMouseEvent) -> None:  # noqa: N802 (Qt API)
        x, y = self._pixel(self.mapToScene(ev.position().toPoint()))
        self.double_clicked.emit(x, y)
        ev.accept()

    def contextMenuEvent(self, ev: QtGui.QContextMenuEvent) -> None:  # noqa: N802 (Qt API)
        self.context_menu.emit(ev.globalPos())
        ev.accept()

    def reset_view(self) -> None:
        self.box.autoRange(padding=0.02)


def titled(title: str, widget: QtWidgets.QWidget) -> tuple[QtWidgets.QWidget, QtWidgets.QLabel]:
    """``widget`` under a bold title label; returns (container, label)."""
    box = QtWidgets.QWidget()
    lay = QtWidgets.QVBoxLayout(box)
    lay.setContentsMargins(2, 2, 2, 2)
    lay.setSpacing(2)
    label = QtWidgets.QLabel(title)
    label.setStyleSheet("font-weight: bold;")
    lay.addWidget(label)
    lay.addWidget(widget, 1)
    return box, label


class ColourScale(QtWidgets.QWidget):
    """The heat map's colour scale: a bar from its first colour to its last, with the values they stand for."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        ramp = heat_colours(np.linspace(0.0, 1.0, 256, dtype=np.float32)[None].repeat(8, axis=0), 0.0, 1.0)
        self._ramp = np.ascontiguousarray(ramp)  # the QImage below reads this memory
        image = QtGui.QImage(self._ramp.data, 256, 8, 256 * 3, QtGui.QImage.Format.Format_RGB888)
        self.bar = QtWidgets.QLabel()
        self.bar.setPixmap(QtGui.QPixmap.fromImage(image))
        self.bar.setScaledContents(True)
        self.bar.setFixedHeight(12)
        self.bar.setMinimumWidth(60)
        self.lo, self.hi = QtWidgets.QLabel(), QtWidgets.QLabel()
        for label in (self.lo, self.hi):
            label.setStyleSheet("font-family: monospace;")
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(4, 0, 4, 0)
        lay.addWidget(self.lo)
        lay.addWidget(self.bar, 1)
        lay.addWidget(self.hi)
        self.setToolTip("heat map colour scale: the smallest value shown (left) to the largest (right); white is NaN")

    def set_range(self, lo: float, hi: float) -> None:
        self.lo.setText(f"{lo:.4g}")
        self.hi.setText(f"{hi:.4g}")
