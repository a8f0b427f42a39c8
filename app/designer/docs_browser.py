"""Help > Layer Documentation: a searchable browser over every layer and activation descriptor."""
from __future__ import annotations

import html

from PySide6 import QtCore, QtWidgets

from engine.descriptors import ActivationDesc, InputKind, LayerDesc
from engine.export import layer_support_html
from engine.registry import Registry

KEY_ROLE = QtCore.Qt.ItemDataRole.UserRole + 1
_KIND = {InputKind.PRIMARY: "primary", InputKind.SECONDARY: "secondary (optional)",
         InputKind.PRIMARY_INFINITE: "primary, any number"}


def layer_page(desc: LayerDesc) -> str:
    """Rich-text documentation page of a layer, built from its descriptor."""
    rows = "".join(f"<tr><td><b>{html.escape(i.name)}</b></td><td>{_KIND[i.kind]}</td><td>{html.escape(i.doc)}</td></tr>"
                   for i in desc.inputs) or "<tr><td colspan=3><i>none</i></td></tr>"
    prows = "".join(
        f"<tr><td><b>{html.escape(p.name)}</b></td><td>{p.type}</td><td>{html.escape(p.default_text)}</td>"
        f"<td>{html.escape(p.allowed())}</td><td>{html.escape(p.doc)}</td></tr>" for p in desc.params
    ) or "<tr><td colspan=5><i>none</i></td></tr>"
    cats = ", ".join(desc.categories) or "—"
    return (f"<h2>{html.escape(desc.display_name)} <small>(<code>{desc.name}</code>)</small></h2>"
            f"<p><i>{html.escape(desc.summary)}</i></p>"
            f"<p>Category: {html.escape(cats)} · Collection: {html.escape(desc.collection or '—')}</p>"
            f"{desc.documentation}"
            f"<h3>Inputs</h3><table border=1 cellspacing=0 cellpadding=4><tr><th>Input</th><th>Kind</th><th></th></tr>"
            f"{rows}</table>"
            f"<h3>Parameters</h3><table border=1 cellspacing=0 cellpadding=4><tr><th>Name</th><th>Type</th>"
            f"<th>Default</th><th>Allowed</th><th>Meaning</th></tr>{prows}</table>")


def activation_page(desc: ActivationDesc) -> str:
    crow = "".join(f"<tr><td><b>{html.escape(c.name)}</b></td><td>{c.default}</td><td>{html.escape(c.doc)}</td></tr>"
                   for c in desc.coefficients) or "<tr><td colspan=3><i>none</i></td></tr>"
    return (f"<h2>{html.escape(desc.display_name)} <small>(activation <code>{desc.name}</code>)</small></h2>"
            f"<p><i>{html.escape(desc.summary)}</i></p><p>Collection: {html.escape(desc.collection or '—')}</p>"
            f"{desc.documentation}<h3>Coefficients</h3><table border=1 cellspacing=0 cellpadding=4>"
            f"<tr><th>Name</th><th>Default</th><th>Meaning</th></tr>{crow}</table>")


class DocsBrowser(QtWidgets.QDialog):
    """Non-modal documentation window; the search box matches names, summaries and documentation text."""

    def __init__(self, registry: Registry, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Layer Documentation — LayerLab")
        self.setModal(False)
        self.resize(900, 600)
        self.registry = registry
        self.search = QtWidgets.QLineEdit()
        self.search.setPlaceholderText("Search layers and activations…")
        self.search.setClearButtonEnabled(True)
        self.tree = QtWidgets.QTreeWidget()
        self.tree.setHeaderHidden(True)
        self.tree.header().setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        self.tree.header().setStretchLastSection(False)  # long names scroll sideways instead of being cut
        self.page = QtWidgets.QTextBrowser()
        self.page.setOpenExternalLinks(True)
        left = QtWidgets.QWidget()
        ll = QtWidgets.QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(self.search)
        ll.addWidget(self.tree)
        split = QtWidgets.QSplitter()
        split.addWidget(left)
        split.addWidget(self.page)
        self.split = split
        lay = QtWidgets.QVBoxLayout(self)
        lay.addWidget(split)
        self._pages: dict[str, str] = {}
        self._text: dict[str, str] = {}
        for d in registry.layer_descs():
            self._pages[f"layer:{d.name}"] = layer_page(d) + layer_support_html(registry, d.name)
            self._text[f"layer:{d.name}"] = " ".join([d.name, d.display_name, d.summary, d.documentation, *d.categories])
        for a in registry.activation_descs():
            self._pages[f"activation:{a.name}"] = activation_page(a) + layer_support_html(registry, a.name, "activation")
            self._text[f"activation:{a.name}"] = " ".join([a.name, a.display_name, a.summary, a.documentation])
        self._templates: list[LayerDesc] = []
        self.search.textChanged.connect(self._fill)
        self.tree.currentItemChanged.connect(self._show)
        self._fill()
        wide = self.tree.sizeHintForColumn(0) + self.tree.indentation() + 36  # the whole names, and the scroll bar
        split.setSizes([min(max(260, wide), 460), 900 - min(max(260, wide), 460)])

    def set_templates(self, descs: list[LayerDesc]) -> None:
        """The templates of the model being edited get pages under Templates (``layer:template:NAME``)."""
        for d in self._templates:
            self._pages.pop(f"layer:{d.name}", None)
            self._text.pop(f"layer:{d.name}", None)
        self._templates = list(descs)
        for d in self._templates:
            self._pages[f"layer:{d.name}"] = layer_page(d)
            self._text[f"layer:{d.name}"] = " ".join([d.name, d.display_name, d.summary, d.documentation])
        self._fill()

    def _templates_title(self) -> str:
        custom = any(d.name.startswith("custom:") for d in self._templates)
        return "Templates and custom layers" if custom else "Templates"

    def _fill(self) -> None:
        t = self.search.text().strip().lower()
        self.tree.clear()
        first = None
        for title, prefix, descs in (("Layers", "layer:", self.registry.layer_descs()),
                                     (self._templates_title(), "layer:", self._templates),
                                     ("Activations", "activation:", self.registry.activation_descs())):
            group = QtWidgets.QTreeWidgetItem([title])
            group.setFlags(QtCore.Qt.ItemFlag.ItemIsEnabled)
            for d in descs:
                key = prefix + d.name
                if t and t not in self._text[key].lower():
                    continue
                item = QtWidgets.QTreeWidgetItem([f"{d.display_name}  ({d.name})"])
                item.setData(0, KEY_ROLE, key)
                item.setToolTip(0, f"{d.display_name} ({d.name}): {d.summary}" if d.summary else d.name)
                group.addChild(item)
                first = first or item
            if group.childCount():
                self.tree.addTopLevelItem(group)
        self.tree.expandAll()
        if first is not None:
            self.tree.setCurrentItem(first)
        else:
            self.page.setHtml("<p><i>Nothing matches.</i></p>")

    def _show(self, item: QtWidgets.QTreeWidgetItem | None, _prev: object = None) -> None:
        key = item.data(0, KEY_ROLE) if item else None
        if key:
            self.page.setHtml(self._pages[key])

    def show_entry(self, key: str) -> None:
        """Show ``layer:NAME`` or ``activation:NAME``."""
        self.search.clear()
        it = QtWidgets.QTreeWidgetItemIterator(self.tree)
        while it.value():
            if it.value().data(0, KEY_ROLE) == key:
                self.tree.setCurrentItem(it.value())
                return
            it += 1

    def visible_keys(self) -> list[str]:
        out = []
        it = QtWidgets.QTreeWidgetItemIterator(self.tree)
        while it.value():
            if it.value().data(0, KEY_ROLE):
                out.append(it.value().data(0, KEY_ROLE))
            it += 1
        return out
