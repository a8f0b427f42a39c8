"""Editing operations on the canvas (menus and tests call these): adding layers at free spots, selection, focus,
delete, copy, cut, paste, duplicate, arrange, fit, zoom and the grid."""
from __future__ import annotations

from collections.abc import Iterable

from NodeGraphQt.constants import ViewerEnum
from NodeGraphQt.qgraphics.port import PortItem
from PySide6 import QtCore, QtGui

from canvas.clipboard import clipboard_templates, copy_layers, paste_specs
from canvas.constants import (
    FOCUS_SCALE,
    FREE_GAP,
    NODE_SIZE_GUESS,
    snap_position,
)
from canvas.groups import BOX_SIZE
from canvas.overview import OVERVIEW_LOD
from engine.groups import COLLAPSE_LAYERS
from engine.layout import expanded_drawing, grouped_drawing, layered_drawing, readable_drawing
from engine.templates import find_desc


class CanvasEditingMixin:
    """``ModelCanvas``'s editing and view operations."""

    # ---- editing operations (menus and tests call these) -----------------------------------------
    def view_center(self) -> tuple[float, float]:
        vp = self.viewer().viewport().rect().center()
        p = self.viewer().mapToScene(vp)
        return snap_position((p.x() - NODE_SIZE_GUESS[0] / 2, p.y() - NODE_SIZE_GUESS[1] / 2))

    def free_center(self) -> tuple[float, float]:
        """Where a new layer goes: the view centre, or the first free place below it (never on another node)."""
        return self.free_spot(*self.view_center())

    def add_layer(self, layer_type: str, pos: tuple[float, float] | None = None) -> str | None:
        """Add a layer of ``layer_type`` (a plugin layer or ``template:NAME``; at the view centre by default),
        select it, return its name."""
        if find_desc(self.net_model, self.registry, layer_type) is None:
            self.status_message.emit(f"Unknown layer type {layer_type!r}")
            return None
        name = self.net_model.add_layer(layer_type, position=pos or self.free_center())
        self.select_layers([name])
        self.status_message.emit(f"Added {name}")
        return name

    def free_spot(self, x: float, y: float, size: tuple[float, float] = NODE_SIZE_GUESS,
                  step: float | None = None, ignore: str | None = None) -> tuple[float, float]:
        """The first position from (x, y) downwards where a node of ``size`` overlaps no other node (``ignore``:
        the layer being placed, when it is on the canvas already)."""
        step = step or size[1] + FREE_GAP / 2
        column = QtCore.QRectF(x, y, *size).adjusted(-FREE_GAP / 4, -FREE_GAP / 4, FREE_GAP / 4, 200 * step)
        boxes = [r for r in (self.node_rect(n) for n in self.nodes if n != ignore) if r.intersects(column)]
        for i in range(200):
            rect = QtCore.QRectF(x, y + i * step, *size).adjusted(-FREE_GAP / 4, -FREE_GAP / 4, FREE_GAP / 4, FREE_GAP / 4)
            if not any(r.intersects(rect) for r in boxes):
                return snap_position((x, y + i * step))
        return snap_position((x, y))

    def clear_of_others(self, name: str) -> None:
        """Move layer ``name`` down to the first place where its node overlaps no other node (nothing when it
        overlaps none): a node that grew, such as a new template instance, must not hide its neighbours."""
        rect = self.node_rect(name)
        if any(rect.intersects(self.node_rect(n)) for n in self.nodes if n != name):
            self.net_model.move_layer(name, self.free_spot(rect.x(), rect.y(), (rect.width(), rect.height()),
                                                           ignore=name))

    def add_layer_at_port(self, item: PortItem) -> str | None:
        """Double-click on a free port: create an input (output) layer linked to it, in free space beside the
        port (left of an input, right of the output)."""
        ref = self._port_ref(item)
        if ref is None or item.connected_pipes:
            return None
        name, idx = ref
        layer_type = "output" if idx is None else "input"
        if self.registry.find_layer(layer_type) is None:
            return None
        node_rect = self.nodes[name].view.sceneBoundingRect()
        port_y = item.sceneBoundingRect().center().y() - NODE_SIZE_GUESS[1] / 2
        if idx is None:
            pos = self.free_spot(node_rect.right() + FREE_GAP, port_y)
        else:
            pos = self.free_spot(node_rect.left() - FREE_GAP - NODE_SIZE_GUESS[0], port_y)
        with self.net_model.macro(f"Add {layer_type} for {name}"):
            new = self.net_model.add_layer(layer_type, position=pos)
            if idx is None:
                self.net_model.connect(name, new, 0)
            else:
                self.net_model.connect(new, name, idx)
        self.select_layers([new])
        self.status_message.emit(f"Added {new} linked to {name}")
        return new

    def select_layers(self, names: Iterable[str]) -> None:
        """Select exactly ``names`` (their nodes are made if they have none yet)."""
        wanted = [n for n in dict.fromkeys(names) if n in self.nodes]
        self._materialize_many(wanted)
        self.clear_selection()
        for name in wanted:
            self.nodes[name].view.selected = True  # (not set_selected: it pushes onto NodeGraphQt's unused undo stack)
        self.selection_changed.emit(self.selected_layers())

    def focus_layer(self, name: str) -> None:
        """Select ``name`` and centre the view on it, zoomed in to where its ports and parameters are drawn when
        the view was zoomed out further (a Type Check row of a large model, a report's layer)."""
        if name in self.nodes:
            self._fitted = True
            self.select_layers([name])
            if self.viewer().transform().m11() < FOCUS_SCALE:
                self.zoom_to(name, FOCUS_SCALE)
            else:
                self.center_on([self.nodes[name]])

    def delete_selection(self) -> None:
        """Delete the selected nodes, or else the selected links."""
        names = self.selected_layers()
        if names:
            self.net_model.remove_layers(names)
            self.status_message.emit(f"Deleted {len(names)} layer(s)")
            return
        cuts = []
        for pipe in self.viewer().selected_pipes():
            ref = self._port_ref(pipe.input_port)
            if ref and ref[1] is not None:
                cuts.append(ref)
        if cuts:
            with self.net_model.macro("Delete links"):
                for dst, idx in cuts:
                    self.net_model.disconnect(dst, idx)
            for dst, _ in cuts:
                self._sync_links(dst)

    def copy_selection(self) -> str | None:
        names = self.selected_layers()
        if not names:
            return None
        text = copy_layers(self.net_model, names)
        mime = QtCore.QMimeData()
        mime.setData("application/x-layerlab-layers", text.encode())
        mime.setText(text)
        QtGui.QGuiApplication.clipboard().setMimeData(mime)
        return text

    def cut_selection(self) -> None:
        names = self.selected_layers()
        if self.copy_selection():
            with self.net_model.macro("Cut"):
                self.net_model.remove_layers(names)

    def cursor_scene_pos(self) -> QtCore.QPointF | None:
        """Where the mouse pointer is on the canvas (None when it is outside the canvas)."""
        viewer = self.viewer()
        local = viewer.viewport().mapFromGlobal(QtGui.QCursor.pos())
        return viewer.mapToScene(local) if viewer.viewport().rect().contains(local) else None

    def paste(self, text: str | None = None, at: tuple[float, float] | None = None) -> list[str]:
        """Paste layers (from the clipboard by default) with their top-left corner at ``at``: by default at the
        mouse pointer when it is on the canvas, else beside the copied layers' own places (never on top of
        them); returns the new names."""
        if text is None:
            mime = QtGui.QGuiApplication.clipboard().mimeData()
            text = bytes(mime.data("application/x-layerlab-layers")).decode() if mime else ""
            text = text or QtGui.QGuiApplication.clipboard().text()
        try:
            specs = paste_specs(self.net_model, text, (0.0, 0.0))
        except (ValueError, TypeError, KeyError):
            self.status_message.emit("Nothing to paste: the clipboard holds no layers")
            return []
        if not specs:
            return []
        left = min(sp.position[0] for sp in specs)
        top = min(sp.position[1] for sp in specs)
        if at is None:
            cursor = self.cursor_scene_pos()
            if cursor is not None:
                at = (cursor.x(), cursor.y())
            else:
                right = max(sp.position[0] for sp in specs) + NODE_SIZE_GUESS[0]
                at = self.free_spot(right + FREE_GAP, top)
        for sp in specs:
            sp.position = snap_position((sp.position[0] - left + at[0], sp.position[1] - top + at[1]))
        needed = clipboard_templates(text)
        kept = [n for n, t in needed.items() if n in self.net_model.templates and self.net_model.templates[n] != t]
        custom = clipboard_templates(text, "custom-layers")
        kept += [n for n, t in custom.items() if self.net_model.custom_layers.get(n, t) != t]
        with self.net_model.macro("Paste"):
            for n, t in custom.items():
                if n not in self.net_model.custom_layers:
                    self.net_model.set_custom_layer(n, t)
            for n, t in needed.items():
                if n not in self.net_model.templates:
                    self.net_model.add_template(n, t)
            self.net_model.add_layers(specs, "Paste")
        names = [s.name for s in specs]
        self.select_layers(names)
        note = f" (this network's own definition of {', '.join(kept)} used)" if kept else ""
        self.status_message.emit(f"Pasted {len(names)} layer(s){note}")
        return names

    def duplicate_selection(self) -> list[str]:
        names = self.selected_layers()
        return self.paste(copy_layers(self.net_model, names)) if names else []

    def select_all_layers(self) -> None:
        self.select_layers(list(self.nodes))

    def arrange(self, names: Iterable[str] | None = None, fold: bool = False) -> int:
        """Lay out ``names`` (default: every layer) left to right by depth (engine.layout, igraph), from the
        top-left corner they occupy now, as one undo step; returns how many layers moved. With ``fold`` (every
        layer), a drawing much wider than the view is folded into bands (how an import is placed). Links are then
        drawn along the layout's routes (``canvas.routes``); the collapsed groups are laid out as blocks, and a
        network with groups (or a large one) drawn expanded in banded blocks (``engine.layout.expanded_drawing``)."""
        wanted = set(names) if names is not None else set(self.nodes)
        layers = {n: s for n, s in self.net_model.layers.items() if n in wanted and n in self.nodes}
        if not layers:
            return 0
        sizes = self.node_sizes(layers)
        origin = (min(s.position[0] for s in layers.values()), min(s.position[1] for s in layers.values()))
        collapsed = self.collapsed_groups() if names is None else set()
        vp = self.viewer().viewport().size()
        aspect = vp.width() / vp.height() if vp.height() > 50 and vp.width() > 50 else 1.6
        if collapsed:  # each collapsed group's layers together, where its box stands
            drawing = grouped_drawing(layers, sizes, collapsed, aspect, BOX_SIZE)
        elif names is None and (self._groups or len(layers) > COLLAPSE_LAYERS):  # banded blocks (canvas.unfold)
            drawing = expanded_drawing(layers, sizes, aspect)
        elif fold and names is None:
            drawing = readable_drawing(layers, sizes, aspect)
        else:
            drawing = layered_drawing(layers, sizes, origin)
        positions = drawing.positions
        moves = [(n, p) for n, p in positions.items() if n in layers and tuple(layers[n].position) != p]
        if moves:
            with self.net_model.macro("Arrange " + (f"{len(moves)} layers" if names is not None else "network")):
                for name, pos in moves:
                    self.net_model.move_layer(name, pos)
        if names is None:
            self._block_rects = {p: QtCore.QRectF(*r) for p, r in drawing.blocks.items()}
            self._refresh_groups()  # the boxes stand where their layers went
        self.set_routes(drawing.bends, replace=names is None)
        if names is None and not collapsed and drawing is not None and self._groups:
            self._schedule_routes()  # the links between banded blocks: found from the boxes
        self.status_message.emit(f"Arranged {len(layers)} layer(s)" if moves else "Already arranged")
        return len(moves)

    def node_sizes(self, names: Iterable[str]) -> dict[str, tuple[float, float]]:
        """(width, height) of the nodes of ``names`` (whether or not their items exist yet)."""
        return {n: (r.width(), r.height()) for n, r in ((n, self.node_rect(n)) for n in names)}

    def fit(self) -> None:
        """Frame the whole network (never magnified beyond 1:1)."""
        if not self.nodes:
            return
        self._fitted = True
        viewer = self.viewer()
        for _ in range(2 if self.framed_groups() else 1):  # the frames' titles take room by the scale: fit again
            rect = self._shown_rect().united(self.frames_rect()).adjusted(-40, -40, 40, 40)
            vp = viewer.viewport().size()
            if rect.width() < vp.width() and rect.height() < vp.height():
                center = rect.center()
                rect = QtCore.QRectF(0, 0, vp.width(), vp.height())
                rect.moveCenter(center)
            viewer._scene_range = rect
            viewer._update_scene()
            self._place_frames()
        self._follow_zoom()

    def zoom_to(self, name: str, scale: float = 1.0) -> None:
        """Show layer ``name`` at the centre of the view at ``scale`` (1.0: one scene unit per pixel)."""
        viewer = self.viewer()
        vp = viewer.viewport().size()
        rect = QtCore.QRectF(0, 0, vp.width() / scale, vp.height() / scale)
        rect.moveCenter(self.node_rect(name).center())
        self._fitted = True
        viewer._scene_range = rect
        viewer._update_scene()
        self._follow_zoom()

    def _follow_zoom(self) -> None:
        """Pick the drawing mode for the new scale now (wheel zooms are caught when the overview paints)."""
        if self.overview is not None:
            self.overview.set_active(self.viewer().transform().m11() < OVERVIEW_LOD)

    def zoom(self, steps: int) -> None:
        """Zoom in (positive) or out (negative) by 10% steps around the view centre."""
        self._fitted = True
        for _ in range(abs(steps)):
            self.viewer()._set_viewer_zoom(1.0 if steps > 0 else -1.0, 0.0)
        self._follow_zoom()

    def show_grid(self, on: bool) -> None:
        self._grid = on
        self.set_grid_mode(ViewerEnum.GRID_DISPLAY_LINES.value if on else ViewerEnum.GRID_DISPLAY_NONE.value)

    @property
    def grid_shown(self) -> bool:
        return self._grid

