"""Edit and View commands on the current canvas: cut, copy, paste, duplicate, delete, select all, arrange, the grid,
fit and zoom, the layer right-click menu's Precision and Layout entries, and adding a layer from the palette."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from app.designer.context import Controller, DesignerContext
from app.designer.document import Document
from engine.errors import LayerLabError


def make_action(parent: QtWidgets.QWidget, text: str, slot: Callable[[], Any],
                shortcut: QtGui.QKeySequence | str | QtGui.QKeySequence.StandardKey | None = None,
                icon: QtWidgets.QStyle.StandardPixmap | None = None, tip: str = "") -> QtGui.QAction:
    """A menu action of ``parent`` calling ``slot()``."""
    act = QtGui.QAction(text, parent)
    if shortcut is not None:
        act.setShortcut(QtGui.QKeySequence(shortcut))
    if icon is not None:
        act.setIcon(parent.style().standardIcon(icon))
    if tip:
        act.setStatusTip(tip)
    act.triggered.connect(lambda _checked=False: slot())
    return act


class Editing(Controller):
    """The edit and view actions (``act_*``) acting on the current document's canvas."""

    def __init__(self, ctx: DesignerContext) -> None:
        super().__init__(ctx)
        K, P = QtGui.QKeySequence.StandardKey, QtWidgets.QStyle.StandardPixmap
        a = lambda *args: make_action(ctx.parent, *args)  # noqa: E731
        on = self.with_doc
        self.act_cut = a("Cu&t", lambda: on(lambda d: d.canvas.cut_selection()), K.Cut)
        self.act_copy = a("&Copy", lambda: on(lambda d: d.canvas.copy_selection()), K.Copy)
        self.act_paste = a("&Paste", lambda: on(lambda d: d.canvas.paste()), K.Paste)
        self.act_duplicate = a("D&uplicate", lambda: on(lambda d: d.canvas.duplicate_selection()), "Ctrl+D")
        self.act_delete = a("&Delete", lambda: on(lambda d: d.canvas.delete_selection()), K.Delete)
        self.act_select_all = a("Select &All", lambda: on(lambda d: d.canvas.select_all_layers()), K.SelectAll)
        self.act_grid = a("Show &Grid", lambda: self.set_grid(self.act_grid.isChecked()))
        self.act_grid.setCheckable(True)
        self.act_grid.setChecked(True)
        self.act_fit = a("&Fit to View", lambda: on(lambda d: d.canvas.fit()), "F", P.SP_FileDialogContentsView,
                         "Show the whole network")
        self.act_arrange = a("&Arrange", self.arrange, "Ctrl+L", None,
                             "Lay the network out left to right by depth (the selection only, when several layers "
                             "are selected); one undo step")
        self.act_find = a("&Find…", lambda: on(lambda d: d.canvas.show_find()), K.Find, None,
                          "Find layers by name or type (Enter: next, Shift+Enter: previous)")
        self.act_expand_all = a("E&xpand All Groups", lambda: on(lambda d: d.canvas.expand_all()), None, None,
                                "Draw every layer of every group")
        self.act_collapse_all = a("&Collapse All Groups", lambda: on(lambda d: d.canvas.collapse_all()), None, None,
                                  "Draw each top-level group as one box (double-click a box to expand it)")
        self.act_zoom_in = a("Zoom &In", lambda: self._zoom(1), K.ZoomIn)
        self.act_zoom_out = a("Zoom &Out", lambda: self._zoom(-1), K.ZoomOut)
        for act in (self.act_delete, self.act_select_all, self.act_fit, self.act_find):
            act.setShortcutContext(QtCore.Qt.ShortcutContext.WindowShortcut)
        self._format_actions: list[tuple[str, QtGui.QAction]] | None = None

    def with_doc(self, fn: Callable[[Document], Any]) -> None:
        """Call ``fn`` on the current document; a refusal goes to the status bar."""
        doc = self.ctx.documents.current
        if doc is not None:
            try:
                fn(doc)
            except LayerLabError as exc:
                self.ctx.status(str(exc), 8000)

    def format_menu_items(self) -> list[tuple[str, QtGui.QAction]]:
        """The layer right-click menu's Precision and Layout entries (``app.layer_format``), made once."""
        from app import layer_format as lf  # noqa: PLC0415

        if self._format_actions is None:
            on = self.with_doc
            items = [(f"Precision: {c}", lambda c=c: on(
                lambda d: lf.set_precision(d.model, d.canvas.selected_layers(), c))) for c in lf.PRECISION_CHOICES]
            items += [(f"Layout: {c}", lambda c=c: on(
                lambda d: lf.set_layout(d.model, d.canvas.selected_layers(), c))) for c in lf.LAYOUT_CHOICES]
            self._format_actions = [(text, make_action(self.ctx.parent, text, slot)) for text, slot in items]
        return self._format_actions

    def add_layer(self, layer_type: str) -> str | None:
        """Add a layer at the centre of the current canvas (a new model is created if none is open)."""
        doc = self.ctx.documents.current or self.ctx.documents.new_model()
        return doc.canvas.add_layer(layer_type)

    def focus_layer(self, name: str) -> None:
        """Select ``name`` on the current canvas and bring it into view."""
        doc = self.ctx.documents.current
        if doc is not None and name in doc.canvas.nodes:
            doc.canvas.focus_layer(name)

    def arrange(self) -> int:
        """Edit > Arrange: a layered layout of the current network (of the selection when it holds several
        layers), undoable in one step; the view is fitted to the result."""
        doc = self.ctx.documents.current
        if doc is None:
            return 0
        selected = doc.canvas.selected_layers()
        moved = doc.canvas.arrange(selected if len(selected) > 1 else None)
        if moved:
            doc.canvas.fit()
        return moved

    def set_grid(self, on: bool) -> None:
        """View > Show Grid, on every canvas."""
        self.act_grid.setChecked(on)
        for doc in self.ctx.documents.docs:
            doc.canvas.show_grid(on)

    def _zoom(self, steps: int) -> None:
        doc = self.ctx.documents.current
        if doc is not None:
            doc.canvas.zoom(steps)

    def update_actions(self, doc: Document | None) -> None:
        """Enable what applies to ``doc`` (the current document) and its selection."""
        has = doc is not None
        selected = has and bool(doc.canvas.selected_layers())
        for act in (self.act_cut, self.act_copy, self.act_duplicate):
            act.setEnabled(selected)
        for act in (self.act_paste, self.act_delete, self.act_select_all, self.act_fit, self.act_zoom_in,
                    self.act_zoom_out, self.act_arrange, self.act_find, self.act_expand_all, self.act_collapse_all):
            act.setEnabled(has)
