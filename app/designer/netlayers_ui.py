"""Network layers in the designer: Edit > Import Model as Layer, double-click opens the referenced model in its
own tab, and the referenced files are watched so a changed file re-checks every open model using it."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6 import QtCore, QtGui, QtWidgets

from app.designer.context import Controller, DesignerContext
from app.designer.workspace import FILE_FILTER
from engine.errors import LayerLabError
from engine.netlayers import network_desc, network_file, network_type, referenced_files, relative_reference, resolve

if TYPE_CHECKING:
    from app.designer.document import Document


class NetworkLayers(Controller):
    """What the main window does with network layers (one per window)."""

    def __init__(self, ctx: DesignerContext) -> None:
        super().__init__(ctx)
        self.watcher = QtCore.QFileSystemWatcher(self)
        self.watcher.fileChanged.connect(self.file_changed)
        self.act_import = QtGui.QAction("Import Model as &Layer…", ctx.parent)
        self.act_import.setStatusTip("Add a saved model as one layer referencing its file (it expands at build time)")
        self.act_import.triggered.connect(lambda: self.import_layer())

    def attach(self, doc: Document) -> None:
        """Follow ``doc``: double-click on a network layer opens its model; its referenced files are watched."""
        doc.canvas.node_double_clicked.connect(lambda node, d=doc: self._double_clicked(d, node))
        doc.checked.connect(lambda _diags, d=doc: self.watch(d))
        self.watch(doc)

    def watch(self, doc: Document) -> None:
        """Watch the files ``doc``'s network layers reference (existing ones; a save by rename drops a watch)."""
        files = {str(p) for p in referenced_files(doc.model).values() if p.is_file()}
        missing = sorted(files - set(self.watcher.files()))
        if missing:
            self.watcher.addPaths(missing)

    def import_layer(self, path: str | os.PathLike[str] | None = None, weights: str | os.PathLike[str] | None = None,
                     name: str | None = None) -> str | None:
        """Edit > Import Model as Layer: add a network layer referencing the model at ``path`` (asked for when None)
        to the current model, with ``weights`` (its own weights folder or file, optional). Returns the layer."""
        ctx = self.ctx
        doc = ctx.documents.current
        if doc is None:
            return None
        if path is None:
            start = str(Path(doc.path).parent) if doc.path else os.getcwd()
            path, _ = QtWidgets.QFileDialog.getOpenFileName(ctx.parent, "Import model as layer", start, FILE_FILTER)
            if not path:
                return None
        ltype = network_type(relative_reference(doc.model, path))
        if doc.path and Path(doc.path).resolve() == Path(path).resolve():
            ctx.warn("Cannot import the model as a layer", "a model cannot be a layer of itself")
            return None
        try:
            network_desc(doc.model, ctx.registry, ltype)
        except LayerLabError as exc:
            ctx.warn("Cannot import the model as a layer", str(exc))
            return None
        params = {"weights": relative_reference(doc.model, weights)} if weights else {}
        name = name or doc.model.unique_name(Path(path).stem.replace('-', '_').replace(' ', '_'))
        layer = doc.model.add_layer(ltype, name, params=params, position=doc.canvas.free_center())
        doc.canvas.select_layers([layer])
        ctx.status(f"Imported {Path(path).name} as network layer {layer}", 8000)
        return layer

    def open_layer_model(self, doc: Document, layer: str) -> Any:
        """Open the model network layer ``layer`` of ``doc`` references in its own tab (None when not one)."""
        spec = doc.model.layers.get(layer)
        if spec is None or network_file(spec.type) is None:
            return None
        return self.ctx.open_path(resolve(doc.model, spec.type))

    def _double_clicked(self, doc: Document, node: Any) -> None:
        layer = doc.canvas.layer_of(node)
        if layer is not None:
            self.open_layer_model(doc, layer)

    def file_changed(self, path: str) -> None:
        """A referenced file changed: the nodes of layers using it follow its ports, and each model using it is
        checked again (the next build reads the new file anyway)."""
        changed = Path(path).resolve()
        for doc in list(self.ctx.documents.docs):
            users = {doc.model.layers[n].type for n, p in referenced_files(doc.model).items() if p == changed}
            for ltype in sorted(users):
                doc.canvas.refresh_nodes_of_type(ltype)
            if users:
                doc.run_check()
                self.ctx.status(f"{changed.name} changed: checked {doc.title} again", 8000)
        if changed.is_file() and str(changed) not in self.watcher.files():
            self.watcher.addPath(str(changed))
