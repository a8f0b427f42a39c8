"""Find on the canvas: a small bar over the canvas (Ctrl+F) that finds layers by name or type; Enter or F3 goes to
the next match, Shift+Enter or Shift+F3 to the previous one (wrapping), Esc closes it. The match is selected and
centred, its group expanded when it was collapsed."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets


def find_layers(layers: Mapping[str, Any], text: str) -> list[str]:
    """Names of the ``layers`` (name -> spec with a ``type``) whose name or type holds ``text`` (any case), in model
    order."""
    needle = text.strip().lower()
    if not needle:
        return []
    return [n for n, spec in layers.items() if needle in n.lower() or needle in str(spec.type).lower()]


class FindBar(QtWidgets.QFrame):
    """The find bar of one canvas (``canvas.find_bar``), floating at the top right of its view."""

    def __init__(self, canvas: Any) -> None:
        super().__init__(canvas.widget)
        self.canvas = canvas
        self.matches: list[str] = []
        self.index = -1
        self.setObjectName("FindBar")
        self.setStyleSheet("#FindBar { background: #2b2f36; border: 1px solid #55606e; border-radius: 4px; }")
        row = QtWidgets.QHBoxLayout(self)
        row.setContentsMargins(6, 4, 6, 4)
        self.edit = QtWidgets.QLineEdit()
        self.edit.setPlaceholderText("Find layer by name or type")
        self.edit.setClearButtonEnabled(True)
        self.edit.setMinimumWidth(220)
        self.edit.textChanged.connect(self._search)
        self.edit.installEventFilter(self)
        self.count = QtWidgets.QLabel("")
        self.count.setMinimumWidth(60)
        row.addWidget(self.edit)
        row.addWidget(self.count)
        for text, tip, step in (("▲", "Previous match (Shift+Enter, Shift+F3)", -1), ("▼", "Next match (Enter, F3)", 1)):
            button = QtWidgets.QToolButton()
            button.setText(text)
            button.setToolTip(tip)
            button.clicked.connect(lambda _checked=False, s=step: self.step(s))
            row.addWidget(button)
        close = QtWidgets.QToolButton()
        close.setText("✕")
        close.setToolTip("Close (Esc)")
        close.clicked.connect(self.close_bar)
        row.addWidget(close)
        self.hide()

    def open_bar(self) -> None:
        """Show the bar with its text selected, ready to type."""
        self.adjustSize()
        self._place()
        self.show()
        self.raise_()
        self.edit.setFocus(QtCore.Qt.FocusReason.ShortcutFocusReason)
        self.edit.selectAll()

    def close_bar(self) -> None:
        self.hide()
        self.canvas.viewer().setFocus()

    def _place(self) -> None:
        parent = self.parentWidget()
        if parent is not None:
            self.move(max(0, parent.width() - self.width() - 12), 8)

    def _search(self, text: str) -> None:
        self.matches = find_layers(self.canvas.net_model.layers, text)
        self.index = -1
        if self.matches:
            self.step(1)
        else:
            self.count.setText("no match" if text.strip() else "")

    def step(self, direction: int) -> str | None:
        """Go to the next (1) or previous (-1) match, wrapping; returns its name (None: no match)."""
        if not self.matches:
            return None
        self.index = (self.index + direction) % len(self.matches)
        name = self.matches[self.index]
        self.count.setText(f"{self.index + 1} of {len(self.matches)}")
        self.canvas.reveal(name)
        self.canvas.focus_layer(name)
        return name

    def eventFilter(self, obj: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802 (Qt API)
        if obj is self.edit and event.type() == QtCore.QEvent.Type.KeyPress:
            key, shift = event.key(), bool(event.modifiers() & QtCore.Qt.KeyboardModifier.ShiftModifier)
            if key in (QtCore.Qt.Key.Key_Return, QtCore.Qt.Key.Key_Enter, QtCore.Qt.Key.Key_F3):
                self.step(-1 if shift else 1)
                return True
            if key == QtCore.Qt.Key.Key_Escape:
                self.close_bar()
                return True
        return super().eventFilter(obj, event)

    def keyPressEvent(self, event: QtGui.QKeyEvent) -> None:  # noqa: N802 (Qt API)
        if event.key() == QtCore.Qt.Key.Key_Escape:
            self.close_bar()
            return
        super().keyPressEvent(event)
