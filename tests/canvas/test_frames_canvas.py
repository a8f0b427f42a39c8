"""Frames of expanded groups on a real canvas: after Expand All each group (features > denseblock3 > denselayer12)
has one frame around its members, titled with its name; collapsing removes it, a double-click on its title
collapses it, its menu collapses it or selects its members, a moved member grows it, and a rubber band never
selects it."""
from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from canvas.frames import GroupFrame
from tests.canvas.conftest import dispose, mouse_drag
from tests.canvas.test_expand_layout import open_arranged
from tests.canvas.test_groups_canvas import gcanvas  # noqa: F401 - a fixture


def scene_frames(c) -> list[GroupFrame]:  # noqa: ANN001
    return [i for i in c.scene().items() if isinstance(i, GroupFrame)]


def at_title(c, path: str) -> QtCore.QPoint:  # noqa: ANN001
    """The viewport point in the middle of the left part of group ``path``'s title band, the view centred on it."""
    band = c.group_frame(path).title_rect()
    spot = QtCore.QPointF(band.left() + min(60.0, band.width() / 3), band.center().y())
    c.viewer().centerOn(spot)
    return c.viewer().mapFromScene(spot)


def test_expand_all_frames_every_group_around_its_members_nested_and_collapse_removes_them(qtbot, registry) -> None:
    c = open_arranged(qtbot, registry)
    try:
        assert c.group_frame("features/denseblock3") is None  # collapsed: its box, no frame
        c.expand_all()
        groups = c.groups()
        assert sorted(c.framed_groups()) == sorted(groups)
        assert len(scene_frames(c)) == len(groups)  # one item per group, none per layer
        for path, group in groups.items():
            frame = c.group_frame(path)
            assert frame.title == group.name == path.rsplit("/", 1)[-1]
            assert path in frame.toolTip()
            rect = frame.sceneBoundingRect()
            assert all(rect.contains(c.node_rect(n)) for n in group.members), path
            if group.parent:  # a nested frame lies inside its parent's, inset
                outer = c.group_frame(group.parent).sceneBoundingRect()
                assert outer.contains(rect) and outer.top() < rect.top() and outer.left() < rect.left()
            assert frame.zValue() < c.overview.zValue()  # under everything (the overview is under the nodes)
        c.collapse_group("features/denseblock3")
        assert c.group_frame("features/denseblock3") is None
        assert c.group_frame("features/denseblock3/denselayer12") is None
        assert len(scene_frames(c)) == len(groups) - 1 - len(groups["features/denseblock3"].children)
        box = c.group_box("features/denseblock3").sceneBoundingRect()
        assert c.group_frame("features").sceneBoundingRect().contains(box)
    finally:
        dispose(c)


def test_double_click_on_a_frame_title_collapses_its_group(gcanvas, qtbot) -> None:  # noqa: F811 - the fixture
    c = gcanvas
    assert c.group_frame("features/stage2") is not None and c.group_box("features/stage2") is None
    pos = at_title(c, "features/stage2")
    qtbot.mouseDClick(c.viewer().viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)
    assert c.group_box("features/stage2") is not None and not c.nodes["block_conv4"].view.isVisible()
    assert c.group_frame("features/stage2") is None and c.group_frame("features") is not None


def frame_menu(c, path: str, label: str) -> list[str]:  # noqa: ANN001
    """Right-click group ``path``'s frame title; returns the menu's entries, triggering ``label``."""
    pos = at_title(c, path)
    vp = c.viewer().viewport()
    seen: list[str] = []

    def pick() -> None:
        menu = QtWidgets.QApplication.activePopupWidget()
        if menu is not None:
            seen.extend(a.text() for a in menu.actions() if a.text())
            next(a for a in menu.actions() if a.text() == label).trigger()
            menu.close()

    QtCore.QTimer.singleShot(0, pick)
    QtWidgets.QApplication.sendEvent(vp, QtGui.QContextMenuEvent(QtGui.QContextMenuEvent.Reason.Mouse, pos,
                                                                 vp.mapToGlobal(pos)))
    return seen


def test_frame_menu_selects_members_and_collapses(gcanvas) -> None:  # noqa: F811 - the fixture
    c = gcanvas
    assert frame_menu(c, "features/stage1", "Select Members") == ["Collapse", "Select Members"]
    assert c.selected_layers() == ["block_conv0", "block_conv1", "block_conv2"]
    frame_menu(c, "features/stage1", "Collapse")
    assert c.group_box("features/stage1") is not None and c.group_frame("features/stage1") is None


def test_a_moved_member_grows_its_frame_dragged_or_moved_in_the_model(gcanvas) -> None:  # noqa: F811 - the fixture
    c = gcanvas
    before = c.group_frame("features/stage1").sceneBoundingRect()
    c.nodes["block_conv1"].view.setPos(QtCore.QPointF(500, 600))  # (as a drag moves the item)
    rect = c.group_frame("features/stage1").sceneBoundingRect()
    assert rect.bottom() > before.bottom() + 400 and rect.contains(c.node_rect("block_conv1"))
    assert c.group_frame("features").sceneBoundingRect().contains(rect)
    c.net_model.move_layer("block_conv4", (2600.0, -700.0))
    rect = c.group_frame("features/stage2").sceneBoundingRect()
    assert rect.top() < -700 and rect.contains(c.node_rect("block_conv4"))


def test_a_rubber_band_selects_layers_never_frames(gcanvas, qtbot) -> None:  # noqa: F811 - the fixture
    c = gcanvas
    c.fit()
    qtbot.wait(10)
    vp = c.viewer().viewport()
    mouse_drag(qtbot, vp, QtCore.QPoint(3, 3), QtCore.QPoint(vp.width() - 3, vp.height() - 3))
    picked = c.scene().selectedItems()
    assert c.selected_layers() == list(c.net_model.layers)
    assert not any(isinstance(i, GroupFrame) for i in picked)


def test_a_press_inside_a_frame_below_its_title_starts_a_rubber_band(gcanvas, qtbot) -> None:  # noqa: F811
    """Only a frame's title band takes the mouse: a band drawn from inside the frame selects what it covers."""
    c = gcanvas
    c.fit()
    qtbot.wait(10)
    a, b = c.node_rect("block_conv0"), c.node_rect("block_conv1")
    frame = c.group_frame("features/stage1")
    start = QtCore.QPointF(a.left() - 6, a.bottom() + 6)
    assert frame.sceneBoundingRect().contains(start) and not frame.title_rect().contains(start)
    end = QtCore.QPointF(b.right() + 6, a.top() - 2)
    mouse_drag(qtbot, c.viewer().viewport(), c.viewer().mapFromScene(start), c.viewer().mapFromScene(end))
    assert c.selected_layers() == ["block_conv0", "block_conv1"]


def wrapped_stages():
    """Three stages of blocks scoped as torchvision's EfficientNet exports them: each block ``stage.i`` wraps a
    ``block`` (and, after the first, its residual sum), so ``block`` is all or nearly all its parent holds."""
    from engine.model import LayerSpec, Model

    m = Model("wrapped")
    specs, x = [LayerSpec("inp", "input")], "inp"
    for s in range(3):
        for i in range(3):
            path = f"features/features.{s}/features.{s}.{i}"
            names = [f"f_{s}_{i}_block_{k}" for k in range(3)]
            for k, n in enumerate(names):
                specs.append(LayerSpec(n, "convolution", inputs=[x if k == 0 else names[k - 1]], group=f"{path}/block"))
            if i:
                specs.append(LayerSpec(f"f_{s}_{i}_Add", "element_wise", inputs=[names[-1], x], group=path))
                x = f"f_{s}_{i}_Add"
            else:
                x = names[-1]
    specs.append(LayerSpec("out", "output", inputs=[x]))
    m.add_layers(specs, "build")
    m.clear_undo()
    return m


def test_a_group_wrapping_one_block_shares_its_frame_named_after_the_wrapper(qtbot, registry) -> None:
    """The frame that would coincide with its parent's is not drawn: the distinguishing outer name shows, not
    ``block`` nine times."""
    from canvas.bridge import ModelBridge
    from canvas.graph import ModelCanvas

    m = wrapped_stages()
    c = ModelCanvas(m, registry, ModelBridge(m))
    c.widget.resize(1200, 700)
    c.widget.show()
    try:
        c.expand_all()
        framed = c.framed_groups()
        assert not [p for p in framed if p.endswith("/block")]
        for s in range(3):
            for i in range(3):
                path = f"features/features.{s}/features.{s}.{i}"
                frame = c.group_frame(path)
                assert frame is not None and frame.title == f"features.{s}.{i}"
                rect = frame.sceneBoundingRect()
                assert all(rect.contains(c.node_rect(f"f_{s}_{i}_block_{k}")) for k in range(3))
    finally:
        dispose(c)
