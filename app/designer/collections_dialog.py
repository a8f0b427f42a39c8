"""Tools > Manage Collections: every collection (plugin) with its metadata, where it was loaded from and what it
provides, a check box to load or unload it, Add Plugin Folder… for third-party collections, and the errors of
collections that failed to load. Choices are remembered in the application's settings (``collections/unloaded``,
``collections/folders``) and restored when the designer starts. Loading or unloading refreshes the palette, the
documentation browser, the fusing-rules window, the canvas nodes and the type check of every open model (layers of an
unloaded collection become type-check errors). Plugins of an added folder are first tried in a separate process
(``app.designer.collection_probe``)."""
from __future__ import annotations

import html
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from app.designer.collection_probe import CollectionProbe, tell_refused
from app.designer.context import Controller, DesignerContext
from engine.errors import LayerLabError
from engine.log import get_logger
from engine.plugin_collections import Collection, CollectionManager

UNLOADED_KEY = "collections/unloaded"
FOLDERS_KEY = "collections/folders"
NAME_ROLE = QtCore.Qt.ItemDataRole.UserRole
log = get_logger(__name__)


def _strings(value: Any) -> list[str]:
    """A QSettings list (an INI file gives a lone string for a one-item list, None for none)."""
    if value is None or value == "":
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


class Collections(Controller):
    """The designer's collections: the manager over its registry, the remembered choices and the refresh
    (``changed``: the documentation browser and the fusing-rules window follow it)."""

    changed = QtCore.Signal()

    def __init__(self, ctx: DesignerContext) -> None:
        super().__init__(ctx)
        self.manager = CollectionManager(ctx.registry)
        self.probe = CollectionProbe(ctx.settings)
        self.manager.accept = self.probe
        self.dialog: ManageCollectionsDialog | None = None
        self.act_manage = QtGui.QAction("Manage &Collections…", ctx.parent)
        self.act_manage.setStatusTip("Load and unload layer collections (plugins); add a plugin folder")
        self.act_manage.triggered.connect(lambda: self.show_dialog())
        unloaded, folders = _strings(ctx.settings.value(UNLOADED_KEY)), _strings(ctx.settings.value(FOLDERS_KEY))
        for note in self.manager.apply(unloaded, folders):
            log.warning("%s", note)
        self.probe.take_refused()  # at start: logged, and listed among the failures of the dialog
        if unloaded or folders:
            ctx.palette.rebuild()

    def show_dialog(self) -> ManageCollectionsDialog:
        """Open the dialog (non-modal)."""
        if self.dialog is None:
            self.dialog = ManageCollectionsDialog(self, self.ctx.parent)
        self.dialog.fill()
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    def set_loaded(self, name: str, loaded: bool) -> bool:
        """Load or unload collection ``name``, remember it and refresh the designer; False (with the reason shown)
        when it cannot be done."""
        try:
            self.manager.set_loaded(name, loaded)
        except LayerLabError as exc:
            self.ctx.status(str(exc), 10000)
            return False
        self._remember()
        self.refresh(set(self.manager.collection(name).layers))
        self.ctx.status(f"{'Loaded' if loaded else 'Unloaded'} collection {name}", 6000)
        return True

    def add_folder(self, folder: str) -> list[str]:
        """Load the collections of plugin folder ``folder`` (remembered); returns their names."""
        added = self.manager.add_folder(folder)
        self._remember()
        tell_refused(self.dialog or self.ctx.parent, self.probe.take_refused())
        self.refresh({n for name in added for n in self.manager.collection(name).layers})
        self.ctx.status(f"Plugin folder {folder}: {len(added)} collection(s) loaded", 8000)
        return added

    def _remember(self) -> None:
        unloaded, folders = self.manager.choices()
        self.ctx.settings.setValue(UNLOADED_KEY, unloaded)
        self.ctx.settings.setValue(FOLDERS_KEY, folders)

    def refresh(self, layer_types: set[str]) -> None:
        """What the registry offers changed (``layer_types`` came or went): palette, documentation, fusing rules,
        canvas nodes and every open model's type check follow."""
        ctx = self.ctx
        ctx.palette.rebuild()
        for doc in ctx.documents.docs:
            for ltype in sorted({s.type for s in doc.model.layers.values()} & layer_types):
                doc.canvas.refresh_nodes_of_type(ltype)
            doc.run_check()
        self.changed.emit()


class ManageCollectionsDialog(QtWidgets.QDialog):
    """The collections, one row each with a load check box; details of the selected one; failures below."""

    COLUMNS = ("Collection", "Version", "Author", "Kind", "Loaded from")

    def __init__(self, collections: Collections, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.collections = collections
        self.setWindowTitle("Manage Collections — LayerLab")
        self.setModal(False)
        self.resize(900, 560)
        self.tree = QtWidgets.QTreeWidget()
        self.tree.setHeaderLabels(list(self.COLUMNS))
        self.tree.setRootIsDecorated(False)
        self.tree.itemChanged.connect(self._toggled)
        self.tree.currentItemChanged.connect(lambda *_: self._show_details())
        self.details = QtWidgets.QTextBrowser()
        self.failures = QtWidgets.QListWidget()
        self.failures.setWordWrap(True)
        self.add_button = QtWidgets.QPushButton("Add Plugin Folder…")
        self.add_button.clicked.connect(lambda: self.add_folder())
        close = QtWidgets.QPushButton("Close")
        close.clicked.connect(self.close)
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        split.addWidget(self.tree)
        split.addWidget(self.details)
        split.setSizes([300, 160])
        buttons = QtWidgets.QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addStretch(1)
        buttons.addWidget(close)
        lay = QtWidgets.QVBoxLayout(self)
        lay.addWidget(split, 1)
        self.failures_label = QtWidgets.QLabel("Collections that failed to load:")
        lay.addWidget(self.failures_label)
        lay.addWidget(self.failures)
        lay.addLayout(buttons)
        self._filling = False
        self.fill()

    def fill(self) -> None:
        """Show the manager's collections and failures as they are now."""
        self._filling = True
        current = self.tree.currentItem().data(0, NAME_ROLE) if self.tree.currentItem() else None
        self.tree.clear()
        for c in self.collections.manager.collections():
            item = QtWidgets.QTreeWidgetItem([c.name, c.meta.version, c.meta.author, c.kind, c.location])
            item.setData(0, NAME_ROLE, c.name)
            item.setFlags(item.flags() | QtCore.Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(0, QtCore.Qt.CheckState.Checked if c.loaded else QtCore.Qt.CheckState.Unchecked)
            item.setToolTip(0, c.meta.description)
            item.setToolTip(4, c.location)
            self.tree.addTopLevelItem(item)
            if c.name == current:
                self.tree.setCurrentItem(item)
        for i in range(len(self.COLUMNS) - 1):
            self.tree.resizeColumnToContents(i)
        # the name column's size hint leaves out the check box (the theme's item padding): the names in full
        fm, style = self.tree.fontMetrics(), self.tree.style()
        names = [self.tree.topLevelItem(i).text(0) for i in range(self.tree.topLevelItemCount())]
        need = max(map(fm.horizontalAdvance, names), default=0) + style.pixelMetric(
            QtWidgets.QStyle.PixelMetric.PM_IndicatorWidth) + 32
        self.tree.header().resizeSection(0, max(self.tree.columnWidth(0), need))
        self.failures.clear()
        for f in self.collections.manager.failures:
            self.failures.addItem(str(f))
        self.failures_label.setVisible(bool(self.collections.manager.failures))
        self.failures.setVisible(bool(self.collections.manager.failures))
        self._filling = False
        self._show_details()

    def item_for(self, name: str) -> QtWidgets.QTreeWidgetItem | None:
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            if item.data(0, NAME_ROLE) == name:
                return item
        return None

    def _toggled(self, item: QtWidgets.QTreeWidgetItem, column: int) -> None:
        if self._filling or column != 0:
            return
        loaded = item.checkState(0) == QtCore.Qt.CheckState.Checked
        self.collections.set_loaded(item.data(0, NAME_ROLE), loaded)
        # the view still uses the clicked item once this signal returns: rebuilding the rows now would delete it
        # under the view (a crash), so they are rebuilt after the click is over
        QtCore.QTimer.singleShot(0, self, self.fill)

    def add_folder(self, folder: str | None = None) -> list[str]:
        """Add Plugin Folder…: asks for the folder when ``folder`` is None."""
        if folder is None:
            folder = QtWidgets.QFileDialog.getExistingDirectory(self, "Add plugin folder")
            if not folder:
                return []
        added = self.collections.add_folder(folder)
        self.fill()
        return added

    def _show_details(self) -> None:
        item = self.tree.currentItem()
        if item is None:
            self.details.setHtml("<p>Select a collection to see what it provides.</p>")
            return
        self.details.setHtml(details_html(self.collections.manager.collection(item.data(0, NAME_ROLE))))


def details_html(c: Collection) -> str:
    """The details pane of a collection: metadata, where it was loaded from, what it provides."""
    def names(items: tuple[str, ...]) -> str:
        return ", ".join(f"<code>{html.escape(n)}</code>" for n in items) or "<i>none</i>"

    rules = "".join(f"<li><code>{html.escape(r)}</code></li>" for r in c.fusing_rules) or "<li><i>none</i></li>"
    state = "loaded" if c.loaded else "not loaded"
    return (f"<h3>{html.escape(c.name)} {html.escape(c.meta.version)}</h3>"
            f"<p>{html.escape(c.meta.description)}</p>"
            f"<p><b>Author:</b> {html.escape(c.meta.author)} &nbsp; <b>Kind:</b> {c.kind} ({state})<br>"
            f"<b>Loaded from:</b> {html.escape(c.location)}</p>"
            f"<p><b>Layers:</b> {names(c.layers)}<br><b>Activations:</b> {names(c.activations)}</p>"
            f"<p><b>Fusing rules:</b></p><ul>{rules}</ul>")
