"""Templates in the designer with what a real model holds: a custom layer inside a template, edited in its tab and
saved back; a grouped instance larger than the layers it replaces, placed clear of its neighbours."""
from __future__ import annotations

from tests.engine.custom_cases import softsign


def test_a_custom_layer_inside_a_template_is_known_in_the_template_tab(window, sample_path, qtbot):
    doc = window.files.open_path(sample_path)
    model = doc.model
    model.set_custom_layer("softsign", softsign().to_xml())
    model.add_layer("custom:softsign", "soft", inputs=["conv2"], position=(660.0, 300.0))
    model.connect("soft", "conv3", 0)
    doc.canvas.select_layers(["conv2", "soft"])
    instance = window.templates.group_selection("block")
    assert instance is not None
    tab = window.templates.edit_template("block", doc)
    assert tab is not None and tab is window.current
    node = tab.canvas.nodes["soft"]
    assert node.desc is not None and node.desc.display_name == "Scaled softsign"
    tab.run_check()
    assert not [d for d in tab.diagnostics if d.severity == "error"], [str(d) for d in tab.diagnostics]
    tab.model.set_param("soft", "alpha", "2.5")
    assert window.templates.save_definition(tab)
    assert 'value="2.5"' in model.templates["block"]


def test_a_grouped_instance_overlaps_no_neighbour_and_undoes_in_one_step(window, sample_path, qtbot):
    doc = window.files.open_path(sample_path)
    canvas, model = doc.canvas, doc.model
    below = canvas.node_rect("conv1").bottom() + 12.0  # just under conv1: free until conv1 grows into an instance
    model.add_layer("convolution", "side", inputs=["input"], position=(220.0, below))
    rects = {n: canvas.node_rect(n) for n in canvas.nodes}
    assert not [(a, b) for a in rects for b in rects if a < b and rects[a].intersects(rects[b])]
    canvas.select_layers(["conv1", "conv2", "conv3", "residual"])
    instance = window.templates.group_selection("block")
    assert instance is not None
    box = canvas.node_rect(instance)
    assert box.height() > rects["conv1"].height()  # the case this is about: larger than conv1
    assert not [n for n in canvas.nodes if n != instance and canvas.node_rect(n).intersects(box)]
    assert model.layers["side"].position == (220.0, below)  # the neighbour stays where the user put it
    assert model.undo_text().startswith("Group conv1, conv2, conv3, residual")
    model.undo()
    assert "conv1" in model.layers and instance not in model.layers and "block" not in model.templates
