"""Nodes made when they are needed, on the canvas side: which layers a view needs, making their nodes (in bulk, with
their neighbours, while idle near the view), and the measured boxes of the layers that have none yet (``canvas.lazy``)."""
from __future__ import annotations

import time
from collections.abc import Iterable

from PySide6 import QtCore, QtGui, QtWidgets

from canvas.constants import (
    BULK_UNINDEXED,
    LINK_PICK_PX,
    PREFETCH_BUDGET_S,
    dims_text,
)
from canvas.lazy import BoxIndex, NodeGeom
from canvas.nodes import (
    LayerNode,
    LayerNodeItem,
    category_color,
    info_size,
    input_port_center,
    input_port_name,
    node_box,
    output_port_center,
)
from canvas.overview import OVERVIEW_LOD
from engine.descriptors import LayerDesc
from engine.groups import compact_labels, short_labels


class LazyCanvasMixin:
    """``ModelCanvas``'s making of nodes as they are needed (large models)."""

    @property
    def lazy(self) -> bool:
        """Whether nodes are made as they are needed (a large model) rather than all at once."""
        return not self._eager

    @property
    def making_nodes(self) -> bool:
        """Whether idle time is still making the nodes near the view."""
        return self._prefetch.isActive()

    def created_count(self) -> int:
        """How many layers have their node items now."""
        return len(self.nodes.created_items())

    def _reader_index(self) -> dict[str, list[str]]:
        """Layer -> the layers that read it (kept until the links change)."""
        if self._readers is None:
            index: dict[str, list[str]] = {}
            for name, spec in self.net_model.layers.items():
                for src in spec.inputs:
                    if src and name not in index.setdefault(src, []):
                        index[src].append(name)
            self._readers = index
        return self._readers

    def _neighbours(self, name: str) -> list[str]:
        """The layers ``name`` reads and the layers reading it."""
        spec = self.net_model.layers.get(name)
        sources = [s for s in spec.inputs if s] if spec is not None else []
        return sources + self._reader_index().get(name, [])

    def _materialize(self, name: str) -> LayerNode:
        """Make ``name``'s node (and its neighbours', so that every link of it is drawn)."""
        if name not in self.net_model.layers:
            raise KeyError(name)
        self._materialize_many([name])
        return self.nodes.created(name)

    def _materialize_many(self, names: Iterable[str], neighbours: bool = True) -> list[str]:
        """Make the nodes of ``names`` that have none (with ``neighbours``, of the layers linked to them too), in
        one bulk pass: items, one layout each, then their links to every node that exists. Returns the names
        made."""
        wanted = [n for n in names if n in self.nodes and self.nodes.created(n) is None and n in self.net_model.layers]
        if neighbours and wanted:
            more = [other for name in wanted for other in self._neighbours(name)
                    if other in self.nodes and self.nodes.created(other) is None]
            wanted = list(dict.fromkeys(wanted + more))
        if not wanted:
            return []
        self._bulk = True
        LayerNodeItem.defer_layout = True
        scene = self.scene()
        reindex = len(wanted) >= BULK_UNINDEXED  # many items placed at once: one index rebuild, not one per move
        if reindex:
            scene.setItemIndexMethod(QtWidgets.QGraphicsScene.ItemIndexMethod.NoIndex)
            QtWidgets.QApplication.setOverrideCursor(QtCore.Qt.CursorShape.WaitCursor)
        try:
            made = [self._create_node(name) for name in wanted]
            for name in wanted:
                self._sync_ports(name)
            LayerNodeItem.defer_layout = False
            for node in made:
                node.view.draw_node()
                node.place_badge()
            fresh = set(wanted)
            readers = self._reader_index()
            for name in wanted:  # links last: each is drawn once, between placed ports
                self._sync_links(name)
            for reader in dict.fromkeys(r for name in wanted for r in readers.get(name, ()) if r not in fresh):
                if self.nodes.created(reader) is not None:
                    self._sync_links(reader)
        finally:
            self._bulk = False
            LayerNodeItem.defer_layout = False
            if reindex:
                scene.setItemIndexMethod(QtWidgets.QGraphicsScene.ItemIndexMethod.BspTreeIndex)
                QtWidgets.QApplication.restoreOverrideCursor()
        if self.overview is not None:
            self.overview.adopt(wanted, made)
        return wanted

    def _geometry(self, name: str) -> NodeGeom:
        """Where ``name``'s node is: measured from its items when it has them (they may be being dragged), else
        from the model (position) and the layout rule (size)."""
        node = self.nodes.created(name)
        if node is not None:
            view = node.view
            outs = node.output_ports()
            return NodeGeom(view.sceneBoundingRect(), tuple(view.color[:3]), view,
                            outs[0].view.sceneBoundingRect().center() if outs else None,
                            [p.view.sceneBoundingRect().center() for p in node.input_ports()])
        return self._predicted(name)

    def _predicted(self, name: str) -> NodeGeom:
        """``name``'s box from the model and the layout rule (kept until the layer changes)."""
        geom = self._geo.get(name)
        if geom is None:
            geom = self._geo[name] = self._measure(name)
        return geom

    def _measure(self, name: str) -> NodeGeom:
        """The box a node for ``name`` would have (the layout rule of its items, without making them)."""
        spec = self.net_model.layers[name]
        desc = self._desc(name)
        n_in = self._wanted_ports(name)
        has_out = desc is None or desc.generates_output
        w, h = node_box(name, [input_port_name(desc, i) for i in range(n_in)], [None] if has_out else [],
                        info_size(self._info_lines(name)))
        x, y = spec.position
        out = QtCore.QPointF(x + output_port_center(w)[0], y + output_port_center(w)[1]) if has_out else None
        ins = [QtCore.QPointF(x + input_port_center(i)[0], y + input_port_center(i)[1]) for i in range(n_in)]
        return NodeGeom(QtCore.QRectF(x, y, w, h), category_color(desc), None, out, ins)

    def node_rect(self, name: str) -> QtCore.QRectF:
        """``name``'s node box on the scene (whether or not its items exist yet)."""
        return self._geometry(name).rect

    def _desc(self, name: str) -> LayerDesc | None:
        node = self.nodes.created(name)
        return node.desc if node is not None else self._node_class(self.net_model.layers[name].type).desc

    def _overview_detail(self, name: str) -> str:
        """The line under a layer's name on the zoomed-out canvas: its output shape, else its type."""
        shape = self._shapes.get(name)
        if shape is not None:
            return dims_text(shape)
        desc = self._desc(name) if name in self.net_model.layers else None
        return desc.display_name if desc is not None else ""

    def _overview_label(self, name: str, compact: bool = False) -> str:
        """A layer's shorter label on the zoomed-out canvas (``engine.groups.short_labels``); ``compact``: the one
        for a box too narrow even for that (``engine.groups.compact_labels``)."""
        if self._labels is None:
            short = short_labels(self.net_model.layers)
            self._labels = {**{(n, False): label for n, label in short.items()},
                            **{(n, True): label for n, label in compact_labels(short).items()}}
        return self._labels.get((name, compact), name)

    def _links(self) -> list[tuple[str, str, int]]:
        """Every link of the model: (source, target, input index)."""
        return [(src, name, i) for name, spec in self.net_model.layers.items() for i, src in enumerate(spec.inputs) if src]


    # ---- nodes made as they are needed (large models) ---------------------------------------------
    def _view_rect(self) -> QtCore.QRectF:
        viewer = self.viewer()
        return viewer.mapToScene(viewer.viewport().rect()).boundingRect()

    def _pending_in(self, area: QtCore.QRectF) -> list[tuple[str, bool, float]]:
        """Layers without a node whose box, or a link of which, crosses ``area``: (name, whether its box does,
        distance from the area's centre), nearest first."""
        pending = self.nodes.pending()
        if not pending:
            return []
        if self._index is not None and self._stale and not self._index.update(self._stale, self._predicted):
            self._index = None
        self._stale.clear()
        if self._index is None:
            self._index = BoxIndex(list(self.nodes), self._predicted, self._links())
        return self._index.crossing(area, set(pending) - set(self._hidden))

    def _make(self, found: list[tuple[str, bool, float]]) -> None:
        """Make the nodes ``_pending_in`` found: those whose box is in the area with their neighbours (every link
        of a shown node drawn), those only reached by a link crossing it alone (the link drawn, nothing more)."""
        self._materialize_many([n for n, by_box, _ in found if by_box])
        self._materialize_many([n for n, by_box, _ in found if not by_box], neighbours=False)

    def _forget(self, name: str) -> None:
        """``name``'s box may have changed: measured again when it is needed."""
        self._geo.pop(name, None)
        self._stale.add(name)
        self._covered = QtCore.QRectF()

    def _before_paint(self) -> None:
        """Before the canvas paints: pick the drawing mode for the scale, and, zoomed in, make the nodes in view
        that have none yet (and their neighbours, so that their links are drawn); then look for more to make
        near the view while idle."""
        if self._eager:
            return
        scale = self.viewer().transform().m11()
        if self.overview is not None:
            self.overview.set_active(scale < OVERVIEW_LOD)
        if not self._fitted or not self.nodes.pending():
            return
        if scale >= OVERVIEW_LOD:
            view = self._view_rect()
            if not self._covered.contains(view):
                self._make(self._pending_in(view))
                self._covered = view
        if not self._prefetch.isActive():
            self._prefetch.start()

    def _prefetch_tick(self) -> None:
        """Idle time: make the nodes nearest the view centre, within what one zoom-in to detail reaches, for at
        most PREFETCH_BUDGET_S per turn of the event loop (so a gesture waits at most that long)."""
        try:
            self._prefetch_near_view()
        except RuntimeError:  # the canvas was closed before the timer came due
            pass

    def _prefetch_near_view(self) -> None:
        if self._eager or not self._fitted or not self.nodes.pending():
            return
        viewer = self.viewer()
        vp = viewer.viewport().rect()
        scale = max(viewer.transform().m11(), OVERVIEW_LOD)
        size = QtCore.QSizeF(2.0 * vp.width() / scale, 2.0 * vp.height() / scale)
        # around the view centre (Zoom In, the keyboard) and the mouse pointer (the wheel zooms at the pointer)
        centers = [viewer.mapToScene(vp.center())]
        cursor = viewer.viewport().mapFromGlobal(QtGui.QCursor.pos())
        if vp.contains(cursor):
            centers.append(viewer.mapToScene(cursor))
        step = size.width() / 8  # the list is redone when the view moved by an eighth of the region or more
        key = (tuple((round(c.x() / step), round(c.y() / step)) for c in centers), round(size.width()), len(self.nodes))
        if key != self._todo_key:  # the view moved: what is near it now, nearest first
            self._todo_key = key
            found: dict[str, tuple[str, bool, float]] = {}
            for c in centers:
                for item in self._pending_in(QtCore.QRectF(c.x() - size.width() / 2, c.y() - size.height() / 2,
                                                           size.width(), size.height())):
                    if item[0] not in found or item[2] < found[item[0]][2]:
                        found[item[0]] = item
            self._todo = sorted(found.values(), key=lambda t: t[2])
        start = time.perf_counter()
        while self._todo and time.perf_counter() - start < PREFETCH_BUDGET_S:
            self._make(self._todo[:2])
            self._todo = [t for t in self._todo[2:] if self.nodes.created(t[0]) is None and t[0] in self.nodes]
        if self._todo:
            self._prefetch.start()

    def _materialize_at(self, pos: QtCore.QPointF) -> None:
        """A press at ``pos``: make the nodes under it and the links near it first, so the press reaches them."""
        if self._eager or not self.nodes.pending():
            return
        tol = max(LINK_PICK_PX, 12.0) / max(self.viewer().transform().m11(), 1e-6)
        self._make(self._pending_in(QtCore.QRectF(pos.x() - tol, pos.y() - tol, 2 * tol, 2 * tol)))

    def _materialize_in_band(self, pos: QtCore.QPoint) -> None:
        """While a rubber band is drawn, the nodes it covers get their items (so that it selects them)."""
        viewer = self.viewer()
        if self._eager or not (viewer.LMB_state and viewer._rubber_band.isActive) or not self.nodes.pending():
            return
        rect = QtCore.QRect(viewer._origin_pos, pos).normalized()
        area = viewer.mapToScene(rect).boundingRect()
        pending = [n for n in self.nodes.pending() if self._geometry(n).rect.intersects(area)]
        self._materialize_many(pending, neighbours=False)

