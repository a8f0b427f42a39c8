"""Frames of expanded groups: behind the layers of each expanded group a light rounded rectangle with the group's name
at its top-left, so that a network whose groups are open still says which block is which at Fit to View. A frame is
view state (nothing is saved) and one item per expanded group (never one per layer), under everything else: it hides
nothing, links do not avoid it, and a rubber band does not select it. Double-click its title to collapse the group."""
from __future__ import annotations

import math

from PySide6 import QtCore, QtGui, QtWidgets

from canvas.constants import NAME_PX, next_turn_timer, shrunk_font
from engine.groups import Group

MARGIN = 14.0  # scene units between a frame's side and what it holds (each nesting level insets by this much)
BAND = 34.0  # height of a frame's title band zoomed in (scene units)
BAND_PX = 17.0  # zoomed out, the title band is this tall on screen (its name at least NAME_PX, as a group box's)
FONT_SHARE = 0.74  # the name's height as a share of its band
NARROWEST_PX = 40.0  # a frame narrower than this on screen shows no name
FRAME_Z = -3.0  # under the overview (-1) and every node and link; a nested frame a little above its parent
FILL = QtGui.QColor(140, 160, 195, 24)
EDGE = QtGui.QColor(150, 170, 200, 110)
TITLE = QtGui.QColor(222, 230, 242)
SCALE_STEPS = 8  # the frames' bands are redone when the view's scale changed by a eighth of a doubling


def band_height(scale: float) -> float:
    """The height (scene units) a frame's title band needs at view ``scale`` for its name to read on screen."""
    return max(BAND, BAND_PX / max(scale, 1e-6))


class GroupFrame(QtWidgets.QGraphicsObject):
    """The frame behind an expanded group's layers: its title band (the group's name, kept readable zoomed out)
    takes double-clicks (collapse) and right-clicks (the canvas's frame menu); the rest of it takes no mouse
    event, so clicks and rubber bands there reach the canvas as if it were not there."""

    collapse_requested = QtCore.Signal(str)

    def __init__(self, group: Group, depth: int) -> None:
        super().__init__()
        self.group = group
        self.depth = depth
        self._rect = QtCore.QRectF()
        self._band = BAND
        self.titled = True  # whether its name is drawn (level of detail: off where it would overlap another)
        self.setZValue(FRAME_Z + 0.01 * min(depth, 50))
        self.setAcceptedMouseButtons(QtCore.Qt.MouseButton.LeftButton)
        self.setToolTip(f"group {group.path}\n{len(group.members)} layers\ndouble-click the name to collapse")

    @property
    def title(self) -> str:
        """The name the frame shows (its group's last step; the full path is in the tooltip)."""
        return self.group.name

    def place(self, rect: QtCore.QRectF, band: float, titled: bool, shown: bool = True) -> None:
        """Stand at scene ``rect``, with a title band ``band`` high at its top, its name drawn or not; ``shown``
        False: not drawn at all (zoomed out, an untitled frame would only add lines)."""
        self.setVisible(shown)
        if rect == self.sceneBoundingRect() and band == self._band and titled == self.titled:
            return
        self.prepareGeometryChange()
        self.setPos(rect.topLeft())
        self._rect = QtCore.QRectF(0, 0, rect.width(), rect.height())
        self._band = band
        self.titled = titled
        self.update()

    def title_rect(self) -> QtCore.QRectF:
        """The title band, in scene coordinates."""
        return QtCore.QRectF(self.pos(), QtCore.QSizeF(self._rect.width(), min(self._band, self._rect.height())))

    def boundingRect(self) -> QtCore.QRectF:  # noqa: N802 (Qt API)
        return self._rect

    def shape(self) -> QtGui.QPainterPath:
        """Only the title band is hit (by clicks, the tooltip and the canvas's look for items under a press)."""
        path = QtGui.QPainterPath()
        path.addRect(QtCore.QRectF(0, 0, self._rect.width(), min(self._band, self._rect.height())))
        return path

    def paint(self, painter: QtGui.QPainter, option: QtWidgets.QStyleOptionGraphicsItem,
              widget: QtWidgets.QWidget | None = None) -> None:
        lod = max(QtWidgets.QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform()), 1e-3)
        r = self._rect
        painter.save()
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
        painter.setPen(QtGui.QPen(EDGE, 0))  # cosmetic: one pixel at every zoom
        painter.setBrush(FILL)
        radius = min(12.0 / lod, MARGIN, r.height() / 4)
        painter.drawRoundedRect(r, radius, radius)
        if self.titled and r.width() * lod >= NARROWEST_PX:
            band = QtCore.QRectF(0, 0, r.width(), min(self._band, r.height()))
            pad = min(MARGIN, 8.0 / lod)
            name = self.group.name
            font, _ = shrunk_font(name, band.height() * FONT_SHARE, NAME_PX / lod, band.width() - 2 * pad)
            painter.setFont(font)
            painter.setPen(TITLE)
            text = QtGui.QFontMetricsF(font).elidedText(name, QtCore.Qt.TextElideMode.ElideLeft, band.width() - 2 * pad)
            painter.drawText(band.adjusted(pad, 0, -pad, 0),
                             QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignVCenter, text)
        painter.restore()

    def mousePressEvent(self, event: QtWidgets.QGraphicsSceneMouseEvent) -> None:  # noqa: N802 (Qt API)
        event.accept()  # (a press on the title: the double-click that may follow comes here)

    def mouseDoubleClickEvent(self, event: QtWidgets.QGraphicsSceneMouseEvent) -> None:  # noqa: N802 (Qt API)
        self.collapse_requested.emit(self.group.path)
        event.accept()


class FramesMixin:
    """``ModelCanvas``'s frames of expanded groups (``GroupsMixin`` says when the groups open or close; moves and
    zooms redo the frames' places once, at the next turn of the event loop or before the next paint)."""

    def _init_frames(self) -> None:
        self._frames: dict[str, GroupFrame] = {}
        self._frames_scale = 0.0  # the view scale the frames were placed for
        self._frames_timer = next_turn_timer(self, self._place_frames)

    # ---- queries ---------------------------------------------------------------------------------
    def framed_groups(self) -> list[str]:
        """Paths of the expanded groups drawn with a frame (outermost first)."""
        return list(self._frames)

    def group_frame(self, path: str) -> GroupFrame | None:
        """The frame of expanded group ``path`` (None while it is collapsed or inside a collapsed one), placed for
        what the canvas shows now."""
        if self._frames_timer.isActive():
            self._frames_timer.stop()
            self._place_frames()
        return self._frames.get(path)

    def frame_at(self, scene_pos: QtCore.QPointF) -> GroupFrame | None:
        """The innermost frame whose title band is at ``scene_pos`` (None: none)."""
        hits = [f for f in self._frames.values() if f.isVisible() and f.title_rect().contains(scene_pos)]
        return max(hits, key=lambda f: f.depth, default=None)

    def frames_rect(self) -> QtCore.QRectF:
        """The scene area the frames drawn take (around the layers they hold, with their titles)."""
        rect = QtCore.QRectF()
        for frame in self._frames.values():
            if not frame.isVisible():
                continue
            rect = rect.united(frame.sceneBoundingRect())
        return rect

    def select_members(self, path: str) -> None:
        """Select the layers of group ``path`` that are drawn (those inside a collapsed subgroup are not)."""
        group = self._groups.get(path)
        if group is not None:
            self.select_layers([n for n in group.members if n not in self._hidden])

    def _frame_menu(self, event: QtGui.QContextMenuEvent) -> bool:
        """A right-click on a frame's title: its menu (Collapse, Select Members). False where there is none."""
        frame = self.frame_at(self.viewer().mapToScene(event.pos()))
        if frame is None:
            return False
        path = frame.group.path
        menu = QtWidgets.QMenu(self.viewer())
        menu.addAction("Collapse", lambda: self.collapse_group(path))
        menu.addAction("Select Members", lambda: self.select_members(path))
        menu.exec(event.globalPos())
        menu.deleteLater()
        return True

    # ---- keeping them up to date -----------------------------------------------------------------
    def _frames_later(self) -> None:
        """Layers moved (dragged, Arrange, an expansion beside them): the frames follow at the next turn."""
        if self._frames and not self._frames_timer.isActive():
            self._frames_timer.start()

    def _frames_before_paint(self) -> None:
        """Before a paint: after a zoom the title bands are redone (names stay readable, overlapping ones go)."""
        if self._frames and _scale_step(self.viewer().transform().m11()) != _scale_step(self._frames_scale):
            self._place_frames()

    def _refresh_frames(self, later: bool = False) -> None:
        """Groups opened or closed: one frame per expanded group that is not inside a collapsed one, placed now
        (or, ``later``, at the next turn of the event loop: a burst of edits places them once)."""
        wanted = [p for p, g in self._groups.items() if p not in self._collapsed and not self._inside_collapsed(g)
                  and not _wrapped(g, self._groups)]
        scene = self.scene()
        for path in [p for p in self._frames if p not in wanted or self._frames[p].group is not self._groups[p]]:
            scene.removeItem(self._frames.pop(path))
        for path in wanted:
            if path not in self._frames:
                frame = GroupFrame(self._groups[path], path.count("/"))
                frame.collapse_requested.connect(self.collapse_group)
                scene.addItem(frame)
                self._frames[path] = frame
        self._frames = {p: self._frames[p] for p in wanted}  # outermost first (groups come parents first)
        if later:
            self._frames_later()
        else:
            self._place_frames()

    def _inside_collapsed(self, group: Group) -> bool:
        parent = group.parent
        while parent:
            if parent in self._collapsed:
                return True
            parent = self._groups[parent].parent if parent in self._groups else ""
        return False

    def _place_frames(self) -> None:
        """Put each frame around what its group shows (its layers, its subgroups' frames and collapsed boxes) and
        decide, for the view's scale, which titles are drawn: a title that would run into a sibling's frame is
        left out (zoomed out, the outer groups' names stay), and a titled frame's band grows to keep its name
        readable."""
        self._frames_timer.stop()
        if not self._frames:
            return
        scale = self.viewer().transform().m11()
        self._frames_scale = scale
        content = self._frame_contents()
        base = _nest(self._frames, self._groups, content, {})
        wanted = band_height(scale)
        titled: dict[str, bool] = {}
        strips: dict[str, QtCore.QRectF] = {}
        by_parent: dict[str, list[str]] = {}
        for path in base:
            by_parent.setdefault(_framed(self._groups[path].parent, self._frames, self._groups), []).append(path)
        for path, rect in base.items():
            if wanted <= BAND:
                titled[path] = True
                continue
            inside = rect.top() + MARGIN + BAND  # the top of what it holds
            strip = strips[path] = QtCore.QRectF(rect.left(), inside - MARGIN - wanted, rect.width(), wanted + MARGIN)
            siblings = by_parent.get(_framed(self._groups[path].parent, self._frames, self._groups), [])
            titled[path] = not any(base[s].intersects(strip) for s in siblings if s != path)
        for siblings in by_parent.values():  # all the names of one level, or none (no pattern of holes)
            if not all(titled[s] for s in siblings):
                titled.update(dict.fromkeys(siblings, False))
        kept: list[tuple[str, QtCore.QRectF]] = []
        for path, strip in strips.items():  # outer groups first: a name never runs into another one kept
            if titled[path] and any(s.intersects(strip) and not path.startswith(p + "/") for p, s in kept):
                titled[path] = False
            elif titled[path]:
                kept.append((path, strip))
        bands = {p: wanted if on else BAND for p, on in titled.items()}
        for path, rect in _nest(self._frames, self._groups, content, bands).items():
            self._frames[path].place(rect, bands[path], titled[path], titled[path] or wanted <= BAND)
        for path in self._frames.keys() - base.keys():  # nothing of it drawn (an empty group)
            self._frames[path].place(QtCore.QRectF(), BAND, False, False)

    def _frame_contents(self) -> dict[str, QtCore.QRectF]:
        """For each framed group, the area of what it shows directly: its layers in no framed subgroup, and the
        boxes of its collapsed subgroups."""
        content: dict[str, QtCore.QRectF] = {}
        boxed: set[str] = set()
        for name, spec in self.net_model.layers.items():
            if not spec.group:
                continue
            top = self._hidden.get(name)
            if top is None:
                key, rect = spec.group, self.node_rect(name)
            elif top in boxed or top not in self._boxes:
                continue
            else:
                boxed.add(top)
                key, rect = self._groups[top].parent, self._boxes[top].sceneBoundingRect()
            key = _framed(key, self._frames, self._groups)
            if key:
                content[key] = content[key].united(rect) if key in content else rect
        return content


#: a parent's own layers beside its one subgroup, at most, for the two to share one frame (a residual sum)
WRAPPER_OWN = 2


def _wrapped(group: Group, groups: dict[str, Group]) -> bool:
    """Whether ``group`` is nearly all its parent holds (a module wrapping one other, as efficientnet's
    ``features.2.1`` around its ``block`` and the residual sum): one frame, the parent's, shows both (two would
    nearly coincide, the inner, generic name hiding the distinguishing outer one)."""
    parent = groups.get(group.parent)
    return (parent is not None and parent.children == [group.path]
            and len(parent.members) - len(group.members) <= WRAPPER_OWN)


def _framed(path: str, frames: dict[str, GroupFrame], groups: dict[str, Group]) -> str:
    """``path`` or its nearest ancestor that has a frame (``""``: none)."""
    while path and path not in frames:
        path = groups[path].parent if path in groups else ""
    return path


def _nest(frames: dict[str, GroupFrame], groups: dict[str, Group], content: dict[str, QtCore.QRectF],
          bands: dict[str, float]) -> dict[str, QtCore.QRectF]:
    """Each framed group's frame, innermost first: around its own content and its subgroups' frames, ``MARGIN``
    wider and with its title band (``bands``, default ``BAND``) on top. Groups showing nothing get none."""
    out: dict[str, QtCore.QRectF] = {}
    inner = dict(content)
    for path in sorted(frames, key=lambda p: -p.count("/")):
        area = inner.get(path)
        if area is None or not area.isValid():
            continue
        rect = area.adjusted(-MARGIN, -MARGIN - bands.get(path, BAND), MARGIN, MARGIN)
        out[path] = rect
        parent = _framed(groups[path].parent, frames, groups)
        if parent:
            inner[parent] = inner[parent].united(rect) if parent in inner else rect
    return out


def _scale_step(scale: float) -> int:
    return round(math.log2(max(scale, 1e-6)) * SCALE_STEPS)

