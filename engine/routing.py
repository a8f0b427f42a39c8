"""Routes for links between boxes placed anywhere (a file opened from disk, groups expanded or collapsed, layers
moved), so that no link is drawn behind a box: the layout's own routes (``engine.layout.Drawing.bends``) are kept
while they stay clear, the others are found here from the boxes alone. Same route format as the layout's, drawn
through :func:`engine.layout.route_through`. Qt-free; the work per link looks only at the boxes near it (sorted
arrays), so thousands of links route in well under a second."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from engine.layout import route_through

Box = tuple[float, float, float, float]  # x, y, width, height
Point = tuple[float, float]
Route = list[Point]
Link = tuple[str, str]

CLEAR = 6.0  # the least distance a routed link keeps from a box it passes


class BoxGrid:
    """Which boxes meet a rectangle: the boxes' edges in arrays sorted by their left edge, so a query looks only
    at the boxes whose left edge can lie in its x-range."""

    def __init__(self, boxes: Mapping[str, Box]) -> None:
        self.names = list(boxes)
        self.boxes = [boxes[n] for n in self.names]
        edges = np.array([(x, y, x + w, y + h) for x, y, w, h in self.boxes], dtype=float).reshape(-1, 4)
        self._order = np.argsort(edges[:, 0], kind="stable")
        self._edges = edges[self._order]
        self._widest = float((edges[:, 2] - edges[:, 0]).max()) if len(edges) else 0.0

    def meeting(self, x0: float, y0: float, x1: float, y1: float, pad: float = 0.0) -> list[int]:
        """Indices of the boxes, grown by ``pad`` on every side, whose inside meets the rectangle (x0, y0)-(x1, y1)
        (a rectangle of no width or height is a line)."""
        return self.meeting_any(np.array([[x0, y0, x1, y1]]), pad)

    def meeting_any(self, rects: np.ndarray, pad: float = 0.0) -> list[int]:
        """:meth:`meeting` of several rectangles (rows of x0, y0, x1, y1) at once: the boxes meeting any."""
        e = self._edges
        lo = np.searchsorted(e[:, 0], rects[:, 0].min() - self._widest - pad, side="left")
        hi = np.searchsorted(e[:, 0], rects[:, 2].max() + pad, side="left")
        if hi <= lo:
            return []
        part = e[lo:hi, None, :]
        hit = ((part[..., 0] - pad < rects[None, :, 2]) & (rects[None, :, 0] < part[..., 2] + pad)
               & (part[..., 1] - pad < rects[None, :, 3]) & (rects[None, :, 1] < part[..., 3] + pad)).any(axis=1)
        return sorted(self._order[lo:hi][hit].tolist())


def _segments_clear(points: list[Point], grid: BoxGrid, ends: set[int]) -> bool:
    """Whether the path through ``points`` (drawn as ``canvas.routes.route_path`` draws it: straight, or an
    S-curve inside the rectangle of its two points) meets no box but its own ends'."""
    p = np.array(points, dtype=float)
    rects = np.concatenate([np.minimum(p[:-1], p[1:]), np.maximum(p[:-1], p[1:])], axis=1)
    return all(i in ends for i in grid.meeting_any(rects, pad=-1.0))  # (touching a side is not behind)


def route_clear(start: Point, route: Route, end: Point, grid: BoxGrid, ends: set[int]) -> bool:
    """Whether the link from port ``start`` to port ``end`` along ``route`` meets no box but those of ``ends``."""
    return _segments_clear(route_through(start, route, end), grid, ends)


def _free_y(grid: BoxGrid, ids: list[int], lo: float, hi: float, want: float) -> float | None:
    """The height nearest ``want`` within (lo, hi) at least CLEAR away from the boxes ``ids``."""
    blocked = sorted((grid.boxes[i][1] - CLEAR, grid.boxes[i][1] + grid.boxes[i][3] + CLEAR) for i in ids)
    free, y = [], lo + CLEAR
    for a, b in blocked:
        if a > y:
            free.append((y, a))
        y = max(y, b)
    if hi - CLEAR > y:
        free.append((y, hi - CLEAR))
    if not free:
        return None
    return min((min(max(want, a), b) for a, b in free), key=lambda v: abs(v - want))


def _columns(grid: BoxGrid, ids: list[int]) -> list[tuple[float, float, list[int]]]:
    """The boxes ``ids`` gathered into columns: (left, right, boxes) of each run of overlapping x-extents (grown by
    CLEAR), left to right; between two columns every height is free."""
    out: list[tuple[float, float, list[int]]] = []
    for i in sorted(ids, key=lambda i: grid.boxes[i][0]):
        x, _, w, _ = grid.boxes[i]
        if out and x - CLEAR <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], x + w + CLEAR), [*out[-1][2], i])
        else:
            out.append((x - CLEAR, x + w + CLEAR, [i]))
    return out


def _across(start: Point, end: Point, grid: BoxGrid, ends: set[int]) -> Route | None:
    """A left-to-right route: through the free space between columns, and through each column at a free height
    (near the straight line from ``start`` to ``end``)."""
    (x0, ys), (x1, yt) = start, end
    pad = 400.0
    for _ in range(4):
        lo, hi = min(ys, yt) - pad, max(ys, yt) + pad
        ids = [i for i in grid.meeting(x0, lo, x1, hi) if i not in ends]
        cols = _columns(grid, ids)
        first, last = x0, x1
        if cols and cols[0][0] <= x0:  # the source's own column: left at the port's height
            first = cols.pop(0)[1]
        if cols and cols[-1][1] >= x1:  # the target's own column: entered at the port's height
            last = cols.pop()[0]
        if first > last:
            return None
        route: Route = [(first, ys)]
        for left, right, members in cols:
            want = ys + (yt - ys) * ((left + right) / 2 - x0) / max(x1 - x0, 1.0)
            y = _free_y(grid, members, lo, hi, want)
            if y is None:
                break
            route += [(left, y), (right, y)]
        else:
            route.append((last, yt))
            return route if route_clear(start, route, end, grid, ends) else None
        pad *= 3
    return None


def _side(x: float, y0: float, y1: float, step: float, grid: BoxGrid, ends: set[int]) -> float | None:
    """The x nearest ``x`` (moving by ``step``'s sign) where a vertical run from ``y0`` to ``y1`` meets no box."""
    for _ in range(8):
        hit = [i for i in grid.meeting(x, min(y0, y1), x, max(y0, y1), pad=CLEAR) if i not in ends]
        if not hit:
            return x
        boxes = [grid.boxes[i] for i in hit]
        x = max(b[0] + b[2] for b in boxes) + CLEAR + 1 if step > 0 else min(b[0] for b in boxes) - CLEAR - 1
    return None


def _around(start: Point, end: Point, grid: BoxGrid, ends: set[int]) -> Route | None:
    """A route out to the right of the source, along a free height, and in from the left of the target (a link
    running back, as into the next band of a folded drawing, or one no straight passage serves)."""
    (x0, ys), (x1, yt) = start, end
    out_x, in_x = x0 + 2 * CLEAR, x1 - 2 * CLEAR
    lo_x, hi_x = min(out_x, in_x), max(out_x, in_x)
    pad = 200.0
    for _ in range(4):
        lo, hi = min(ys, yt) - pad, max(ys, yt) + pad
        ids = [i for i in grid.meeting(lo_x - 200, lo, hi_x + 200, hi) if i not in ends]
        tried: set[float] = set()
        for want in ((ys + yt) / 2, ys, yt, lo, hi):
            y = _free_y(grid, ids, lo, hi, want)
            if y is None or y in tried:
                continue
            tried.add(y)
            a = _side(out_x, ys, y, 1, grid, ends)
            b = _side(in_x, y, yt, -1, grid, ends)
            if a is None or b is None:
                continue
            route = [(a, ys), (a, y), (b, y), (b, yt)]
            if route_clear(start, route, end, grid, ends):
                return route
        pad *= 3
    return None


def _meets_any(points: list[Point], rects: list[Box]) -> bool:
    """Whether the rectangle around ``points`` meets any of ``rects``."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    return any(x < x1 and x0 < x + w and y < y1 and y0 < y + h for x, y, w, h in rects)


def route_links(boxes: Mapping[str, Box], links: Mapping[Link, tuple[Point, Point]],
                keep: Mapping[Link, Route] | None = None, changed: list[Box] | None = None) -> dict[Link, Route]:
    """A route for each link (``(source, target)`` -> its output port and input port points) between ``boxes``
    (name -> x, y, width, height) that meets no box but its ends': the route of ``keep`` where it is still clear,
    else one through the free space between columns, else one around; a link no route serves is left out (drawn
    straight). ``changed``: where boxes came, went or moved since ``keep`` was clear (None: anywhere); a kept
    route away from all of them is kept without looking further (a moved layer costs little on a large network)."""
    grid = BoxGrid(boxes)
    row = {n: i for i, n in enumerate(grid.names)}
    keep = keep or {}
    out: dict[Link, Route] = {}
    for link, (start, end) in links.items():
        ends = {row[n] for n in link if n in row}
        old = keep.get(link)
        if old and changed is not None and not _meets_any([start, *old, end], changed):
            out[link] = list(old)
            continue
        if old and route_clear(start, old, end, grid, ends):
            out[link] = list(old)
            continue
        if _segments_clear([start, end], grid, ends) and start[0] < end[0]:
            out[link] = [(start[0], start[1]), (end[0], end[1])]
            continue
        route = _across(start, end, grid, ends) if end[0] > start[0] + 2 * CLEAR else None
        route = route or _around(start, end, grid, ends)
        if route is not None:
            out[link] = route
    return out
