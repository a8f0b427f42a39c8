"""The Log dock: the records of LayerLab's logger tree (``engine.log``): loading plugins, building, fusing, running,
from the engine and every plugin, with their level, source and time. Records logged in the worker thread arrive
through a queued signal."""
from __future__ import annotations

import logging
import time

from PySide6 import QtCore, QtGui, QtWidgets

from engine.log import ROOT

LEVELS = (("Debug", logging.DEBUG), ("Info", logging.INFO), ("Warning", logging.WARNING), ("Error", logging.ERROR))
COLOURS = {logging.WARNING: "#e0a030", logging.ERROR: "#e05050", logging.CRITICAL: "#e05050"}


class _Bridge(QtCore.QObject):
    record = QtCore.Signal(int, str, str, float)  # level, source, message, time


class QtLogHandler(logging.Handler):
    """A logging handler that re-emits each record as a Qt signal (safe from any thread)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.bridge = _Bridge()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            layer = getattr(record, "layer", None)
            if layer:
                message = f"{layer}: {message}"
            self.bridge.record.emit(record.levelno, record.name.removeprefix(ROOT + "."), message, record.created)
        except Exception:  # a logging failure never reaches the code that logged
            self.handleError(record)


class LogPanel(QtWidgets.QWidget):
    """The records of the logger tree, newest last; a level filter and Clear. ``level``: the least level the tree
    gives while the panel is open (info: loading, building, fusing and running are shown)."""

    MAX_ROWS = 5000

    def __init__(self, parent: QtWidgets.QWidget | None = None, level: int = logging.INFO) -> None:
        super().__init__(parent)
        self.tree = QtWidgets.QTreeWidget()
        self.tree.setHeaderLabels(["Time", "Level", "Source", "Message"])
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setWordWrap(False)
        self.level = QtWidgets.QComboBox()
        for text, value in LEVELS:
            self.level.addItem(text, value)
        self.level.setCurrentIndex(1)
        self.level.currentIndexChanged.connect(self._filter)
        clear = QtWidgets.QPushButton("Clear")
        clear.clicked.connect(self.tree.clear)
        bar = QtWidgets.QHBoxLayout()
        bar.addWidget(QtWidgets.QLabel("Show:"))
        bar.addWidget(self.level)
        bar.addStretch(1)
        bar.addWidget(clear)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(bar)
        lay.addWidget(self.tree)
        self.handler = QtLogHandler()
        self.handler.bridge.record.connect(self.add_record, QtCore.Qt.ConnectionType.QueuedConnection)
        self._root = logging.getLogger(ROOT)
        if self._root.getEffectiveLevel() > level:
            self._root.setLevel(level)
        self._root.addHandler(self.handler)
        self.destroyed.connect(lambda *_: self.detach())

    def detach(self) -> None:
        """Stop receiving records (the window closes)."""
        self._root.removeHandler(self.handler)

    def add_records(self, records: list[logging.LogRecord]) -> None:
        """Show records logged before the panel existed (the plugins loaded at start)."""
        for r in records:
            self.handler.emit(r)

    def add_record(self, level: int, source: str, message: str, created: float) -> None:
        """Show one record (the handler's signal calls it)."""
        stamp = time.strftime("%H:%M:%S", time.localtime(created))
        item = QtWidgets.QTreeWidgetItem([stamp, logging.getLevelName(level).lower(), source, message])
        item.setData(1, QtCore.Qt.ItemDataRole.UserRole, level)
        item.setToolTip(3, message)
        if level in COLOURS:
            item.setForeground(3, QtGui.QBrush(QtGui.QColor(COLOURS[level])))
        self.tree.addTopLevelItem(item)
        item.setHidden(level < self.level.currentData())
        while self.tree.topLevelItemCount() > self.MAX_ROWS:
            self.tree.takeTopLevelItem(0)
        self.tree.scrollToItem(item)

    def messages(self, least: int = logging.DEBUG) -> list[str]:
        """The shown messages of level ``least`` and above, oldest first (tests, copying)."""
        out = []
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            if item.data(1, QtCore.Qt.ItemDataRole.UserRole) >= least:
                out.append(item.text(3))
        return out

    def _filter(self) -> None:
        least = self.level.currentData()
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            item.setHidden(item.data(1, QtCore.Qt.ItemDataRole.UserRole) < least)
