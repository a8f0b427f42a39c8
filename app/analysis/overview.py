"""The Network Overview: the built network flattened in execution order (fused layers shown as fused),
one glyph per layer with its name, type, current shape and status. Selecting a layer draws its input
links in yellow and its output links in blue. Right-click: Add / Remove Breakpoint, Inspect Channels;
double-click opens the channel inspector. With Profile Layer Timings on, each glyph shows the layer's
latest time; after Compare Precision each glyph is coloured by its drift against fp32."""
from __future__ import annotations

from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from engine.analysis import OverviewItem, drift_colour, link_roles

GLYPH_W, GLYPH_H, GAP = 230.0, 62.0, 22.0
LINK_COLOURS = {"input": QtGui.QColor(240, 210, 40), "output": QtGui.QColor(70, 150, 255), "": QtGui.QColor(110, 114, 122)}
FILL = QtGui.QColor(52, 56, 64)
FILL_IO = QtGui.QColor(46, 64, 58)
FILL_FUSED = QtGui.QColor(66, 56, 78)


class Glyph(QtWidgets.QGraphicsRectItem):
    """One layer of the overview."""

    def __init__(self, item: OverviewItem, y: float) -> None:
        super().__init__(0, 0, GLYPH_W, GLYPH_H)
        self.item = item
        self.setPos(0, y)
        self.setFlag(QtWidgets.QGraphicsItem.GraphicsItemFlag.ItemIsSelectable, True)
        self.setAcceptHoverEvents(True)
        self.breakpoint = False
        self.paused = False
        self.time_ms: float | None = None
        self.drift: tuple[float, tuple[int, int, int]] | None = None
        self.name_text = QtWidgets.QGraphicsSimpleTextItem(self)
        f = QtGui.QFont()
        f.setBold(True)
        self.name_text.setFont(f)
        self.name_text.setPos(16, 4)
        self.detail = QtWidgets.QGraphicsSimpleTextItem(self)
        self.detail.setPos(16, 22)
        self.status = QtWidgets.QGraphicsSimpleTextItem(self)
        self.status.setPos(16, 40)
        for t in (self.name_text, self.detail, self.status):
            t.setBrush(QtGui.QColor(225, 225, 225))
        self.detail.setBrush(QtGui.QColor(170, 176, 186))
        self.marker = QtWidgets.QGraphicsEllipseItem(-7, GLYPH_H / 2 - 6, 12, 12, self)
        self.marker.setBrush(QtGui.QColor(220, 50, 50))
        self.marker.setPen(QtGui.QPen(QtGui.QColor(255, 220, 220), 1))
        self.update_item(item)

    def update_item(self, item: OverviewItem) -> None:
        self.item = item
        self.name_text.setText(item.name)
        self.detail.setText(f"{item.type}   {item.shape}")
        self.refresh()

    def refresh(self) -> None:
        item = self.item
        parts = [item.status] if item.status else []
        if self.time_ms is not None:
            parts.append(f"{self.time_ms:.3f} ms")
        if self.drift is not None:
            parts.append(f"drift {self.drift[0]:.2e}")
        if self.paused:
            parts.insert(0, "▶ paused here")
        text = "  ·  ".join(parts)
        metrics = QtGui.QFontMetricsF(self.status.font())
        self.status.setText(metrics.elidedText(text, QtCore.Qt.TextElideMode.ElideRight, GLYPH_W - 22))
        self.status.setBrush(QtGui.QColor(240, 180, 60) if self.paused else QtGui.QColor(200, 200, 200))
        if self.drift is not None:
            fill = QtGui.QColor(*self.drift[1]).darker(190)
        elif item.fused_from:
            fill = FILL_FUSED
        elif item.is_input or item.is_output:
            fill = FILL_IO
        else:
            fill = FILL
        self.setBrush(fill)
        pen = QtGui.QPen(QtGui.QColor(240, 170, 40) if self.paused else
                         QtGui.QColor(120, 170, 240) if self.isSelected() else QtGui.QColor(90, 94, 102),
                         3 if self.paused or self.isSelected() else 1)
        self.setPen(pen)
        self.marker.setVisible(self.breakpoint)
        self.setToolTip(f"{item.name} ({item.type})\n{item.shape}" + (f"\n{item.status}" if item.status else "")
                        + (f"\nrule {item.rule}" if item.rule else ""))

    def itemChange(self, change: QtWidgets.QGraphicsItem.GraphicsItemChange, value: Any) -> Any:  # noqa: N802
        if change == QtWidgets.QGraphicsItem.GraphicsItemChange.ItemSelectedHasChanged:
            QtCore.QTimer.singleShot(0, self.refresh)
        return super().itemChange(change, value)

    def top(self) -> QtCore.QPointF:
        return self.pos() + QtCore.QPointF(GLYPH_W / 2, 0)

    def bottom(self) -> QtCore.QPointF:
        return self.pos() + QtCore.QPointF(GLYPH_W / 2, GLYPH_H)


class NetworkOverview(QtWidgets.QGraphicsView):
    """The overview view. Signals carry layer names."""

    selected = QtCore.Signal(str)
    inspect_requested = QtCore.Signal(str)
    breakpoint_toggled = QtCore.Signal(str, bool)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setScene(QtWidgets.QGraphicsScene(self))
        self.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        self.setBackgroundBrush(QtGui.QColor(33, 35, 39))
        self.setDragMode(QtWidgets.QGraphicsView.DragMode.ScrollHandDrag)
        self.glyphs: dict[str, Glyph] = {}
        self.links: dict[tuple[str, str, int], QtWidgets.QGraphicsPathItem] = {}
        self.items_: list[OverviewItem] = []
        self.current: str | None = None
        self.breakpoints: set[str] = set()
        self.scene().selectionChanged.connect(self._selection_changed)
        self.empty = self.scene().addSimpleText("Launch Analysis to see the network.")
        self.empty.setBrush(QtGui.QColor(150, 150, 150))

    # ---- content -----------------------------------------------------------------------------------
    def set_items(self, items: list[OverviewItem]) -> None:
        """Show the network (rebuilt when its layers changed, else shapes and statuses are updated)."""
        if [i.name for i in items] == [i.name for i in self.items_] and all(
                a.inputs == b.inputs for a, b in zip(items, self.items_)):
            for it in items:
                self.glyphs[it.name].update_item(it)
            self.items_ = items
            return
        scene = self.scene()
        scene.blockSignals(True)
        scene.clear()
        scene.blockSignals(False)
        self.empty = None
        self.glyphs, self.links, self.items_ = {}, {}, items
        for i, it in enumerate(items):
            g = Glyph(it, i * (GLYPH_H + GAP))
            g.breakpoint = it.name in self.breakpoints
            g.refresh()
            scene.addItem(g)
            self.glyphs[it.name] = g
        pos = {it.name: i for i, it in enumerate(items)}
        lanes: dict[int, int] = {}
        for s, t, idx in sorted(link_roles(items, None), key=lambda k: pos[k[1]] - pos[k[0]]):
            if s not in self.glyphs:
                continue
            path = QtGui.QPainterPath()
            a, b = self.glyphs[s], self.glyphs[t]
            if pos[t] - pos[s] == 1:
                path.moveTo(a.bottom())
                path.lineTo(b.top())
            else:  # a skip link: a lane to the right of the glyphs
                lane = lanes.setdefault(pos[s] * 1000 + pos[t], len(lanes))
                x = GLYPH_W + 18 + 14 * (lane % 8)
                y0 = a.pos().y() + GLYPH_H * 0.5
                y1 = b.pos().y() + GLYPH_H * (0.35 + 0.3 * (idx % 2))
                path.moveTo(GLYPH_W, y0)
                path.cubicTo(x, y0, x, y0, x, (y0 + y1) / 2)
                path.cubicTo(x, y1, x, y1, GLYPH_W, y1)
            link = scene.addPath(path)
            link.setZValue(-1)
            self.links[(s, t, idx)] = link
        self._colour_links()
        scene.setSceneRect(scene.itemsBoundingRect().adjusted(-20, -10, 40, 10))
        if self.current in self.glyphs:
            self.glyphs[self.current].setSelected(True)

    def _colour_links(self) -> None:
        roles = link_roles(self.items_, self.current)
        for key, link in self.links.items():
            role = roles.get(key, "")
            link.setPen(QtGui.QPen(LINK_COLOURS[role], 3 if role else 1.5))
            link.setZValue(0 if role else -1)

    def select(self, name: str | None) -> None:
        """Select a layer (programmatically: as a click would)."""
        for g in self.glyphs.values():
            g.setSelected(g.item.name == name)

    def _selection_changed(self) -> None:
        sel = [i for i in self.scene().selectedItems() if isinstance(i, Glyph)]
        self.current = sel[0].item.name if sel else None
        self._colour_links()
        if self.current is not None:
            self.selected.emit(self.current)

    # ---- decorations -------------------------------------------------------------------------------
    def set_breakpoints(self, names: set[str] | frozenset[str]) -> None:
        self.breakpoints = set(names)
        for name, g in self.glyphs.items():
            g.breakpoint = name in self.breakpoints
            g.refresh()

    def set_paused(self, layer: str | None) -> None:
        for name, g in self.glyphs.items():
            g.paused = name == layer
            g.refresh()
        if layer in self.glyphs:
            self.ensureVisible(self.glyphs[layer])

    def set_times(self, times: dict[str, float]) -> None:
        """Latest time of each layer (empty: hide the times)."""
        for name, g in self.glyphs.items():
            g.time_ms = times.get(name) if times else None
            g.refresh()

    def set_drift(self, errors: dict[str, float] | None, threshold: float = 1e-2) -> None:
        """Colour each glyph by its relative error against the reference run (None: clear)."""
        for name, g in self.glyphs.items():
            e = errors.get(name) if errors else None
            g.drift = (e, drift_colour(e, threshold)) if e is not None else None
            g.refresh()

    # ---- interaction -------------------------------------------------------------------------------
    def _glyph_at(self, pos: QtCore.QPoint) -> Glyph | None:
        for it in self.items(pos):
            while it is not None and not isinstance(it, Glyph):
                it = it.parentItem()
            if isinstance(it, Glyph):
                return it
        return None

    def mouseDoubleClickEvent(self, ev: QtGui.QMouseEvent) -> None:  # noqa: N802 (Qt API)
        g = self._glyph_at(ev.position().toPoint())
        if g is not None:
            self.inspect_requested.emit(g.item.name)
            ev.accept()
            return
        super().mouseDoubleClickEvent(ev)

    def context_actions(self, name: str) -> list[tuple[str, Any]]:
        """(text, callback) of the context menu of a layer (tests use it without a popup)."""
        acts: list[tuple[str, Any]] = []
        if name in self.breakpoints:
            acts.append(("Remove Breakpoint", lambda: self.breakpoint_toggled.emit(name, False)))
        else:
            acts.append(("Add Breakpoint", lambda: self.breakpoint_toggled.emit(name, True)))
        acts.append(("Inspect Channels", lambda: self.inspect_requested.emit(name)))
        return acts

    def contextMenuEvent(self, ev: QtGui.QContextMenuEvent) -> None:  # noqa: N802 (Qt API)
        g = self._glyph_at(ev.pos())
        if g is None:
            return
        self.select(g.item.name)
        menu = QtWidgets.QMenu(self)
        for text, cb in self.context_actions(g.item.name):
            menu.addAction(text, cb)
        menu.exec(ev.globalPos())

    def fit(self) -> None:
        if self.glyphs:
            self.fitInView(self.scene().sceneRect(), QtCore.Qt.AspectRatioMode.KeepAspectRatio)


class OverviewPanel(QtWidgets.QWidget):
    """The overview with its toolbar: Profile Layer Timings (checkable), Rerun, Fit."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.view = NetworkOverview()
        self.toolbar = QtWidgets.QToolBar()
        self.act_timings = self.toolbar.addAction("Profile Layer Timings")
        self.act_timings.setCheckable(True)
        self.act_timings.setToolTip("Show each layer's latest inference time (rerun to collect them)")
        self.act_rerun = self.toolbar.addAction("Rerun")
        self.act_rerun.setToolTip("Run every layer again")
        self.act_fit = self.toolbar.addAction("Fit", self.view.fit)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.toolbar)
        lay.addWidget(self.view, 1)
