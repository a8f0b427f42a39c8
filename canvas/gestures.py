"""User gestures on the canvas turned into Model commands: connecting and detaching ports, moving, renaming, dropping
palette entries and files, selecting."""
from __future__ import annotations

from typing import Any

from NodeGraphQt.qgraphics.port import PortItem
from PySide6 import QtCore

from canvas.constants import (
    DRAG_PREFIX,
    snap_position,
)
from engine.errors import LayerLabError


class GesturesMixin:
    """``ModelCanvas``'s answers to NodeGraphQt's gesture signals."""

    # ---- user gestures -> Model commands ---------------------------------------------------------
    def _port_ref(self, item: PortItem) -> tuple[str, int | None] | None:
        """(layer, input index or None for the output) of a port view item."""
        name = self.layer_of(item.node)
        if name is None:
            return None
        if item.port_type == "out":
            return name, None
        views = [p.view for p in self.nodes[name].input_ports()]
        return (name, views.index(item)) if item in views else None

    def _on_connection_changed(self, disconnected: list, connected: list) -> None:  # noqa: D401 (NodeGraphQt slot)
        """The viewer reports links the user made or removed; apply them to the Model."""
        touched: set[str] = set()
        links = []
        for a, b in connected:
            ra, rb = self._port_ref(a), self._port_ref(b)
            if not ra or not rb:
                continue
            (src, _), (dst, idx) = (ra, rb) if ra[1] is None else (rb, ra)
            links.append((src, dst, idx))
            touched.add(dst)
        cuts = []
        for a, b in disconnected:
            ra, rb = self._port_ref(a), self._port_ref(b)
            if not ra or not rb:
                continue
            dst, idx = ra if ra[1] is not None else rb
            touched.add(dst)
            if not any(d == dst and i == idx for _, d, i in links):
                cuts.append((dst, idx))
        refused = [(src, dst) for src, dst, _ in links if self.net_model.depends_on(src, dst)]
        if refused:
            src, dst = refused[0]
            self.status_message.emit(f"Link refused: linking {src} to {dst} would create a cycle")
        else:
            try:
                with self.net_model.macro("Connect" if links else "Disconnect"):
                    for dst, idx in cuts:
                        self.net_model.disconnect(dst, idx)
                    for src, dst, idx in links:
                        self.net_model.connect(src, dst, idx)
            except LayerLabError as exc:
                self.status_message.emit(f"Link refused: {exc}")
        for dst in touched:
            self._sync_links(dst)

    def _on_connection_sliced(self, ports: list) -> None:
        self._on_connection_changed(ports, [])

    def _on_insert_node(self, pipe: Any, node_id: str, prev_node_pos: dict) -> None:
        pass  # dropping a node onto a link does nothing; links are made explicitly

    def _on_nodes_moved(self, node_data: dict) -> None:
        moves = []
        for view in node_data:
            name = self.layer_of(view)
            if name is not None:
                moves.append((name, tuple(view.xy_pos)))
        if not moves:
            return
        try:
            with self.net_model.macro("Move " + ", ".join(n for n, _ in moves)):
                for name, pos in moves:
                    self.net_model.move_layer(name, snap_position(pos))
        except LayerLabError as exc:  # a read-only model (analysis mode): the nodes go back where they were
            for name, _ in moves:
                x, y = self.net_model.layers[name].position
                self.nodes[name].set_pos(x, y)
            self.status_message.emit(f"Move refused: {exc}")

    def _on_node_name_changed(self, node_id: str, name: str) -> None:
        node = self.get_node_by_id(node_id)
        old = self.layer_of(node)
        if old is None or old == name:
            return
        try:
            self.net_model.rename_layer(old, name)
        except LayerLabError as exc:
            self.status_message.emit(f"Rename refused: {exc}")
            node.view.name = old
            node.view.draw_node()

    def _on_search_triggered(self, node_type: str, pos: tuple) -> None:
        for layer_type, cls in self._classes.items():
            if cls.type_ == node_type:
                self.add_layer(layer_type, (pos[0], pos[1]))

    def _on_node_data_dropped(self, mimedata: QtCore.QMimeData, pos: QtCore.QPoint) -> None:
        files = [u.toLocalFile() for u in mimedata.urls() if u.isLocalFile()] if mimedata.hasUrls() else []
        if files:
            self.files_dropped.emit(files)
            return
        text = mimedata.text() if mimedata.hasText() else ""
        if text.startswith(DRAG_PREFIX):
            self.add_layer(text[len(DRAG_PREFIX):], (float(pos.x()), float(pos.y())))

    def _on_selection(self, selected: list, deselected: list) -> None:
        self.selection_changed.emit(self.selected_layers())

    def _node_moved(self, view: Any) -> None:
        """A node item moved (dragged, or placed from the model): refresh the overview and the frames once, after
        the moves."""
        name = view if isinstance(view, str) else self.layer_of(view)  # (a node item, or a layer moved in the model)
        self._moved.update([name] if name is not None else [])
        self._frames_later()
        if not self._moves_pending:
            self._moves_pending = True
            QtCore.QTimer.singleShot(0, self, self._after_moves)  # (none once the canvas is gone)

    def _after_moves(self) -> None:
        self._moves_pending = False
        moved, self._moved = self._moved, set()
        if self.overview is not None:
            self.overview.invalidate(moved)
