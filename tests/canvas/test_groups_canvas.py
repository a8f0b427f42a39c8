"""Groups and Find on a real canvas: collapse and expand show and hide the members, a box counts them, Ctrl+F's bar
finds by name and type, wraps, and opens the group of its match."""
from __future__ import annotations

import pytest
from PySide6 import QtCore, QtGui

from engine.model import Model
from tests.canvas.conftest import dispose, shown_canvas


def grouped_model() -> Model:
    m = Model("g")
    m.add_layer("input", "inp", position=(0, 0))
    x = "inp"
    for i in range(6):
        m.add_layer("convolution", f"block_conv{i}", inputs=[x], position=(250 * (i + 1), 0))
        x = f"block_conv{i}"
    m.add_layer("output", "out", inputs=[x], position=(2000, 0))
    m.set_group([f"block_conv{i}" for i in range(3)], "features/stage1")
    m.set_group([f"block_conv{i}" for i in range(3, 6)], "features/stage2")
    m.mark_clean()
    m.clear_undo()
    return m


@pytest.fixture
def gcanvas(qtbot, registry):
    with shown_canvas(qtbot, registry, grouped_model()) as c:
        yield c


def test_collapse_hides_members_and_the_box_counts_them(gcanvas) -> None:
    c = gcanvas
    assert c.shown_groups() == []  # a small network opens expanded
    c.collapse_group("features/stage1")
    box = c.group_box("features/stage1")
    assert box is not None and box.isVisible() and "3 layers" in box.toolTip()
    assert not c.nodes["block_conv1"].view.isVisible() and c.nodes["block_conv4"].view.isVisible()
    # the box stands where its layers were, and its links are drawn: inp -> box -> block_conv3
    assert c.node_rect("block_conv0").united(c.node_rect("block_conv2")).contains(box.sceneBoundingRect().center())
    assert set(c._shown_links()) >= {("inp", "group:features/stage1", 0), ("group:features/stage1", "block_conv3", 0)}
    c.collapse_all()
    assert c.shown_groups() == ["features"] and "6 layers" in c.group_box("features").toolTip()
    places = {n: s.position for n, s in c.net_model.layers.items()}
    c.expand_all()
    assert c.shown_groups() == [] and all(c.nodes[f"block_conv{i}"].view.isVisible() for i in range(6))
    c.collapse_all()  # the layers expanding laid out afresh go back where they stood
    assert {n: s.position for n, s in c.net_model.layers.items()} == places


def test_double_click_expands_a_box(gcanvas, qtbot) -> None:
    c = gcanvas
    c.collapse_group("features/stage2")
    box = c.group_box("features/stage2")
    c.viewer().centerOn(box)
    qtbot.wait(10)
    pos = c.viewer().mapFromScene(box.sceneBoundingRect().center())
    qtbot.mouseDClick(c.viewer().viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)
    assert c.group_box("features/stage2") is None and c.nodes["block_conv4"].view.isVisible()


def test_regrouping_is_model_data_and_follows_undo(gcanvas) -> None:
    c = gcanvas
    c.collapse_group("features/stage1")
    c.net_model.set_group(["block_conv0"], "")
    assert c.nodes["block_conv0"].view.isVisible() and "2 layers" in c.group_box("features/stage1").toolTip()
    c.net_model.undo()
    assert not c.nodes["block_conv0"].view.isVisible()


def test_find_by_name_and_type_wraps_and_opens_groups(gcanvas, qtbot) -> None:
    c = gcanvas
    c.collapse_all()
    c.show_find()
    bar = c.find_bar
    assert bar.isVisible()
    qtbot.keyClicks(bar.edit, "conv4")
    assert bar.matches == ["block_conv4"]
    assert c.selected_layers() == ["block_conv4"] and c.nodes["block_conv4"].view.isVisible()
    assert "features/stage2" not in c.collapsed_groups() and "features" not in c.collapsed_groups()
    bar.edit.clear()
    qtbot.keyClicks(bar.edit, "Output")  # by type (any case)
    assert bar.matches == ["out"]
    bar.edit.clear()
    qtbot.keyClicks(bar.edit, "block_conv")
    assert c.selected_layers() == ["block_conv0"]
    qtbot.keyClick(bar.edit, QtCore.Qt.Key.Key_Return, QtCore.Qt.KeyboardModifier.ShiftModifier)
    assert c.selected_layers() == ["block_conv5"] and bar.count.text() == "6 of 6"  # wrapped backwards
    qtbot.keyClick(bar.edit, QtCore.Qt.Key.Key_F3)
    assert c.selected_layers() == ["block_conv0"]  # and forwards
    qtbot.keyClick(bar.edit, QtCore.Qt.Key.Key_Return)
    assert c.selected_layers() == ["block_conv1"]
    qtbot.keyClick(bar.edit, QtCore.Qt.Key.Key_Escape)
    assert not bar.isVisible()


def test_shortened_names_keep_their_distinct_end() -> None:
    from PySide6 import QtGui

    font = QtGui.QFont()
    metrics = QtGui.QFontMetricsF(font)
    names = [f"features_denseblock3_denselayer{i}_conv2_Conv" for i in (11, 12)]
    width = metrics.horizontalAdvance("denselayer12_conv2_Conv") + 20
    short = [metrics.elidedText(n, QtCore.Qt.TextElideMode.ElideLeft, width) for n in names]
    assert short[0] != short[1] and all(s.startswith("…") for s in short)


def boxes_apart_and_readable(c) -> dict:
    """Fitted, the collapsed groups' boxes overlap neither each other nor a shown layer, and transition1's box is
    at least the layout's share of the widest; the boxes' scene rects by path."""
    from engine.layout import BLOCK_SHARE

    c.fit()
    boxes = {p: c.group_box(p).sceneBoundingRect() for p in c.shown_groups()}
    shown = {n: c.node_rect(n) for n in c.nodes if not c.is_hidden(n)}
    items = list(boxes.items()) + list(shown.items())
    for i, (a, ra) in enumerate(items):
        for b, rb in items[i + 1:]:
            assert not ra.adjusted(1, 1, -1, -1).intersects(rb), (a, b)
    widest = max(r.width() for r in boxes.values())
    assert boxes["transition1"].width() >= BLOCK_SHARE * widest - 1
    return boxes


def test_arranged_collapsed_groups_stand_apart_and_small_ones_stay_readable(qtbot, registry) -> None:  # noqa: ARG001
    """A densenet-like network (blocks of 4 to 40 layers with transitions of 2 between them) opens collapsed;
    after Arrange the boxes overlap neither each other nor a layer, a 2-layer box is at least 30% as wide as the
    largest one, its name is painted inside it, and links to the boxes follow routes."""
    from canvas.bridge import ModelBridge
    from canvas.graph import ModelCanvas

    m = Model("dense")
    m.add_layer("input", "inp")
    x, k = "inp", 0
    for b, n in enumerate([6, 12, 40, 24]):
        names = []
        for _ in range(n):
            m.add_layer("convolution", f"conv{k}", inputs=[x])
            names.append(x := f"conv{k}")
            k += 1
        m.set_group(names, f"denseblock{b + 1}")
        if b < 3:
            m.add_layer("convolution", f"tconv{b}", inputs=[x])
            m.add_layer("convolution", f"tpool{b}", inputs=[f"tconv{b}"])
            m.set_group([f"tconv{b}", f"tpool{b}"], f"transition{b + 1}")
            x = f"tpool{b}"
    for i in range(70):  # enough layers to open collapsed
        m.add_layer("convolution", f"head{i}", inputs=[x])
        x = f"head{i}"
    m.add_layer("output", "out", inputs=[x])
    m.clear_undo()
    c = ModelCanvas(m, registry, ModelBridge(m))
    c.widget.resize(1200, 700)
    c.widget.show()
    try:
        assert c.opens_collapsed() and c.lazy and len(c.shown_groups()) == 7
        c.arrange()
        boxes_apart_and_readable(c)
        assert c.link_route("group:denseblock1", "group:transition1") is not None
        image = QtGui.QImage(c.widget.size(), QtGui.QImage.Format.Format_RGB32)
        c.widget.render(image)  # paints every box (the names are clipped to their boxes)
    finally:
        dispose(c)


def test_an_imported_grouped_network_opens_with_its_boxes_apart_without_arrange(qtbot, registry, tmp_path) -> None:  # noqa: ARG001
    """`layerlab import` lays a network that opens collapsed out by its groups, so the file opened in the designer
    (no Arrange) shows boxes that overlap neither each other nor a layer, a small one at least 30% of the largest."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    from canvas.bridge import ModelBridge
    from canvas.graph import ModelCanvas
    from engine.importers.onnx import import_onnx

    nodes, inits, x, k = [], [], "input", 0
    w = numpy_helper.from_array(np.eye(4, dtype=np.float32).reshape(4, 4, 1, 1), "w")

    def conv(scope: str) -> None:
        nonlocal x, k
        nodes.append(helper.make_node("Conv", [x, "w"], [f"t{k}"], name=f"/{scope}/conv{k}/Conv"))
        x, k = f"t{k}", k + 1

    for b, n in enumerate([6, 12, 40, 24]):
        for _ in range(n):
            conv(f"denseblock{b + 1}")
        if b < 3:
            conv(f"transition{b + 1}")
            conv(f"transition{b + 1}")
    for _ in range(70):
        conv("head")
    graph = helper.make_graph(nodes, "dense", [helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT,
                                                                                [1, 4, 8, 8])],
                              [helper.make_tensor_value_info(x, onnx.TensorProto.FLOAT, [1, 4, 8, 8])], [w, *inits])
    path = tmp_path / "dense.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    m = import_onnx(path, registry=registry).model
    c = ModelCanvas(m, registry, ModelBridge(m))
    c.widget.resize(1200, 700)
    c.widget.show()
    try:
        assert c.opens_collapsed() and len(c.shown_groups()) >= 7
        boxes_apart_and_readable(c)
    finally:
        dispose(c)
