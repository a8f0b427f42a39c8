"""What the designer's controllers and dialogs may use of the main window: the open documents, the registry, the
settings, the palette, a status line, warnings and a parent for dialogs. They receive a :class:`DesignerContext`,
never the window, so none of them imports it and each can be built in a test from stubs."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from PySide6 import QtCore, QtWidgets

if TYPE_CHECKING:
    from app.designer.document import Document
    from app.designer.palette import Palette
    from engine.model import Model
    from engine.registry import Registry


class Documents(Protocol):
    """The open models and the tab area they and the reports are shown in (``app.designer.workspace``)."""

    docs: list[Document]
    tabs: QtWidgets.QTabWidget

    @property
    def current(self) -> Document | None:
        """The model of the current tab (None on a report tab or with no tab)."""

    def add_document(self, model: Model, path: str | None = None) -> Document:
        """Open ``model`` in a new tab and make it current."""

    def new_model(self) -> Document:
        """A new empty model in its own tab."""

    def document_by_id(self, doc_id: int | None) -> Document | None:
        """The open model with this id."""


@dataclass
class DesignerContext:
    """The small interface the designer's parts get instead of the main window.

    ``parent`` is the widget dialogs and actions belong to (its menu bar receives the parts' menu entries);
    ``open_path`` opens a model file (or switches to its tab); ``add_recent`` puts a file in File > Open Recent."""

    parent: QtWidgets.QMainWindow
    registry: Registry
    settings: QtCore.QSettings
    documents: Documents
    palette: Palette
    open_path: Callable[[str | os.PathLike[str]], Document | None]
    add_recent: Callable[[str], None]
    message_box: QtWidgets.QMessageBox | None = field(default=None, init=False)  # the latest warning shown

    def status(self, text: str, timeout_ms: int = 0) -> None:
        """Show ``text`` in the status bar (for ``timeout_ms``; 0: until the next message)."""
        self.parent.statusBar().showMessage(text, timeout_ms)

    def warn(self, title: str, text: str) -> QtWidgets.QMessageBox:
        """Show a problem in the status bar and in a message box that does not block; returns the box."""
        self.status(text, 10000)
        box = QtWidgets.QMessageBox(QtWidgets.QMessageBox.Icon.Warning, title, text,
                                    QtWidgets.QMessageBox.StandardButton.Ok, self.parent)
        box.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        self.message_box = box
        box.open()
        return box

    def menu(self, title: str) -> QtWidgets.QMenu | None:
        """The menu bar's menu named ``title`` (without its ``&``), or None."""
        return next((a.menu() for a in self.parent.menuBar().actions()
                     if a.menu() is not None and a.text().replace("&", "") == title), None)


class Controller(QtCore.QObject):
    """A part of the designer's window (files, runs, templates, ...): a QObject the window owns (dialogs and actions
    are parented to it), working through ``ctx`` alone."""

    def __init__(self, ctx: DesignerContext) -> None:
        super().__init__(ctx.parent)
        self.ctx = ctx
