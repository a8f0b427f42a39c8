"""Analysis > Compare Precision: one dialog asking for the variant to compare with fp32 and the threshold."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

VARIANTS = ["fp16", "fp16 nhwc", "cupy:fp16 nhwc", "cupy:fp32"]


class ComparePrecisionDialog(QtWidgets.QDialog):
    """Emits ``chosen(variant, threshold)`` when accepted; non-modal by default (``open()`` shows it)."""

    chosen = QtCore.Signal(str, float)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Compare Precision")
        self.variant = QtWidgets.QComboBox()
        self.variant.setEditable(True)  # any "[backend:]format" the run options accept
        self.variant.addItems(VARIANTS)
        self.variant.setToolTip("Run the current inputs in fp32 and in this variant ([backend:]precision [layout])")
        self.threshold = QtWidgets.QDoubleSpinBox()
        self.threshold.setDecimals(6)
        self.threshold.setRange(1e-6, 1e6)
        self.threshold.setValue(0.01)
        self.threshold.setToolTip("Layers whose relative error exceeds this are coloured as drifting")
        form = QtWidgets.QFormLayout()
        form.addRow("Compare fp32 with:", self.variant)
        form.addRow("Relative error threshold:", self.threshold)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Ok
                                             | QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QtWidgets.QDialogButtonBox.StandardButton.Ok).setText("Compare")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QtWidgets.QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(buttons)
        self.accepted.connect(lambda: self.chosen.emit(self.variant.currentText().strip(), self.threshold.value()))
