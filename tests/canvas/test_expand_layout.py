"""Expanded groups laid out afresh on a real canvas: after Expand All an imported DenseNet-like network reads as
bands per block (no box over another, the drawing about the view's shape), one group expanded takes its box's
place with the rest moved aside, and collapsing puts every layer back."""
from __future__ import annotations

from engine.model import LayerSpec, Model
from tests.canvas.conftest import dispose
from tests.canvas.test_groups_canvas import gcanvas  # noqa: F401 - a fixture
from tests.engine.test_layout import dense_block


def densenet_like() -> Model:
    """A stem, four dense blocks of 6, 12, 24 and 16 dense layers (scoped as PyTorch's export names them) with
    transitions between them, and a head: more layers than a network that opens expanded."""
    m = Model("dense")
    specs = [LayerSpec("inp", "input"), LayerSpec("stem_conv0", "convolution", inputs=["inp"], group="features")]
    x = "stem_conv0"
    for b, n in enumerate([6, 12, 24, 16], 1):
        block = dense_block(n, f"features/denseblock{b}", first=x)
        specs += block.values()
        last = list(block)[-1]
        cat = f"features_denseblock{b}_Concat"
        specs.append(LayerSpec(cat, "concatenation", inputs=[x, *[k for k in block if k.endswith("conv2_Conv")]],
                               group=f"features/denseblock{b}"))
        x = cat if last else x
        if b < 4:
            t = f"features_transition{b}"
            specs += [LayerSpec(f"{t}_conv_Conv", "convolution", inputs=[x], group=f"features/transition{b}"),
                      LayerSpec(f"{t}_pool_AveragePool", "pooling", inputs=[f"{t}_conv_Conv"],
                                group=f"features/transition{b}")]
            x = f"{t}_pool_AveragePool"
    specs += [LayerSpec("classifier", "fully_connected", inputs=[x]), LayerSpec("out", "output", inputs=["classifier"])]
    m.add_layers(specs, "build")
    m.clear_undo()
    return m


def open_arranged(qtbot, registry):  # noqa: ANN001, ANN201, ARG001
    """The network on a shown canvas, laid out as an import lays it out (each collapsed group's layers where its
    box stands)."""
    from canvas.bridge import ModelBridge
    from canvas.graph import ModelCanvas

    m = densenet_like()
    c = ModelCanvas(m, registry, ModelBridge(m))
    c.widget.resize(1200, 700)
    c.widget.show()
    c.arrange()
    return c


def shown_rects(c) -> dict:  # noqa: ANN001
    rects = {n: c.node_rect(n) for n in c.net_model.layers if not c.is_hidden(n)}
    rects.update({f"group:{p}": c.group_box(p).sceneBoundingRect() for p in c.shown_groups()})
    return rects


def assert_apart(rects: dict) -> None:
    items = sorted(rects.items(), key=lambda kv: kv[1].left())
    for i, (a, ra) in enumerate(items):
        for b, rb in items[i + 1:]:
            if rb.left() >= ra.right():
                break
            assert not ra.adjusted(1, 1, -1, -1).intersects(rb), (a, b)


def test_expand_all_lays_blocks_out_in_bands_and_collapse_all_puts_them_back(qtbot, registry) -> None:
    c = open_arranged(qtbot, registry)
    try:
        assert c.opens_collapsed() and "features/denseblock3" in c.shown_groups()
        collapsed_places = {n: s.position for n, s in c.net_model.layers.items()}
        c.expand_all()
        assert c.shown_groups() == []
        rects = shown_rects(c)
        assert_apart(rects)
        whole = c._shown_rect()
        vp = c.viewer().viewport().size()
        assert 1 / 3 < (whole.width() / whole.height()) / (vp.width() / vp.height()) < 3
        block = [n for n, s in c.net_model.layers.items() if s.group.startswith("features/denseblock3")]
        rows = {round(rects[n].center().y()) for n in block}
        assert len(rows) <= len(block) / 6  # a few rows (bands), not one height per layer (a diagonal)
        assert c.link_route(block[0], block[1]) is not None
        assert c.net_model.modified  # the places are model positions, undone in one step like Arrange's
        c.collapse_all()
        assert {n: s.position for n, s in c.net_model.layers.items()} == collapsed_places
        assert "features/denseblock3" in c.shown_groups()
    finally:
        dispose(c)


def test_an_imported_block_expands_where_its_box_stood_without_moving(qtbot, registry) -> None:
    """An import lays each collapsed group's layers out as the expanded layout does: expanding it moves nothing."""
    c = open_arranged(qtbot, registry)
    try:
        before = {n: s.position for n, s in c.net_model.layers.items()}
        c.net_model.mark_clean()
        c.expand_group("features/denseblock2")
        assert "features/denseblock2" not in c.shown_groups() and "features/denseblock3" in c.shown_groups()
        assert_apart(shown_rects(c))
        assert {n: s.position for n, s in c.net_model.layers.items()} == before and not c.net_model.modified
    finally:
        dispose(c)


def test_one_expanded_group_takes_its_box_place_and_moves_the_rest_aside(gcanvas) -> None:  # noqa: F811 - the fixture
    """A group's box is smaller than its layers laid out: the layers take the box's corner, what stood right of it
    moves right (nothing overlaps), as one undo step; collapsing it puts every layer back."""
    c = gcanvas
    c.collapse_group("features/stage1")
    before = {n: s.position for n, s in c.net_model.layers.items()}
    box = c.group_box("features/stage1").sceneBoundingRect()
    c.expand_group("features/stage1")
    assert c.shown_groups() == []
    assert_apart(shown_rects(c))
    assert abs(c.node_rect("block_conv0").left() - box.left()) < 1
    assert c.net_model.layers["block_conv3"].position[0] > before["block_conv3"][0]  # moved aside
    c.net_model.undo()  # the layout is one undo step: the places come back, the group stays open
    assert {n: s.position for n, s in c.net_model.layers.items()} == before
    c.net_model.redo()
    c.collapse_group("features/stage1")
    assert {n: s.position for n, s in c.net_model.layers.items()} == before
