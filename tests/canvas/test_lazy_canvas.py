"""A large model's canvas makes its nodes as they are needed (canvas.lazy): what is not made yet is drawn by the
overview from the same layout rule, and every workflow reaches it (look-up, view, click, rubber band, edit, undo)."""
from __future__ import annotations

import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from canvas import graph
from canvas.bridge import ModelBridge
from canvas.graph import ModelCanvas
from engine.model import Model
from engine.templates.commands import group
from engine.typecheck import CheckMemo, check
from tests.bench.bench_canvas import chain_model
from tests.canvas.conftest import model_view, mouse_drag, shown_canvas

LAYERS = 362  # above graph.EAGER_LAYERS: nodes are made as they are needed (chain_model rounds to whole blocks)


@pytest.fixture
def big(qtbot, registry):
    model = chain_model(LAYERS)
    assert len(model.layers) == LAYERS
    with shown_canvas(qtbot, registry, model, (1000, 600)) as c:
        c.fit()
        c.viewer().viewport().repaint()
        yield c


def view_rect(canvas: ModelCanvas) -> QtCore.QRectF:
    viewer = canvas.viewer()
    return viewer.mapToScene(viewer.viewport().rect()).boundingRect()


def shown_inputs(canvas: ModelCanvas, name: str) -> list[str | None]:
    """The sources the node of ``name`` is linked to on the canvas (its items must exist)."""
    assert canvas.nodes.created(name) is not None
    return canvas.links_shown(name)


def model_inputs(model: Model, name: str) -> list[str | None]:
    links = list(model.layers[name].inputs)
    while links and links[-1] is None:
        links.pop()
    return links


def test_a_large_model_opens_with_few_nodes_and_fits_every_layer(big):
    assert big.lazy and len(big.nodes) == LAYERS
    assert big.created_count() < LAYERS // 4  # only what is near the view, made while idle
    assert big.overview.active  # zoomed out: the overview draws every layer
    area = view_rect(big)
    assert all(area.contains(big.node_rect(name)) for name in big.nodes)
    small = Model("small")
    small.add_layer("input", "inp")
    assert graph.EAGER_LAYERS >= 1 and not ModelCanvas(small, big.registry, ModelBridge(small)).lazy


def test_boxes_measured_before_a_node_exists_are_the_boxes_of_its_items(big, registry):
    """One layout rule: the box, output and input ports the overview uses before a node is made are where its
    items are after (for every kind of node: 1-input convolutions, 3-port sums, input, output, a template instance,
    a layer of an unknown type)."""
    m = big.net_model
    group(m, ["conv30_a", "conv30_b"], "block", registry)  # a template instance (gold, its own ports)
    m.add_layer("no_such_type", "odd", inputs=["sum10", "sum11"], position=(-900.0, 0.0))  # unknown type
    names = ["input", "conv0_a", "conv0_b", "sum0", "sum40", "output", "block_1", "odd"]
    memo = CheckMemo()
    big.set_analysis(check(m, registry, memo), memo.shapes_out)  # output shapes are part of the boxes
    assert all(big.nodes.created(n) is None for n in ("sum40", "output", "block_1", "odd"))
    before = {n: big._geometry(n) for n in names}
    for name in names:
        big.nodes[name]
    for name in names:
        after = big._geometry(name)
        assert after.view is big.nodes[name].view
        assert after.rect == before[name].rect, name
        assert after.out == before[name].out and after.ins == before[name].ins, name


def test_looking_a_node_up_makes_it_with_all_its_links(big):
    name = "sum50"
    assert big.nodes.created(name) is None
    node = big.nodes[name]
    assert big.layer_of(node) == name and node.name() == name
    assert shown_inputs(big, name) == model_inputs(big.net_model, name)
    readers = [n for n, spec in big.net_model.layers.items() if name in spec.inputs]
    assert readers and all(shown_inputs(big, r)[big.net_model.layers[r].inputs.index(name)] == name for r in readers)
    assert "→ ?" in node.info.get_value() or "×" in node.info.get_value()


def test_zooming_in_makes_the_nodes_in_view_and_their_links(big):
    big.zoom_to("conv60_b", 1.0)
    big.viewer().viewport().repaint()
    area = view_rect(big)
    in_view = [n for n in big.nodes if big.node_rect(n).intersects(area)]
    assert in_view and not big.overview.active
    for name in in_view:
        assert big.nodes.created(name) is not None
        assert shown_inputs(big, name) == model_inputs(big.net_model, name), name
    assert big.nodes.created("conv0_a") is None  # far from the view: not made
    assert not big.nodes.created(name).view.drawn_by_overview


def test_a_click_at_overview_zoom_selects_a_node_not_made_yet(big, qtbot):
    name = "conv70_a"
    assert big.nodes.created(name) is None and big.overview.active
    pos = big.viewer().mapFromScene(big.node_rect(name).center())
    qtbot.mouseClick(big.viewer().viewport(), QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.KeyboardModifier.NoModifier, pos)
    assert big.selected_layers() == [name]
    assert big.nodes.created(name).view.drawn_by_overview  # made in overview mode: drawn by the overview


def test_a_rubber_band_at_overview_zoom_selects_nodes_not_made_yet(big):
    names = ["conv80_a", "conv80_b", "sum80"]
    assert all(big.nodes.created(n) is None for n in names)
    area = big.node_rect(names[0]).united(big.node_rect(names[-1]))
    viewer = big.viewer()
    start = viewer.mapFromScene(area.topLeft() - QtCore.QPointF(25, 25))
    end = viewer.mapFromScene(area.bottomRight() + QtCore.QPointF(25, 25))
    assert not any(big.node_rect(n).contains(viewer.mapToScene(start)) for n in big.nodes)
    vp = viewer.viewport()

    def send(kind: QtCore.QEvent.Type, at: QtCore.QPoint, buttons: QtCore.Qt.MouseButton) -> None:
        QtWidgets.QApplication.sendEvent(vp, QtGui.QMouseEvent(
            kind, QtCore.QPointF(at), QtCore.QPointF(vp.mapToGlobal(at)), QtCore.Qt.MouseButton.LeftButton, buttons,
            QtCore.Qt.KeyboardModifier.NoModifier))

    left = QtCore.Qt.MouseButton.LeftButton
    send(QtCore.QEvent.Type.MouseButtonPress, start, left)
    send(QtCore.QEvent.Type.MouseMove, (start + end) / 2, left)
    send(QtCore.QEvent.Type.MouseMove, end, left)
    send(QtCore.QEvent.Type.MouseButtonRelease, end, QtCore.Qt.MouseButton.NoButton)
    picked = big.selected_layers()
    assert set(names) <= set(picked)
    assert all(big.node_rect(n).intersects(QtCore.QRectF(viewer.mapToScene(start), viewer.mapToScene(end))) for n in picked)


def test_edit_and_undo_of_layers_without_nodes_then_made_show_the_model(big, registry):
    m = big.net_model
    memo = CheckMemo()

    def run_check() -> None:
        big.set_analysis(check(m, registry, memo), memo.shapes_out)

    run_check()
    made = "conv90_a"
    node = big.nodes[made]  # made while zoomed out
    size = node.view.boundingRect().size()
    m.set_param(made, "num_output_channels", "1024")
    m.set_param("conv91_a", "num_output_channels", "24")  # no node yet
    m.rename_layer("conv92_b", "renamed")
    run_check()
    assert node.view.boundingRect().size() != size or "1024" in node.info.get_value()
    assert big.nodes.created("conv91_a") is None and "renamed" in big.nodes and "conv92_b" not in big.nodes
    assert "24" in big.nodes["conv91_a"].info.get_value() and "1×24×" in big.nodes["conv91_a"].info.get_value()
    for _ in range(3):
        m.undo()
    run_check()
    assert node.view.boundingRect().size() == size  # zoomed out, edited and undone: the same box
    assert big.node_rect(made).size() == size
    assert big.nodes["conv92_b"].name() == "conv92_b" and "renamed" not in big.nodes
    assert big.snapshot() == model_view(m)  # every node made: the canvas is the model


def test_delete_paste_and_undo_with_nodes_made_later(big):
    m = big.net_model
    big.select_layers(["conv100_a", "conv100_b"])
    text = big.copy_selection()
    big.delete_selection()
    assert "conv100_a" not in big.nodes and big.nodes.created("sum100") is not None
    assert shown_inputs(big, "sum100") == model_inputs(m, "sum100")
    pasted = big.paste(text, at=(0.0, -600.0))
    assert sorted(big.selected_layers()) == sorted(pasted) and len(pasted) == 2
    m.undo()
    m.undo()
    assert "conv100_a" in big.nodes and m.layers["conv100_b"].inputs == ["conv100_a"]
    assert shown_inputs(big, "sum100") == model_inputs(m, "sum100")  # the restored layer's links come back
    assert big.snapshot() == model_view(m)


def test_select_all_makes_and_selects_every_node(big):
    big.select_all_layers()
    assert big.selected_layers() == list(big.net_model.layers)
    assert big.created_count() == LAYERS


def test_arrange_and_fit_use_the_boxes_of_layers_without_nodes(big):
    m = big.net_model
    assert big.arrange() > 0
    big.fit()
    big.viewer().viewport().repaint()
    area = view_rect(big)
    assert all(area.contains(big.node_rect(n)) for n in big.nodes)
    assert all(big.node_rect(n).topLeft().toTuple() == tuple(m.layers[n].position) for n in list(big.nodes)[::37])
    m.undo()
    assert big.node_rect("conv5_a").topLeft().toTuple() == tuple(m.layers["conv5_a"].position)


def test_a_layer_moved_into_view_and_a_link_crossing_it_get_their_nodes(big):
    m = big.net_model
    big.zoom_to("conv60_b", 1.0)
    big.viewer().viewport().repaint()
    area = view_rect(big)
    far = "conv3_b"
    assert big.nodes.created(far) is None and not big.node_rect(far).intersects(area)
    m.move_layer(far, (area.center().x(), area.top() + 5))  # an edit moves a layer without a node into view
    big.viewer().viewport().repaint()
    assert big.nodes.created(far) is not None and area.contains(big.node_rect(far).topLeft())
    # a long link through the view whose two ends are out of it: both ends are made, so the link is drawn
    src, dst = "conv5_a", "conv5_b"
    assert big.nodes.created(src) is None and big.nodes.created(dst) is None
    m.move_layer(src, (area.left() - 900, area.center().y()))
    m.move_layer(dst, (area.right() + 900, area.center().y()))
    big.viewer().viewport().repaint()
    assert big.nodes.created(src) is not None and big.nodes.created(dst) is not None
    assert shown_inputs(big, dst) == [src]


def test_a_mouse_drag_connects_ports_of_nodes_made_by_the_view(big, qtbot):
    m = big.net_model
    m.disconnect("conv61_b", 0)
    big.zoom_to("conv61_a", 1.0)
    viewer = big.viewer()
    viewer.viewport().repaint()
    assert big.nodes.created("conv61_a") is not None and big.nodes.created("conv61_b") is not None
    start = viewer.mapFromScene(big.port_of("conv61_a", None).view.sceneBoundingRect().center())
    end = viewer.mapFromScene(big.port_of("conv61_b", 0).view.sceneBoundingRect().center())
    mouse_drag(qtbot, viewer.viewport(), start, end)
    assert m.layers["conv61_b"].inputs == ["conv61_a"]
    assert shown_inputs(big, "conv61_b") == ["conv61_a"]
    m.undo()
    assert m.layers["conv61_b"].inputs in ([], [None]) and shown_inputs(big, "conv61_b") == []


def test_idle_time_makes_the_nodes_one_zoom_in_reaches(big, qtbot):
    qtbot.waitUntil(lambda: not big.making_nodes, timeout=10000)
    made = big.created_count()
    assert 20 < made < LAYERS  # near the view only
    center = view_rect(big).center()
    big.zoom_to(min(big.nodes, key=lambda n: (big.node_rect(n).center() - center).manhattanLength()), 0.6)
    area = view_rect(big)
    waiting = [n for n in big.nodes if big.nodes.created(n) is None and big.node_rect(n).intersects(area)]
    assert waiting == []  # zoomed in at the centre: every node in view was made while idle
    big.viewer().viewport().repaint()
    assert big.created_count() - made < 10  # at most a few layers reached by links crossing the view


def test_zoomed_out_errors_show_as_marks_on_layers_with_and_without_nodes(big, registry):
    m = big.net_model
    m.set_param("conv20_b", "num_output_channels", "24")  # sum20 reads mismatched inputs: an error on it
    m.disconnect("conv30_a", 0)  # an error on conv30_a: its input is not connected
    big.set_analysis(check(m, registry, CheckMemo()), {})
    made = big.nodes["conv30_a"]
    assert big.nodes.created("sum20") is None and big.overview.active
    assert made.badge.severity == "error" and made.badge.isVisible() and made.badge.opacity() == 0.0

    def pixel_at_corner(name: str) -> QtGui.QColor:
        rect = big.node_rect(name)
        image = QtGui.QImage(21, 21, QtGui.QImage.Format.Format_RGB32)
        image.fill(QtGui.QColor("black"))
        painter = QtGui.QPainter(image)
        big.scene().render(painter, QtCore.QRectF(0, 0, 21, 21),
                           QtCore.QRectF(rect.right() - 105, rect.top() - 105, 210, 210))
        painter.end()
        return image.pixelColor(10, 10)

    for name in ("sum20", "conv30_a", "sum40"):  # without a node, with one, and a layer without problems
        color = pixel_at_corner(name)
        is_red = color.red() > 150 and color.green() < 100
        assert is_red == (name != "sum40"), (name, color.getRgb())
    big.zoom_to("conv30_a", 1.0)
    big.viewer().viewport().repaint()
    assert not big.overview.active and made.badge.opacity() == 1.0
