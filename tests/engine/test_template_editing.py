"""Editing a template in place (engine.templates.editing): the definition as a model, saved back as one undo step,
exposed parameters kept where their layers still exist."""
from __future__ import annotations

import pytest

from engine.errors import LayerLabError
from engine.model import LayerSpec, Model
from engine.templates import Exposed, get_template, template_xml
from engine.templates.editing import apply_definition, definition_model, instance_dims
from engine.typecheck import check, errors, output_shapes


def resblock_model() -> Model:
    layers = [
        LayerSpec("c1", "convolution", {"num_output_channels": "3"}, "relu", inputs=["$x"], position=(0, 0)),
        LayerSpec("c2", "convolution", {"num_output_channels": "3"}, inputs=["c1"], position=(220, 0)),
        LayerSpec("add", "element_wise", {}, inputs=["c2", "$skip"], position=(440, 0)),
    ]
    m = Model("net")
    m.templates["resblock"] = template_xml("resblock", ["x", "skip"], layers, "add",
                                           [Exposed("c1", "num_output_channels"), Exposed("c2", "kernel_size")])
    m.add_layer("input", "inp", params={"dimensions": "1x3x12x12"})
    m.add_layer("template:resblock", "r1", params={"c1.num_output_channels": "3", "c2.kernel_size": "5"},
                inputs=["inp", "inp"])
    m.add_layer("template:resblock", "r2", inputs=["r1", "inp"])
    m.add_layer("output", "out", inputs=["r2"])
    m.clear_undo()
    return m


def test_definition_model_is_a_runnable_model_of_the_template(registry):
    m = resblock_model()
    dims = instance_dims(m, "resblock", output_shapes(m, registry))
    assert dims == {"x": "1x3x12x12", "skip": "1x3x12x12"}
    d = definition_model(m, "resblock", registry, dims)
    assert list(d.layers) == ["x", "skip", "c1", "c2", "add", "output"]
    assert d.layers["c1"].inputs == ["x"] and d.layers["add"].inputs == ["c2", "skip"]
    assert d.layers["output"].inputs == ["add"] and not errors(check(d, registry))


def test_saving_updates_every_instance_in_one_undo_step_and_drops_exposed_of_removed_layers(registry):
    m = resblock_model()
    d = definition_model(m, "resblock", registry)
    d.remove_layers(["c2"])
    d.connect("c1", "add", 0)
    d.set_param("c1", "num_output_channels", "3")
    dropped = apply_definition(m, "resblock", d, registry)
    assert dropped == ["c2.kernel_size"]
    defn = get_template(m, "resblock")
    assert list(defn.layers) == ["c1", "add"] and [e.key for e in defn.exposed] == ["c1.num_output_channels"]
    assert m.layers["r1"].params == {"c1.num_output_channels": "3"}  # the dropped one's value went too
    assert m.layers["r1"].inputs == ["inp", "inp"] and m.layers["r2"].inputs == ["r1", "inp"]
    assert not errors(check(m, registry))
    m.undo()  # one step
    assert list(get_template(m, "resblock").layers) == ["c1", "c2", "add"]
    assert m.layers["r1"].params["c2.kernel_size"] == "5"


def test_instances_keep_their_links_by_input_name(registry):
    m = resblock_model()
    d = definition_model(m, "resblock", registry)
    d.layers = {n: d.layers[n] for n in ["skip", "x", "c1", "c2", "add", "output"]}  # skip first now
    apply_definition(m, "resblock", d, registry)
    assert get_template(m, "resblock").inputs == ["skip", "x"]
    assert m.layers["r2"].inputs == ["inp", "r1"]  # skip <- inp, x <- r1


def test_a_definition_that_cannot_be_a_template_is_refused_unchanged(registry):
    m = resblock_model()
    before = dict(m.templates)
    d = definition_model(m, "resblock", registry)
    d.add_layer("output", "second", inputs=["c1"])
    with pytest.raises(LayerLabError, match="2 output layers"):
        apply_definition(m, "resblock", d, registry)
    assert m.templates == before and not m.can_undo()
