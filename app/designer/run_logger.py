"""The Inference Run Logger (a dock): one row per run with its start time, model, status (running, done,
cancelled, failed: reason), backend and device, tensor format, average time per iteration and the exact
``layerlab profile ...`` command line that reproduces it; the row's Copy button copies that line."""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from PySide6 import QtCore, QtGui, QtWidgets

COLUMNS = ("Started", "Model", "Status", "Backend / device", "Format", "Avg ms / iteration", "", "Command line")
COPY_COLUMN = COLUMNS.index("")
STATUS_COLOURS = {"running": "#6aa8f0", "done": "#6fcf6f", "cancelled": "#e0a030", "failed": "#ff6b6b"}


@dataclass
class RunEntry:
    run_id: int
    started: _dt.datetime
    model: str
    status: str = "running"
    reason: str = ""
    backend: str = ""
    device: str = ""
    format: str = ""
    avg_ms: float | None = None
    command: str = ""
    report_path: str | None = None

    @property
    def status_text(self) -> str:
        return f"failed: {self.reason}" if self.status == "failed" and self.reason else self.status


class RunLogger(QtWidgets.QWidget):
    """Emits ``report_requested(path)`` when a finished run's row is double-clicked or Open Report is pressed."""

    report_requested = QtCore.Signal(str)
    copied = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.entries: dict[int, RunEntry] = {}
        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(24)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setStretchLastSection(True)
        for c in range(len(COLUMNS) - 1):
            header.setSectionResizeMode(c, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(COLUMNS.index("Status"), QtWidgets.QHeaderView.ResizeMode.Interactive)
        self.table.cellDoubleClicked.connect(lambda r, _c: self._open_row(r))
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.open_button = QtWidgets.QPushButton("Open Report")
        self.copy_button = QtWidgets.QPushButton("Copy Command")
        self.clear_button = QtWidgets.QPushButton("Clear Finished")
        self.open_button.clicked.connect(lambda: self._open_row(self.table.currentRow()))
        self.copy_button.clicked.connect(lambda: self._copy_row(self.table.currentRow()))
        self.clear_button.clicked.connect(self.clear_finished)
        buttons = QtWidgets.QHBoxLayout()
        hint = QtWidgets.QLabel("Double-click a finished run to open its report.")
        hint.setStyleSheet("color: #9aa4b0;")
        buttons.addWidget(hint, 1)
        for b in (self.open_button, self.copy_button, self.clear_button):
            buttons.addWidget(b)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.table)
        lay.addLayout(buttons)
        self._update_buttons()

    # ---- rows ------------------------------------------------------------------------------------
    def _row_of(self, run_id: int) -> int:
        for r in range(self.table.rowCount()):
            if self.table.item(r, 0).data(QtCore.Qt.ItemDataRole.UserRole) == run_id:
                return r
        return -1

    def entry_at(self, row: int) -> RunEntry | None:
        item = self.table.item(row, 0) if 0 <= row < self.table.rowCount() else None
        return self.entries.get(item.data(QtCore.Qt.ItemDataRole.UserRole)) if item else None

    def add(self, entry: RunEntry) -> None:
        """A new run (newest on top)."""
        self.entries[entry.run_id] = entry
        self.table.insertRow(0)
        first = QtWidgets.QTableWidgetItem()
        first.setData(QtCore.Qt.ItemDataRole.UserRole, entry.run_id)
        self.table.setItem(0, 0, first)
        for c in range(1, len(COLUMNS)):
            self.table.setItem(0, c, QtWidgets.QTableWidgetItem())
        button = QtWidgets.QToolButton()
        button.setText("Copy")
        button.setToolTip("Copy the command line that reproduces this run")
        button.setAutoRaise(True)
        button.setIcon(self.style().standardIcon(QtWidgets.QStyle.StandardPixmap.SP_FileDialogDetailedView))
        button.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        button.clicked.connect(lambda _c=False, rid=entry.run_id: self.copy_command(rid))
        self.table.setCellWidget(0, COPY_COLUMN, button)
        self.table.selectRow(0)
        self.update_entry(entry.run_id)

    def update_entry(self, run_id: int, **changes: object) -> RunEntry | None:
        """Change fields of a run (``status=``, ``reason=``, ``avg_ms=``...) and redraw its row."""
        entry = self.entries.get(run_id)
        row = self._row_of(run_id)
        if entry is None or row < 0:
            return None
        for k, v in changes.items():
            setattr(entry, k, v)
        device = f"{entry.backend} ({entry.device})" if entry.device else entry.backend
        texts = [entry.started.strftime("%H:%M:%S"), entry.model, entry.status_text, device, entry.format,
                 f"{entry.avg_ms:.4f}" if entry.avg_ms is not None else "", "", entry.command]
        for c, text in enumerate(texts):
            item = self.table.item(row, c)
            item.setText(text)
            item.setToolTip(text if c != 0 else entry.started.strftime("%Y-%m-%d %H:%M:%S"))
        status = self.table.item(row, COLUMNS.index("Status"))
        status.setForeground(QtGui.QColor(STATUS_COLOURS.get(entry.status, "#dddddd")))
        self.table.item(row, COLUMNS.index("Avg ms / iteration")).setTextAlignment(
            QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
        self.table.item(row, COLUMNS.index("Command line")).setFont(QtGui.QFontDatabase.systemFont(
            QtGui.QFontDatabase.SystemFont.FixedFont))
        status_col = COLUMNS.index("Status")
        self.table.resizeColumnToContents(status_col)  # a long failure reason is elided; the tooltip has it all
        self.table.setColumnWidth(status_col, min(self.table.columnWidth(status_col), 360))
        button = self.table.cellWidget(row, COPY_COLUMN)
        if button is not None:
            button.setEnabled(bool(entry.command))
        self._update_buttons()
        return entry

    def clear_finished(self) -> None:
        for r in reversed(range(self.table.rowCount())):
            e = self.entry_at(r)
            if e is not None and e.status != "running":
                self.table.removeRow(r)
                self.entries.pop(e.run_id, None)
        self._update_buttons()

    # ---- actions ---------------------------------------------------------------------------------
    def copy_command(self, run_id: int) -> str:
        """Put the run's command line on the clipboard (and return it)."""
        entry = self.entries.get(run_id)
        if entry is None or not entry.command:
            return ""
        QtGui.QGuiApplication.clipboard().setText(entry.command)
        self.copied.emit(entry.command)
        return entry.command

    def _copy_row(self, row: int) -> None:
        e = self.entry_at(row)
        if e is not None:
            self.copy_command(e.run_id)

    def _open_row(self, row: int) -> None:
        e = self.entry_at(row)
        if e is not None and e.report_path:
            self.report_requested.emit(e.report_path)

    def _update_buttons(self) -> None:
        e = self.entry_at(self.table.currentRow())
        self.open_button.setEnabled(bool(e and e.report_path))
        self.copy_button.setEnabled(bool(e and e.command))
        self.clear_button.setEnabled(any(x.status != "running" for x in self.entries.values()))
