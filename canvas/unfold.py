"""Expanded groups laid out afresh: a collapsed group's box keeps little room, so when groups expand their layers
get a readable banded layout (``engine.layout``) and the rest of the canvas moves aside; collapsing them again
puts every layer back where it stood, as long as nothing moved since. The places are model positions, changed as
one undo step like Arrange's."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from PySide6 import QtCore

from engine.groups import BOX_SIZE
from engine.layout import Drawing, banded_drawing, expanded_drawing, grouped_drawing

Point = tuple[float, float]


@dataclass
class Unfolding:
    """One expansion's layout: what expanded (a group's path, or ``""`` for all), each moved layer's place before
    and after, and the collapsed boxes' places before."""

    key: str
    before: dict[str, Point]
    after: dict[str, Point]
    block_rects: dict[str, QtCore.QRectF] = field(default_factory=dict)


class UnfoldMixin:
    """``ModelCanvas``'s layout of expanded groups (called by ``GroupsMixin`` around expand and collapse)."""

    def _init_unfold(self) -> None:
        self._unfoldings: list[Unfolding] = []

    def _view_aspect(self) -> float:
        vp = self.viewer().viewport().size()
        return vp.width() / vp.height() if vp.height() > 50 and vp.width() > 50 else 1.6

    def _unfold_all(self, blocks: set[str]) -> None:
        """Expand All drew every layer: the groups that were boxes (``blocks``) laid out as banded blocks, the whole
        drawing from the top-left corner it had."""
        layers = self.net_model.layers
        if not blocks or not layers:
            return
        corner = self._shown_rect().topLeft()
        drawing = expanded_drawing(layers, self.node_sizes(layers), self._view_aspect(), blocks)
        moved = _translated(drawing, corner.x(), corner.y())
        self._apply_unfolding("", moved.positions, "Expand all groups")
        self._block_rects = {}
        self.set_routes(moved.bends, replace=True)
        self._schedule_routes()  # (the links between blocks: found from the boxes)

    def _unfold_group(self, path: str, old: QtCore.QRectF) -> None:
        """Group ``path``'s box (``old``) opened: its layers (and boxes of its subgroups still collapsed) laid out
        where the box stood, everything right of the box moved right and everything below it moved down by what
        the block needs more than the box had (so nothing overlaps and what stood apart stays apart)."""
        members = {n: self.net_model.layers[n] for n in self._groups[path].members if n in self.net_model.layers}
        if not members or old.isEmpty():
            return
        inside = {p for p in self._collapsed if p.startswith(path + "/")}
        sizes = self.node_sizes(members)
        drawing = (grouped_drawing(members, sizes, inside, self._view_aspect(), BOX_SIZE) if inside
                   else banded_drawing(members, sizes, self._view_aspect()))
        moved = _translated(drawing, old.left(), old.top())
        right = max(x + sizes[n][0] for n, (x, _) in moved.positions.items())
        bottom = max(y + sizes[n][1] for n, (_, y) in moved.positions.items())
        dx, dy = max(0.0, right - old.right()), max(0.0, bottom - old.bottom())
        places = dict(moved.positions)
        rects = dict(self._block_rects)
        for unit, names, rect in self._other_units(set(members)):
            sx = dx if rect.left() >= old.right() - 0.5 else 0.0
            sy = dy if rect.top() >= old.bottom() - 0.5 else 0.0
            if sx or sy:
                for n in names:
                    x, y = self.net_model.layers[n].position
                    places[n] = (round(x + sx, 1), round(y + sy, 1))
                if unit in rects:
                    rects[unit] = rects[unit].translated(sx, sy)
        for p, r in moved.blocks.items():
            rects[p] = QtCore.QRectF(*r)
        self._apply_unfolding(path, places, f"Expand group {path}")
        self._block_rects = rects
        self.set_routes(moved.bends, replace=False)

    def _other_units(self, skip: set[str]) -> list[tuple[str, list[str], QtCore.QRectF]]:
        """What stands on the canvas beside the layers ``skip``: each shown layer, and each collapsed group's box
        with its layers (``(name or path, layers, scene rect)``)."""
        units: list[tuple[str, list[str], QtCore.QRectF]] = []
        boxed: dict[str, list[str]] = {}
        for name in self.net_model.layers:
            if name in skip:
                continue
            top = self._hidden.get(name)
            if top is None:
                units.append((name, [name], self.node_rect(name)))
            else:
                boxed.setdefault(top, []).append(name)
        for top, names in boxed.items():
            box = self._boxes.get(top)
            rect = box.sceneBoundingRect() if box is not None else QtCore.QRectF()
            for n in names:
                if box is None:
                    rect = rect.united(self.node_rect(n))
            units.append((top, names, rect))
        return units

    def _apply_unfolding(self, key: str, places: Mapping[str, Point], text: str) -> None:
        """Move the layers to ``places`` as one undo step and remember where they stood."""
        layers = self.net_model.layers
        before = {n: tuple(layers[n].position) for n, p in places.items() if tuple(layers[n].position) != tuple(p)}
        if not before:
            return
        rects = dict(self._block_rects)
        with self.net_model.macro(text):
            for name in before:
                self.net_model.move_layer(name, places[name])
        self._unfoldings.append(Unfolding(key, before, {n: tuple(places[n]) for n in before}, rects))

    def _fold_back(self, key: str | None) -> None:
        """Before groups collapse: the layers an expansion moved (of group ``key``, or every expansion: None) go
        back where they stood, as one undo step, where none of them moved since (else they stay)."""
        layers = self.net_model.layers
        restore: dict[str, Point] = {}
        rects: dict[str, QtCore.QRectF] | None = None
        while self._unfoldings:
            last = self._unfoldings[-1]
            if key is not None and last.key != key:
                break
            self._unfoldings.pop()
            if any(n not in layers or tuple(layers[n].position) != p for n, p in last.after.items()):
                continue  # moved since (or undone): left as it is
            restore.update(last.before)
            rects = last.block_rects
            if key is not None:
                break
        if not restore:
            return
        with self.net_model.macro(f"Collapse group {key}" if key else "Collapse all groups"):
            for name, pos in restore.items():
                self.net_model.move_layer(name, pos)
        if rects is not None:
            self._block_rects = rects
        self._routes = {}  # the expanded layout's routes: found again for the places restored
        self._schedule_routes()


def _translated(drawing: Drawing, x: float, y: float) -> Drawing:
    """``drawing`` moved so that its top-left corner (of its layers and blocks) is at (x, y)."""
    corners = list(drawing.positions.values()) + [(b[0], b[1]) for b in drawing.blocks.values()]
    if not corners:
        return drawing
    dx, dy = x - min(c[0] for c in corners), y - min(c[1] for c in corners)
    return Drawing({n: (round(px + dx, 1), round(py + dy, 1)) for n, (px, py) in drawing.positions.items()},
                   {k: [(round(px + dx, 1), round(py + dy, 1)) for px, py in r] for k, r in drawing.bends.items()},
                   {p: (bx + dx, by + dy, bw, bh) for p, (bx, by, bw, bh) in drawing.blocks.items()})
