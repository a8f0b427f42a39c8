"""Templates on the canvas: instance nodes (template name, inputs as ports, exposed parameters), group and
ungroup through the right-click menu on real nodes, undo/redo keeping the canvas equal to the Model, and
copy/paste carrying template definitions."""
from __future__ import annotations

from PySide6 import QtGui

from canvas.bridge import ModelBridge
from canvas.clipboard import copy_layers
from canvas.graph import ModelCanvas
from engine import templates as T
from engine.model import Model
from engine.network import Network
from tests.canvas.conftest import dispose, model_view, right_click


def install_menu(canvas: ModelCanvas, registry):
    """Right-click menu commands bound to actions doing what the designer's do (group, ungroup, delete)."""
    acts = {}
    for label, fn in (("Group", lambda: T.group(canvas.net_model, canvas.selected_layers(), "blk", registry)),
                      ("Ungroup", lambda: [T.ungroup(canvas.net_model, n, registry) for n in canvas.selected_layers()]),
                      ("Delete", canvas.delete_selection), ("Paste", canvas.paste)):
        act = QtGui.QAction(label, canvas.widget)
        act.triggered.connect(lambda _c=False, fn=fn: fn())
        acts[label] = act
    canvas.set_context_actions([("Group as Template…", acts["Group"]), ("Ungroup", acts["Ungroup"]), None,
                                ("Delete", acts["Delete"])], [("Paste", acts["Paste"])])
    return acts


def test_group_from_the_right_click_menu_and_undo(canvas, registry):
    m = canvas.net_model
    install_menu(canvas, registry)
    before = m.content()
    canvas.select_layers(["conv1", "conv2"])
    entries = right_click(canvas, "conv2", "Group as Template…")
    assert [t for t, _ in entries] == ["Group as Template…", "Ungroup", "Delete"]
    assert list(m.layers) == ["inp", "blk_1", "add", "out"] and m.layers["add"].inputs == ["blk_1", "inp"]
    assert canvas.snapshot() == model_view(m)
    node = canvas.nodes["blk_1"]
    assert [p.name() for p in node.input_ports()] == ["inp"]
    info = node.info.get_value()
    assert "template blk" in info and "conv1.num_output_channels: <b>16</b>" in info
    assert node.layer_type == "template:blk" and node.desc.display_name == "blk"
    assert Network(m, registry).infer()["out"].shape == (1, 3, 64, 64)
    m.undo()
    assert m.content() == before and canvas.snapshot() == model_view(m)
    m.redo()
    assert canvas.snapshot() == model_view(m)


def test_right_click_outside_the_selection_selects_that_node(canvas, registry):
    install_menu(canvas, registry)
    canvas.select_layers(["conv1", "conv2"])
    right_click(canvas, "add")
    assert canvas.selected_layers() == ["add"]
    entries = right_click(canvas, None)
    assert entries == [("Paste", True)]


def test_ungroup_from_the_menu_restores_the_layers(canvas, registry):
    m = canvas.net_model
    acts = install_menu(canvas, registry)
    before = m.content()
    T.group(m, ["conv1", "conv2"], "blk", registry)
    acts["Ungroup"].setEnabled(True)
    right_click(canvas, "blk_1", "Ungroup")
    assert m.content()["layers"] == before["layers"]
    assert canvas.snapshot() == model_view(m)
    assert "relu" in canvas.nodes["conv1"].info.get_value()
    m.undo()
    m.undo()
    assert m.content() == before and canvas.snapshot() == model_view(m)


def test_template_nodes_follow_their_definition(canvas, registry):
    m = canvas.net_model
    T.group(m, ["conv1", "conv2", "add"], "blk", registry)
    assert [p.name() for p in canvas.nodes["blk_1"].input_ports()] == ["inp"]
    T.set_exposed(m, "blk", ["conv2.stride"], registry)
    info = canvas.nodes["blk_1"].info.get_value()
    assert "conv2.stride" in info and "conv1.num_output_channels" not in info
    assert canvas.snapshot() == model_view(m)
    m.undo()
    assert "conv1.num_output_channels" in canvas.nodes["blk_1"].info.get_value()
    m.add_layer("template:blk", "second", inputs=["inp"], position=(300, 300))
    assert canvas.snapshot() == model_view(m) and canvas.nodes["second"].desc.name == "template:blk"


def test_copy_paste_carries_the_template_to_another_model(canvas, registry):
    m = canvas.net_model
    T.group(m, ["conv1", "conv2"], "blk", registry)
    text = copy_layers(m, ["blk_1"])
    other = Model("other")
    target = ModelCanvas(other, registry, ModelBridge(other))
    try:
        names = target.paste(text)
        assert names == ["blk_1"] and other.templates == {"blk": m.templates["blk"]}
        assert target.snapshot() == model_view(other)
        other.undo()
        assert other.layers == {} and other.templates == {}
    finally:
        dispose(target)
