"""Nodes made when they are needed: the canvas of a large model creates NodeGraphQt's items for a layer only when it
comes into view, is looked up (selected, searched, edited through ``canvas.nodes[name]``), or is near the view while
the canvas is idle. Until then a layer is drawn by the overview from its measured box (``NodeGeom``), which the same
layout rule as a node item gives (``canvas.nodes.node_box``)."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np
from PySide6 import QtCore


class NodeGeom(NamedTuple):
    """Where a layer's node is on the scene: its box, body colour, node item (None while it has none), the centre
    of its output port (None without one) and of each input port."""

    rect: QtCore.QRectF
    color: tuple[int, ...]
    view: Any
    out: QtCore.QPointF | None
    ins: list[QtCore.QPointF]


class LazyNodes(Mapping[str, Any]):
    """``canvas.nodes``: every layer on the canvas by name, in model order. Looking a layer up (``nodes[name]``,
    ``nodes.get(name)``) creates its node when it has none yet; ``name in nodes``, ``len`` and iterating over the
    names create nothing. ``values()`` and ``items()`` create every node: the canvas itself uses ``created()``."""

    def __init__(self, make: Callable[[str], Any]) -> None:
        self._all: dict[str, Any] = {}
        self._make = make

    def __getitem__(self, name: str) -> Any:
        node = self._all[name]
        return node if node is not None else self._make(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._all))

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, name: object) -> bool:
        return name in self._all

    def created(self, name: str) -> Any:
        """The node of ``name`` if it has been made, else None (never makes one)."""
        return self._all.get(name)

    def created_items(self) -> list[tuple[str, Any]]:
        """(name, node) of every layer whose node exists."""
        return [(n, v) for n, v in self._all.items() if v is not None]

    def pending(self) -> list[str]:
        """Names of the layers that have no node yet."""
        return [n for n, v in self._all.items() if v is None]

    def add(self, name: str, node: Any = None) -> None:
        """Record ``name`` (with its node, or None until it is made)."""
        self._all[name] = node

    def pop(self, name: str) -> Any:
        """Forget ``name``; returns its node (None if it had none)."""
        return self._all.pop(name, None)

    def rename(self, old: str, new: str) -> None:
        """``old`` is now called ``new`` (it moves to the end of the order, as a re-added layer)."""
        self._all[new] = self._all.pop(old)


class BoxIndex:
    """Which layers, and which links, cross an area of the scene: the boxes of every layer and the bounding boxes
    of every link, in arrays (one query over thousands of layers costs well under a millisecond)."""

    def __init__(self, names: list[str], geometry: Callable[[str], NodeGeom],
                 links: list[tuple[str, str, int]]) -> None:
        self.names = names
        self._row = {n: i for i, n in enumerate(names)}
        geoms = {n: geometry(n) for n in names}
        self._boxes = np.array([r.getCoords() for r in (g.rect for g in geoms.values())], dtype=float).reshape(-1, 4)
        ends, points = [], []
        self._links: list[tuple[str, str, int]] = []
        self._links_of: dict[int, list[int]] = {}  # row -> positions of the links that touch it
        for link in links:
            src, dst, index = link
            a, b = geoms.get(src), geoms.get(dst)
            if a is None or b is None or a.out is None or index >= len(b.ins):
                continue
            for row in (self._row[src], self._row[dst]):
                self._links_of.setdefault(row, []).append(len(self._links))
            self._links.append(link)
            ends.append((self._row[src], self._row[dst]))
            points.append((a.out.x(), a.out.y(), b.ins[index].x(), b.ins[index].y()))
        self._ends = np.array(ends, dtype=np.int64).reshape(-1, 2)
        self._segs = self._bounds(np.array(points, dtype=float).reshape(-1, 4))

    @staticmethod
    def _bounds(p: np.ndarray) -> np.ndarray:
        return np.stack([np.minimum(p[:, 0], p[:, 2]), np.minimum(p[:, 1], p[:, 3]),
                         np.maximum(p[:, 0], p[:, 2]), np.maximum(p[:, 1], p[:, 3])], axis=1)

    def update(self, names: set[str], geometry: Callable[[str], NodeGeom]) -> bool:
        """The boxes of ``names`` changed (not the links): measure them and their links again. False when it
        cannot (a layer or a port it does not know): then build a new index."""
        for name in names:
            row = self._row.get(name)
            if row is None:
                return False
            self._boxes[row] = geometry(name).rect.getCoords()
            for i in self._links_of.get(row, ()):
                src, dst, index = self._links[i]
                a, b = geometry(src), geometry(dst)
                if a.out is None or index >= len(b.ins):
                    return False
                p = np.array([[a.out.x(), a.out.y(), b.ins[index].x(), b.ins[index].y()]])
                self._segs[i] = self._bounds(p)[0]
        return True

    @staticmethod
    def _crossing(boxes: np.ndarray, area: QtCore.QRectF) -> np.ndarray:
        return ((boxes[:, 0] <= area.right()) & (boxes[:, 2] >= area.left())
                & (boxes[:, 1] <= area.bottom()) & (boxes[:, 3] >= area.top()))

    @staticmethod
    def _distance(boxes: np.ndarray, point: QtCore.QPointF) -> np.ndarray:
        """Manhattan distance from ``point`` to each box (0 inside)."""
        dx = np.maximum(0.0, np.maximum(boxes[:, 0] - point.x(), point.x() - boxes[:, 2]))
        dy = np.maximum(0.0, np.maximum(boxes[:, 1] - point.y(), point.y() - boxes[:, 3]))
        return dx + dy

    def crossing(self, area: QtCore.QRectF, among: set[str]) -> list[tuple[str, bool, float]]:
        """The layers of ``among`` whose box crosses ``area``, or which have a link crossing it: (name, whether its
        own box crosses it, distance from the centre of ``area`` to the box or the nearest crossing link),
        nearest first."""
        if not among or not self.names:
            return []
        wanted = np.zeros(len(self.names), dtype=bool)
        wanted[[self._row[n] for n in among if n in self._row]] = True
        center = area.center()
        by_box = self._crossing(self._boxes, area) & wanted
        dist = np.where(by_box, self._distance(self._boxes, center), np.inf)
        hit = by_box.copy()
        if len(self._ends):
            crossing = self._crossing(self._segs, area)
            ends, seg_dist = self._ends[crossing], self._distance(self._segs[crossing], center)
            for side in (0, 1):
                rows = ends[:, side]
                keep = wanted[rows]
                hit[rows[keep]] = True
                np.minimum.at(dist, rows[keep], seg_dist[keep])
        rows = np.flatnonzero(hit)
        rows = rows[np.argsort(dist[rows], kind="stable")]
        return [(self.names[i], bool(by_box[i]), float(dist[i])) for i in rows]
