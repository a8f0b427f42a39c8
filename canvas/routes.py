"""Links drawn along the routes of the layout (``engine.layout.Drawing.bends``), so that a skip connection or a
concatenation's far input never runs behind the layers it passes: through the lanes the layout kept free in the
columns it crosses, and from one height to another only in the free space between columns. Routes are a view
state of the canvas, set by Arrange and by an import's layout; whenever what is drawn changes (a file opens, groups
expand or collapse, a layer moves or is relinked) the routes still clear of every box are kept and the others are
found again from the boxes (``engine.routing``) before the canvas next paints."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from NodeGraphQt.qgraphics.pipe import PipeItem
from PySide6 import QtCore, QtGui

from canvas.groups import KEY
from engine.events import ActivationChanged, LayerEvent, ParamChanged
from engine.layout import route_through
from engine.routing import route_links

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
        self._dirty: set[str] | None = None  # the layers changed since the routes were checked (None: anything may have)
        viewer = self.viewer()
        viewer.establish_connection = self._establish_connection  # NodeGraphQt makes its links there
        self._routes_timer = QtCore.QTimer(self)  # what is drawn changed: routes checked once, after the burst
        self._routes_timer.setSingleShot(True)
        self._routes_timer.setInterval(0)
        self._routes_timer.timeout.connect(self._reroute_later)

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
            self._routes_timer.stop()  # a whole layout's routes: clear of every box by construction
            self._dirty = set()
        else:
            self._schedule_routes()
        self._routes.update((k, list(v)) for k, v in routes.items())
        self._redraw_links()

    def _layer_changed_routes(self, ev: LayerEvent) -> None:
        """A layer changed: moved, relinked, gone or renamed, its links lose their routes; its box may have grown
        (a parameter or activation shown on it): the routes are checked again."""
        if isinstance(ev, (ParamChanged, ActivationChanged)):
            self._schedule_routes(ev.layer)
        else:
            self._forget_routes(ev.layer)

    def _forget_routes(self, layer: str) -> None:
        """``layer`` moved, changed its links, went or was renamed: its links (and its group box's) lose their
        routes."""
        self._schedule_routes(layer)
        if not self._routes:
            return
        ends = {layer}
        box = getattr(self, "_hidden", {}).get(layer)
        if box is not None:
            ends.add(KEY + box)
        gone = [k for k in self._routes if k[0] in ends or k[1] in ends]
        for key in gone:
            del self._routes[key]

    def _schedule_routes(self, layer: str | None = None) -> None:
        """What is drawn changed (``layer``'s box only, or None: anything): check and find the routes after this
        turn of the event loop (or before the canvas paints, whichever comes first)."""
        if not hasattr(self, "_routes_timer"):
            return  # (the canvas is being built)
        if layer is None or self._dirty is None:
            self._dirty = None
        else:
            self._dirty.add(layer)
            box = getattr(self, "_hidden", {}).get(layer)
            if box is not None:
                self._dirty.add(KEY + box)
        if not self._routes_timer.isActive():
            self._routes_timer.start()

    def _routes_before_paint(self) -> None:
        """Before the canvas paints: the routes a change asked for are found now (no frame shows a link behind a
        box)."""
        if self._routes_timer.isActive():
            self._routes_timer.stop()
            self.reroute()

    def _reroute_later(self) -> None:
        try:
            self.reroute()
        except RuntimeError:  # the canvas was closed before the timer came due
            pass

    def reroute(self) -> None:
        """Route every link as drawn now (layers shown and collapsed groups' boxes): a route still clear of every
        box is kept, the others are found again from the boxes (``engine.routing.route_links``)."""
        self._routes_timer.stop()
        names = self._shown_names()
        geoms = {n: self._shown_geometry(n) for n in names}
        boxes = {n: (g.rect.x(), g.rect.y(), g.rect.width(), g.rect.height()) for n, g in geoms.items()}
        links: dict[tuple[str, str], tuple[tuple[float, float], tuple[float, float]]] = {}
        for src, dst, index in self._shown_links():
            a, b = geoms.get(src), geoms.get(dst)
            if (src, dst) in links or a is None or b is None or a.out is None or index >= len(b.ins):
                continue
            links[(src, dst)] = ((a.out.x(), a.out.y()), (b.ins[index].x(), b.ins[index].y()))
        # only a box that came or grew can stand in a route's way: where only known layers changed, the routes
        # away from their boxes stay as they are without a look
        changed = None if self._dirty is None else [boxes[n] for n in self._dirty if n in boxes]
        routes = route_links(boxes, links, self._routes, changed)
        self._dirty = set()
        if routes != self._routes:
            self._routes = routes
            self._redraw_links()

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
