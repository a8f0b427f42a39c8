"""The layer palette: every layer of the loaded plugins, and the current model's templates (category
Templates), grouped by name, collection or category, filterable; drag an entry onto the canvas or
double-click it to add the layer (or a template instance) at the view centre."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from canvas.graph import make_palette_mime
from engine.categories import Category
from engine.descriptors import LayerDesc
from engine.registry import Registry

TYPE_ROLE = QtCore.Qt.ItemDataRole.UserRole + 1
GROUPINGS = ("Category", "Collection", "Name")
TEMPLATES = Category.TEMPLATES


def group_keys(desc: LayerDesc, grouping: str) -> list[str]:
    """The groups a layer is listed under for ``grouping`` (empty for a flat list by name)."""
    if grouping == "Category":
        return list(desc.categories) or [Category.OTHER]
    if grouping == "Collection":
        return [desc.collection or "Other"]
    return []


def matches(desc: LayerDesc, text: str) -> bool:
    """Filter: the text appears in the layer's name or display name (case-insensitive)."""
    t = text.strip().lower()
    return not t or t in desc.name.lower() or t in desc.display_name.lower()


class _Item(QtWidgets.QTreeWidgetItem):
    """Sorted by text, except that the model's own Templates group comes first."""

    def __lt__(self, other: QtWidgets.QTreeWidgetItem) -> bool:
        first = [i.parent() is None and i.text(0) == TEMPLATES for i in (self, other)]
        if first[0] != first[1]:
            return first[0]
        return self.text(0) < other.text(0)  # what Qt compares by default (case-sensitive text)


class _Tree(QtWidgets.QTreeWidget):
    def mimeData(self, items: list[QtWidgets.QTreeWidgetItem]) -> QtCore.QMimeData:  # noqa: N802 (Qt API)
        types = [i.data(0, TYPE_ROLE) for i in items if i.data(0, TYPE_ROLE)]
        return make_palette_mime(types[0]) if types else QtCore.QMimeData()

    def mimeTypes(self) -> list[str]:  # noqa: N802 (Qt API)
        return ["text/plain"]


class Palette(QtWidgets.QWidget):
    """Emits ``add_requested(layer_type)`` on double-click (or Enter). A template entry's right-click menu
    emits ``template_action(action, name)`` with action ``add``, ``exposed`` or ``delete``."""

    add_requested = QtCore.Signal(str)
    template_action = QtCore.Signal(str, str)
    custom_action = QtCore.Signal(str, str)  # add, edit, export or delete; the custom layer's name

    def __init__(self, registry: Registry, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.registry = registry
        self.templates: list[LayerDesc] = []
        self.filter = QtWidgets.QLineEdit()
        self.filter.setPlaceholderText("Filter layers…")
        self.filter.setClearButtonEnabled(True)
        self.grouping = QtWidgets.QComboBox()
        self.grouping.addItems(GROUPINGS)
        self.grouping.setToolTip("Arrange layers by category, by collection (plugin) or by name")
        self.tree = _Tree()
        self.tree.setHeaderLabels(["Layer"])
        self.tree.setDragEnabled(True)
        self.tree.setDragDropMode(QtWidgets.QAbstractItemView.DragDropMode.DragOnly)
        self.tree.setSortingEnabled(True)
        self.tree.sortByColumn(0, QtCore.Qt.SortOrder.AscendingOrder)
        self.tree.setRootIsDecorated(True)
        self.tree.setUniformRowHeights(True)
        self.setMinimumWidth(270)
        top = QtWidgets.QHBoxLayout()
        top.addWidget(self.filter, 1)
        top.addWidget(self.grouping)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.tree)
        self.filter.textChanged.connect(self.rebuild)
        self.grouping.currentTextChanged.connect(self.rebuild)
        self.tree.itemActivated.connect(self._activated)
        self.tree.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._context_menu)
        self.menu: QtWidgets.QMenu | None = None
        self.rebuild()

    def set_templates(self, descs: list[LayerDesc]) -> None:
        """The templates of the model being edited (listed under Templates)."""
        if descs != self.templates:
            self.templates = list(descs)
            self.rebuild()

    def rebuild(self) -> None:
        """Refill the tree for the current grouping and filter."""
        self.tree.clear()
        grouping = self.grouping.currentText()
        groups: dict[str, QtWidgets.QTreeWidgetItem] = {}
        for desc in [*self.registry.layer_descs(), *self.templates]:
            if not matches(desc, self.filter.text()):
                continue
            keys = group_keys(desc, grouping)
            for key in keys or [None]:
                item = _Item([desc.display_name])
                item.setData(0, TYPE_ROLE, desc.name)
                item.setToolTip(0, f"<b>{desc.display_name}</b> (<code>{desc.name}</code>)<br>{desc.summary}")
                item.setStatusTip(0, desc.summary)
                item.setFlags(item.flags() | QtCore.Qt.ItemFlag.ItemIsDragEnabled)
                if key is None:
                    self.tree.addTopLevelItem(item)
                else:
                    if key not in groups:
                        g = _Item([key])
                        g.setFlags(QtCore.Qt.ItemFlag.ItemIsEnabled)
                        font = g.font(0)
                        font.setBold(True)
                        g.setFont(0, font)
                        self.tree.addTopLevelItem(g)
                        groups[key] = g
                    groups[key].addChild(item)
        self.tree.expandAll()

    def layer_items(self) -> list[QtWidgets.QTreeWidgetItem]:
        """Every visible layer entry (not group headers)."""
        out = []
        it = QtWidgets.QTreeWidgetItemIterator(self.tree)
        while it.value():
            if it.value().data(0, TYPE_ROLE):
                out.append(it.value())
            it += 1
        return out

    def item_for(self, layer_type: str) -> QtWidgets.QTreeWidgetItem | None:
        for item in self.layer_items():
            if item.data(0, TYPE_ROLE) == layer_type:
                return item
        return None

    def template_menu(self, name: str) -> QtWidgets.QMenu:
        """The right-click menu of template ``name``'s entry."""
        menu = QtWidgets.QMenu(self)
        for text, action in (("Add Instance", "add"), ("Exposed Parameters…", "exposed"), ("Rename Template…", "rename"),
                             ("Edit Template", "edit"),
                             (None, None), ("Delete Template", "delete")):
            if text is None:
                menu.addSeparator()
                continue
            act = menu.addAction(text)
            act.triggered.connect(lambda _c=False, a=action: self.template_action.emit(a, name))
        return menu

    def custom_menu(self, name: str) -> QtWidgets.QMenu:
        """The right-click menu of custom layer ``name``'s entry."""
        menu = QtWidgets.QMenu(self)
        for text, action in (("Add Instance", "add"), ("Edit Custom Layer…", "edit"), ("Export Definition…", "export"),
                             ("Delete Custom Layer", "delete")):
            act = menu.addAction(text)
            act.triggered.connect(lambda _c=False, a=action: self.custom_action.emit(a, name))
        return menu

    def _context_menu(self, pos: QtCore.QPoint) -> None:
        item = self.tree.itemAt(pos)
        layer_type = item.data(0, TYPE_ROLE) if item else None
        if layer_type and layer_type.startswith("template:"):
            self.menu = self.template_menu(layer_type.partition(":")[2])
            self.menu.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
            self.menu.popup(self.tree.viewport().mapToGlobal(pos))  # popup(): never blocks
        elif layer_type and layer_type.startswith("custom:"):
            self.menu = self.custom_menu(layer_type.partition(":")[2])
            self.menu.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
            self.menu.popup(self.tree.viewport().mapToGlobal(pos))

    def _activated(self, item: QtWidgets.QTreeWidgetItem, column: int) -> None:
        layer_type = item.data(0, TYPE_ROLE)
        if layer_type:
            self.add_requested.emit(layer_type)
