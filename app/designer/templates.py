"""Templates in the designer: Edit > Group Selection as Template / Ungroup / Import Model as Template, the palette's
Templates category and its right-click menu (add, rename, exposed parameters, delete), and Edit Template in place.

Edit Template in place: double-click a template instance (or the palette entry's Edit Template) opens the definition
in its own tab as a model (``engine.templates.editing.definition_model``). Saving that tab (File > Save) writes it back
as the definition in the model it came from and in every other open model holding the same definition (one undo step
each); the exposed parameters whose layers are gone are dropped and listed."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtWidgets

from app.designer.context import Controller, DesignerContext
from app.designer.document import Document
from app.designer.params import ParamPanel
from app.designer.workspace import FILE_FILTER, SAMPLE
from engine import modelfile
from engine.custom import custom_descs
from engine.errors import LayerLabError
from engine.model import Model
from engine.templates import group, rename_template, template_descs, template_name, template_type, ungroup
from engine.templates.editing import apply_definition, definition_model, instance_dims


@dataclass
class _Editing:
    owner: Document
    name: str
    text: str  # the definition the tab was opened on (or last saved)


def default_template_name(model: Model) -> str:
    """``template1``, ``template2``, ...: the first one neither a template nor a layer of ``model`` uses."""
    n = 1
    while f"template{n}" in model.templates or f"template{n}_1" in model.layers:
        n += 1
    return f"template{n}"


class Templates(Controller):
    """The designer's template commands and template-editing tabs (``sessions``: editing tab id -> what it edits)."""

    def __init__(self, ctx: DesignerContext, params: ParamPanel) -> None:
        super().__init__(ctx)
        self.params = params
        self.template_dialog: QtWidgets.QInputDialog | None = None  # the latest name dialog
        self.sessions: dict[int, _Editing] = {}
        ctx.palette.template_action.connect(self._palette_action)

    @property
    def _docs(self) -> Any:
        return self.ctx.documents

    def refresh(self) -> None:
        """The palette's Templates category shows the current model's templates."""
        doc = self._docs.current
        self.ctx.palette.set_templates([*template_descs(doc.model, doc.registry), *custom_descs(doc.model)]
                                       if doc else [])

    # ---- grouping --------------------------------------------------------------------------------
    def group_selection(self, name: str | None = None) -> str | None:
        """Edit > Group Selection as Template: with ``name``, group now and return the instance's name; without,
        ask for the name in a non-modal dialog (``template_dialog``) and group when it is accepted."""
        doc = self._docs.current
        if doc is None:
            return None
        names = doc.canvas.selected_layers()
        if not names:
            self.ctx.status("Select the layers to group as a template", 5000)
            return None
        if name is None:
            self._ask_name("Group as Template",
                           f"Name of the new template ({len(names)} layer(s): {', '.join(names[:6])}"
                           f"{'…' if len(names) > 6 else ''}):", default_template_name(doc.model),
                           lambda text, d=doc, n=names: self._group(d, n, text))
            return None
        return self._group(doc, names, name)

    def _ask_name(self, title: str, label: str, value: str, accepted: Callable[[str], Any]) -> None:
        """Ask for a template name in a dialog that does not block; ``accepted`` gets the stripped text."""
        dlg = QtWidgets.QInputDialog(self.ctx.parent)
        dlg.setWindowTitle(title)
        dlg.setLabelText(label)
        dlg.setTextValue(value)
        dlg.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.textValueSelected.connect(lambda text: accepted(text.strip()))
        self.template_dialog = dlg
        dlg.open()

    def _group(self, doc: Document, names: list[str], name: str) -> str | None:
        ordered = [n for n in doc.model.layers if n in set(names)]
        try:
            with doc.model.macro(f"Group {', '.join(ordered)} as template {name}"):
                instance = group(doc.model, names, name, doc.registry)
                doc.canvas.clear_of_others(instance)  # the instance may be larger than the first layer it replaces
        except LayerLabError as exc:
            self.ctx.warn("Cannot group as a template", str(exc))
            return None
        doc.canvas.select_layers([instance])
        self.ctx.status(f"Grouped {len(names)} layers as template {name}: instance {instance}", 8000)
        return instance

    def ungroup_selection(self) -> list[str]:
        """Edit > Ungroup: replace the selected template instances by their layers (one undo step)."""
        doc = self._docs.current
        if doc is None:
            return []
        instances = [n for n in doc.canvas.selected_layers() if template_name(doc.model.layers[n].type)]
        if not instances:
            self.ctx.status("Select a template instance to ungroup", 5000)
            return []
        new: list[str] = []
        try:
            with doc.model.macro("Ungroup " + ", ".join(instances)):
                for inst in instances:
                    new += ungroup(doc.model, inst, doc.registry)
        except LayerLabError as exc:
            self.ctx.status(f"Cannot ungroup: {exc}", 10000)
            return []
        doc.canvas.select_layers(new)
        self.ctx.status(f"Ungrouped {', '.join(instances)} into {len(new)} layers", 8000)
        return new

    def import_template(self, path: str | os.PathLike[str] | None = None, name: str | None = None) -> str | None:
        """Edit > Import Model as Template: add a saved model to the current one as a template (asks for the
        file when ``path`` is None); returns the template's name."""
        doc = self._docs.current
        if doc is None:
            return None
        if path is None:
            start = str(Path(doc.path).parent) if doc.path else str(SAMPLE.parent)
            path, _ = QtWidgets.QFileDialog.getOpenFileName(self.ctx.parent, "Import model as template", start,
                                                            FILE_FILTER)
            if not path:
                return None
        try:
            added = modelfile.import_model_as_template(doc.model, path, self.ctx.registry, name)
        except LayerLabError as exc:
            self.ctx.warn("Cannot import the model as a template", str(exc))
            return None
        self.ctx.status(f"Imported {Path(path).name} as template {added}: add it from the palette's "
                        "Templates category", 8000)
        return added

    # ---- the palette's Templates category --------------------------------------------------------
    def _palette_action(self, action: str, name: str) -> None:
        if action == "add":
            doc = self._docs.current or self._docs.new_model()
            doc.canvas.add_layer(template_type(name))
        elif action == "exposed":
            self.edit_exposed(name)
        elif action == "delete":
            self.delete_template(name)
        elif action == "rename":
            self.rename_template(name)
        elif action == "edit":
            self.edit_template(name)

    def rename_template(self, name: str, new: str | None = None) -> bool:
        """Rename template ``name`` of the current model, its instances following (one undo step); without
        ``new``, ask for it in a non-modal dialog (``template_dialog``) and rename when it is accepted."""
        doc = self._docs.current
        if doc is None:
            return False
        if new is None:
            self._ask_name("Rename Template", f"New name of template {name} (its instances follow):", name,
                           lambda text, n=name: self.rename_template(n, text))
            return False
        try:
            rename_template(doc.model, name, new, doc.registry)
        except LayerLabError as exc:
            self.ctx.warn("Cannot rename the template", str(exc))
            return False
        self.ctx.status(f"Renamed template {name} to {new}", 6000)
        return True

    def edit_exposed(self, name: str) -> None:
        """Open the dialog choosing the exposed parameters of template ``name`` of the current model."""
        doc = self._docs.current
        if doc is not None:
            self.params.set_target(doc, doc.canvas.selected_layers())
            self.params.edit_exposed(name)

    def delete_template(self, name: str) -> bool:
        """Delete template ``name`` from the current model (refused, with the reason, while it is used)."""
        doc = self._docs.current
        if doc is None:
            return False
        try:
            doc.model.remove_template(name)
        except LayerLabError as exc:
            self.ctx.warn("Cannot delete the template", str(exc))
            return False
        self.ctx.status(f"Deleted template {name}", 6000)
        return True

    # ---- editing a template in its own tab -------------------------------------------------------
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
        docs = self._docs
        doc = doc or docs.current
        if doc is None or name not in doc.model.templates:
            self.ctx.status(f"No template {name} in the current model", 5000)
            return None
        for did, s in self.sessions.items():
            if s.owner is doc and s.name == name:
                tab = docs.document_by_id(did)
                if tab is not None:
                    docs.tabs.setCurrentWidget(tab.canvas.widget)
                    return tab
        try:
            model = definition_model(doc.model, name, self.ctx.registry,
                                     instance_dims(doc.model, name, dict(doc.shapes)))
        except LayerLabError as exc:
            self.ctx.warn("Cannot edit the template", str(exc))
            return None
        model.name = f"template {name}"  # the tab's title: "template NAME (new)"
        tab = docs.add_document(model, None)
        self.sessions[tab.id] = _Editing(doc, name, doc.model.templates[name])
        tab.destroyed.connect(lambda *_a, i=tab.id: self.sessions.pop(i, None))
        self.ctx.status(f"Editing template {name} of {doc.title}: File > Save updates its instances", 8000)
        return tab

    def targets(self, session: _Editing) -> list[Document]:
        """The open models to update: the one the template came from and every other with the same definition."""
        open_docs = self._docs.docs
        docs = [session.owner] if session.owner in open_docs else []
        docs += [d for d in open_docs if d is not session.owner and d.id not in self.sessions
                 and d.model.templates.get(session.name) == session.text]
        return docs

    def save_definition(self, tab: Document) -> bool:
        """Write the tab's model back as the template's definition (see the module documentation)."""
        session = self.sessions[tab.id]
        targets = self.targets(session)
        if not targets:
            self.ctx.warn("Cannot save the template", f"the model template {session.name} came from is closed")
            return False
        dropped: set[str] = set()
        for doc in targets:
            try:
                dropped |= set(apply_definition(doc.model, session.name, tab.model, doc.registry))
            except LayerLabError as exc:
                self.ctx.warn("Cannot save the template", str(exc))
                return False
        session.text = session.owner.model.templates.get(session.name, session.text)
        tab.model.mark_clean()
        names = ", ".join(d.title for d in targets)
        if dropped:
            self.ctx.warn("Template saved", f"Template {session.name} saved in {names}. These exposed parameters were "
                                            f"dropped, their layers or parameters are gone: {', '.join(sorted(dropped))}")
        else:
            self.ctx.status(f"Template {session.name} saved in {names}", 8000)
        return True
