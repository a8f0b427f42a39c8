"""Compare Precision's follow-up: "Pin diverging layers to fp32". The panel offers the search after a comparison
that found a drifting layer, shows its progress while the worker runs it (``engine.precision.pin_and_compare``),
then the pins, each output's error before and after and the time of the mixed network against all-fp16 and
all-fp32, side by side, and why a layer inside the network may stay over the threshold; "Stop Analysis and Apply
Pins" stops analysis (the model is read-only while it runs) and stores the pins in the model (one undo step)."""
from __future__ import annotations

import math
from typing import Any

from PySide6 import QtCore, QtWidgets


def _num(v: float) -> str:
    return f"{v:.3e}" if math.isfinite(v) else "inf"


class PrecisionFixPanel(QtWidgets.QWidget):
    """``pin_requested`` asks for the search; ``apply_requested(pins)`` asks to store the pins in the model."""

    pin_requested = QtCore.Signal()
    apply_requested = QtCore.Signal(list)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Precision")
        self.report: Any = None
        lay = QtWidgets.QVBoxLayout(self)
        self.summary = QtWidgets.QLabel("Run Analysis > Compare Precision first.")
        self.summary.setWordWrap(True)
        self.pin_button = QtWidgets.QPushButton("Pin Diverging Layers to fp32")
        self.pin_button.setToolTip("find a small set of layers to run in fp32 so that every output stays within the "
                                   "threshold, then compare again and time it")
        self.pin_button.setEnabled(False)
        self.progress = QtWidgets.QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setVisible(False)
        self.table = QtWidgets.QTableWidget(0, 3)
        self.table.setHorizontalHeaderLabels(["", "before", "after"])
        self.table.horizontalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.apply_button = QtWidgets.QPushButton("Stop Analysis and Apply Pins")
        self.apply_button.setToolTip("the model is read-only while analysis runs: this stops analysis, then pins "
                                     "these layers to fp32 in the model (one undo step)")
        self.apply_button.setEnabled(False)
        self.note = QtWidgets.QLabel()
        self.note.setWordWrap(True)
        self.note.setSizePolicy(QtWidgets.QSizePolicy.Policy.Preferred, QtWidgets.QSizePolicy.Policy.Minimum)
        self.note.setVisible(False)
        for w in (self.summary, self.pin_button, self.progress, self.table, self.note, self.apply_button):
            lay.addWidget(w)
        self.pin_button.clicked.connect(self._pin)
        self.apply_button.clicked.connect(lambda: self.report and self.apply_requested.emit(list(self.report.fix.pins)))

    def show_drift(self, result: Any) -> None:
        """After Compare Precision: offer the search when a layer is over the threshold in an fp16 candidate."""
        first = result.first_over
        fp16 = "fp16" in result.candidate
        self.pin_button.setEnabled(first is not None and fp16)
        if self.report is None or not self.progress.isVisible():
            self.summary.setText(f"{result.candidate}: first layer over {result.threshold:g} is {first.name}. "
                                 "Pinning searches layers to run in fp32 until every network output is within "
                                 "the threshold." if first else f"{result.candidate}: no layer over {result.threshold:g}")

    def _pin(self) -> None:
        self.pin_button.setEnabled(False)
        self.progress.setValue(0)
        self.progress.setVisible(True)
        self.summary.setText("Searching for the layers to pin…")
        self.pin_requested.emit()

    def show_progress(self, fraction: float, message: str) -> None:
        self.progress.setVisible(True)
        self.progress.setValue(int(round(100 * fraction)))
        self.progress.setFormat(f"%p% — {message}")

    def failed(self, reason: str) -> None:
        self.progress.setVisible(False)
        self.pin_button.setEnabled(True)
        self.summary.setText(f"The search failed: {reason}")

    def show_report(self, report: Any) -> None:
        """The pins, each output's error before and after, and the three times, side by side."""
        self.report = report
        fix = report.fix
        self.progress.setVisible(False)
        pins = ", ".join(fix.pins) if fix.pins else "none needed"
        state = "every output within" if fix.satisfied else "cannot meet"
        self.summary.setText(f"Pinned to fp32: {pins} ({state} {fix.threshold:g}; {fix.evaluations} runs)")
        times = {t.label: t.ms for t in report.times}
        rows = [(f"error {name}", _num(b), _num(a)) for name, b, a in report.error_rows()]
        rows.append(("time (ms)", f"{times.get('all fp16', math.nan):.3f} (all fp16)",
                     f"{times.get('mixed', math.nan):.3f} (mixed)"))
        rows.append(("time all fp32 (ms)", "", f"{times.get('all fp32', math.nan):.3f}"))
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                self.table.setItem(r, c, QtWidgets.QTableWidgetItem(text))
        from engine.precision import inner_drift_note  # noqa: PLC0415 - NumPy and the run path load with analysis

        note = inner_drift_note(report.after, fix.after.outputs) if fix.satisfied else ""
        self.note.setText(f"{note}." if note else "")
        self.note.setVisible(bool(note))
        self.apply_button.setEnabled(bool(fix.pins) and fix.satisfied)
        self.pin_button.setEnabled(True)
