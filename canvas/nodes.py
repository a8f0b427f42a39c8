"""Node classes generated from layer descriptors. They are views: they hold no network semantics, only what
is drawn (ports named after the descriptor's inputs, an info label, a diagnostics badge)."""
from __future__ import annotations

import html
import zlib
from collections.abc import Callable
from typing import Any

from NodeGraphQt import BaseNode
from NodeGraphQt.constants import NodeEnum, PortEnum, PortTypeEnum
from NodeGraphQt.qgraphics.node_base import NodeItem
from PySide6 import QtCore, QtGui, QtWidgets

from engine.categories import Category
from engine.descriptors import InputKind, LayerDesc

IDENTIFIER = "layerlab"
PRIMARY_COLOR = (70, 150, 230)
SECONDARY_COLOR = (200, 150, 60)
OUTPUT_COLOR = (120, 200, 120)
UNKNOWN_COLOR = (200, 70, 70)
#: node body colours by the first category of the layer (stable for categories not listed)
CATEGORY_COLORS = {
    Category.INPUT_OUTPUT: (44, 82, 60),
    Category.CONVOLUTION: (40, 64, 100),
    Category.ARITHMETIC: (78, 58, 98),
    Category.TEMPLATES: (104, 82, 34),
}
TEMPLATE_BORDER = (224, 184, 92)
_FALLBACK_COLORS = [(92, 70, 44), (44, 86, 92), (90, 52, 64), (64, 80, 44), (60, 60, 90)]


def category_color(desc: LayerDesc | None) -> tuple[int, int, int]:
    """Body colour of a node of this layer type."""
    if desc is None:
        return (90, 40, 40)
    cat = desc.categories[0] if desc.categories else desc.name
    if cat in CATEGORY_COLORS:
        return CATEGORY_COLORS[cat]
    return _FALLBACK_COLORS[zlib.crc32(cat.encode()) % len(_FALLBACK_COLORS)]


def node_type_id(layer_type: str) -> str:
    """NodeGraphQt type id of the node class for ``layer_type``."""
    return f"{IDENTIFIER}.LayerNode_{layer_type}"


def input_port_name(desc: LayerDesc | None, index: int) -> str:
    """Display name of input slot ``index`` (infinite inputs are numbered: ``inputs 1``, ``inputs 2``...)."""
    if desc is None:
        return f"input {index}"
    inp = desc.input_desc(index)
    if inp is None:
        return f"extra {index}"
    if inp.kind is InputKind.PRIMARY_INFINITE:
        first = len(desc.inputs) - 1
        return f"{inp.name} {index - first + 1}"
    return inp.name


def input_is_secondary(desc: LayerDesc | None, index: int) -> bool:
    inp = desc.input_desc(index) if desc else None
    return inp is not None and inp.kind is InputKind.SECONDARY


def _square_port_painter(painter: QtGui.QPainter, rect: QtCore.QRectF, info: dict[str, Any]) -> None:
    """Secondary (optional, weight-replacing) inputs are drawn as hollow squares."""
    painter.save()
    color = QtGui.QColor(*info["color"])
    border = QtGui.QColor(*info["border_color"])
    if info["hovered"]:
        color = QtGui.QColor(255, 220, 130)
        border = QtGui.QColor(255, 240, 190)
    r = rect.adjusted(1.5, 1.5, -1.5, -1.5)
    painter.setPen(QtGui.QPen(border, 1.6))
    painter.setBrush(color if info["connected"] else QtGui.QColor(40, 40, 40))
    painter.drawRect(r)
    painter.restore()


#: one run of node text: (text, colour "#rrggbb", bold, italic)
Run = tuple[str, str, bool, bool]
INFO_FONT_PX = 12
TITLE_FONT_PX = 13
#: below this scale a node is drawn as a coloured box with its name (ports, labels and parameters hidden)
DETAIL_LOD = 0.55


def _font(px: int, bold: bool = False, italic: bool = False) -> QtGui.QFont:
    font = QtGui.QFont()
    font.setPixelSize(px)
    font.setBold(bold)
    font.setItalic(italic)
    return font


PORT_W = PortEnum.SIZE.value + PortEnum.CLICK_FALLOFF.value  # a port item's bounding box
PORT_H = PortEnum.SIZE.value
PORT_ROW = PORT_H + 1.0
TEXT_MARGIN = 4.0  # a title text item's document margin
_metrics: dict[str, QtGui.QFontMetricsF] = {}


def _metric(kind: str) -> QtGui.QFontMetricsF:
    """Font metrics of the title (``title``) and port labels (``label``), made once."""
    if kind not in _metrics:
        _metrics[kind] = QtGui.QFontMetricsF(_font(TITLE_FONT_PX, bold=True) if kind == "title" else QtGui.QFont())
    return _metrics[kind]


def info_size(lines: list[list[Run]]) -> tuple[float, float]:
    """Width and height of a node's info text (the same measure whether or not the node has items)."""
    line_h = InfoItem.font(False, False)[1].lineSpacing()
    width = max((sum(InfoItem.font(b, i)[1].horizontalAdvance(t) for t, _, b, i in line) for line in lines), default=0.0)
    return width + 4.0, line_h * len(lines) + 4.0


def title_height() -> float:
    """Height of a node's title row."""
    return _metric("title").height() + 2 * TEXT_MARGIN + 4.0


def node_box(title: str, in_labels: list[str | None], out_labels: list[str | None],
             info: tuple[float, float]) -> tuple[float, float]:
    """A node's (width, height) from its title, its input and output port labels (None: not shown) and its info
    text's size. The one layout rule: a node item measures itself with it, and the canvas measures a node that
    has no items yet with it, so both always agree."""
    label = _metric("label")
    in_text = max((label.horizontalAdvance(t) + 2 * TEXT_MARGIN for t in in_labels if t), default=0.0)
    out_text = max((label.horizontalAdvance(t) + 2 * TEXT_MARGIN for t in out_labels if t), default=0.0)
    ports_w = (PORT_W if in_labels or out_labels else 0.0) + in_text + out_text + 12.0
    ports_h = max(len(in_labels), len(out_labels)) * PORT_ROW
    width = max(_metric("title").horizontalAdvance(title) + 2 * TEXT_MARGIN + 24.0, ports_w, info[0] + 14.0, 120.0)
    return width, title_height() + ports_h + info[1] + 6.0


def input_port_center(index: int) -> tuple[float, float]:
    """Centre of input port ``index`` relative to the node's top-left corner."""
    return 0.0, title_height() + index * PORT_ROW + PORT_H / 2


def output_port_center(width: float) -> tuple[float, float]:
    """Centre of the output port of a node ``width`` wide, relative to its top-left corner."""
    return width, title_height() + PORT_H / 2


class PortLabel(QtWidgets.QGraphicsSimpleTextItem):
    """A port's name beside it: a plain text item (NodeGraphQt's rich-text item costs about 26 KB per port)."""

    def __init__(self, text: str, parent: QtWidgets.QGraphicsItem) -> None:
        super().__init__(text, parent)
        self.setAcceptedMouseButtons(QtCore.Qt.MouseButton.NoButton)

    def setDefaultTextColor(self, color: QtGui.QColor) -> None:  # noqa: N802 (NodeGraphQt calls the text item API)
        self.setBrush(color)


class InfoItem(QtWidgets.QGraphicsItem):
    """A node's read-only text under its ports (type, main parameters, activation, output shape), painted
    directly: no embedded widget, so thousands of nodes stay cheap to build, update and draw."""

    _fonts: dict[tuple[bool, bool], tuple[QtGui.QFont, QtGui.QFontMetricsF]] = {}

    def __init__(self, parent: QtWidgets.QGraphicsItem | None = None) -> None:
        super().__init__(parent)
        self._lines: list[list[Run]] = []
        self._size = QtCore.QSizeF(0.0, 0.0)
        self.setCacheMode(QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.setAcceptedMouseButtons(QtCore.Qt.MouseButton.NoButton)

    @classmethod
    def font(cls, bold: bool, italic: bool) -> tuple[QtGui.QFont, QtGui.QFontMetricsF]:
        key = (bold, italic)
        if key not in cls._fonts:
            font = _font(INFO_FONT_PX, bold, italic)
            cls._fonts[key] = (font, QtGui.QFontMetricsF(font))
        return cls._fonts[key]

    def set_lines(self, lines: list[list[Run]]) -> bool:
        """Show ``lines``; returns whether anything changed (then the node needs a new layout)."""
        if lines == self._lines:
            return False
        self.prepareGeometryChange()
        self._lines = [list(line) for line in lines]
        self._size = QtCore.QSizeF(*info_size(lines))
        self.update()
        return True

    def get_value(self) -> str:
        """The text shown, as simple rich text (bold parts in ``<b>``), one line per ``<br>``."""
        return "<br>".join("".join(f"<b>{html.escape(t)}</b>" if b else html.escape(t) for t, _, b, _ in line)
                           for line in self._lines)

    def boundingRect(self) -> QtCore.QRectF:  # noqa: N802 (Qt API)
        return QtCore.QRectF(0.0, 0.0, self._size.width(), self._size.height())

    def paint(self, painter: QtGui.QPainter, option: QtWidgets.QStyleOptionGraphicsItem,
              widget: QtWidgets.QWidget | None = None) -> None:
        metrics = self.font(False, False)[1]
        y = 2.0 + metrics.ascent()
        for line in self._lines:
            x = 2.0
            for text, color, bold, italic in line:
                font, fm = self.font(bold, italic)
                painter.setFont(font)
                painter.setPen(QtGui.QColor(color))
                painter.drawText(QtCore.QPointF(x, y), text)
                x += fm.horizontalAdvance(text)
            y += metrics.lineSpacing()


class Badge(QtWidgets.QGraphicsEllipseItem):
    """The warning/error badge in a node's top-right corner; its tooltip lists the diagnostics."""

    def __init__(self, parent: QtWidgets.QGraphicsItem) -> None:
        super().__init__(0, 0, 18, 18, parent)
        self.setZValue(10)
        self.severity = ""
        self._text = QtWidgets.QGraphicsSimpleTextItem("!", self)
        font = QtGui.QFont()
        font.setBold(True)
        font.setPointSizeF(9)
        self._text.setFont(font)
        self._text.setBrush(QtGui.QColor("white"))
        br = self._text.boundingRect()
        self._text.setPos(9 - br.width() / 2, 9 - br.height() / 2)
        self.setVisible(False)

    def show_diagnostics(self, severity: str, messages: list[str]) -> None:
        self.severity = severity
        if not severity:
            self.setVisible(False)
            self.setToolTip("")
            return
        color = QtGui.QColor(210, 50, 50) if severity == "error" else QtGui.QColor(225, 160, 30)
        self.setBrush(color)
        self.setPen(QtGui.QPen(QtGui.QColor(30, 30, 30), 1.5))
        self.setToolTip("<br>".join(html.escape(m) for m in messages))
        self.setVisible(True)


class FormatBadge(QtWidgets.QGraphicsSimpleTextItem):
    """The badge in a node's top-left corner naming the layer's own tensor format (``fp32``, ``NCHW``); hidden for
    a layer in the network's format."""

    def __init__(self, parent: QtWidgets.QGraphicsItem) -> None:
        super().__init__("", parent)
        self.setZValue(10)
        font = QtGui.QFont()
        font.setBold(True)
        font.setPointSizeF(8)
        self.setFont(font)
        self.setBrush(QtGui.QColor(120, 200, 255))
        self.setPos(4, -14)
        self.setVisible(False)

    def show_format(self, text: str) -> None:
        self.setText(text)
        self.setToolTip(f"this layer runs in {text} whatever the network's format" if text else "")
        self.setVisible(bool(text))


class LayerNodeItem(NodeItem):
    """Node item laid out as title, then the port rows, then the info text underneath (compact width).

    Its size never depends on the zoom: the layout counts every port label and the info text whether they are
    shown or not. Zoomed out (scale below ``DETAIL_LOD``), the node is painted as a coloured box with its name
    in a size readable on screen, and its ports, labels and info are hidden until the view zooms in again."""

    info: InfoItem | None = None
    badges: tuple[QtWidgets.QGraphicsItem, ...] = ()  # the diagnostics and format badges
    #: the layer's note (e.g. the ONNX node it was imported from), a line of the tooltip
    note = ""
    #: while True (a bulk build), layouts wait: the builder lays out every node once at the end
    defer_layout = False

    def __init__(self, name: str = "node", parent: QtWidgets.QGraphicsItem | None = None) -> None:
        super().__init__(name, parent)
        self._text_item.setFont(_font(TITLE_FONT_PX, bold=True))
        self._icon_item.setVisible(False)
        self._detail = True
        self._by_overview = False
        self.on_moved: Callable[[LayerNodeItem], None] | None = None  # the canvas's overview follows dragged nodes
        self.setFlag(QtWidgets.QGraphicsItem.GraphicsItemFlag.ItemSendsGeometryChanges, True)

    def itemChange(self, change: QtWidgets.QGraphicsItem.GraphicsItemChange, value: Any) -> Any:  # noqa: N802
        if change == QtWidgets.QGraphicsItem.GraphicsItemChange.ItemPositionHasChanged and self.on_moved is not None:
            self.on_moved(self)
        return super().itemChange(change, value)

    def _tooltip_disable(self, state: bool) -> None:  # NodeGraphQt's tooltip (name, type), plus the note
        super()._tooltip_disable(state)
        if self.note:
            self.setToolTip(self.toolTip() + html.escape(self.note).replace("\n", "<br/>"))

    def set_note(self, note: str) -> None:
        """Show ``note`` in the node's tooltip."""
        if note != self.note:
            self.note = note
            self._tooltip_disable(self.disabled)

    def draw_node(self) -> None:
        if not LayerNodeItem.defer_layout:
            super().draw_node()

    def _add_port(self, port: Any) -> Any:
        """NodeGraphQt's port registration, with a plain text label."""
        text = PortLabel(port.name, self)
        text.setVisible(port.display_name)
        (self._input_items if port.port_type == PortTypeEnum.IN.value else self._output_items)[port] = text
        if self.scene():
            self.post_init()
        return port

    def calc_size(self, add_w: float = 0.0, add_h: float = 0.0) -> tuple[float, float]:
        info = self.info.boundingRect() if self.info is not None else QtCore.QRectF()
        width, height = node_box(self.name, [p.name if p.display_name else None for p in self._input_items],
                                 [p.name if p.display_name else None for p in self._output_items],
                                 (info.width(), info.height()))
        return width + add_w, height + add_h

    def _draw_node_horizontal(self) -> None:
        """Lay out title, ports (all of them, shown or not) and info; no size depends on the zoom."""
        self._width, self._height = self.calc_size()
        self._set_text_color(self.text_color)
        self._tooltip_disable(self.disabled)
        top = title_height()
        self._text_item.setPos((self._width - self._text_item.boundingRect().width()) / 2, 0.0)
        y = top
        for port, text in self._input_items.items():
            port.setPos(-PORT_W / 2, y)
            text.setPos(PORT_W / 2 - PortEnum.CLICK_FALLOFF.value + 2 + TEXT_MARGIN,
                        y + (PORT_H - text.boundingRect().height()) / 2)
            text.setVisible(self._detail and port.display_name)
            y += PORT_ROW
        y_out = top
        for port, text in self._output_items.items():
            port.setPos(self._width - PORT_W / 2, y_out)
            text.setPos(port.x() - text.boundingRect().width() + PortEnum.CLICK_FALLOFF.value - 2 - TEXT_MARGIN,
                        y_out + (PORT_H - text.boundingRect().height()) / 2)
            text.setVisible(self._detail and port.display_name)
            y_out += PORT_ROW
        if self.info is not None:
            self.info.setPos(7.0, top + max(len(self._input_items), len(self._output_items)) * PORT_ROW)
        self.update()

    def align_label(self, h_offset: float = 0.0, v_offset: float = 0.0) -> None:
        pass  # laid out once by draw_node(), not again at every paint

    def align_icon(self, h_offset: float = 0.0, v_offset: float = 0.0) -> None:
        pass

    def align_ports(self, v_offset: float = 0.0) -> None:
        pass

    def align_widgets(self, v_offset: float = 0.0) -> None:
        pass

    def auto_switch_mode(self) -> None:
        pass  # the level of detail is chosen in paint(), from the painter's scale

    def set_proxy_mode(self, mode: bool) -> None:
        self._set_detail(not mode)

    def _set_detail(self, detail: bool) -> None:
        if detail is self._detail:
            return
        self._detail = detail
        self._proxy_mode = not detail
        for items in (self._input_items, self._output_items):
            for port, text in items.items():
                port.setOpacity(1.0 if detail else 0.0)  # not hidden: hidden ports hide their links too
                text.setVisible(detail and port.display_name)
        self._text_item.setVisible(detail)
        if self.info is not None:
            self.info.setVisible(detail)

    def set_drawn_by_overview(self, on: bool) -> None:
        """Zoomed out, the canvas's overview draws this node: it paints nothing itself (and shows no ports, labels
        or info) but stays in the scene for clicks, rubber bands and drags."""
        if on is not self._by_overview:
            self._by_overview = on
            if on:
                self._set_detail(False)
            for badge in self.badges:  # the overview draws the error and warning marks
                badge.setOpacity(0.0 if on else 1.0)
            self.update()

    @property
    def drawn_by_overview(self) -> bool:
        """Whether the overview draws this node now (zoomed out)."""
        return self._by_overview

    @property
    def detailed(self) -> bool:
        """Whether the ports, labels and info are shown (False: zoomed out, a box with the name)."""
        return self._detail

    def paint(self, painter: QtGui.QPainter, option: QtWidgets.QStyleOptionGraphicsItem,
              widget: QtWidgets.QWidget | None = None) -> None:
        if self._by_overview:
            return
        lod = QtWidgets.QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        self._set_detail(lod >= DETAIL_LOD)
        if self._detail:
            self._paint_horizontal(painter, option, widget)
            return
        painter.save()
        rect = self.boundingRect()
        painter.setPen(QtGui.QPen(QtGui.QColor(*(NodeEnum.SELECTED_BORDER_COLOR.value if self.selected
                                                 else self.border_color)), 1.5 / max(lod, 1e-3)))
        painter.setBrush(QtGui.QColor(*self.color).lighter(150 if self.selected else 115))
        painter.drawRect(rect)
        px = min(13.0 / lod, rect.height() * 0.45)  # about 13 px on screen, as long as it fits the box
        if px * lod >= 6.0:
            font = QtGui.QFont(self._text_item.font())
            font.setPixelSize(max(1, int(px)))
            painter.setFont(font)
            painter.setPen(QtGui.QColor(235, 235, 235))
            text_rect = rect.adjusted(4.0 / lod, 0, -4.0 / lod, 0)
            text = QtGui.QFontMetricsF(font).elidedText(self.name, QtCore.Qt.TextElideMode.ElideRight, text_rect.width())
            painter.drawText(text_rect, QtCore.Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()


class LayerNode(BaseNode):
    """Base of the generated node classes; ``desc`` is the layer's descriptor (None for an unknown type)."""

    __identifier__ = IDENTIFIER
    NODE_NAME = "layer"
    desc: LayerDesc | None = None
    layer_type = ""

    def __init__(self) -> None:
        super().__init__(qgraphics_item=LayerNodeItem)
        self.set_port_deletion_allowed(True)
        self.set_color(*category_color(self.desc))
        if self.layer_type.startswith("template:"):
            self.set_property("border_color", (*TEMPLATE_BORDER, 255), push_undo=False)
        if self.desc is None or self.desc.generates_output:
            self.add_output("output", multi_output=True, display_name=False, color=OUTPUT_COLOR)
        for i in range(len(self.desc.inputs) if self.desc else 0):
            self.add_input_slot(i)
        self.info = InfoItem(self.view)
        self.view.info = self.info
        self.badge = Badge(self.view)
        self.format_badge = FormatBadge(self.view)
        self.view.badges = (self.badge, self.format_badge)

    def add_input_slot(self, index: int) -> None:
        """Add the port for input slot ``index`` (ports are always in slot order)."""
        secondary = input_is_secondary(self.desc, index)
        color = SECONDARY_COLOR if secondary else (PRIMARY_COLOR if self.desc else UNKNOWN_COLOR)
        self.add_input(input_port_name(self.desc, index), multi_input=False, color=color,
                       painter_func=_square_port_painter if secondary else None)

    def set_info(self, lines: list[list[Run]], layout: bool = True) -> None:
        """Show ``lines`` in the node body; re-layout the node when they changed (unless ``layout`` is False:
        the caller lays it out later, as a bulk build does)."""
        if self.info.set_lines(lines) and layout:
            self.view.draw_node()
            self.place_badge()

    def place_badge(self) -> None:
        self.badge.setPos(self.view.boundingRect().right() - 12, -6)


def make_node_class(layer_type: str, desc: LayerDesc | None) -> type[LayerNode]:
    """A NodeGraphQt node class for one layer type, generated from its descriptor."""
    return type(f"LayerNode_{layer_type}", (LayerNode,), {
        "__identifier__": IDENTIFIER,
        "NODE_NAME": desc.display_name if desc else layer_type,
        "desc": desc,
        "layer_type": layer_type,
    })
