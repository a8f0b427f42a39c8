"""The zoomed-out canvas: one item paints every node box and link in a few batched calls.

Below ``OVERVIEW_LOD`` the node items of NodeGraphQt paint nothing (they stay in the scene, opaque, so clicking,
rubber-band selection and dragging keep working on them), the link items are transparent, and this item draws the
whole network: a coloured box per node with its name where it is readable, the selection, and the links as straight
lines.
Thousands of per-item paint calls become one, so panning and zooming stay fluid on imported networks."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from canvas.lazy import NodeGeom
from engine.layout import LOOSE_SHARE

#: below this scale the overview draws the network (the same scale at which a node hides its details)
OVERVIEW_LOD = 0.55
NAME_PX = 13.0  # the name's size on screen when the box is large enough to hold it
MIN_PX = 8.0  # names are not drawn smaller than this on screen
LABEL_PX = 90.0  # a name may take this width on screen, over a narrower box's sides
ROOMS_MAX = 300  # beside collapsed groups, up to this many layers are drawn grown into their room
ROOM_GAP = 40.0  # the free space a grown layer leaves to its neighbours (scene units)
OVERFLOW = 30.0  # by at most this much on each side (scene units: a third of the layout's gap between columns)
SELECTED = QtGui.QColor(255, 198, 10)
MARK_PX = 10.0  # diameter of a layer's error or warning dot on screen
ERROR_MARK = QtGui.QColor(210, 50, 50)
WARNING_MARK = QtGui.QColor(225, 160, 30)


class OverviewItem(QtWidgets.QGraphicsItem):
    """Draws the layers ``names()``, each where ``geometry(name)`` (a ``canvas.lazy.NodeGeom``) puts it, and
    ``links()`` ((source, target, input index)) in overview mode, each through the points ``route(source, target,
    start, end)`` gives (default: straight), each layer named ``label(name)``, with ``details(name)`` under it where there
    is room; ``items()`` are the NodeGraphQt nodes that exist (made transparent in overview mode). Call
    ``invalidate()`` after anything moved, was added, removed or relinked, ``adopt()`` after nodes were made."""

    def __init__(self, names: Callable[[], Iterable[str]], geometry: Callable[[str], NodeGeom],
                 links: Callable[[], Iterable[tuple[str, str, int]]],
                 details: Callable[[str], str] = lambda _name: "",
                 items: Callable[[], Iterable[Any]] = lambda: (),
                 marks: Callable[[], dict[str, str]] = dict,
                 pinned: Callable[[str], bool] = lambda _name: False,
                 any_pinned: Callable[[], bool] | None = None,
                 route: Callable[[str, str, QtCore.QPointF, QtCore.QPointF], list[QtCore.QPointF]] | None = None,
                 label: Callable[[str, bool], str] = lambda name, _compact: name) -> None:
        super().__init__()
        self._label = label
        self._route = route or (lambda _s, _t, a, b: [a, b])
        self._names = names
        self._geometry = geometry
        self._items = items
        self._details = details
        self._marks = marks
        self._links = links
        self._pinned = pinned  # boxes whose links it draws at every zoom (nothing else draws them)
        # whether any is drawn now (asked after every edit: the caller may know it without looking at every name)
        self._any_pinned = any_pinned or (lambda: any(pinned(n) for n in names()))
        self._pinned_lines: list[QtCore.QLineF] = []
        self._active = False
        self._pending = False
        self._rect = QtCore.QRectF()
        self._geom: dict[str, NodeGeom] = {}
        self._min_height = 0.0
        self._room: dict[str, QtCore.QRectF] = {}  # beside collapsed groups: the room a layer is drawn in
        self._line_of: dict[tuple[str, str, int], list[QtCore.QLineF]] = {}  # a link's segments
        self._by_color: list[tuple[QtGui.QColor, list[QtCore.QRectF]]] = []
        self._lines: list[QtCore.QLineF] = []
        self.setZValue(-1.0)  # under everything: transparent items above still take the clicks
        self.setAcceptedMouseButtons(QtCore.Qt.MouseButton.NoButton)
        self.setFlag(QtWidgets.QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption, True)

    @property
    def active(self) -> bool:
        """Whether the overview draws the network now (zoomed out)."""
        return self._active

    def invalidate(self, names: Iterable[str] | None = None) -> None:
        """The nodes ``names`` (None: all) moved, changed size, appeared or went, or their links changed:
        recompute what is drawn (only their geometry is measured again)."""
        if names is None:
            self._geom.clear()
        else:
            for n in names:
                self._geom.pop(n, None)
        if self._active or self._any_pinned():
            self._rebuild()
            self.update()
        elif self._pinned_lines:
            self._pinned_lines = []
            self.update()

    def _rebuild(self) -> None:
        """Measure the nodes not measured yet (all after ``invalidate()``, the changed ones after an edit) and
        redo the lines that touch them; the rest is reused."""
        names = self._names()
        changed = {n for n in self._geom if n not in names}
        for name in changed:
            del self._geom[name]
        for name in names:
            if name not in self._geom:
                changed.add(name)
                self._geom[name] = self._geometry(name)
        if not changed and self._line_of:
            return
        by_color: dict[tuple, list[QtCore.QRectF]] = {}
        for g in self._geom.values():
            by_color.setdefault(g[1], []).append(g[0])
        self._by_color = [(QtGui.QColor(*c).lighter(125), rects) for c, rects in by_color.items()]
        self._min_height = min((g[0].height() for g in self._geom.values()), default=0.0)
        self._room = self._rooms()
        lines: dict[tuple[str, str, int], list[QtCore.QLineF]] = {}
        for link in self._links():
            src, dst, index = link
            line = self._line_of.get(link) if src not in changed and dst not in changed else None
            if line is None:
                a, b = self._geom.get(src), self._geom.get(dst)
                if a is None or b is None or a[3] is None or index >= len(b[4]):
                    continue
                points = self._route(src, dst, a[3], b[4][index])
                line = [QtCore.QLineF(p, q) for p, q in zip(points, points[1:])]
            lines[link] = line
        self._line_of = lines
        self._lines = [segment for line in lines.values() for segment in line]
        self._pinned_lines = [segment for (src, dst, _), line in lines.items() if self._pinned(src) or self._pinned(dst)
                              for segment in line]
        rect = self._rect.adjusted(20, 20, -20, -20) if len(changed) < len(self._geom) and self._rect.isValid() \
            else QtCore.QRectF()
        for name in changed if rect.isValid() else self._geom:
            if name in self._geom:
                rect = rect.united(self._geom[name][0])
        rect = rect.adjusted(-20, -20, 20, 20)
        if rect != self._rect:
            self.prepareGeometryChange()
            self._rect = rect

    def _switch_later(self, on: bool) -> None:
        try:
            self.set_active(on)
        except RuntimeError:  # the canvas was closed before the switch came due
            pass

    def set_active(self, on: bool) -> None:
        """Switch overview mode: the node items paint nothing and the link items are transparent (on), or they
        draw themselves (off)."""
        self._pending = False
        if on == self._active:
            return
        self._active = on
        self.apply_mode()
        if on:
            self._rebuild()
        self.update()

    def adopt(self, names: Iterable[str], nodes: Iterable[Any]) -> None:
        """The layers ``names`` got their NodeGraphQt ``nodes``: they follow the current mode, and are measured
        from their items from now on."""
        nodes = list(nodes)
        if self._active:
            self.apply_mode(nodes)
        for name, node in zip(names, nodes):  # same box as measured before (one layout rule): only the item is new
            geom = self._geom.get(name)
            if geom is not None:
                self._geom[name] = geom._replace(view=node.view)

    def apply_mode(self, nodes: Iterable[Any] | None = None) -> None:
        """Let the overview draw the nodes ``nodes`` (default: all) and their links in overview mode, and let them
        draw themselves otherwise."""
        opacity = 0.0 if self._active else 1.0
        for node in self._items() if nodes is None else nodes:
            node.view.set_drawn_by_overview(self._active)
            for port in node.input_ports():
                for pipe in port.view.connected_pipes:
                    if pipe.opacity() != opacity:
                        pipe.setOpacity(opacity)

    def boundingRect(self) -> QtCore.QRectF:  # noqa: N802 (Qt API)
        return self._rect

    def shape(self) -> QtGui.QPainterPath:
        """Nothing to hit: a click or a rubber band on the canvas finds the nodes and links, never this item."""
        return QtGui.QPainterPath()

    def paint(self, painter: QtGui.QPainter, option: QtWidgets.QStyleOptionGraphicsItem,
              widget: QtWidgets.QWidget | None = None) -> None:
        lod = QtWidgets.QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        want = lod < OVERVIEW_LOD
        if want != self._active and not self._pending:  # switch after this frame (not while painting)
            self._pending = True
            QtCore.QTimer.singleShot(0, lambda w=want: self._switch_later(w))
        if not self._active:
            if self._pinned_lines:
                painter.save()
                painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
                painter.setPen(QtGui.QPen(QtGui.QColor(150, 160, 170), 2.0))
                painter.drawLines(self._pinned_lines)
                painter.restore()
            return
        exposed = option.exposedRect
        painter.save()
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, False)  # boxes and lines: crisp and fast
        painter.setPen(QtGui.QPen(QtGui.QColor(150, 160, 170), 0))  # cosmetic: one pixel wide at every zoom
        painter.drawLines(self._lines)
        painter.setPen(QtGui.QPen(QtGui.QColor(20, 22, 26), 0))
        for color, rects in self._by_color:
            painter.setBrush(color)
            painter.drawRects(rects)
        picked = set(self.scene().selectedItems()) if self.scene() is not None else set()
        selected = [g[0] for g in self._geom.values() if g[2] in picked] if picked else []
        if selected:
            painter.setBrush(QtCore.Qt.BrushStyle.NoBrush)
            painter.setPen(QtGui.QPen(SELECTED, 2.0 / max(lod, 1e-3)))
            painter.drawRects(selected)
        self._paint_rooms(painter, lod, exposed)
        self._paint_marks(painter, lod)
        # names at MIN_PX on screen at least, over the box where it is smaller
        visible = [(name, g[0]) for name, g in self._geom.items() if exposed.intersects(g[0]) and not self._pinned(name)
                   and name not in self._room]
        self._paint_names(painter, lod, visible, self._min_height)
        painter.restore()

    def _rooms(self) -> dict[str, QtCore.QRectF]:
        """Beside collapsed groups' boxes, each layer's box grown around its centre into the free space about it
        (half the way to a layer that grows too), up to ``LOOSE_SHARE`` of the smallest box's size (the room the
        grouped layout leaves it): at Fit to View a layer outside the groups reads like a box."""
        pinned = [g[0] for n, g in self._geom.items() if self._pinned(n)]
        loose = [n for n in self._geom if not self._pinned(n)]
        if not pinned or not loose or len(loose) > ROOMS_MAX:
            return {}
        cap_w = LOOSE_SHARE * min(r.width() for r in pinned)
        cap_h = LOOSE_SHARE * min(r.height() for r in pinned)
        others = [(g[0], self._pinned(n)) for n, g in self._geom.items()]
        out = {}
        for name in loose:
            own = self._geom[name][0]
            c = own.center()
            half_w, half_h = max(own.width(), cap_w) / 2, max(own.height(), cap_h) / 2
            for r, fixed in others:
                room = QtCore.QRectF(c.x() - half_w, c.y() - half_h, 2 * half_w, 2 * half_h)
                if r is own or not room.intersects(r.adjusted(-ROOM_GAP, -ROOM_GAP, ROOM_GAP, ROOM_GAP)):
                    continue
                share = 1.0 if fixed else 0.5  # a layer beside it grows too: half the free space each
                gap_x = (max(r.left() - c.x(), c.x() - r.right()) - ROOM_GAP) * share
                gap_y = (max(r.top() - c.y(), c.y() - r.bottom()) - ROOM_GAP) * share
                if gap_x >= gap_y:  # beside it: narrower; above or below it: lower
                    half_w = max(own.width() / 2, min(half_w, gap_x if fixed else gap_x + own.width() / 4))
                else:
                    half_h = max(own.height() / 2, min(half_h, gap_y if fixed else gap_y + own.height() / 4))
            room = QtCore.QRectF(c.x() - half_w, c.y() - half_h, 2 * half_w, 2 * half_h)
            if room.width() > own.width() * 1.5 or room.height() > own.height() * 1.5:
                out[name] = room
        return out

    def _paint_rooms(self, painter: QtGui.QPainter, lod: float, exposed: QtCore.QRectF) -> None:
        """The layers drawn in their room (:meth:`_rooms`): a box of their colour with their name."""
        shown = [(n, r) for n, r in self._room.items() if exposed.intersects(r)]
        for name, room in shown:
            painter.setPen(QtGui.QPen(QtGui.QColor(150, 170, 200), 2.0 / max(lod, 1e-3)))
            painter.setBrush(QtGui.QColor(*self._geom[name][1]).darker(160))
            painter.drawRoundedRect(room, 8 / max(lod, 1e-3), 8 / max(lod, 1e-3))
        for name, room in shown:
            self._paint_names(painter, lod, [(name, room)], room.height())

    def _paint_marks(self, painter: QtGui.QPainter, lod: float) -> None:
        """A red (error) or amber (warning) dot on the top-right corner of each layer the type check found a
        problem with, MARK_PX wide on screen."""
        r = MARK_PX / 2 / max(lod, 1e-3)
        painter.setPen(QtGui.QPen(QtGui.QColor(20, 22, 26), 0))
        for severity, color in (("warning", WARNING_MARK), ("error", ERROR_MARK)):
            painter.setBrush(color)
            for name, sev in self._marks().items():
                geom = self._geom.get(name)
                if sev == severity and geom is not None:
                    painter.drawEllipse(QtCore.QPointF(geom.rect.right(), geom.rect.top()), r, r)

    def _paint_names(self, painter: QtGui.QPainter, lod: float, boxes: list[tuple[str, QtCore.QRectF]],
                     height: float) -> None:
        """Each name in about NAME_PX pixels on screen (smaller, down to MIN_PX, when it is wider than its box),
        with the layer's detail line (``details(name)``, e.g. its output shape) under it where the box has room."""
        if not boxes:
            return
        px = max(min(NAME_PX / lod, height * 0.3), MIN_PX / lod)
        font = QtGui.QFont()
        font.setBold(True)
        small = QtGui.QFont()
        small.setPixelSize(max(1, round(px * 0.8)))
        small_metrics = QtGui.QFontMetricsF(small)
        pad = 4.0 / lod
        two_lines = height * lod >= 3.2 * NAME_PX
        for name, rect in boxes:
            # a narrow box's name may run over its sides, into part of the gap beside it (never over a neighbour)
            extra = min(max(0.0, (LABEL_PX / lod - rect.width()) / 2), OVERFLOW)
            r = rect.adjusted(pad - extra, 0, extra - pad, 0)
            size, full = px, name
            font.setPixelSize(max(1, round(size)))
            metrics = QtGui.QFontMetricsF(font)
            wide = metrics.horizontalAdvance(name)
            if wide > r.width():  # the shorter label (full name on hover), shrunk as far as it stays readable
                name = self._label(name, False)
                wide = metrics.horizontalAdvance(name)
            if wide > r.width():  # shrink to fit, as far as it stays readable; elide beyond
                size = max(MIN_PX / lod, size * r.width() / wide)
                font.setPixelSize(max(1, round(size)))
                metrics = QtGui.QFontMetricsF(font)
                if metrics.horizontalAdvance(name) > r.width():  # still cut: the compact label keeps it distinct
                    name = self._label(full, True)
            text = metrics.elidedText(name, QtCore.Qt.TextElideMode.ElideLeft, r.width())  # the distinguishing end
            if len(text) < min(len(name), 4):
                continue  # a name cut to a stub says nothing: the box alone
            painter.setFont(font)
            painter.setPen(QtGui.QColor(240, 240, 240))
            detail = self._details(full) if two_lines else ""
            if not detail:
                painter.drawText(r, QtCore.Qt.AlignmentFlag.AlignCenter, text)
                continue
            top = r.center().y() - metrics.height()
            painter.drawText(QtCore.QRectF(r.x(), top, r.width(), metrics.height()), QtCore.Qt.AlignmentFlag.AlignCenter, text)
            detail_font = _fitted(small, small_metrics, detail, r.width(), MIN_PX / lod)
            if detail_font is None:
                continue  # a shape cut short misleads ("1x3x24…"): the name alone
            painter.setFont(detail_font)
            painter.setPen(QtGui.QColor(170, 215, 170))
            painter.drawText(QtCore.QRectF(r.x(), top + metrics.height() * 1.1, r.width(), small_metrics.height()),
                             QtCore.Qt.AlignmentFlag.AlignCenter, detail)


def _fitted(font: QtGui.QFont, metrics: QtGui.QFontMetricsF, text: str, width: float,
            smallest: float) -> QtGui.QFont | None:
    """``font``, made smaller where ``text`` is wider than ``width`` (not below ``smallest`` pixels); None when the
    text does not fit even then."""
    wide = metrics.horizontalAdvance(text)
    if wide <= width:
        return font
    size = font.pixelSize() * width / wide
    if size < smallest:
        return None
    out = QtGui.QFont(font)
    out.setPixelSize(max(1, int(size)))  # rounded down: never wider than the box
    return out
