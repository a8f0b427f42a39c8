"""File > New, Open, Save, Save As and Close of the designer: models read and written through ``engine.modelfile``,
``.onnx`` files handed to the ONNX import, template-editing tabs saved back into their models, and the question
before unsaved changes are lost."""
from __future__ import annotations

import os
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app.designer.autosave import Autosaver
from app.designer.context import Controller, DesignerContext
from app.designer.document import Document
from app.designer.onnx_import import OPEN_FILTER, OnnxImport
from app.designer.templates import Templates
from app.designer.workspace import FILE_FILTER, SAMPLE, Workspace
from engine import modelfile
from engine.errors import LayerLabError
from engine.importers import is_importable


class Files(Controller):
    """Opening, saving and closing models; ``saved`` tells the window a document got a (new) file."""

    saved = QtCore.Signal(object)  # the Document
    closed = QtCore.Signal(object)  # the Document, after its tab is gone

    def __init__(self, ctx: DesignerContext, workspace: Workspace, autosaver: Autosaver, templates: Templates,
                 onnx_import: OnnxImport) -> None:
        super().__init__(ctx)
        self.workspace = workspace
        self.autosaver = autosaver
        self.templates = templates
        self.onnx_import = onnx_import

    def open_path(self, path: str | os.PathLike[str]) -> Document | None:
        """Open a model file (or switch to its tab); errors are shown, not raised. An ``.onnx`` file is imported in
        the background into a new tab (None is returned; ``onnx_import`` shows the import)."""
        if is_importable(path):
            self.onnx_import.import_file(path)
            return None
        path = str(Path(path).resolve())
        for d in self.workspace.docs:
            if d.path and Path(d.path).resolve() == Path(path):
                self.workspace.show(d)
                return d
        try:
            model = modelfile.load(path, self.ctx.registry)
        except LayerLabError as exc:
            QtWidgets.QMessageBox.critical(self.ctx.parent, "Cannot open model", str(exc))
            self.ctx.status(str(exc), 10000)
            return None
        doc = self.workspace.add_document(model, path)
        self.ctx.add_recent(path)
        msg = f"Opened {path}"
        if model.load_warnings:
            msg += f" — {len(model.load_warnings)} warning(s): " + "; ".join(model.load_warnings[:3])
        self.ctx.status(msg, 10000)
        return doc

    def open_dialog(self) -> None:
        """File > Open: ask for a model file (or an ONNX model) and open it."""
        current = self.workspace.current
        start = str(Path(current.path).parent) if current and current.path else str(SAMPLE.parent)
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self.ctx.parent, "Open model", start, OPEN_FILTER)
        if path:
            self.open_path(path)

    def save(self, doc: Document | None = None) -> bool:
        """File > Save (Save As for a model without a file); False when not saved."""
        doc = doc or self.workspace.current
        if doc is None:
            return False
        if self.templates.handles(doc):  # a template's definition: saved back into its model(s)
            return self.templates.save_definition(doc)
        if not doc.path:
            return self.save_as(doc)
        return self._write(doc, doc.path)

    def save_as(self, doc: Document | None = None, path: str | None = None) -> bool:
        """File > Save As (asks for the file when ``path`` is None); False when not saved."""
        doc = doc or self.workspace.current
        if doc is None:
            return False
        if path is None:
            start = doc.path or str(Path.cwd() / f"{doc.model.name}.lnet")
            path, _ = QtWidgets.QFileDialog.getSaveFileName(self.ctx.parent, "Save model as", start, FILE_FILTER)
            if not path:
                return False
            if not Path(path).suffix:
                path += ".lnet"
        return self._write(doc, path)

    def _write(self, doc: Document, path: str) -> bool:
        try:
            self.onnx_import.before_save(doc, path)  # an imported model's weights: a .safetensors next to it
            modelfile.save(doc.model, path)
        except (OSError, LayerLabError) as exc:
            QtWidgets.QMessageBox.critical(self.ctx.parent, "Cannot save model", f"{path}: {exc}")
            return False
        doc.mark_saved(str(Path(path).resolve()))
        self.saved.emit(doc)
        self.autosaver.remove(doc.id)
        self.ctx.add_recent(doc.path)
        self.ctx.status(f"Saved {doc.path}", 6000)
        return True

    def maybe_save(self, doc: Document) -> bool:
        """Ask before losing unsaved changes; False means the user cancelled."""
        if not doc.modified:
            return True
        self.workspace.show(doc)
        B = QtWidgets.QMessageBox.StandardButton
        answer = QtWidgets.QMessageBox.question(
            self.ctx.parent, "Unsaved changes", f"{doc.title} has unsaved changes. Save them before closing?",
            B.Save | B.Discard | B.Cancel, B.Save)
        if answer == B.Save:
            return self.save(doc)
        return answer == B.Discard

    def close_document(self, doc: Document | None) -> bool:
        """Close ``doc``'s tab (asking about unsaved changes); False when it stays open."""
        if doc is None:
            return False
        if not self.maybe_save(doc):
            doc.canvas.reset_modifiers()  # the dialog took the Ctrl release of Ctrl+W
            return False
        self.autosaver.remove(doc.id)
        self.workspace.remove(doc)
        self.closed.emit(doc)
        return True
