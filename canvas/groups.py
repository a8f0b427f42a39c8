"""Groups on the canvas: a collapsed group (``engine.groups``) is one box standing at the centre of its layers, which
are hidden, with the links that enter or leave it drawn to the box; it expands in place (double-click, Find, View >
Expand All). Which groups are collapsed is a view state of the canvas, not a model edit; membership is model data."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from canvas.constants import NAME_PX, next_turn_timer, shrunk_font
from canvas.frames import FramesMixin
from canvas.lazy import NodeGeom
from canvas.unfold import UnfoldMixin
from engine.events import GroupChanged, LayerEvent, LayerMoved, TemplateEvent
from engine.figures import combine, summary_text
from engine.groups import BOX_SIZE, Group, groups_of, opening_collapsed, opens_collapsed, outermost_collapsed
from engine.layout import BLOCK_SHARE
from engine.typecheck import layer_costs

BOX_COLOR = QtGui.QColor(70, 86, 110)
KEY = "group:"  # the overview's name of a collapsed group's box (layer names are identifiers: no ':')


def figures_text(members: Iterable[str], figures: dict[str, dict[str, Any]],
                 costs: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """The figures of ``members`` as one (``engine.figures.combine``: parameters, FLOPs, time and share, change
    summed, drift the largest), as far as ``costs`` (``engine.typecheck.layer_costs``) and ``figures`` have them."""
    costs = costs or {}
    return summary_text(combine({**costs.get(n, {}), **figures.get(n, {})} for n in members))


class GroupBox(QtWidgets.QGraphicsObject):
    """A collapsed group: its name, layer count and summed figures; double-click expands it."""

    expand_requested = QtCore.Signal(str)

    def __init__(self, group: Group, rect: QtCore.QRectF, lines: list[str]) -> None:
        super().__init__()
        self.group = group
        self._rect = QtCore.QRectF(0, 0, rect.width(), rect.height())
        self.setPos(rect.topLeft())
        self.lines = lines
        self.setZValue(1.0)
        self.setFlag(QtWidgets.QGraphicsItem.GraphicsItemFlag.ItemIsSelectable, True)
        self.setToolTip(f"group {group.path}\n{len(group.members)} layers" + "".join(f"\n{t}" for t in lines)
                        + "\ndouble-click to expand")

    @property
    def title(self) -> str:
        return self.group.name

    def boundingRect(self) -> QtCore.QRectF:  # noqa: N802 (Qt API)
        return self._rect

    def paint(self, painter: QtGui.QPainter, option: QtWidgets.QStyleOptionGraphicsItem,
              widget: QtWidgets.QWidget | None = None) -> None:
        lod = QtWidgets.QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        r = self._rect
        painter.save()
        painter.setPen(QtGui.QPen(QtGui.QColor(255, 198, 10) if self.isSelected() else QtGui.QColor(150, 170, 200),
                                  2.0 / max(lod, 1e-3)))
        painter.setBrush(BOX_COLOR)
        painter.drawRoundedRect(r, 8, 8)
        # the name stays readable zoomed out (at least NAME_PX on screen) as far as the box allows; it never
        # runs over the box's sides (no overlap with a neighbour): shrunk to fit, then cut at its start (the
        # distinguishing end stays), the full name on hover
        name = f"▸ {self.group.name}"
        px = min(max(15.0, NAME_PX / max(lod, 1e-3)), r.height() / 1.6)
        font, px = shrunk_font(name, px, NAME_PX / max(lod, 1e-3), r.width() - 16)
        metrics = QtGui.QFontMetricsF(font)
        painter.setFont(font)
        painter.setPen(QtGui.QColor(245, 245, 245))
        painter.setClipRect(r)
        if px * 2.6 > r.height():  # no room for the figures: the name alone, in the middle
            painter.drawText(r.adjusted(4, 0, -4, 0), QtCore.Qt.AlignmentFlag.AlignCenter,
                             metrics.elidedText(name, QtCore.Qt.TextElideMode.ElideLeft, r.width() - 8))
            painter.restore()
            return
        painter.drawText(r.adjusted(8, 4, -8, 0), QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignTop,
                         metrics.elidedText(name, QtCore.Qt.TextElideMode.ElideLeft, r.width() - 16))
        small = QtGui.QFont()
        small.setPixelSize(max(12, round(px * 0.8)))
        painter.setFont(small)
        painter.setPen(QtGui.QColor(200, 210, 225))
        text = "  ·  ".join([f"{len(self.group.members)} layers", *self.lines])
        painter.drawText(r.adjusted(8, 4 + metrics.height() * 1.2, -8, -4),
                         QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.TextFlag.TextWordWrap, text)
        painter.restore()

    def mouseDoubleClickEvent(self, event: QtWidgets.QGraphicsSceneMouseEvent) -> None:  # noqa: N802 (Qt API)
        self.expand_requested.emit(self.group.path)
        event.accept()


class GroupsMixin(FramesMixin, UnfoldMixin):
    """``ModelCanvas``'s groups: collapse, expand, and what a collapsed group hides."""

    def _init_groups(self) -> None:
        self._init_unfold()
        self._init_frames()
        self._collapsed: set[str] = set()
        self._hidden: dict[str, str] = {}  # layer -> the collapsed group hiding it
        self._boxes: dict[str, GroupBox] = {}
        self._groups: dict[str, Group] = {}
        self._figures: dict[str, dict[str, Any]] = {}
        self._costs: dict[str, dict[str, Any]] | None = None  # parameters and FLOPs per layer (None: to compute)
        self.bridge.event.connect(self._costs_changed)
        self._block_rects: dict[str, QtCore.QRectF] = {}  # the place Arrange gave each collapsed group
        self._groups_timer = next_turn_timer(self, self._refresh_groups)
        self._groups = groups_of(self.net_model.layers)
        self._collapsed = opening_collapsed(self.net_model.layers)
        self._refresh_groups()

    def opens_collapsed(self) -> bool:
        """Whether the model opens with groups collapsed (``engine.groups.opens_collapsed``). Such a canvas makes
        its nodes as they are needed (most are hidden in the groups' boxes)."""
        return opens_collapsed(self.net_model.layers)

    # ---- queries ---------------------------------------------------------------------------------
    def groups(self) -> dict[str, Group]:
        """The model's groups by path (``engine.groups``)."""
        return dict(self._groups)

    def collapsed_groups(self) -> set[str]:
        """Paths of the groups drawn collapsed."""
        return set(self._collapsed)

    def shown_groups(self) -> list[str]:
        """Paths of the collapsed groups drawn as a box now (not inside another collapsed group)."""
        return list(self._boxes)

    def group_box(self, path: str) -> GroupBox | None:
        """The box of collapsed group ``path`` (None while it is expanded or inside another collapsed one)."""
        return self._boxes.get(path)

    def is_hidden(self, layer: str) -> bool:
        """Whether ``layer`` is inside a collapsed group (its node is not drawn)."""
        return layer in self._hidden

    # ---- collapse and expand ---------------------------------------------------------------------
    def collapse_group(self, path: str) -> None:
        """Draw group ``path`` as one box (its layers back where they stood before it expanded, where they did not
        move since)."""
        if path in self._groups:
            self._fold_back(path)
            self._collapsed.add(path)
            self._refresh_groups()

    def expand_group(self, path: str) -> None:
        """Draw group ``path``'s layers and subgroups (its enclosing groups expand too), laid out afresh where its
        box stood, the rest of the drawing moved aside to make room (``canvas.unfold``; one undo step)."""
        steps = path.split("/")
        opened = {"/".join(steps[:i + 1]) for i in range(len(steps))}
        if self._collapsed & opened:
            shown = next((p for p in sorted(opened, key=len) if p in self._boxes), None)
            old = self._boxes[shown].sceneBoundingRect() if shown is not None else QtCore.QRectF()
            self._collapsed -= opened
            self._refresh_groups()
            if shown is not None:
                self._unfold_group(shown, old)

    def collapse_all(self) -> None:
        """View > Collapse All: every top-level group as one box, but where a group's box would cover layers shown
        beside it (laid out among its own), its subgroups' boxes instead (no layer is hidden behind a box). The
        layers that expanding moved go back first (where they did not move since)."""
        self._fold_back(None)
        collapsed = {p for p, g in self._groups.items() if not g.parent}
        while True:
            area = {}
            for path in collapsed:
                rect = QtCore.QRectF()
                for name in self._groups[path].members:
                    rect = rect.united(self._predicted(name).rect)
                area[path] = rect
            covering = set()
            for name, spec in self.net_model.layers.items():
                top = outermost_collapsed(spec.group, collapsed) if spec.group else None
                rect = self._predicted(name).rect.adjusted(1, 1, -1, -1)
                covering |= {p for p, a in area.items() if p != top and a.intersects(rect)}
            if not covering:
                break
            collapsed = (collapsed - covering) | {c for p in covering for c in self._groups[p].children}
        self._collapsed = collapsed
        self._refresh_groups()

    def expand_all(self) -> None:
        """View > Expand All: every layer drawn, the groups that were boxes laid out afresh as banded blocks so
        that the whole drawing reads at Fit to View (``canvas.unfold``; one undo step)."""
        blocks = set(self._boxes)
        self._collapsed = set()
        self._refresh_groups()
        self._unfold_all(blocks)

    def reveal(self, layer: str) -> None:
        """Expand the groups hiding ``layer``."""
        path = self.net_model.layers[layer].group if layer in self.net_model.layers else ""
        if layer in self._hidden:
            self.expand_group(path)

    @property
    def find_bar(self) -> Any:
        """The canvas's find bar (``canvas.find.FindBar``), made when first asked for."""
        if getattr(self, "_find_bar", None) is None:
            from canvas.find import FindBar  # noqa: PLC0415

            self._find_bar = FindBar(self)
        return self._find_bar

    def show_find(self) -> None:
        """Edit > Find (Ctrl+F): open the find bar."""
        self.find_bar.open_bar()

    def set_layer_figures(self, figures: dict[str, dict[str, Any]]) -> None:
        """Per-layer figures (``params``, ``flops``, ``time_ms``...; e.g. ``engine.report.layer_figures`` with the
        report's ``flops``) that the collapsed groups show summed; empty: none."""
        self._figures = dict(figures)
        if self._boxes:  # (the boxes shown carry the figures; none shown: nothing to redraw)
            self._refresh_groups()

    def layer_costs(self) -> dict[str, dict[str, Any]]:
        """Parameters and FLOPs of each layer (``engine.typecheck.layer_costs``), kept until the model changes."""
        if self._costs is None:
            try:
                self._costs = layer_costs(self.net_model, self.registry)
            except Exception:  # noqa: BLE001 - a model that cannot be shaped shows no costs; the type check says why
                self._costs = {}
        return self._costs

    def _costs_changed(self, ev: Any) -> None:
        """A layer, link or template changed: the costs are measured again when a collapsed group shows them."""
        if isinstance(ev, (LayerEvent, TemplateEvent, GroupChanged)) and not isinstance(ev, LayerMoved):
            self._costs = None
            if self._boxes and not self._groups_timer.isActive():
                self._groups_timer.start()

    # ---- drawing ---------------------------------------------------------------------------------
    def _groups_changed(self, moved_only: bool = False) -> None:
        """The model's groups or the layers' places changed: redraw the boxes after this turn of the event loop
        (a burst of moves redraws once); membership changes are applied now."""
        if not moved_only:
            self._groups = groups_of(self.net_model.layers)
            self._collapsed &= set(self._groups)
            if self._collapsed or self._hidden:  # (nothing collapsed: nothing hidden, nothing to redraw)
                self._refresh_groups()
            else:
                self._refresh_frames(later=True)
        else:
            self._frames_later()
            if self._boxes and not self._groups_timer.isActive():
                self._groups_timer.start()

    def _refresh_groups(self) -> None:
        """Hide the layers of collapsed groups, show the others, and place one box per outermost collapsed group."""
        hidden = {}
        for name, spec in self.net_model.layers.items():
            top = outermost_collapsed(spec.group, self._collapsed) if spec.group else None
            if top is not None:
                hidden[name] = top
        changed = set(hidden) ^ set(self._hidden)
        self._hidden = hidden
        scene = self.scene()
        for box in self._boxes.values():
            scene.removeItem(box)
        self._boxes = {}
        areas: dict[str, QtCore.QRectF] = {}
        for path in dict.fromkeys(hidden.values()):
            area = QtCore.QRectF()
            for name in self._groups[path].members:
                area = area.united(self._predicted(name).rect)
            areas[path] = area
        # the least box, as the grouped layout leaves room for: a share of the largest block's width and height
        least_w = max([BOX_SIZE[0]] + [BLOCK_SHARE * a.width() for a in areas.values()])
        least_h = max([BOX_SIZE[1]] + [BLOCK_SHARE * a.height() for a in areas.values()])
        for path, area in areas.items():
            group = self._groups[path]
            # the box takes its layers' place (Arrange and imports lay a collapsed group's layers out together)
            rect = self._block_rects.get(path, QtCore.QRectF())
            if not rect.contains(area):  # (laid out elsewhere, or its layers moved since): around them
                rect = QtCore.QRectF(0, 0, max(least_w, area.width()), max(least_h, area.height()))
                rect.moveCenter(area.center())
            box = GroupBox(group, rect, figures_text(group.members, self._figures, self.layer_costs()))
            box.expand_requested.connect(self.expand_group)
            scene.addItem(box)
            self._boxes[path] = box
        self._apply_hidden([n for n in changed if self.nodes.created(n) is not None] if changed else [])
        self._refresh_frames()
        self._covered = QtCore.QRectF()
        self._index = None
        if self.overview is not None:
            self.overview.invalidate()
        self._schedule_routes()  # the links as drawn changed: their routes are checked before the next paint
        self.viewer().viewport().update()

    def _apply_hidden(self, names: Iterable[str]) -> None:
        """Show or hide the node items of ``names`` and the links touching them."""
        for name in names:
            node = self.nodes.created(name)
            if node is None:
                continue
            hide = name in self._hidden
            node.view.setVisible(not hide)
            if hide:
                node.view.setSelected(False)
            for port in node.input_ports() + node.output_ports():
                for pipe in port.view.connected_pipes:
                    ends = [p.node for p in (pipe.input_port, pipe.output_port) if p is not None]
                    pipe.setVisible(all(e.isVisible() for e in ends))

    def _materialize_many(self, names: Iterable[str], neighbours: bool = True) -> list[str]:
        made = super()._materialize_many(names, neighbours)
        if made and getattr(self, "_hidden", None):  # (none while the canvas is first built)
            self._apply_hidden(made)
        return made

    def _shown_names(self) -> list[str]:
        """What the overview draws: the layers not hidden, then a box per collapsed group shown."""
        return [n for n in self.nodes if n not in self._hidden] + [KEY + p for p in self._boxes]

    def _end(self, layer: str) -> str:
        top = self._hidden.get(layer)
        return layer if top is None else KEY + top

    def _shown_links(self) -> list[tuple[str, str, int]]:
        """Links as drawn: an end inside a collapsed group goes to its box; links inside one box are left out."""
        out = {}
        for src, dst, index in self._links():
            a, b = self._end(src), self._end(dst)
            if a != b:
                out[(a, b, index if b == dst else 0)] = None
        return list(out)

    def _shown_geometry(self, name: str) -> NodeGeom:
        if name.startswith(KEY):
            box = self._boxes[name[len(KEY):]]
            rect = box.sceneBoundingRect()
            return NodeGeom(rect, (BOX_COLOR.red(), BOX_COLOR.green(), BOX_COLOR.blue()), box,
                            QtCore.QPointF(rect.right(), rect.center().y()), [QtCore.QPointF(rect.left(), rect.center().y())])
        return self._geometry(name)

    def _shown_rect(self) -> QtCore.QRectF:
        """The scene area of everything drawn (layers not hidden and group boxes)."""
        rect = QtCore.QRectF()
        for name in self.nodes:
            if name not in self._hidden:
                rect = rect.united(self.node_rect(name))
        for box in self._boxes.values():
            rect = rect.united(box.sceneBoundingRect())
        return rect
