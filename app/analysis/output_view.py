"""The Analysis Output view: every network output as an image (a vector output, such as a classifier's scores, as
its largest values), updated after every run."""
from __future__ import annotations

import math

import numpy as np
from PySide6 import QtWidgets

from app.analysis.views import ImageView, titled

TOP_K = 5  # values listed for a vector output


class AnalysisOutputView(QtWidgets.QWidget):
    """A grid of image viewers, one per output layer (zoom and pan each with the mouse)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.views: dict[str, ImageView] = {}
        self.labels: dict[str, QtWidgets.QLabel] = {}
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
        self.views, self.labels = {}, {}
        cols = max(1, math.ceil(math.sqrt(len(names))))
        for i, name in enumerate(names):
            view = ImageView(placeholder="waiting for the first run")
            box, label = titled(name, view)
            self._grid.addWidget(box, i // cols, i % cols)
            self.views[name], self.labels[name] = view, label
        self._grid.addWidget(self.status, (len(names) + cols - 1) // cols, 0, 1, cols)

    def show_outputs(self, images: dict[str, np.ndarray]) -> None:
        """Update the viewers with the images of the latest run."""
        if set(images) - set(self.views):
            self.set_outputs(list(images))
        for name, img in images.items():
            if img.ndim == 1:  # a vector (a classifier's scores): its largest values, not a one-pixel image
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
