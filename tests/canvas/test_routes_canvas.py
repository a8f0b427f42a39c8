"""Links never run behind boxes, at every state a user reaches: after an import's layout, Expand All, collapsing
again, opening the saved file (its routes found again from the layers' places), and moving a layer."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from PySide6 import QtWidgets

from engine import modelfile
from engine.model import Model
from tests.canvas.conftest import dispose, links_behind_boxes

if TYPE_CHECKING:
    from canvas.graph import ModelCanvas


def dense_model() -> Model:
    """A densenet-like network: blocks whose every layer concatenates all earlier outputs of its block, transitions
    between them, a stem and a head outside any group; large enough to open collapsed."""
    m = Model("dense")
    m.add_layer("input", "inp")
    m.add_layer("convolution", "stem", inputs=["inp"])
    x, k = "stem", 0
    for b, n in enumerate([6, 12, 36, 24]):
        names, feats = [], [x]
        for _ in range(n):
            m.add_layer("convolution", f"conv{k}", inputs=[feats[-1]])
            m.add_layer("concatenation", f"cat{k}", inputs=[*feats, f"conv{k}"])
            names += [f"conv{k}", f"cat{k}"]
            feats.append(f"cat{k}")
            k += 1
        m.set_group(names, f"features/denseblock{b + 1}")
        x = feats[-1]
        if b < 3:
            m.add_layer("convolution", f"tconv{b}", inputs=[x])
            m.add_layer("pooling", f"tpool{b}", inputs=[f"tconv{b}"])
            m.set_group([f"tconv{b}", f"tpool{b}"], f"features/transition{b + 1}")
            x = f"tpool{b}"
    m.add_layer("convolution", "head", inputs=[x, "stem"])
    m.add_layer("output", "out", inputs=["head"])
    m.clear_undo()
    return m


def settle() -> None:
    QtWidgets.QApplication.processEvents()


@contextlib.contextmanager
def canvas_of(registry, model: Model) -> Iterator[ModelCanvas]:  # noqa: ANN001
    """A shown canvas of ``model`` (1200 x 700), disposed afterwards."""
    from canvas.bridge import ModelBridge
    from canvas.graph import ModelCanvas

    c = ModelCanvas(model, registry, ModelBridge(model))
    c.widget.resize(1200, 700)
    c.widget.show()
    try:
        yield c
    finally:
        dispose(c)


def test_links_stay_clear_of_boxes_through_expand_collapse_and_reopen(qtbot, registry, tmp_path) -> None:  # noqa: ARG001
    m = dense_model()
    with canvas_of(registry, m) as c:
        assert c.opens_collapsed()
        c.arrange(fold=True)  # as an import lays the network out
        settle()
        assert links_behind_boxes(c) == []
        c.expand_all()
        settle()
        assert c.shown_groups() == [] and links_behind_boxes(c) == []
        assert c.link_route("tpool0", "cat6") is not None  # a link into a block that was collapsed is routed
        c.collapse_all()
        settle()
        assert c.shown_groups() and links_behind_boxes(c) == []
        c.expand_group("features/denseblock2")
        settle()
        assert links_behind_boxes(c) == []
        path = tmp_path / "dense.lnet"
        modelfile.save(m, path)
    with canvas_of(registry, modelfile.load(path, registry)) as c:
        c.expand_all()  # the saved file opened, then every group expanded: no route comes from a layout
        c.fit()
        settle()
        assert links_behind_boxes(c) == []
        c.collapse_all()
        settle()
        assert links_behind_boxes(c) == []


def test_a_moved_layer_does_not_hide_links(qtbot, registry) -> None:  # noqa: ARG001
    m = Model("chain")
    m.add_layer("input", "inp", position=(0, 0))
    m.add_layer("convolution", "a", inputs=["inp"], position=(300, 0))
    m.add_layer("convolution", "b", inputs=["a"], position=(600, 0))
    m.add_layer("element_wise", "add", inputs=["b", "inp"], position=(900, 0))
    m.add_layer("output", "out", inputs=["add"], position=(1200, 0))
    with canvas_of(registry, m) as c:
        settle()
        assert links_behind_boxes(c) == []  # the skip link inp -> add goes around a and b
        m.move_layer("b", (600, 300))
        m.move_layer("a", (600, 600))
        settle()
        assert links_behind_boxes(c) == []


def test_at_fit_layers_outside_the_groups_read_like_the_boxes(qtbot, registry) -> None:  # noqa: ARG001
    """Fitted to the view, a collapsed network's layers in no group (stem, head) are drawn grown into the room the
    grouped layout leaves them, about as large as the smallest box, apart from each other and from the boxes, and
    their names are painted there."""
    from canvas.overview import LOOSE_SHARE

    m = dense_model()
    with canvas_of(registry, m) as c:
        c.arrange(fold=True)
        c.fit()
        settle()
        c.widget.grab()  # paints the overview (it measures what it draws then)
        boxes = [c.group_box(p).sceneBoundingRect() for p in c.shown_groups()]
        rooms = c.overview._room
        loose = ["inp", "stem", "head", "out"]
        assert set(rooms) == set(loose)
        least = min(b.height() for b in boxes)
        scale = c.viewer().transform().m11()
        for name in loose:
            room = rooms[name]
            assert room.contains(c.node_rect(name).center())
            assert room.height() >= 0.8 * LOOSE_SHARE * least and room.height() * scale >= 30  # a readable name
            assert not any(room.intersects(b) for b in boxes)
            assert not any(room.intersects(rooms[o]) for o in loose if o != name)


def test_collapse_all_hides_no_layer_behind_a_box(qtbot, registry) -> None:  # noqa: ARG001
    """Collapse All on a network whose top-level group's layers surround a layer outside it (as a folded layout puts
    densenet121's classifier inside the area of ``features``) draws the subgroups' boxes instead: no shown layer
    lies behind a box, and no link runs behind one."""
    m = Model("folded")
    m.add_layer("input", "inp", position=(0, 0))
    x = "inp"
    for band, stage in enumerate(["stage1", "stage2"]):
        names = []
        for i in range(4):
            m.add_layer("convolution", f"{stage}_conv{i}", inputs=[x], position=(300 + 300 * i, 600 * band))
            names.append(x := f"{stage}_conv{i}")
        m.set_group(names, f"features/{stage}")
    m.add_layer("fully_connected", "classifier", inputs=[x], position=(750, 300))  # between the two bands
    m.add_layer("output", "out", inputs=["classifier"], position=(1050, 300))
    with canvas_of(registry, m) as c:
        c.collapse_all()
        settle()
        assert sorted(c.shown_groups()) == ["features/stage1", "features/stage2"]
        boxes = [c.group_box(p).sceneBoundingRect() for p in c.shown_groups()]
        shown = [c.node_rect(n) for n in m.layers if not c.is_hidden(n)]
        assert not [r for r in shown for b in boxes if b.intersects(r.adjusted(1, 1, -1, -1))]
        assert links_behind_boxes(c) == []
