"""Templates: definition checks (each message), expansion (names, wiring, exposed parameters, nesting,
shared templates), same outputs as the hand-flattened network, group/ungroup/import as undoable commands,
the model file, the preprocessed export, fusing across expanded layers, exporters and the command line."""
from __future__ import annotations

import io

import numpy as np
import pytest

from engine import modelfile
from engine import templates as T
from engine.errors import LayerLabError, ModelFileError, TemplateError
from engine.export import export_onnx, export_preprocessed, export_project, export_torch
from engine.model import LayerSpec, Model
from engine.network import Network
from engine.templates import Exposed, template_xml
from engine.typecheck import ERROR, check, output_shapes
from engine.weights import RandomWeights, WeightsFolder, save_weights

DIMS = "1x3x12x12"
SEED = 7


def resblock_text(name: str = "resblock") -> str:
    """conv(relu) -> conv -> add(skip): inputs x and skip, output add; c1's channel count and the add's
    operation exposed."""
    layers = [
        LayerSpec("c1", "convolution", {"num_output_channels": "3"}, "relu", inputs=["$x"], position=(0, 0)),
        LayerSpec("c2", "convolution", {"num_output_channels": "3"}, inputs=["c1"], position=(220, 0)),
        LayerSpec("add", "element_wise", {}, inputs=["c2", "$skip"], position=(440, 0)),
    ]
    return template_xml(name, ["x", "skip"], layers, "add",
                        [Exposed("c1", "num_output_channels"), Exposed("add", "operation")])


def pair_text() -> str:
    """Two resblock instances in a row (nesting); the second one's operation exposed as r2.add.operation."""
    layers = [LayerSpec("r1", "template:resblock", inputs=["$x", "$x"], position=(0, 0)),
              LayerSpec("r2", "template:resblock", inputs=["r1", "r1"], position=(300, 0))]
    return template_xml("pair", ["x"], layers, "r2", [Exposed("r2", "add.operation")])


def with_instances() -> Model:
    """input -> b1 (resblock, operation max) -> b2 (resblock) -> output; b2's skip is the input."""
    m = Model("templated")
    m.templates["resblock"] = resblock_text()
    m.add_layer("input", "inp", params={"dimensions": DIMS}, position=(0, 0))
    m.add_layer("template:resblock", "b1", params={"add.operation": "max"}, inputs=["inp", "inp"], position=(300, 50))
    m.add_layer("template:resblock", "b2", inputs=["b1", "inp"], position=(600, 50))
    m.add_layer("output", "out", inputs=["b2"], position=(900, 0))
    m.clear_undo()
    return m


def flattened() -> Model:
    """``with_instances`` written out by hand, with the names the preprocessor gives."""
    m = Model("templated")
    m.add_layer("input", "inp", params={"dimensions": DIMS})
    for inst, x, skip, op in (("b1", "inp", "inp", "max"), ("b2", "b1__add", "inp", None)):
        m.add_layer("convolution", f"{inst}__c1", params={"num_output_channels": "3"}, inputs=[x], activation="relu")
        m.add_layer("convolution", f"{inst}__c2", params={"num_output_channels": "3"}, inputs=[f"{inst}__c1"])
        m.add_layer("element_wise", f"{inst}__add", params={"operation": op} if op else {}, inputs=[f"{inst}__c2", skip])
    m.add_layer("output", "out", inputs=["b2__add"])
    return m


def chain() -> Model:
    m = Model("plain")
    m.add_layer("input", "inp", params={"dimensions": DIMS}, position=(0, 0))
    m.add_layer("convolution", "c1", params={"num_output_channels": "3"}, inputs=["inp"], activation="relu",
                position=(250, 0))
    m.add_layer("convolution", "c2", params={"num_output_channels": "3"}, inputs=["c1"], position=(500, 20))
    m.add_layer("element_wise", "add", inputs=["c2", "inp"], position=(750, 0))
    m.add_layer("output", "out", inputs=["add"], position=(1000, 0))
    m.clear_undo()
    return m


def feed() -> dict[str, np.ndarray]:
    return {"inp": np.random.default_rng(1).random((1, 3, 12, 12), dtype=np.float32)}


def run(model: Model, registry, **kw) -> dict[str, np.ndarray]:
    return Network(model, registry, weights=kw.pop("weights", RandomWeights(SEED)), **kw).infer(feed())


# ---- definitions: every problem has its message ---------------------------------------------------

def _layer(name, ltype="convolution", src="$x", **extra):
    return f'<layer name="{name}" type="{ltype}"><input index="0" source="{src}"/>{extra.get("body", "")}</layer>'


BAD = [
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a", "convolutoin") + "</layers>"
     "<output source='a'/></template>", "layer a: unknown layer type 'convolutoin' (did you mean convolution"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a", src="$y") + "</layers>"
     "<output source='a'/></template>", "layer a: input 0 reads unknown template input '$y' (the template's inputs: $x)"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a", src="ghost") + "</layers>"
     "<output source='a'/></template>", "layer a: input 0 reads 'ghost', which is not a layer of the template"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a") + "</layers></template>",
     "no <output source=\"LAYER\"/>"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a") + "</layers>"
     "<output source='b'/></template>", "<output> source 'b' is not a layer of the template"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a") + "</layers>"
     "<output source='$x'/></template>", "<output> source '$x' is a template input"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a", src="b") + _layer("b", src="a")
     + "</layers><output source='b'/></template>", "the layers form a cycle: a -> b -> a"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a") + _layer("b") + "</layers>"
     "<output source='b'/></template>", "layer a: its output is not used"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a") + "</layers><output source='a'/>"
     "<exposed><param layer='a' name='flux'/></exposed></template>",
     "exposed parameter a.flux: convolution has no parameter 'flux'"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a") + "</layers><output source='a'/>"
     "<exposed><param layer='z' name='groups'/></exposed></template>", "'z' is not a layer of the template"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a", "template:t") + "</layers>"
     "<output source='a'/></template>", "layer a: the template instantiates itself (t -> t)"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a", "template:u") + "</layers>"
     "<output source='a'/></template>", "layer b: the template instantiates itself (t -> u -> t)"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a", "template:nope") + "</layers>"
     "<output source='a'/></template>", "layer a: unknown template 'nope'"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a", "output") + "</layers>"
     "<output source='a'/></template>", "layer a: a template cannot contain output layers"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>"
     + _layer("a", body='<param name="num_output_channels" value="-2"/>') + "</layers><output source='a'/></template>",
     "parameter num_output_channels: '-2' is not an integer"),
    ("<template name='t'><layers></layers><output source='a'/></template>", "<layers> is empty"),
    ("<template name='t'><inputs><input name='x'/></inputs><layers>" + _layer("a") + "</layers>"
     "<output source='a'/>", "malformed XML"),
    ("<template name='9t'><layers/></template>", "needs a name that is an identifier"),
]


@pytest.mark.parametrize("text,message", BAD, ids=[m[:40] for _, m in BAD])
def test_definition_errors_name_the_template_and_the_problem(registry, text, message):
    m = Model("net")
    m.templates["t"] = text
    m.templates["u"] = ("<template name='u'><inputs><input name='x'/></inputs><layers>" + _layer("b", "template:t")
                        + "</layers><output source='b'/></template>")
    with pytest.raises(TemplateError) as info:
        T.check_template(T.parse_template(text), m, registry)
    assert message in str(info.value)
    assert "template " in str(info.value)


def test_errors_in_a_model_file_name_the_file_and_line(tmp_path, registry):
    text = ('<?xml version="1.0"?>\n<network name="n">\n  <templates>\n    <template name="blk">\n'
            '      <inputs><input name="x"/></inputs>\n      <layers>\n'
            '        <layer name="a" type="convolution"><input index="0" source="$x"/></layer>\n'
            '        <layer name="b" type="warp" x="1"><input index="0" source="a"/></layer>\n'
            '      </layers>\n      <output source="b"/>\n    </template>\n  </templates>\n</network>\n')
    path = tmp_path / "bad.lnet"
    path.write_text(text)
    with pytest.raises(ModelFileError) as info:
        modelfile.load(path, registry)
    assert str(info.value).startswith(f"{path}:8: template blk: layer b: unknown layer type 'warp'")
    path.write_text(text.replace('source="b"', 'source="zz"'))
    with pytest.raises(TemplateError, match=r":10: template blk: <output> source 'zz'"):
        modelfile.load(path)  # the structure is checked even without a registry


def test_unknown_instance_parameter_and_template_in_a_file(tmp_path, registry):
    m = with_instances()
    m.layers["b2"].params["add.operation"] = "warp"
    with pytest.raises(ModelFileError, match=r":\d+: template:resblock b2: parameter add.operation: 'warp' is not one of"):
        modelfile.loads(modelfile.dumps(m), str(tmp_path / "x.lnet"), registry)
    m = with_instances()
    m.layers["b2"].type = "template:ghost"
    with pytest.raises(ModelFileError, match=r"layer b2: unknown layer type 'template:ghost' \(no template named "
                                             r"'ghost' in this file; its templates: resblock\)"):
        modelfile.loads(modelfile.dumps(m), "x.lnet", registry)


# ---- descriptors ------------------------------------------------------------------------------------

def test_template_desc_describes_an_instance_like_a_layer(registry):
    m = with_instances()
    d = T.template_desc("resblock", m, registry)
    assert d.name == "template:resblock" and d.display_name == "resblock" and d.categories == ("Templates",)
    assert [(i.name, i.kind.value) for i in d.inputs] == [("x", "primary"), ("skip", "secondary")]
    conv = registry.find_layer("convolution").param("num_output_channels")
    p = d.param("c1.num_output_channels")
    assert p.type == conv.type and p.min == conv.min and p.default == 3 and "layer c1" in p.doc
    assert d.param("add.operation").enum_values == registry.find_layer("element_wise").param("operation").enum_values
    assert "<b>c2</b>" in d.documentation and "(output)" in d.documentation
    assert T.find_desc(m, registry, "template:resblock") == d
    assert T.find_desc(m, registry, "convolution") is registry.find_layer("convolution")
    assert T.find_desc(m, registry, "template:none") is None
    m.templates["pair"] = pair_text()
    assert [p.name for p in T.template_desc("pair", m, registry).params] == ["r2.add.operation"]


# ---- expansion --------------------------------------------------------------------------------------

def test_expansion_names_wiring_params_and_positions(registry):
    m = with_instances()
    exp = T.expand(m, registry)
    e = exp.model
    assert list(e.layers) == ["inp", "b1__c1", "b1__c2", "b1__add", "b2__c1", "b2__c2", "b2__add", "out"]
    assert not e.templates and not T.has_instances(e)
    assert e.layers["b1__c1"].inputs == ["inp"] and e.layers["b1__add"].inputs == ["b1__c2", "inp"]
    assert e.layers["b2__c1"].inputs == ["b1__add"] and e.layers["out"].inputs == ["b2__add"]
    assert e.layers["b1__add"].params == {"operation": "max"} and e.layers["b2__add"].params == {}
    assert e.layers["b1__c2"].position == (520.0, 50.0)
    assert exp.output_of == {"b1": "b1__add", "b2": "b2__add"} and exp.origin["b2__c2"] == ("b2", "c2")
    assert T.expand_templates(m, registry) == e and m == with_instances()  # the model is unchanged


def test_nested_templates_expand_recursively(registry):
    m = with_instances()
    m.templates["pair"] = pair_text()
    m.add_layer("template:pair", "p", params={"r2.add.operation": "max"}, inputs=["b2"], position=(700, 300))
    m.connect("p", "out", 0)
    exp = T.expand(m, registry)
    names = [n for n in exp.model.layers if n.startswith("p__")]
    assert names == [f"p__{r}__{x}" for r in ("r1", "r2") for x in ("c1", "c2", "add")]
    layers = exp.model.layers
    assert layers["p__r1__c1"].inputs == ["b2__add"] and layers["p__r1__add"].inputs == ["p__r1__c2", "b2__add"]
    assert layers["p__r2__c1"].inputs == ["p__r1__add"] and layers["out"].inputs == ["p__r2__add"]
    assert layers["p__r2__add"].params == {"operation": "max"} and layers["p__r1__add"].params == {}
    assert exp.origin["p__r2__c1"] == ("p", "r2__c1") and exp.output_of["p"] == "p__r2__add"
    assert layers["p__r2__c2"].position == (700 + 300 + 220, 300)
    assert run(m, registry)["out"].shape == (1, 3, 12, 12)


def test_instance_activation_and_permanent_go_to_the_output_layer(registry):
    m = with_instances()
    m.set_activation("b2", "sigmoid")
    m.set_permanent("b2", True)
    out = T.expand_templates(m, registry).layers["b2__add"]
    assert out.activation == "sigmoid" and out.permanent
    assert run(m, registry)["out"].min() >= 0.0
    m.set_activation("b2", "none")
    m.set_activation("b1", "relu")
    text = m.templates["resblock"].replace('<layer name="add" type="element_wise" x="440" y="0">',
                                           '<layer name="add" type="element_wise" x="440" y="0"><activation type="tanh" />')
    m.templates["resblock"] = text
    with pytest.raises(TemplateError, match="instance b1 has activation relu, but the output layer add already has"):
        T.expand(m, registry)


def test_expanded_name_collisions_are_errors(registry):
    m = with_instances()
    m.add_layer("convolution", "b1__c2", inputs=["inp"])
    with pytest.raises(TemplateError, match="expanding instance b1: its layer would be named b1__c2"):
        T.expand(m, registry)
    diags = check(m, registry)
    assert any(d.layer == "b1" and "would be named b1__c2" in d.message for d in diags)


def test_same_outputs_as_the_hand_flattened_network(registry):
    m = with_instances()
    want = run(flattened(), registry)["out"]
    np.testing.assert_array_equal(run(m, registry)["out"], want)
    np.testing.assert_array_equal(run(m, registry, fusing="off")["out"], want)
    net = Network(m, registry, weights=RandomWeights(SEED))
    net.infer(feed())
    np.testing.assert_array_equal(net.output("b2"), want)  # an instance's name reads its output layer
    with pytest.raises(LayerLabError, match="b1 is a template instance.*its output is layer b1__add"):
        net.layer("b1")


def test_weights_of_expanded_layers_use_expanded_names(tmp_path, registry):
    flat = Network(flattened(), registry, weights=RandomWeights(3), fusing="off")  # weights under the layers' names
    flat.infer(feed())
    save_weights(tmp_path, {n: {k: np.asarray(v) for k, v in flat.layer(n).weights.items()}
                            for n in flat.order if flat.layer(n).weights})
    assert (tmp_path / "b2__c1_weights.npy").is_file()
    got = run(with_instances(), registry, weights=WeightsFolder(tmp_path))["out"]
    np.testing.assert_array_equal(got, flat.output("out"))


def test_typecheck_reports_on_the_instance(registry):
    m = with_instances()
    assert check(m, registry) == []
    assert output_shapes(m, registry)["b1"] == output_shapes(flattened(), registry)["b1__add"]
    m.disconnect("b2", 0)
    m.set_param("inp", "dimensions", "1x4x12x12")
    m.set_param("b1", "c9.groups", "2")
    diags = {(d.severity, d.layer, d.message) for d in check(m, registry)}
    assert (ERROR, "b2", "These mandatory inputs are not connected: 0") in diags
    assert ("warning", "b1", "unknown parameter 'c9.groups' is ignored") in diags
    assert (ERROR, "b1", "add: inputs of dimensions 1x3x12x12 and 1x4x12x12 differ in C (3 vs 4)") in diags
    assert not any(layer == "b2" and "c1:" in msg for _, layer, msg in diags)  # no echo of the missing input
    m.set_param("b1", "c1.num_output_channels", "0")
    assert (ERROR, "b1", "c1: parameter num_output_channels: '0' is not an integer in [1, 65536]") in {
        (d.severity, d.layer, d.message) for d in check(m, registry)}
    m.layers["b1"].type = "template:gone"
    assert any(d.layer == "b1" and "no such template in network templated" in d.message for d in check(m, registry))


# ---- commands ----------------------------------------------------------------------------------------

def test_group_and_ungroup_round_trip_with_undo_and_redo(registry):
    m = chain()
    before = m.content()
    x = run(m, registry)["out"]
    inst = T.group(m, ["c2", "c1", "add"], "blk", registry)
    assert inst == "blk_1" and list(m.layers) == ["inp", "blk_1", "out"]
    spec = m.layers[inst]
    assert spec.type == "template:blk" and spec.inputs == ["inp"] and spec.position == (250.0, 0.0)
    assert m.layers["out"].inputs == ["blk_1"] and m.undo_text() == "Group c1, c2, add as template blk"
    defn = T.get_template(m, "blk")
    assert defn.inputs == ["inp"] and defn.output == "add" and defn.layers["c2"].position == (250.0, 20.0)
    assert defn.layers["add"].inputs == ["c2", "$inp"]
    assert check(m, registry) == []
    grouped = m.content()
    np.testing.assert_array_equal(run(m, registry, weights=RandomWeights(SEED))["out"],
                                  Network(T.expand_templates(m), registry, weights=RandomWeights(SEED)).infer(feed())["out"])
    m.undo()
    assert m.content() == before
    m.redo()
    assert m.content() == grouped
    new = T.ungroup(m, inst, registry)
    assert new == ["c1", "c2", "add"]
    assert m.content()["layers"] == before["layers"] and "blk" in m.templates  # the template stays
    np.testing.assert_array_equal(run(m, registry)["out"], x)
    m.undo()
    assert m.content() == grouped
    m.undo()
    assert m.content() == before and not m.can_undo()


def test_grouping_instances_nests_templates(registry):
    m = with_instances()
    want = run(m, registry)["out"]
    outer = T.group(m, ["b1", "b2"], "twice", registry)
    defn = T.get_template(m, "twice")
    assert defn.inputs == ["inp"] and defn.output == "b2" and defn.layers["b1"].params == {"add.operation": "max"}
    assert [e.key for e in defn.exposed] == ["b1.c1.num_output_channels", "b1.add.operation",
                                             "b2.c1.num_output_channels", "b2.add.operation"]
    assert T.expand(m).output_of == {outer: f"{outer}__b2__add"}
    assert check(m, registry) == []
    assert run(m, registry)["out"].shape == want.shape
    assert T.ungroup(m, outer, registry) == ["b1", "b2"]
    np.testing.assert_array_equal(run(m, registry)["out"], want)


def test_ungroup_applies_exposed_params_and_renames_clashes(registry):
    m = with_instances()
    new = T.ungroup(m, "b1", registry)
    assert new == ["c1", "c2", "add"] and m.layers["add"].params == {"operation": "max"}
    assert m.layers["c1"].inputs == ["inp"] and m.layers["b2"].inputs == ["add", "inp"]
    assert m.layers["c2"].position == (520.0, 50.0)
    assert T.ungroup(m, "b2", registry) == ["b2_c1", "b2_c2", "b2_add"]
    assert m.layers["out"].inputs == ["b2_add"]
    np.testing.assert_array_equal(Network(m, registry, weights=RandomWeights(SEED)).infer(feed())["out"].shape,
                                  (1, 3, 12, 12))
    with pytest.raises(LayerLabError, match="not a template instance"):
        T.ungroup(m, "c1", registry)


@pytest.mark.parametrize("names,message", [
    (["c1", "c2"], "lies between|read from outside"),
    (["inp", "c1"], "cannot group inp: input and output layers stay in the network"),
    ([], "select the layers"),
    (["nope"], "no layer named 'nope'"),
])
def test_group_refusals_change_nothing(registry, names, message):
    m = chain()
    m.add_layer("convolution", "side", inputs=["c1"])
    before = m.content()
    with pytest.raises(LayerLabError, match=message):
        T.group(m, names, "blk", registry)
    assert m.content() == before and m.undo_text() == "Add side"


def test_group_refuses_an_outside_layer_between_selected_ones(registry):
    m = chain()
    m.remove_layer("out")
    with pytest.raises(LayerLabError, match="c2 is outside the selection but lies between selected layers"):
        T.group(m, ["c1", "add"], "blk", registry)


def test_group_refuses_several_outputs_and_bad_names(registry):
    m = chain()
    m.add_layer("convolution", "side", inputs=["c1"])
    with pytest.raises(LayerLabError, match=r"a template has one output, but 2 selected layers are read from outside "
                                            r"the selection: c1 \(read by side\); c2 \(read by add\)"):
        T.group(m, ["c1", "c2"], "blk", registry)
    with pytest.raises(LayerLabError, match="not a valid template name"):
        T.group(m, ["c2"], "2blk", registry)
    T.group(m, ["c2"], "blk", registry)
    with pytest.raises(LayerLabError, match="a template named 'blk' already exists"):
        T.group(m, ["side"], "blk", registry)


def test_remove_template_is_refused_while_used(registry):
    m = with_instances()
    m.templates["pair"] = pair_text()
    with pytest.raises(LayerLabError, match="template resblock is still used by b1, b2, template pair"):
        m.remove_template("resblock")
    m.remove_template("pair")
    assert "pair" not in m.templates
    m.undo()
    assert "pair" in m.templates


def test_set_exposed_changes_every_instance_and_undoes(registry):
    m = with_instances()
    T.set_exposed(m, "resblock", ["c2.kernel_size"], registry)
    assert [p.name for p in T.template_desc("resblock", m, registry).params] == ["c2.kernel_size"]
    assert m.layers["b1"].params == {}
    m.undo()
    assert m.layers["b1"].params == {"add.operation": "max"} and m == with_instances()
    with pytest.raises(TemplateError, match="exposed parameter c2.nope: convolution has no parameter 'nope'"):
        T.set_exposed(m, "resblock", ["c2.nope"], registry)
    assert ("c2.stride", registry.find_layer("convolution").param("stride")) in T.exposable(m, "resblock", registry)


def test_import_model_as_template(tmp_path, registry):
    modelfile.save(chain(), tmp_path / "plain.lnet")
    m = with_instances()
    name = modelfile.import_model_as_template(m, tmp_path / "plain.lnet", registry)
    assert name == "plain" and m.undo_text() == "Import plain.lnet as template plain"
    defn = T.get_template(m, "plain")
    assert defn.inputs == ["inp"] and defn.output == "add" and list(defn.layers) == ["c1", "c2", "add"]
    assert defn.layers["c1"].inputs == ["$inp"] and defn.layers["c1"].position == (0.0, 0.0)
    m.add_layer("template:plain", "pl", inputs=["b2"])
    m.connect("pl", "out", 0)
    assert check(m, registry) == []
    assert modelfile.import_model_as_template(m, tmp_path / "plain.lnet", registry) == "plain_2"
    for _ in range(3):  # the import, the link, the instance
        m.undo()
    assert "plain_2" not in m.templates and "pl" not in m.layers and "plain" in m.templates


def test_import_refuses_several_outputs_and_brings_nested_templates(tmp_path, registry):
    two = chain()
    two.add_layer("output", "out2", inputs=["c1"])
    modelfile.save(two, tmp_path / "two.lnet")
    m = Model("host")
    with pytest.raises(LayerLabError, match=r"it has 2 output layers \(out, out2\), a template has one output"):
        modelfile.import_model_as_template(m, tmp_path / "two.lnet", registry)
    assert not m.templates and not m.can_undo()
    modelfile.save(with_instances(), tmp_path / "nested.lnet")
    assert modelfile.import_model_as_template(m, tmp_path / "nested.lnet", registry, "outer") == "outer"
    assert set(m.templates) == {"resblock", "outer"}
    m.add_layer("input", "i", params={"dimensions": DIMS})
    m.add_layer("template:outer", "o", inputs=["i"])
    assert list(T.expand_templates(m).layers)[1:4] == ["o__b1__c1", "o__b1__c2", "o__b1__add"]
    m.undo()
    m.undo()
    m.undo()
    assert m.templates == {}


# ---- files and exports -------------------------------------------------------------------------------

def test_model_file_round_trip(tmp_path, registry):
    m = with_instances()
    m.templates["pair"] = pair_text()
    m.add_layer("template:pair", "p", params={"r2.add.operation": "max"}, inputs=["b2"])
    path = tmp_path / "t.lnet"
    modelfile.save(m, path)
    loaded = modelfile.load(path, registry)
    assert loaded == m and loaded.load_warnings == []
    assert modelfile.dumps(loaded) == path.read_text()
    assert '<layer name="b1" type="template:resblock"' in path.read_text()
    assert '<param name="add.operation" value="max" />' in path.read_text()


def test_preprocessed_export_has_no_templates_and_runs_the_same(tmp_path, registry):
    m = with_instances()
    result = export_preprocessed(m, registry, tmp_path / "pre.lnet", weights=RandomWeights(SEED), seed=SEED)
    assert "2 template instance(s) expanded" in result.summary
    text = (tmp_path / "pre.lnet").read_text()
    assert "template:" not in text and "<templates>" not in text
    pre = modelfile.load(tmp_path / "pre.lnet", registry)
    assert not T.has_instances(pre) and "b2__add" in pre.layers
    got = Network(pre, registry, weights=WeightsFolder(tmp_path / "pre_weights")).infer(feed())["out"]
    np.testing.assert_array_equal(got, run(m, registry)["out"])


def test_fusing_rules_apply_inside_and_across_expanded_templates(registry):
    inner = [LayerSpec("conv", "convolution", {"num_output_channels": "4"}, inputs=["$x"]),
             LayerSpec("bn", "batch_normalization", {}, "relu", inputs=["conv"], position=(200, 0)),
             LayerSpec("last", "convolution", {"num_output_channels": "4"}, inputs=["bn"], position=(400, 0))]
    m = Model("fuse")
    m.templates["cbr"] = template_xml("cbr", ["x"], inner, "last")
    m.add_layer("input", "inp", params={"dimensions": DIMS})
    m.add_layer("template:cbr", "t1", inputs=["inp"])
    m.add_layer("batch_normalization", "after", inputs=["t1"])  # fuses with the template's last convolution
    m.add_layer("output", "out", inputs=["after"])
    net = Network(m, registry, weights=RandomWeights(SEED))
    fused = {(inner, outer, name) for _, inner, outer, name in net.fused.applied}
    assert fused == {("t1__conv", "t1__bn", "t1__bn"), ("t1__last", "after", "after")}
    assert net.model.layers["t1__bn"].type == "conv_bn" and net.model.layers["after"].type == "conv_bn"
    want = Network(m, registry, weights=RandomWeights(SEED), fusing="off").infer(feed())["out"]
    np.testing.assert_allclose(net.infer(feed())["out"], want, rtol=1e-4, atol=1e-5)


def test_exporters_build_from_the_expanded_model(tmp_path, registry):
    import onnxruntime as ort

    m = with_instances()
    export_onnx(m, registry, tmp_path / "t.onnx", weights=RandomWeights(SEED), seed=SEED)
    sess = ort.InferenceSession(str(tmp_path / "t.onnx"), providers=["CPUExecutionProvider"])
    got = sess.run(None, feed())[0]
    np.testing.assert_allclose(got, run(m, registry)["out"], rtol=1e-4, atol=1e-5)
    res = export_torch(m, registry, tmp_path / "torch", weights=RandomWeights(SEED), seed=SEED)
    assert "b2__c1" in res.path.read_text()
    res = export_project(m, registry, tmp_path / "proj")
    source = (tmp_path / "proj" / "templated" / "network.py").read_text()
    assert "m.add_layer('convolution', 'b1__c1'" in source and "template:" not in source


def test_cli_infer_check_and_export_on_a_model_with_templates(tmp_path, registry, capsys):
    from app.cli import main

    path = tmp_path / "t.lnet"
    modelfile.save(with_instances(), path)
    out = io.StringIO()
    assert main(["infer", str(path), "-b", "numpy", "-n", "1", "--seed", str(SEED), "-o", f"out={tmp_path}/y.npy"],
                out=out) == 0, capsys.readouterr().err
    assert "7 layers" in out.getvalue()  # 8 expanded, b2's convolution + sum fused into conv_sum
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy").shape, (1, 3, 12, 12))
    out = io.StringIO()
    assert main(["check", str(path)], out=out) == 0 and "0 error(s)" in out.getvalue()
    out = io.StringIO()
    assert main(["profile", str(path), "-b", "numpy", "-n", "1", "-r", str(tmp_path / "rep")], out=out) == 0
    assert "b2__add" in out.getvalue()
    out = io.StringIO()
    assert main(["export", "preprocessed", str(path), "-o", str(tmp_path / "pre.lnet")], out=out) == 0
    assert "template:" not in (tmp_path / "pre.lnet").read_text()


def test_rename_template_follows_instances_and_nesting_and_undoes(registry):
    m = with_instances()
    m.templates["pair"] = pair_text()
    m.add_layer("template:pair", "p", params={"r2.add.operation": "max"}, inputs=["b2"], position=(700, 300))
    m.connect("p", "out", 0)
    m.clear_undo()
    before = run(m, registry)["out"]
    order = list(m.layers)
    content = m.content()
    T.rename_template(m, "resblock", "block", registry)
    assert "resblock" not in m.templates and 'name="block"' in m.templates["block"]
    assert m.layers["b1"].type == m.layers["b2"].type == "template:block"
    assert m.layers["b1"].params == {"add.operation": "max"} and m.layers["b2"].inputs == ["b1", "inp"]
    assert m.layers["p"].inputs == ["b2"] and m.layers["out"].inputs == ["p"]
    assert list(m.layers) == order and m.layers["b1"].position == (300, 50)
    assert 'type="template:block"' in m.templates["pair"] and "template:resblock" not in m.templates["pair"]
    np.testing.assert_array_equal(run(m, registry)["out"], before)  # same layers, same seeded weights
    assert m.undo_text() == "Rename template resblock to block"
    m.undo()
    assert m.content() == content
    m.redo()
    assert m.layers["b2"].type == "template:block"


def test_rename_template_refusals_change_nothing(registry):
    m = with_instances()
    m.templates["other"] = resblock_text("other")
    content = m.content()
    for new, message in (("other", "already exists"), ("9lives", "not a valid template name")):
        with pytest.raises(LayerLabError, match=message):
            T.rename_template(m, "resblock", new, registry)
        assert m.content() == content
    with pytest.raises(LayerLabError, match="no such template"):
        T.rename_template(m, "missing", "x", registry)
