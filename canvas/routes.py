"""Links drawn along the routes of the layout (``engine.layout.Drawing.bends``), so that a skip connection or a
concatenation's far input never runs behind the layers it passes: through the lanes the layout kept free in the
columns it crosses, and from one height to another only in the free space between columns. Routes are a view
state of the canvas, set by Arrange and by an import's layout; a link whose end moves (or is relinked) forgets
its route and is drawn as NodeGraphQt draws links."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from NodeGraphQt.qgraphics.pipe import PipeItem
from PySide6 import QtCore, QtGui

from canvas.groups import KEY
from engine.layout import route_through

Route = list[tuple[float, float]]


def route_path(points: list[QtCore.QPointF]) -> QtGui.QPainterPath:
    """The path through ``points``: straight where two points share their x or y, an S-curve between different
    heights (level at both ends, so it stays between the two points' x)."""
    path = QtGui.QPainterPath(points[0])
    for p, q in zip(points, points[1:]):
        if abs(p.x() - q.x()) < 0.05 or abs(p.y() - q.y()) < 0.05:
            path.lineTo(q)
        else:
            mid = (p.x() + q.x()) / 2
            path.cubicTo(QtCore.QPointF(mid, p.y()), QtCore.QPointF(mid, q.y()), q)
    return path


def routed_points(start: QtCore.QPointF, route: Route, end: QtCore.QPointF) -> list[QtCore.QPointF]:
    """The points of a link from its output port ``start`` to its input port ``end`` along ``route``."""
    return [QtCore.QPointF(x, y) for x, y in route_through((start.x(), start.y()), route, (end.x(), end.y()))]


def _port_center(port: Any) -> QtCore.QPointF:
    rect = port.boundingRect()
    pos = port.scenePos()
    return QtCore.QPointF(pos.x() + rect.width() / 2, pos.y() + rect.height() / 2)


class RoutedPipe(PipeItem):
    """A link item that follows its route when the canvas has one (``route_of(pipe)``), else NodeGraphQt's
    curve."""

    route_of: Any = None  # set by the canvas: pipe -> Route | None

    def draw_path(self, start_port: Any, end_port: Any = None, cursor_pos: Any = None) -> None:
        super().draw_path(start_port, end_port, cursor_pos)
        if cursor_pos is not None or not (self.input_port and self.output_port) or not self.isVisible():
            return
        route = self.route_of(self) if self.route_of is not None else None
        if not route:
            return
        points = routed_points(_port_center(self.output_port), route, _port_center(self.input_port))
        self.setPath(route_path(points[::-1]))  # NodeGraphQt's direction: from the input port
        self._draw_direction_pointer()


class RoutesMixin:
    """``ModelCanvas``'s routed links: the routes of the last layout, looked up by (source, target) as drawn
    (a collapsed group's box is ``group:PATH``)."""

    def _init_routes(self) -> None:
        self._routes: dict[tuple[str, str], Route] = {}
        viewer = self.viewer()
        viewer.establish_connection = self._establish_connection  # NodeGraphQt makes its links there

    def _establish_connection(self, start_port: Any, end_port: Any) -> None:
        """NodeGraphQt's ``NodeViewer.establish_connection``, making a :class:`RoutedPipe`."""
        pipe = RoutedPipe()
        pipe.route_of = self._pipe_route
        self.viewer().scene().addItem(pipe)
        pipe.set_connections(start_port, end_port)
        pipe.draw_path(pipe.input_port, pipe.output_port)
        if start_port.node.selected or end_port.node.selected:
            pipe.highlight()
        if not start_port.node.visible or not end_port.node.visible:
            pipe.hide()

    def _pipe_route(self, pipe: PipeItem) -> Route | None:
        if not self._routes:
            return None
        src, dst = self.layer_of(pipe.output_port.node), self.layer_of(pipe.input_port.node)
        return self._routes.get((src, dst)) if src is not None and dst is not None else None

    def link_route(self, source: str, target: str) -> Route | None:
        """The route the link from ``source`` to ``target`` follows (None: drawn as NodeGraphQt draws links)."""
        return self._routes.get((source, target))

    def set_routes(self, routes: Mapping[tuple[str, str], Route], replace: bool = True) -> None:
        """Draw the links along ``routes`` (``engine.layout.Drawing.bends``) from now on: instead of every route
        (``replace``), or besides the others (a part of the network was arranged)."""
        if replace:
            self._routes = {}
        self._routes.update((k, list(v)) for k, v in routes.items())
        self._redraw_links()

    def _forget_routes(self, layer: str) -> None:
        """``layer`` moved, changed its links, went or was renamed: its links (and its group box's) lose their
        routes."""
        if not self._routes:
            return
        ends = {layer}
        box = getattr(self, "_hidden", {}).get(layer)
        if box is not None:
            ends.add(KEY + box)
        gone = [k for k in self._routes if k[0] in ends or k[1] in ends]
        for key in gone:
            del self._routes[key]

    def _redraw_links(self) -> None:
        for _, node in self.nodes.created_items():
            for port in node.input_ports():
                for pipe in port.view.connected_pipes:
                    pipe.draw_path(pipe.input_port, pipe.output_port)
        if self.overview is not None:
            self.overview.invalidate()

    def _overview_route(self, source: str, target: str, start: QtCore.QPointF,
                        end: QtCore.QPointF) -> list[QtCore.QPointF]:
        """The points the overview draws a link through (its route's, or the straight line)."""
        route = self._routes.get((source, target))
        return routed_points(start, route, end) if route else [start, end]
