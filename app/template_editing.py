"""Edit Template in place: double-click a template instance (or the palette entry's right-click Edit Template) opens
the definition in its own tab as a model (``engine.templates.editing.definition_model``). Saving that tab (File >
Save) writes it back as the definition in the model it came from and in every other open model holding the same
definition (one undo step each); the exposed parameters whose layers are gone are dropped and listed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PySide6 import QtCore

from engine.errors import LayerLabError
from engine.templates import template_name
from engine.templates.editing import apply_definition, definition_model, instance_dims

if TYPE_CHECKING:
    from app.document import Document
    from app.main_window import MainWindow


@dataclass
class _Session:
    owner: Document
    name: str
    text: str  # the definition the tab was opened on (or last saved)


class TemplateEditing(QtCore.QObject):
    """The main window's template-editing tabs."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.sessions: dict[int, _Session] = {}  # editing document id -> what it edits

    def attach(self, doc: Document) -> None:
        """Double-click on a template instance of ``doc`` edits its template."""
        doc.canvas.node_double_clicked.connect(lambda node, d=doc: self._double_clicked(d, node))

    def _double_clicked(self, doc: Document, node: Any) -> None:
        layer = doc.canvas.layer_of(node)
        name = template_name(doc.model.layers[layer].type) if layer in doc.model.layers else None
        if name is not None:
            self.edit_template(name, doc)

    def handles(self, doc: Document | None) -> bool:
        """True when ``doc`` is a template-editing tab (its Save writes the definition back)."""
        return doc is not None and doc.id in self.sessions

    def edit_template(self, name: str, doc: Document | None = None) -> Document | None:
        """Open template ``name`` of ``doc`` (default: the current model) in its own tab (or show the tab already
        open on it); returns the tab's document."""
        window = self.window
        doc = doc or window.current
        if doc is None or name not in doc.model.templates:
            window.statusBar().showMessage(f"No template {name} in the current model", 5000)
            return None
        for did, s in self.sessions.items():
            if s.owner is doc and s.name == name:
                tab = window.document_by_id(did)
                if tab is not None:
                    window.tabs.setCurrentWidget(tab.canvas.widget)
                    return tab
        try:
            model = definition_model(doc.model, name, window.registry,
                                     instance_dims(doc.model, name, dict(doc.shapes)))
        except LayerLabError as exc:
            window._warn("Cannot edit the template", str(exc))
            return None
        model.name = f"template {name}"  # the tab's title: "template NAME (new)"
        tab = window.add_document(model, None)
        self.sessions[tab.id] = _Session(doc, name, doc.model.templates[name])
        tab.destroyed.connect(lambda *_a, i=tab.id: self.sessions.pop(i, None))
        window.statusBar().showMessage(f"Editing template {name} of {doc.title}: File > Save updates its instances",
                                       8000)
        return tab

    def targets(self, session: _Session) -> list[Document]:
        """The open models to update: the one the template came from and every other with the same definition."""
        docs = [session.owner] if session.owner in self.window.docs else []
        docs += [d for d in self.window.docs if d is not session.owner and d.id not in self.sessions
                 and d.model.templates.get(session.name) == session.text]
        return docs

    def save(self, tab: Document) -> bool:
        """Write the tab's model back as the template's definition (see the module documentation)."""
        window = self.window
        session = self.sessions[tab.id]
        targets = self.targets(session)
        if not targets:
            window._warn("Cannot save the template", f"the model template {session.name} came from is closed")
            return False
        dropped: set[str] = set()
        for doc in targets:
            try:
                dropped |= set(apply_definition(doc.model, session.name, tab.model, window.registry))
            except LayerLabError as exc:
                window._warn("Cannot save the template", str(exc))
                return False
        session.text = session.owner.model.templates.get(session.name, session.text)
        tab.model.mark_clean()
        names = ", ".join(d.title for d in targets)
        if dropped:
            window._warn("Template saved", f"Template {session.name} saved in {names}. These exposed parameters were "
                                           f"dropped, their layers or parameters are gone: {', '.join(sorted(dropped))}")
        else:
            window.statusBar().showMessage(f"Template {session.name} saved in {names}", 8000)
        return True
