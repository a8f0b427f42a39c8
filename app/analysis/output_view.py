"""The Analysis Output view: every network output as an image (a vector output, such as a classifier's scores, as
its largest values; a tensor of rank 2 or 3 as a heat map with its colour scale), updated after every run."""
from __future__ import annotations

import math

import numpy as np
from PySide6 import QtWidgets

from app.analysis.views import ColourScale, ImageView, titled
from engine.analysis import HeatMap

TOP_K = 5  # values listed for a vector output


class AnalysisOutputView(QtWidgets.QWidget):
    """A grid of image viewers, one per output layer (zoom and pan each with the mouse)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.views: dict[str, ImageView] = {}
        self.labels: dict[str, QtWidgets.QLabel] = {}
        self.scales: dict[str, ColourScale] = {}
        self._grid = QtWidgets.QGridLayout(self)
        self._grid.setContentsMargins(2, 2, 2, 2)
        self.status = QtWidgets.QLabel("")
        self.status.setStyleSheet("color: #9aa0a6;")

    def set_outputs(self, names: list[str]) -> None:
        """One viewer per output, in a near-square grid."""
        while self._grid.count():
            item = self._grid.takeAt(0)
            if item.widget() is not None and item.widget() is not self.status:
                item.widget().deleteLater()
        self.views, self.labels, self.scales = {}, {}, {}
        cols = max(1, math.ceil(math.sqrt(len(names))))
        for i, name in enumerate(names):
            view = ImageView(placeholder="waiting for the first run")
            box, label = titled(name, view)
            scale = ColourScale()
            scale.setVisible(False)
            box.layout().addWidget(scale)
            self._grid.addWidget(box, i // cols, i % cols)
            self.views[name], self.labels[name], self.scales[name] = view, label, scale
        self._grid.addWidget(self.status, (len(names) + cols - 1) // cols, 0, 1, cols)

    def show_outputs(self, images: dict[str, np.ndarray | HeatMap]) -> None:
        """Update the viewers with the images of the latest run (a tensor of rank 2 or 3: its heat map)."""
        if set(images) - set(self.views):
            self.set_outputs(list(images))
        for name, img in images.items():
            heat = img if isinstance(img, HeatMap) else None
            self.scales[name].setVisible(heat is not None)
            if heat is not None:  # a tensor of rank 2 or 3: its heat map and colour scale
                self.views[name].set_image(heat.image)
                self.scales[name].set_range(heat.lo, heat.hi)
                size = f"heat map, {heat.layout.c} x {heat.layout.h}x{heat.layout.w}"
            elif img.ndim == 1:  # a vector (a classifier's scores): its largest values, not a one-pixel image
                self.views[name].set_image(None)
                self.views[name].set_placeholder(top_values(img))
                size = f"{img.size} values"
            else:
                self.views[name].set_image(img)
                h, w = img.shape[:2]
                size = f"{w}x{h}"
            self.labels[name].setText(f"{name}  <span style='color:#9aa0a6;font-weight:normal'>{size}</span>")

    def set_status(self, text: str) -> None:
        self.status.setText(text)


def top_values(vector: np.ndarray, k: int = TOP_K) -> str:
    """The ``k`` largest values of ``vector`` with their indices, largest first (a classifier's best classes)."""
    order = np.argsort(-np.nan_to_num(vector, nan=-np.inf), kind="stable")[:k]
    return "\n".join([f"top {len(order)} of {vector.size}:", *(f"class {i}: {vector[i]:.4g}" for i in order)])
