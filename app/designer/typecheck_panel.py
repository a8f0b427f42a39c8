"""The type check list: live diagnostics of the current model; double-click focuses the layer."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from engine.typecheck import Diagnostic

LAYER_ROLE = QtCore.Qt.ItemDataRole.UserRole + 1


class TypeCheckPanel(QtWidgets.QWidget):
    """Emits ``layer_activated(name)`` when a diagnostic is double-clicked."""

    layer_activated = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QtWidgets.QLabel()
        self.tree = QtWidgets.QTreeWidget()
        self.tree.setHeaderLabels(["", "Layer", "Message"])
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        self.tree.setWordWrap(True)
        self.tree.setTextElideMode(QtCore.Qt.TextElideMode.ElideMiddle)
        header = self.tree.header()
        header.setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.summary)
        lay.addWidget(self.tree)
        self.tree.itemDoubleClicked.connect(self._activated)
        style = self.style()
        self._icons = {
            "error": style.standardIcon(QtWidgets.QStyle.StandardPixmap.SP_MessageBoxCritical),
            "warning": style.standardIcon(QtWidgets.QStyle.StandardPixmap.SP_MessageBoxWarning),
        }
        self.show_diagnostics([])

    def show_diagnostics(self, diags: list[Diagnostic]) -> None:
        """Replace the list (errors first)."""
        self.tree.clear()
        for d in sorted(diags, key=lambda d: d.severity != "error"):
            item = QtWidgets.QTreeWidgetItem(["", d.layer or "(network)", d.message])
            item.setIcon(0, self._icons.get(d.severity, self._icons["warning"]))
            full = f"{d.severity}: {d.layer or '(network)'}: {d.message}"
            for column in range(3):  # the whole message, whatever the column widths cut
                item.setToolTip(column, full)
            item.setData(0, LAYER_ROLE, d.layer)
            self.tree.addTopLevelItem(item)
        n_err = sum(d.severity == "error" for d in diags)
        n_warn = len(diags) - n_err
        if not diags:
            self.summary.setText("<span style='color:#6fcf6f'>✔ No problems found</span>")
        else:
            self.summary.setText(f"<span style='color:#ff6b6b'>{n_err} error(s)</span>, "
                                 f"<span style='color:#e0a030'>{n_warn} warning(s)</span> — double-click to show the layer")

    def _activated(self, item: QtWidgets.QTreeWidgetItem, column: int) -> None:
        layer = item.data(0, LAYER_ROLE)
        if layer:
            self.layer_activated.emit(layer)
