"""The open models of the designer and the tab area they are shown in: which one is current, adding one in a new tab
(``document_added`` lets the designer's parts follow it before its tab appears), and removing one."""
from __future__ import annotations

import ctypes
import gc
import sys
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app.designer.document import Document
from engine.model import Model
from engine.registry import Registry

FILE_FILTER = "LayerLab models (*.lnet);;All files (*)"
SAMPLE = Path(__file__).resolve().parents[2] / "resources" / "samples" / "denoiser.lnet"


def give_memory_back() -> None:
    """Collect what a closed model left (its canvas's items, its weights, reference cycles through signal
    connections) and return the freed heap to the system. Without the trim, glibc keeps the pages of freed
    weights (allocated by the import's thread, in an arena of its own) and resident memory only grows from one
    imported network to the next."""
    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc (musl): nothing to trim
            pass


class Workspace(QtCore.QObject):
    """The open documents (``docs``) and the tab widget (``tabs``) holding their canvases (and the report tabs)."""

    document_added = QtCore.Signal(object)  # a Document, before its tab is added

    def __init__(self, registry: Registry, parent: QtWidgets.QWidget) -> None:
        super().__init__(parent)
        self.registry = registry
        self.docs: list[Document] = []
        self.tabs = QtWidgets.QTabWidget()
        self.tabs.setTabsClosable(True)
        self.tabs.setMovable(True)
        self.tabs.setDocumentMode(True)

    @property
    def current(self) -> Document | None:
        """The model of the current tab (None on a report tab or with no tab)."""
        return self.doc_at(self.tabs.currentIndex())

    def doc_at(self, index: int) -> Document | None:
        """The model shown in tab ``index`` (None for a report tab)."""
        widget = self.tabs.widget(index)
        for d in self.docs:
            if d.canvas.widget is widget:
                return d
        return None

    def document_by_id(self, doc_id: int | None) -> Document | None:
        """The open model with this id."""
        return next((d for d in self.docs if d.id == doc_id), None)

    def add_document(self, model: Model, path: str | None = None) -> Document:
        """Open ``model`` in a new tab and make it current."""
        doc = Document(model, self.registry, path, self.parent())
        self.docs.append(doc)
        self.document_added.emit(doc)
        index = self.tabs.addTab(doc.canvas.widget, doc.title)
        self.tabs.setCurrentIndex(index)
        doc.state_changed.emit()
        QtCore.QTimer.singleShot(0, doc.canvas.fit)
        return doc

    def new_model(self) -> Document:
        """A new empty model (``network``, ``network_2``, ...) in its own tab."""
        names = {d.model.name for d in self.docs}
        name, n = "network", 1
        while name in names:
            n += 1
            name = f"network_{n}"
        return self.add_document(Model(name))

    def show(self, doc: Document) -> None:
        """Make ``doc``'s tab current."""
        self.tabs.setCurrentWidget(doc.canvas.widget)

    def remove(self, doc: Document) -> None:
        """Close ``doc``'s tab and release it (no questions: see ``Files.close_document``)."""
        index = self.tabs.indexOf(doc.canvas.widget)
        self.docs.remove(doc)
        self.tabs.removeTab(index)
        doc.close()
        doc.canvas.widget.deleteLater()
        doc.destroyed.connect(lambda _obj=None: QtCore.QTimer.singleShot(0, give_memory_back))
        doc.deleteLater()
