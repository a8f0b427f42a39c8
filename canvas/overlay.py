"""Figures on the canvas: each layer (and each collapsed group) coloured by one per-layer figure — its share of the
time, its precision drift, its change against a base report — with the value written beside it, a legend on the
canvas (colour scale, its range and unit) and, on hover, the layer's figures and kernels. One item draws every
coloured frame and value at every zoom, whether or not the layer has a NodeGraphQt node yet (``canvas.lazy``); the
figures themselves come from ``engine.figures``."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from canvas.constants import next_turn_timer
from canvas.overview import OVERVIEW_LOD
from engine.events import GroupChanged, LayerEvent, LayerMoved
from engine.figures import DRIFT, KINDS, Figures, Scale, combine, tooltip_lines, value, value_text

if TYPE_CHECKING:
    from canvas.graph import ModelCanvas

FRAME_PX = 3.0  # a frame's width on screen, at least
TAG_PX = 12.0  # a value's text height on screen, at least (zoomed in it grows with the node)
TAG_MIN_PX = 9.0  # below this on screen (far out) values are not written, the colours stay
SOLID_PX = 24.0  # zoomed out, a box less tall than this on screen is filled with its colour
GROUP_TINT = 70  # alpha of a collapsed group's tint
LEVELS = 256  # colours of a scale (each value takes the nearest)
NO_VALUE = QtGui.QColor(110, 110, 110)
MARGIN = 60.0  # scene units around the drawn frames and values
Z_VALUE = 3.0  # over the nodes (1) and a selected node (2); draws only around them, and takes no clicks


class Entry(NamedTuple):
    """One thing coloured: a layer or a collapsed group's box (``group`` its path), where it is and its figures."""

    name: str
    group: str | None
    rect: QtCore.QRectF
    fig: dict[str, Any]


class Drawn(NamedTuple):
    """What the item draws, worked out once per change (figures, groups shown, an edit), not per frame: the entries,
    their scale, each one's colour and text, and their boxes as an array (rows: left, top, right, bottom) to find
    those in view at once."""

    entries: list[Entry]
    scale: Scale
    colours: list[QtGui.QColor]
    texts: list[str]
    boxes: np.ndarray


def _text_colour(rgb: tuple[int, int, int]) -> QtGui.QColor:
    """Dark text on a light colour, light text on a dark one."""
    r, g, b = rgb
    return QtGui.QColor(20, 20, 20) if 0.299 * r + 0.587 * g + 0.114 * b > 140 else QtGui.QColor(245, 245, 245)


class FigureItem(QtWidgets.QGraphicsItem):
    """Draws the overlay's entries: a frame in the value's colour around each node or box (a band inside it when
    zoomed out, the whole box where it is small on screen) and a tag with the value above it."""

    def __init__(self, overlay: FigureOverlay) -> None:
        super().__init__()
        self._overlay = overlay
        self._rect = QtCore.QRectF()
        self._resize_pending = False
        self.setZValue(Z_VALUE)
        self.setAcceptedMouseButtons(QtCore.Qt.MouseButton.NoButton)
        self.setFlag(QtWidgets.QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption, True)

    def boundingRect(self) -> QtCore.QRectF:  # noqa: N802 (Qt API)
        return self._rect

    def shape(self) -> QtGui.QPainterPath:
        """Nothing to hit: clicks and rubber bands reach the nodes under it."""
        return QtGui.QPainterPath()

    def fit(self, boxes: np.ndarray) -> None:
        """Cover ``boxes`` (rows: left, top, right, bottom), with room for their frames and values."""
        area = QtCore.QRectF()
        if len(boxes):
            left, top = boxes[:, 0].min(), boxes[:, 1].min()
            area = QtCore.QRectF(left - MARGIN, top - 4 * MARGIN, boxes[:, 2].max() - left + 2 * MARGIN,
                                 boxes[:, 3].max() - top + 5 * MARGIN)
        if area != self._rect:
            self.prepareGeometryChange()
            self._rect = area

    def _fit_later(self) -> None:
        self._resize_pending = False
        try:
            self._overlay.invalidate()
        except RuntimeError:  # the canvas was closed before the timer came due
            pass

    def paint(self, painter: QtGui.QPainter, option: QtWidgets.QStyleOptionGraphicsItem,
              widget: QtWidgets.QWidget | None = None) -> None:
        drawn = self._overlay.drawn()
        if drawn is None or not drawn.entries:
            return
        lod = max(QtWidgets.QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform()), 1e-4)
        inner = lod < OVERVIEW_LOD  # zoomed out: a band inside the box (the gaps are narrow on screen)
        exposed = option.exposedRect.adjusted(-MARGIN, -4 * MARGIN, MARGIN, MARGIN)
        b = drawn.boxes
        near = np.flatnonzero((b[:, 0] <= exposed.right()) & (b[:, 2] >= exposed.left())
                              & (b[:, 1] <= exposed.bottom()) & (b[:, 3] >= exposed.top()))
        solid: dict[int, tuple[QtGui.QColor, list[QtCore.QRectF]]] = {}
        framed = []
        grown = False
        for i in near:
            e = drawn.entries[i]
            rect = self._overlay.live_rect(e)  # a node being dragged is followed
            grown = grown or not self._rect.contains(rect)
            if inner and rect.height() * lod < SOLID_PX:  # too small on screen for a band: the whole box
                colour = drawn.colours[i]
                solid.setdefault(colour.rgb(), (colour, []))[1].append(rect)
            else:
                framed.append((i, rect))
        painter.save()
        painter.setPen(QtCore.Qt.PenStyle.NoPen)
        for colour, rects in solid.values():  # one call per colour
            painter.setBrush(colour)
            painter.drawRects(rects)
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
        font = QtGui.QFont()
        font.setBold(True)
        for i, rect in framed:
            self._paint_framed(painter, font, lod, inner, rect, drawn.entries[i].group is not None, drawn.colours[i],
                               drawn.texts[i])
        painter.restore()
        if grown and not self._resize_pending:  # something moved out: grow after this frame
            self._resize_pending = True
            QtCore.QTimer.singleShot(0, self._fit_later)

    def _paint_framed(self, painter: QtGui.QPainter, font: QtGui.QFont, lod: float, inner: bool, rect: QtCore.QRectF,
                      group: bool, colour: QtGui.QColor, text: str) -> None:
        width = FRAME_PX / lod
        if inner:
            width = min(max(width, 4.0), rect.height() / 3, rect.width() / 3)
            frame = rect.adjusted(width / 2, width / 2, -width / 2, -width / 2)
        else:
            width = max(width, 5.0)
            frame = rect.adjusted(-width / 2 - 2, -width / 2 - 2, width / 2 + 2, width / 2 + 2)
        if group:  # a group's box is tinted too (its text stays readable over it)
            painter.setPen(QtCore.Qt.PenStyle.NoPen)
            painter.setBrush(QtGui.QColor(colour.red(), colour.green(), colour.blue(), GROUP_TINT))
            painter.drawRoundedRect(rect, 8, 8)
        painter.setPen(QtGui.QPen(colour, width))
        painter.setBrush(QtCore.Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(frame, 6, 6)
        if text and rect.width() * lod >= 4 * TAG_MIN_PX:
            self._paint_tag(painter, font, lod, rect, text, colour)

    @staticmethod
    def _paint_tag(painter: QtGui.QPainter, font: QtGui.QFont, lod: float, rect: QtCore.QRectF, text: str,
                   colour: QtGui.QColor) -> None:
        """The value in a pill of the value's colour, on the top edge of the node, at least TAG_PX tall on screen
        and at most as wide as the node (zoomed far out, where that is under TAG_MIN_PX, not at all)."""
        px = max(TAG_PX / lod, 13.0)
        font.setPixelSize(max(1, round(px)))
        metrics = QtGui.QFontMetricsF(font)
        wide = metrics.horizontalAdvance(text) + px * 0.8
        if wide > rect.width():  # shrink to the node's width, as far as it stays readable
            px *= rect.width() / wide
            if px * lod < TAG_MIN_PX:
                return
            font.setPixelSize(max(1, round(px)))
            metrics = QtGui.QFontMetricsF(font)
            wide = metrics.horizontalAdvance(text) + px * 0.8
        height = metrics.height() * 1.15
        tag = QtCore.QRectF(rect.center().x() - wide / 2, rect.top() - height * 0.5 - height * 0.55, wide, height)
        painter.setPen(QtCore.Qt.PenStyle.NoPen)
        painter.setBrush(colour)
        painter.drawRoundedRect(tag, height / 2.5, height / 2.5)
        painter.setFont(font)
        painter.setPen(_text_colour((colour.red(), colour.green(), colour.blue())))
        painter.drawText(tag, QtCore.Qt.AlignmentFlag.AlignCenter, text)


class Legend(QtWidgets.QWidget):
    """The colour scale drawn in the canvas's bottom-right corner: which figure, the gradient, its min and max and the
    unit."""

    WIDTH, HEIGHT = 280, 74

    def __init__(self, view: QtWidgets.QGraphicsView) -> None:
        super().__init__(view)
        self.setObjectName("FigureLegend")
        self.setAttribute(QtCore.Qt.WidgetAttribute.WA_TransparentForMouseEvents, True)
        self.title = ""
        self.scale: Scale | None = None
        self.resize(self.WIDTH, self.HEIGHT)
        self.hide()

    def texts(self) -> dict[str, str]:
        """What the legend says: ``title``, ``min``, ``max`` and ``unit`` (empty while hidden)."""
        if self.scale is None or not self.isVisible():
            return {}
        return {"title": self.title, "min": self.scale.label(self.scale.lo), "max": self.scale.label(self.scale.hi),
                "unit": self.scale.unit}

    def set_scale(self, title: str, scale: Scale | None) -> None:
        """Show ``scale`` under ``title`` (None: hide the legend)."""
        if scale == self.scale and title == self.title:
            return
        self.title, self.scale = title, scale
        self.setVisible(scale is not None)
        self.place()
        self.update()

    def place(self) -> None:
        """Bottom-right corner of the view, clear of its scroll bars."""
        view = self.parentWidget()
        if isinstance(view, QtWidgets.QAbstractScrollArea):
            vp = view.viewport().geometry()
            self.move(vp.right() - self.width() - 12, vp.bottom() - self.height() - 12)

    def paintEvent(self, _event: QtGui.QPaintEvent) -> None:  # noqa: N802 (Qt API)
        if self.scale is None:
            return
        texts = self.texts() or {"title": self.title, "min": self.scale.label(self.scale.lo),
                                 "max": self.scale.label(self.scale.hi), "unit": self.scale.unit}
        p = QtGui.QPainter(self)
        p.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
        p.setPen(QtGui.QPen(QtGui.QColor(90, 96, 108), 1))
        p.setBrush(QtGui.QColor(28, 30, 34, 225))
        p.drawRoundedRect(QtCore.QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        font = p.font()
        font.setPixelSize(12)
        font.setBold(True)
        p.setFont(font)
        p.setPen(QtGui.QColor(235, 235, 235))
        p.drawText(QtCore.QRectF(10, 5, self.width() - 20, 16), QtCore.Qt.AlignmentFlag.AlignLeft, texts["title"])
        bar = QtCore.QRectF(10, 26, self.width() - 20, 12)
        gradient = QtGui.QLinearGradient(bar.topLeft(), bar.topRight())
        for i in range(11):
            gradient.setColorAt(i / 10, QtGui.QColor(*self.scale.at(i / 10)))
        p.setPen(QtCore.Qt.PenStyle.NoPen)
        p.setBrush(gradient)
        p.drawRect(bar)
        font.setBold(False)
        font.setPixelSize(11)
        p.setFont(font)
        p.setPen(QtGui.QColor(215, 215, 215))
        row = QtCore.QRectF(10, 40, self.width() - 20, 14)
        p.drawText(row, QtCore.Qt.AlignmentFlag.AlignLeft, texts["min"])
        p.drawText(row, QtCore.Qt.AlignmentFlag.AlignRight, texts["max"])
        p.setPen(QtGui.QColor(170, 178, 190))
        p.drawText(QtCore.QRectF(10, 55, self.width() - 20, 14), QtCore.Qt.AlignmentFlag.AlignHCenter, texts["unit"])
        p.end()


class FigureOverlay(QtCore.QObject):
    """The figures shown on one canvas: ``show_figures(kind, figures)`` colours its layers and collapsed groups by
    ``kind`` (``engine.figures.KINDS``), ``clear()`` takes them away. Follows expand/collapse, Arrange, zoom and
    edits by itself; call ``show_figures`` again when the figures change (a new run)."""

    def __init__(self, canvas: ModelCanvas) -> None:
        super().__init__(canvas)
        self.canvas = canvas
        self.kind = ""
        self.figures: Figures = {}
        self._group_figs: dict[str, dict[str, Any]] = {}
        self._drawn: Drawn | None = None
        self._drawn_key: tuple = ()
        self._title = ""
        self.item = FigureItem(self)
        self.item.setVisible(False)
        canvas.scene().addItem(self.item)
        view = canvas.viewer()
        self.legend = Legend(view)
        view.installEventFilter(self)
        view.viewport().installEventFilter(self)
        canvas.bridge.event.connect(self._model_event)
        self._refit = next_turn_timer(self, self.invalidate)

    @property
    def shown(self) -> bool:
        """Whether figures are drawn now."""
        return bool(self.kind)

    def show_figures(self, kind: str, figures: Figures, title: str = "") -> None:
        """Colour the layers by ``kind`` from ``figures`` (layer name -> figures, ``engine.figures``); ``title``
        heads the legend (default: the figure's name)."""
        if kind not in KINDS:
            raise ValueError(f"unknown figure {kind!r}; figures: {', '.join(KINDS)}")
        title = title or KINDS[kind].text
        if (kind, figures, title) == (self.kind, self.figures, self._title):
            return  # (the same figures again: a tab change, a window activated)
        self.kind, self.figures, self._title = kind, dict(figures), title
        self._group_figs = {}
        self.canvas.set_layer_figures(self.figures)
        self.item.setVisible(True)
        self.invalidate()

    def clear(self) -> None:
        """No figures: nodes and groups as without the overlay (groups still show their parameters and FLOPs)."""
        if not self.kind and not self.figures:
            return
        self.kind, self.figures, self._group_figs, self._drawn = "", {}, {}, None
        self.canvas.set_layer_figures({})
        self.item.setVisible(False)
        self.legend.set_scale("", None)
        self.canvas.viewer().viewport().update()

    # ---- what is drawn ---------------------------------------------------------------------------------------
    def _rect(self, name: str) -> QtCore.QRectF:
        node = self.canvas.nodes.created(name)
        return node.view.sceneBoundingRect() if node is not None else self.canvas.node_rect(name)

    def live_rect(self, entry: Entry) -> QtCore.QRectF:
        """Where ``entry`` is now (a node may be being dragged)."""
        if entry.group is None:
            node = self.canvas.nodes.created(entry.name)
            if node is not None:
                return node.view.sceneBoundingRect()
        return entry.rect

    def invalidate(self) -> None:
        """Something drawn changed (figures, an edit, a move): work out what to draw again and repaint."""
        self._drawn = None
        drawn = self.drawn()
        self.item.fit(drawn.boxes if drawn is not None else np.zeros((0, 4)))
        self.item.update()

    def drawn(self) -> Drawn | None:
        """What is drawn now (None without figures); worked out again when the figures, the groups shown or the
        layers changed."""
        if not self.kind:
            return None
        key = (tuple(self.canvas.shown_groups()), len(self.canvas.nodes))
        if self._drawn is None or key != self._drawn_key:
            entries = self.entries()
            scale = self.scale_of(entries)
            values = [value(self.kind, e.fig) for e in entries]
            if self.kind == DRIFT:  # exact: the colour turns red at the threshold
                colours = [QtGui.QColor(*scale.colour(v)) if v is not None else NO_VALUE for v in values]
            else:
                palette = [QtGui.QColor(*scale.at(i / (LEVELS - 1))) for i in range(LEVELS)]
                colours = [palette[min(LEVELS - 1, max(0, round(scale.position(v) * (LEVELS - 1))))]
                           if v is not None else NO_VALUE for v in values]
            boxes = np.array([e.rect.getCoords() for e in entries], dtype=float).reshape(-1, 4)
            self._drawn = Drawn(entries, scale, colours, [value_text(self.kind, e.fig) for e in entries], boxes)
            self._drawn_key = key
        return self._drawn

    def group_figures(self, path: str) -> dict[str, Any]:
        """The combined figures of collapsed group ``path`` (its layers' figures and costs)."""
        fig = self._group_figs.get(path)
        if fig is None:
            group = self.canvas.groups()[path]
            costs = self.canvas.layer_costs()
            fig = self._group_figs[path] = combine({**costs.get(n, {}), **self.figures.get(n, {})}
                                                   for n in group.members)
        return fig

    def entries(self) -> list[Entry]:
        """The layers with figures that are drawn (not inside a collapsed group), then the collapsed groups' boxes."""
        if not self.kind:
            return []
        canvas = self.canvas
        out = [Entry(name, None, self._rect(name), fig) for name, fig in self.figures.items()
               if name in canvas.nodes and not canvas.is_hidden(name)]
        for path in canvas.shown_groups():
            box = canvas.group_box(path)
            fig = self.group_figures(path)
            if box is not None and value(self.kind, fig) is not None:
                out.append(Entry(path, path, box.sceneBoundingRect(), fig))
        return out

    def scale_of(self, entries: list[Entry]) -> Scale:
        """The colour scale over what is drawn (the legend follows it)."""
        threshold = next((e.fig["threshold"] for e in entries if e.fig.get("threshold") is not None), 0.0)
        scale = Scale.over(self.kind, (value(self.kind, e.fig) for e in entries), threshold)
        self.legend.set_scale(self._title, scale)
        return scale

    def entry_at(self, pos: QtCore.QPointF) -> Entry | None:
        """The drawn layer or group at scene position ``pos`` (its box or the value above it)."""
        drawn = self.drawn()
        for e in reversed(drawn.entries if drawn is not None else []):  # boxes first: over their layers' places
            if self.live_rect(e).adjusted(-8, -40, 8, 8).contains(pos):
                return e
        return None

    def tooltip(self, entry: Entry) -> str:
        """The hover text of ``entry``: its figures and kernels."""
        name = f"group {entry.group}" if entry.group else entry.name
        return "\n".join(tooltip_lines(name, self.kind, entry.fig))

    # ---- reactions -------------------------------------------------------------------------------------------
    def _model_event(self, ev: Any) -> None:
        if self.kind and isinstance(ev, (LayerEvent, GroupChanged)):
            if not isinstance(ev, LayerMoved):
                self._group_figs = {}  # (a move changes no sums)
            if not self._refit.isActive():
                self._refit.start()

    def eventFilter(self, obj: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802 (Qt API)
        view = self.canvas.viewer()
        if event.type() == QtCore.QEvent.Type.Resize and obj is view:
            self.legend.place()
        elif event.type() == QtCore.QEvent.Type.ToolTip and self.kind and obj is view.viewport():
            entry = self.entry_at(view.mapToScene(event.pos()))
            if entry is not None:
                QtWidgets.QToolTip.showText(event.globalPos(), self.tooltip(entry), view.viewport())
                return True
        return False
