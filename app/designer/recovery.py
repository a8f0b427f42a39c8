"""Autosave in the designer: every modified model (with the in-memory weights of an imported one) is copied into the
autosave folder on a timer (``Autosaver``, every ``AUTOSAVE_INTERVAL_MS``: a crash loses at most that much work),
and after a crash the copies left behind are offered for recovery at the next start."""
from __future__ import annotations

import os

from PySide6 import QtCore, QtWidgets

from app.designer.autosave import Autosaver, restore
from app.designer.context import Controller, DesignerContext
from app.designer.document import Document
from engine.errors import LayerLabError

#: how often modified models are copied (milliseconds); a designer killed mid-edit loses at most this much work
AUTOSAVE_INTERVAL_MS = 5_000


def default_autosave_dir() -> str:
    """Where autosave copies go (``LAYERLAB_AUTOSAVE_DIR`` overrides it)."""
    env = os.environ.get("LAYERLAB_AUTOSAVE_DIR")
    if env:
        return env
    base = QtCore.QStandardPaths.writableLocation(QtCore.QStandardPaths.StandardLocation.AppDataLocation)
    return os.path.join(base or os.path.join(os.path.expanduser("~"), ".layerlab"), "autosave")


class Autosave(Controller):
    """The autosave timer (``timer``, every ``interval_ms``) and the recovery offer."""

    def __init__(self, ctx: DesignerContext, autosaver: Autosaver, interval_ms: int) -> None:
        super().__init__(ctx)
        self.autosaver = autosaver
        self.timer = QtCore.QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.autosave_now)
        self.timer.start()

    def autosave_now(self) -> None:
        """Write an autosave copy of every modified model (and drop copies of unmodified ones)."""
        for doc in self.ctx.documents.docs:
            if doc.modified:
                try:
                    self.autosaver.write(doc.id, doc.model, doc.path, doc.title)
                except (OSError, LayerLabError) as exc:
                    self.ctx.status(f"Autosave failed: {exc}", 8000)
            else:
                self.autosaver.remove(doc.id)

    def stop(self) -> None:
        """The window closes cleanly: no copy is left behind."""
        for doc in list(self.ctx.documents.docs):
            self.autosaver.remove(doc.id)
        self.timer.stop()

    def offer_recovery(self) -> list[Document]:
        """After a crash: offer to reopen the autosave copies left behind; returns the recovered documents."""
        found = self.autosaver.recoverable()
        if not found:
            return []
        B = QtWidgets.QMessageBox.StandardButton
        names = "\n".join(f"  • {r.title}" + (f" ({r.original_path})" if r.original_path else "") for r in found)
        answer = QtWidgets.QMessageBox.question(
            self.ctx.parent, "Recover unsaved models",
            f"LayerLab did not close cleanly. Autosaved copies of these models were found:\n{names}\n\nRecover them?",
            B.Yes | B.No, B.Yes)
        recovered = []
        for r in found:
            if answer == B.Yes:
                try:
                    model = restore(r, self.ctx.registry)
                except LayerLabError as exc:
                    self.ctx.status(f"Cannot recover {r.title}: {exc}", 10000)
                    continue
                doc = self.ctx.documents.add_document(model, r.original_path)
                doc.recovered = True
                doc.state_changed.emit()
                recovered.append(doc)
            r.discard()
        if recovered:
            self.autosave_now()
            self.ctx.status(f"Recovered {len(recovered)} model(s); save them to keep the changes", 10000)
        return recovered
