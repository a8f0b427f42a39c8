"""Node classes generated from layer descriptors. They are views: they hold no network semantics, only what
is drawn (ports named after the descriptor's inputs, an info label, a diagnostics badge)."""
from __future__ import annotations

import html
import zlib
from typing import Any

from NodeGraphQt import BaseNode, NodeBaseWidget
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


class InfoWidget(NodeBaseWidget):
    """A read-only rich-text label inside a node: type, main parameters, activation, output shape."""

    def __init__(self, parent: QtWidgets.QGraphicsItem | None = None) -> None:
        super().__init__(parent, name="info", label="")
        self._text = QtWidgets.QLabel()
        self._text.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self._text.setStyleSheet("QLabel { color: #d8d8d8; background: transparent; font-size: 11px; }")
        self._text.setContentsMargins(2, 0, 2, 2)
        self.set_custom_widget(self._text)
        self.widget().setStyleSheet("QGroupBox { background: transparent; border: none; margin-top: 0px;"
                                    " padding-top: 0px; } QGroupBox::title { height: 0px; }")

    def get_value(self) -> str:
        return self._text.text()

    def set_value(self, text: str) -> None:
        if text != self._text.text():
            self._text.setText(text)
            self._text.adjustSize()
            self.widget().adjustSize()
            self.adjustSize()


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
    """Node item laid out as title, then the port rows, then the info label underneath (compact width)."""

    def _ports_extent(self) -> tuple[float, float, float]:
        port_w, in_text, out_text, in_h, out_h = 0.0, 0.0, 0.0, 0.0, 0.0
        for items, is_in in ((self._input_items, True), (self._output_items, False)):
            for port, text in items.items():
                if not port.isVisible():
                    continue
                port_w = port_w or port.boundingRect().width()
                tw = text.boundingRect().width() if text.isVisible() else 0.0
                if is_in:
                    in_text, in_h = max(in_text, tw), in_h + port.boundingRect().height() + 1
                else:
                    out_text, out_h = max(out_text, tw), out_h + port.boundingRect().height() + 1
        return port_w + in_text + out_text + 12.0, max(in_h, out_h), port_w

    def _calc_size_horizontal(self) -> tuple[float, float]:
        ports_w, ports_h, _ = self._ports_extent()
        widget_w = max((w.boundingRect().width() for w in self._widgets.values() if w.isVisible()), default=0.0)
        widget_h = sum(w.boundingRect().height() for w in self._widgets.values() if w.isVisible())
        width = max(self._text_item.boundingRect().width() + 24.0, ports_w, widget_w + 14.0, 120.0)
        return width, ports_h + widget_h + 6.0

    def _align_widgets_horizontal(self, v_offset: float) -> None:
        _, ports_h, _ = self._ports_extent()
        y = v_offset + ports_h
        for widget in self._widgets.values():
            if widget.isVisible():
                widget.widget().setTitleAlign("left")
                widget.setPos(7.0, y)
                y += widget.boundingRect().height()


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
        self.info = InfoWidget(self.view)
        self.add_custom_widget(self.info)
        self.badge = Badge(self.view)
        self.format_badge = FormatBadge(self.view)

    def add_input_slot(self, index: int) -> None:
        """Add the port for input slot ``index`` (ports are always in slot order)."""
        secondary = input_is_secondary(self.desc, index)
        color = SECONDARY_COLOR if secondary else (PRIMARY_COLOR if self.desc else UNKNOWN_COLOR)
        self.add_input(input_port_name(self.desc, index), multi_input=False, color=color,
                       painter_func=_square_port_painter if secondary else None)

    def set_info(self, text: str) -> None:
        """Show ``text`` (rich text) in the node body and re-layout the node."""
        if self.info.get_value() != text:
            self.info.set_value(text)
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
