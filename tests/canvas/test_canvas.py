"""The canvas is a view of the Model: gestures become Model commands, Model events update the view."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PySide6 import QtCore

from canvas.bridge import ModelBridge
from canvas.clipboard import copy_layers, paste_specs
from canvas.graph import ModelCanvas
from engine.errors import LayerLabError
from engine.model import Model
from tests.canvas.conftest import model_view, mouse_drag, small_model


def port_view(canvas, layer, index=None):
    return canvas.port_of(layer, index).view


def drag_link(canvas, src, dst, index, disconnected=()):
    """What the viewer emits when the user drags a link from ``src``'s output to input ``index`` of ``dst``."""
    canvas.viewer().connection_changed.emit(list(disconnected), [(port_view(canvas, src), port_view(canvas, dst, index))])


def test_canvas_shows_model(canvas):
    assert canvas.snapshot() == model_view(canvas.net_model)
    node = canvas.nodes["conv1"]
    text = node.info.get_value()
    assert "Convolution" in text and "num_output_channels" in text and "relu" in text
    # element_wise has 2 links, so a third free port
    assert [p.name() for p in canvas.nodes["add"].input_ports()] == ["inputs 1", "inputs 2", "inputs 3"]


def test_secondary_ports_look_different(canvas):
    ports = canvas.nodes["conv1"].input_ports()
    assert ports[0].view.color != ports[1].view.color
    assert ports[1].view.color == ports[2].view.color


def test_connect_and_replace_link(canvas):
    m = canvas.net_model
    m.add_layer("input", "inp2", position=(0, 200))
    drag_link(canvas, "inp2", "conv1", 0, disconnected=[(port_view(canvas, "conv1", 0), port_view(canvas, "inp"))])
    assert m.layers["conv1"].inputs == ["inp2"]
    assert canvas.snapshot() == model_view(m)
    assert len(canvas.port_of("conv1", 0).connected_ports()) == 1
    m.undo()
    assert m.layers["conv1"].inputs == ["inp"]
    assert canvas.snapshot() == model_view(m)


def test_cycle_refused_with_status_message(canvas, qtbot):
    m = canvas.net_model
    before = m.content()
    with qtbot.waitSignal(canvas.status_message) as sig:
        drag_link(canvas, "conv2", "conv1", 0, disconnected=[(port_view(canvas, "conv1", 0), port_view(canvas, "inp"))])
    assert "cycle" in sig.args[0]
    assert m.content() == before
    assert canvas.snapshot() == model_view(m)
    assert len(canvas.port_of("conv1", 0).view.connected_pipes) == 1


def test_infinite_input_grows_and_shrinks(canvas):
    m = canvas.net_model
    drag_link(canvas, "conv1", "add", 2)
    assert m.layers["add"].inputs == ["conv2", "inp", "conv1"]
    assert len(canvas.nodes["add"].input_ports()) == 4
    m.undo()
    assert len(canvas.nodes["add"].input_ports()) == 3
    assert canvas.snapshot() == model_view(m)


def test_detach_link_disconnects(canvas):
    m = canvas.net_model
    canvas.viewer().connection_changed.emit([(port_view(canvas, "out", 0), port_view(canvas, "add"))], [])
    assert m.layers["out"].inputs == [None]
    assert canvas.snapshot() == model_view(m)


def test_mouse_drag_between_ports_connects(canvas, qtbot):
    m = canvas.net_model
    m.disconnect("out", 0)
    viewer = canvas.viewer()
    canvas.fit()
    qtbot.wait(10)
    start = viewer.mapFromScene(port_view(canvas, "conv2").sceneBoundingRect().center())
    end = viewer.mapFromScene(port_view(canvas, "out", 0).sceneBoundingRect().center())
    mouse_drag(qtbot, viewer.viewport(), start, end)
    assert m.layers["out"].inputs == ["conv2"]
    assert canvas.snapshot() == model_view(m)


def test_double_click_free_ports_creates_io_layers(canvas, qtbot):
    m = canvas.net_model
    canvas.fit()
    qtbot.wait(10)
    viewer = canvas.viewer()
    m.disconnect("conv1", 0)
    pos = viewer.mapFromScene(port_view(canvas, "conv1", 0).sceneBoundingRect().center())
    qtbot.mouseDClick(viewer.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)
    new_in = [n for n, s in m.layers.items() if s.type == "input" and n != "inp"]
    assert new_in == ["input_1"] and m.layers["conv1"].inputs[0] == "input_1"
    pos = viewer.mapFromScene(port_view(canvas, "out").sceneBoundingRect().center())
    qtbot.mouseDClick(viewer.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)
    assert m.layers["output_1"].inputs == ["out"]
    assert canvas.snapshot() == model_view(m)
    m.undo()
    m.undo()
    assert "input_1" not in m.layers and "output_1" not in m.layers
    assert canvas.snapshot() == model_view(m)


def test_move_rename_delete_through_viewer(canvas):
    m = canvas.net_model
    node = canvas.nodes["conv1"]
    node.view.xy_pos = [300.0, 120.0]
    canvas.viewer().moved_nodes.emit({node.view: [250.0, 0.0]})
    assert m.layers["conv1"].position == (300.0, 120.0)
    canvas.viewer().node_name_changed.emit(node.id, "features")
    assert "features" in m.layers and m.layers["conv2"].inputs == ["features"]
    canvas.viewer().node_name_changed.emit(node.id, "2bad")
    assert "features" in m.layers and canvas.nodes["features"].name() == "features"
    canvas.select_layers(["features"])
    canvas.delete_selection()
    assert "features" not in m.layers and m.layers["conv2"].inputs == [None]
    assert canvas.snapshot() == model_view(m)
    for _ in range(3):
        m.undo()
    assert m.layers["conv1"].position == (250.0, 0.0)
    assert canvas.snapshot() == model_view(m)


def test_delete_selected_link(canvas):
    m = canvas.net_model
    pipe = canvas.port_of("out", 0).view.connected_pipes[0]
    pipe.setSelected(True)
    canvas.delete_selection()
    assert m.layers["out"].inputs == [None]
    m.undo()
    assert m.layers["out"].inputs == ["add"]


def test_copy_paste_keeps_params_and_internal_links(canvas):
    m = canvas.net_model
    canvas.select_layers(["conv1", "conv2"])
    text = canvas.copy_selection()
    names = canvas.paste(text)
    assert names == ["conv1_1", "conv2_1"]
    assert m.layers["conv2_1"].inputs == ["conv1_1"]  # internal link kept
    assert m.layers["conv1_1"].inputs == []  # external link dropped
    assert m.layers["conv2_1"].params == {"num_output_channels": "3"}
    assert m.layers["conv1_1"].activation == "relu"
    assert canvas.selected_layers() == names
    dup = canvas.duplicate_selection()
    assert dup == ["conv1_2", "conv2_2"]
    m.undo()
    m.undo()
    assert canvas.snapshot() == model_view(m) and "conv1_1" not in m.layers


def test_paste_specs_pure():
    m = small_model()
    specs = paste_specs(m, copy_layers(m, ["conv2", "add"]), (10, 0))
    assert [s.name for s in specs] == ["conv2_1", "add_1"]
    assert specs[1].inputs == ["conv2_1"]
    assert specs[0].position == (510.0, 0.0)
    assert json.loads(copy_layers(m, ["inp"]))["layers"][0]["name"] == "inp"


def test_badges_and_shapes(canvas):
    from engine.typecheck import check, output_shapes
    m = canvas.net_model
    m.set_param("conv2", "num_output_channels", "5")  # 5 channels + 3 channels in element_wise: error
    canvas.set_analysis(check(m, canvas.registry), output_shapes(m, canvas.registry))
    assert canvas.badge_severity("add") == "error"
    assert canvas.badge_severity("conv1") == ""
    assert "1×16×64×64" in canvas.nodes["conv1"].info.get_value()


# ---- random edit sequences: the canvas always matches the Model, undo/redo restore it exactly ----------
ops = st.lists(st.tuples(st.sampled_from(["add", "remove", "connect", "disconnect", "param", "rename", "move", "act"]),
                         st.integers(0, 50), st.integers(0, 50), st.integers(0, 3)), min_size=1, max_size=25)


def apply_op(m: Model, op: tuple) -> None:
    kind, a, b, c = op
    names = list(m.layers)
    pick = (lambda i: names[i % len(names)]) if names else None
    try:
        if kind == "add" or not names:
            m.add_layer(["convolution", "element_wise", "input", "output"][c], position=(a * 10.0, b * 10.0))
        elif kind == "remove":
            m.remove_layers([pick(a), pick(b)])
        elif kind == "connect":
            m.connect(pick(a), pick(b), c)
        elif kind == "disconnect":
            m.disconnect(pick(a), c)
        elif kind == "param":
            m.set_param(pick(a), "num_output_channels", str(b + 1))
        elif kind == "rename":
            m.rename_layer(pick(a), f"renamed_{b}")
        elif kind == "move":
            m.move_layer(pick(a), (float(b), float(c)))
        elif kind == "act":
            m.set_activation(pick(a), ["none", "relu", "leaky_relu", "sigmoid"][c], {"alpha": "0.2"} if c == 2 else {})
    except LayerLabError:
        pass


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seq=ops)
def test_random_edits_undo_redo(qtbot, registry, seq):
    m = small_model()
    c = ModelCanvas(m, registry, ModelBridge(m))
    qtbot.addWidget(c.widget)
    start = m.content()
    states = [start]
    for op in seq:
        apply_op(m, op)
        assert c.snapshot() == model_view(m)
        if m.content() != states[-1]:
            states.append(m.content())
    end = m.content()
    while m.can_undo():
        m.undo()
        assert c.snapshot() == model_view(m)
    assert m.content() == start
    while m.can_redo():
        m.redo()
    assert m.content() == end
    assert c.snapshot() == model_view(m)
