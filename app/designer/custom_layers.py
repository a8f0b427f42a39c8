"""Custom layers in the designer: Edit > Add Custom Layer… / Edit Custom Layer… / Import… / Export…, the
palette's custom layer menu, applying an edited definition to every open model that has it (one undo step
in each), and the consent prompt before a run executes custom layer code.

Consent: the prompt names the custom layers; the answer "run" is remembered in the settings (key
``customCode/trusted``) against a hash of the custom layer definitions the model carries, so the same
content never asks twice and changed code asks again. Definitions written or edited in the dialog are the
user's own: their digests are remembered there too, so they never ask."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from app.designer.context import Controller, DesignerContext
from app.designer.custom_layer_dialog import DEFINITION_FILTER, CustomLayerDialog
from engine.custom import CONSENT, CustomLayerDef, custom_name, set_definition, used_definitions
from engine.custom.consent import content_hash
from engine.custom.definition import read_definition_file, write_definition_file
from engine.custom.scope import get_definition, remove_definition
from engine.errors import LayerLabError

SETTINGS_KEY = "customCode/trusted"


class CustomLayers(Controller):
    """The designer's custom layers (``window.custom``): its actions, dialog, prompt and file dialogs."""

    def __init__(self, ctx: DesignerContext) -> None:
        super().__init__(ctx)
        self.dialog: CustomLayerDialog | None = None
        self.prompt: QtWidgets.QMessageBox | None = None
        self.file_dialog: QtWidgets.QFileDialog | None = None
        self.act_add = self._action("Add Custom &Layer…", lambda: self.add(), "Describe and implement a new layer: "
                                    "shape script, Python and CUDA code, stored in this model")
        self.act_edit = self._action("&Edit Custom Layer…", lambda: self.edit(), "Edit the selected custom layer's "
                                     "definition (every instance follows)")
        self.act_import = self._action("Import Custom Layer…", lambda: self._ask_file(False),
                                       "Add a custom layer definition from a file")
        self.act_export = self._action("Export Custom Layer…", lambda: self._ask_file(True),
                                       "Write the selected custom layer's definition to a file")
        self._install_menu()
        ctx.palette.custom_action.connect(self._palette_action)

    def _action(self, text: str, slot: Callable[[], Any], tip: str) -> QtGui.QAction:
        act = QtGui.QAction(text, self.ctx.parent)
        act.setStatusTip(tip)
        act.triggered.connect(lambda _checked=False: slot())
        return act

    def _install_menu(self) -> None:
        menu = self.ctx.menu("Edit")
        if menu is not None:
            menu.addSeparator()
            menu.addActions([self.act_add, self.act_edit, self.act_import, self.act_export])

    # ---- what is selected -------------------------------------------------------------------------------
    def selected_custom(self) -> str | None:
        """The custom layer of the single selected layer of the current model, if it is one."""
        doc = self.ctx.documents.current
        if doc is None:
            return None
        names = doc.canvas.selected_layers()
        if len(names) != 1:
            return None
        return custom_name(doc.model.layers[names[0]].type)

    def update_actions(self) -> None:
        doc = self.ctx.documents.current
        chosen = self.selected_custom()
        self.act_add.setEnabled(True)
        self.act_edit.setEnabled(chosen is not None)
        self.act_export.setEnabled(chosen is not None)
        self.act_import.setEnabled(doc is not None)

    # ---- the dialog -------------------------------------------------------------------------------------
    def add(self) -> CustomLayerDialog:
        """Open the dialog for a new custom layer of the current model (one is created if none is open)."""
        doc = self.ctx.documents.current or self.ctx.documents.new_model()
        return self._open(CustomLayerDialog(None, set(doc.model.custom_layers), self.ctx.parent))

    def edit(self, name: str | None = None) -> CustomLayerDialog | None:
        """Open the dialog on custom layer ``name`` (default: the selected layer's) of the current model."""
        doc = self.ctx.documents.current
        name = name or self.selected_custom()
        if doc is None or name is None:
            self._status("Select a custom layer to edit its definition")
            return None
        try:
            defn = get_definition(doc.model, name)
        except LayerLabError as exc:
            self.ctx.warn("Cannot edit the custom layer", str(exc))
            return None
        return self._open(CustomLayerDialog(defn, set(doc.model.custom_layers), self.ctx.parent))

    def _open(self, dialog: CustomLayerDialog) -> CustomLayerDialog:
        if self.dialog is not None:
            self.dialog.close()
        dialog.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.definition_accepted.connect(self.apply)
        dialog.finished.connect(lambda _result, closed=dialog: self._closed(closed))
        self.dialog = dialog
        dialog.open()
        return dialog

    def _closed(self, dialog: CustomLayerDialog) -> None:
        """The dialog closed (OK, Cancel, Esc): it deletes itself, so it is forgotten."""
        if self.dialog is dialog:
            self.dialog = None

    def apply(self, defn: CustomLayerDef, old_name: str | None) -> bool:
        """Add ``defn`` to the current model, or (editing ``old_name``) replace it in every open model that holds
        the same definition: one undo step in each, instances follow. The user wrote it: no consent
        prompt for it."""
        doc = self.ctx.documents.current
        if doc is None:
            return False
        if old_name is None:
            targets = [doc]
        else:  # the models holding the same definition (another model's own layer of that name is left alone)
            same = doc.model.custom_layers.get(old_name)
            targets = [doc, *(d for d in self.ctx.documents.docs if d is not doc and d.model.custom_layers.get(old_name) == same)]
        try:
            for d in targets:
                set_definition(d.model, defn, old_name)
        except LayerLabError as exc:
            self.ctx.warn("Cannot save the custom layer", str(exc))
            return False
        CONSENT.grant([defn])
        self._remember(defn.digest())  # the user's own code: no prompt for it in later sessions either
        where = f" in {len(targets)} open models" if len(targets) > 1 else ""
        self._status(f"{'Added' if old_name is None else 'Updated'} custom layer {defn.name}{where}")
        if old_name is None:
            self._add_layer(defn.type)
        return True

    def delete(self, name: str) -> bool:
        doc = self.ctx.documents.current
        if doc is None:
            return False
        try:
            remove_definition(doc.model, name)
        except LayerLabError as exc:
            self.ctx.warn("Cannot delete the custom layer", str(exc))
            return False
        self._status(f"Deleted custom layer {name}")
        return True

    def _palette_action(self, action: str, name: str) -> None:
        if action == "add":
            self._add_layer(f"custom:{name}")
        elif action == "edit":
            self.edit(name)
        elif action == "export":
            self._ask_file(True, name)
        elif action == "delete":
            self.delete(name)

    # ---- files ------------------------------------------------------------------------------------------
    def export_definition(self, name: str, path: str | Path) -> bool:
        doc = self.ctx.documents.current
        try:
            write_definition_file(get_definition(doc.model, name), path)
        except (LayerLabError, OSError) as exc:
            self.ctx.warn("Cannot export the custom layer", str(exc))
            return False
        self._status(f"Wrote custom layer {name} to {path}")
        return True

    def import_definition(self, path: str | Path) -> str | None:
        """Add the definition in ``path`` to the current model; returns its name (None, with a message, when it
        cannot be read or its name is taken). Its code will need consent before it runs."""
        doc = self.ctx.documents.current or self.ctx.documents.new_model()
        try:
            defn = read_definition_file(path)
            set_definition(doc.model, defn)
        except LayerLabError as exc:
            self.ctx.warn("Cannot import the custom layer", str(exc))
            return None
        self._status(f"Imported custom layer {defn.name} from {path}")
        return defn.name

    def _ask_file(self, save: bool, name: str | None = None) -> None:
        name = name or self.selected_custom()
        if save and name is None:
            self._status("Select a custom layer to export its definition")
            return
        dlg = QtWidgets.QFileDialog(self.ctx.parent, "Export Custom Layer" if save else "Import Custom Layer")
        dlg.setOption(QtWidgets.QFileDialog.Option.DontUseNativeDialog)
        dlg.setNameFilter(DEFINITION_FILTER)
        if save:
            dlg.setAcceptMode(QtWidgets.QFileDialog.AcceptMode.AcceptSave)
            dlg.setDefaultSuffix("xml")
            dlg.selectFile(f"{name}.custom-layer.xml")
            dlg.fileSelected.connect(lambda path, n=name: self.export_definition(n, path))
        else:
            dlg.fileSelected.connect(self.import_definition)
        self.file_dialog = dlg
        dlg.open()

    # ---- consent ------------------------------------------------------------------------------------------
    def trusted_hashes(self) -> list[str]:
        value = self.ctx.settings.value(SETTINGS_KEY, [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in value or []]

    def _remember(self, key: str) -> None:
        known = [k for k in self.trusted_hashes() if k != key]
        self.ctx.settings.setValue(SETTINGS_KEY, [*known, key][-500:])

    def ensure_consent(self, doc: Any, then: Callable[[], Any]) -> bool:
        """True when ``doc``'s custom layer code may run now. Otherwise ask (a prompt that does not block,
        ``self.prompt``, naming the custom layers): on "Run", remember the content hash, give consent and call
        ``then``; on "Cancel", say that nothing ran. Returns False while asking."""
        trusted = set(self.trusted_hashes())
        CONSENT.grant(d for d in used_definitions(doc.model) if d.digest() in trusted)  # written in this designer
        missing = CONSENT.missing(used_definitions(doc.model))
        if not missing:
            return True
        key = content_hash(doc.model.custom_layers.values())
        if key in trusted:
            CONSENT.grant(missing)
            return True
        names = ", ".join(sorted(d.name for d in missing))
        box = QtWidgets.QMessageBox(
            QtWidgets.QMessageBox.Icon.Warning, "Run custom layer code?",
            f"{doc.title} carries code in its custom layers: <b>{names}</b>.<br><br>Running the network executes this "
            "Python and CUDA code on this computer with your permissions. Run it only if you trust where the file "
            "comes from.<br><br>The answer is remembered for this content; changed code asks again.",
            QtWidgets.QMessageBox.StandardButton.NoButton, self.ctx.parent)
        box.setObjectName("CustomCodeConsent")
        run = box.addButton("Run the Code", QtWidgets.QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QtWidgets.QMessageBox.StandardButton.Cancel)
        box.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)

        def answered(_result: int) -> None:
            self.prompt = None
            if box.clickedButton() is run:
                self._remember(key)
                CONSENT.grant(missing)
                then()
            else:
                self._status(f"Not run: the custom layer code of {names} was not trusted")

        box.finished.connect(answered)
        self.prompt = box
        box.open()
        return False

    def _add_layer(self, layer_type: str) -> None:
        doc = self.ctx.documents.current or self.ctx.documents.new_model()
        doc.canvas.add_layer(layer_type)

    def _status(self, text: str) -> None:
        self.ctx.status(text, 8000)
