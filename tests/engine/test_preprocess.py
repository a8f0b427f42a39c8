"""The preprocessor: template expansion then fusing rules, one function with a result object."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import TemplateError
from engine.export import preprocessed_model
from engine.model import LayerSpec, Model
from engine.network import Network
from engine.preprocess import PASSES, PreprocessOptions, PreprocessResult, preprocess
from engine.templates import template_xml
from engine.tensor import FP32_NCHW
from engine.weights import RandomWeights


def templated() -> Model:
    """input -> blk (a template: convolution -> batch normalization) -> output."""
    m = Model("pre")
    layers = [LayerSpec("c", "convolution", {"num_output_channels": "4"}, inputs=["$x"]),
              LayerSpec("bn", "batch_normalization", {}, inputs=["c"], position=(200, 0))]
    m.templates["cb"] = template_xml("cb", ["x"], layers, "bn")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("template:cb", "blk", inputs=["inp"])
    m.add_layer("output", "out", inputs=["blk"])
    m.clear_undo()
    return m


def test_templates_expand_then_rules_fuse_across_the_instance(registry):
    model = templated()
    before = model.content()
    result = preprocess(model, registry, FP32_NCHW)
    assert result.passes == ["overrides", "networks", "templates", "formats", "fusing", "conversions"]
    assert result.expansion is not None and result.expanded_instances == 1
    assert [f[1:] for f in result.fusions] == [("blk__c", "blk__bn", "blk__bn")]
    assert list(result.model.layers) == ["inp", "blk__bn", "out"]
    assert result.model.layers["blk__bn"].type == "conv_bn" and result.model.templates == {}
    assert model.content() == before and result.source is model


def test_fusing_off_keeps_the_expanded_model_and_a_plain_model_is_not_copied(registry):
    result = preprocess(templated(), registry, fusing="off")
    assert result.fused is None and result.fusions == []
    assert list(result.model.layers) == ["inp", "blk__c", "blk__bn", "out"]
    plain = Model("plain")
    plain.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    plain.add_layer("output", "out", inputs=["inp"])
    same = preprocess(plain, registry)
    assert same.model is plain and same.expansion is None and same.fused is not None and not same.fusions
    assert same.weights(base := RandomWeights(0), registry) is base


def test_a_further_pass_sees_the_result_of_the_ones_before(registry):
    seen: list[list[str]] = []

    def note(result: PreprocessResult, options: PreprocessOptions) -> None:
        seen.append(list(result.model.layers))
        result.warnings.append(f"checked for {options.fmt}")

    result = preprocess(templated(), registry, passes=(*PASSES, ("note", note)))
    assert seen == [["inp", "blk__bn", "out"]]
    assert result.passes == ["overrides", "networks", "templates", "formats", "fusing", "conversions", "note"]
    assert result.warnings == ["checked for fp32|nchw"]


def test_the_network_and_the_export_build_the_preprocessed_model(registry):
    model = templated()
    net = Network(model, registry, weights=RandomWeights(2))
    assert net.model is net.preprocessed.model and net.fused is net.preprocessed.fused
    exported = preprocessed_model(model, registry)
    assert exported.content()["layers"] == net.model.content()["layers"]
    assert exported.settings["fusing"] == "off" and exported.templates == {}
    unfused = Network(model, registry, weights=RandomWeights(2), fusing="off")
    x = {"inp": np.random.default_rng(0).random((1, 3, 8, 8), dtype=np.float32)}
    np.testing.assert_allclose(net.infer(x)["out"], unfused.infer(x)["out"], rtol=1e-4, atol=1e-5)


def test_a_broken_instance_is_a_template_error(registry):
    model = templated()
    model.templates["cb"] = model.templates["cb"].replace('source="c"', 'source="nowhere"')
    with pytest.raises(TemplateError, match="nowhere"):
        preprocess(model, registry)
