"""Fusing rules: the rule language (parser, errors, conditions), applying rules to a model, weights of
fused networks, where rules come from, and fused networks giving the unfused networks' outputs."""
from __future__ import annotations

import operator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.descriptors import LayerDesc
from engine.fusing import (
    FusingRule,
    FusingRuleError,
    MappedWeights,
    apply_rules,
    check_rule,
    compare_values,
    parse_rule,
    rules_from,
)
from engine.layer import Layer
from engine.model import FusingRuleSpec, LayerSpec, Model
from engine.network import Network
from engine.plugins import load_plugins
from engine.registry import PluginMeta, Registrar, Registry
from engine.tensor import FORMATS, FP32_NCHW, Dims, Layout, Precision, TensorFormat
from engine.weights import RandomWeights, WeightsFolder, save_weights
from plugins.standard import _common_conv, _common_pool, convolution
from plugins.standard.fusing_rules import RULES as BUILTIN_RULES
from tests.harness import FORMAT_IDS, assert_close, backend_param, each_backend_and_format

EXAMPLE = "fp16|nhwc|convolution_bn = batch_normalization[act == 'none' || act == 'relu'] {convolution[act == 'none']}"
CONV_BN, CONV_POOL = (parse_rule(t) for t in BUILTIN_RULES[:2])
FP16_NHWC = TensorFormat(Precision.FP16, Layout.NHWC)


# ---- a registry with the standard layers, a fused three-layer test layer and test rules ---------------

def _conv_bn_pool_class(reg: Registry) -> type[Layer]:
    """convolution -> batch norm -> pooling in one layer (the activation last), for testing chains of
    fusions: its weights are composed through two fusions."""
    conv_bn, conv_pool = reg.layer_class("conv_bn"), reg.layer_class("conv_pool")
    assert conv_bn is not None and conv_pool is not None
    pool_params = tuple(p for p in conv_pool.desc.params if p.name.startswith("pool_") and p.name != "pool_global")

    class ConvBNPool(conv_bn):  # type: ignore[misc, valid-type]
        desc = replace(conv_bn.desc, name="conv_bn_pool", legacy_names=(), params=(*conv_bn.desc.params, *pool_params))

        def output_dims(self, inputs: list[Dims | None]) -> Dims:
            c = convolution.Convolution.output_dims(self, inputs)
            k, s, p = self.p["pool_kernel_size"], self.p["pool_stride"], self.p["pool_padding"]
            size = _common_pool.pool_output_size
            return Dims(c.n, c.c, size(c.h, k.h, s.h, p.h), size(c.w, k.w, s.w, p.w))

        def forward(self, inputs: list[Any], out: Any) -> None:
            w, b = self.folded_weights(inputs)
            s, p, d = (self.p[n] for n in ("stride", "padding", "dilation"))
            y = _common_conv.conv2d(self.xp, self.nchw(inputs[0]), w, b, (s.h, s.w), (p.h, p.w), (d.h, d.w), self.p["groups"])
            k, s, p = self.p["pool_kernel_size"], self.p["pool_stride"], self.p["pool_padding"]
            y = _common_pool.pool2d(self.xp, y, self.p["pool_type"], (k.h, k.w), (s.h, s.w), (p.h, p.w),
                               self.p["pool_count_include_pad"])
            self.store(out, self.activate(y))

    return ConvBNPool


@pytest.fixture(scope="module")
def reg() -> Registry:
    r = load_plugins()
    assert not r.failures, r.failures
    missing = [n for n in ("convolution", "batch_normalization", "pooling", "conv_bn", "conv_pool") if r.layer_class(n) is None]
    if missing:
        pytest.skip(f"standard layers not registered yet: {missing}")
    cls = _conv_bn_pool_class(r)

    def register(registrar: Registrar) -> None:
        registrar.layer(cls)
        registrar.fusing_rule("*|*|conv_bn = batch_normalization {convolution}")
        registrar.fusing_rule("*|*|conv_pool = pooling {convolution}", enabled=False)

    r.register_plugin(PluginMeta("fusing_test", "1", "tests", "fusing test layers"), register, "tests")
    return r


def conv_bn_model(conv_act: str = "none", bn_act: str = "relu", **conv: str) -> Model:
    """inp -> c (convolution) -> bn (batch_normalization) -> t (convolution) -> out."""
    m = Model("cbn")
    m.add_layer("input", "inp", params={"dimensions": "1x4x9x8"})
    m.add_layer("convolution", "c", params={"num_output_channels": "6", **conv}, inputs=["inp"], activation=conv_act)
    m.add_layer("batch_normalization", "bn", params={"epsilon": "0.001"}, inputs=["c"], activation=bn_act)
    m.add_layer("convolution", "t", params={"num_output_channels": "3"}, inputs=["bn"], activation="tanh")
    m.add_layer("output", "out", inputs=["t"])
    return m


def spec_of(model: Model) -> dict[str, tuple]:
    return {n: (s.type, s.params, s.activation, s.inputs, s.permanent) for n, s in model.layers.items()}


# ---- parsing -----------------------------------------------------------------------------------------

def test_the_example_rule_parses_into_its_parts():
    rule = parse_rule(EXAMPLE)
    assert (rule.precision, rule.layout) == (Precision.FP16, Layout.NHWC)
    assert rule.formats == (FP16_NHWC,) and rule.applies_to(FP16_NHWC)
    assert not rule.applies_to(FP32_NCHW)
    assert rule.replacement == "convolution_bn"
    assert (rule.outer.type, rule.inner.type) == ("batch_normalization", "convolution")
    assert rule.outer.condition.to_text() == "act == 'none' || act == 'relu'"
    assert rule.inner.condition.to_text() == "act == 'none'"
    assert rule.text == EXAMPLE and str(rule) == EXAMPLE
    assert rule.name == "fp16|nhwc|convolution_bn"
    assert parse_rule(EXAMPLE, "my rule").name == "my rule"


def test_a_rule_text_is_parsed_once_and_a_faulty_one_fails_every_time():
    """Every network a model opens applies the collections' rules: the same text (and name) gives the same parsed
    rule, parsed once; a faulty text raises its error at each attempt, not once."""
    parse_rule.cache_clear()
    first = parse_rule(EXAMPLE)
    assert parse_rule(EXAMPLE) is first and parse_rule.cache_info().hits == 1
    assert parse_rule(EXAMPLE, "my rule") is not first and parse_rule(EXAMPLE, "my rule").name == "my rule"
    for _ in range(2):
        with pytest.raises(FusingRuleError, match="column"):
            parse_rule("fp32|nchw|conv_bn = ")


@pytest.mark.parametrize("text", [
    EXAMPLE,
    "*|*|conv_bn = batch_normalization {convolution}",
    "  FP32 | NCHW | conv_bn=batch_normalization{convolution}  ",
    "fp32|*|conv_pool = pooling[pool_type == 'max' && (act == 'none' || act == 'relu')] {convolution[groups == 1]}",
    "*|nhwc|conv_pool = pooling[!(pool_type != 'max') && !global] {convolution[kernel_size == '3x3' && stride <= 2]}",
    "*|*|x = convolution[num_output_channels >= 8 && num_output_channels < 64 || groups > 1]",
    "*|*|x = batch_normalization[epsilon <= 1e-3 && epsilon > -0.5 && epsilon != .25]",
    "*|*|x = convolution[bias == true && bias != false && bias]",
    r"*|*|x = convolution[act == 'it\'s' || act == 'back\\slash']",
    "*|*|x = convolution[((act == 'none'))] # a comment, with [ brackets and 'quotes",
    "*|*|x = convolution[output_channels == 16]",
    "*|*|x = convolution",
])
def test_valid_rules_parse_and_their_canonical_text_parses_back(text):
    rule = parse_rule(text)
    again = parse_rule(rule.to_text())
    assert again.to_text() == rule.to_text()
    assert (again.precision, again.layout, again.replacement) == (rule.precision, rule.layout, rule.replacement)


def test_a_comment_and_escapes_are_read_correctly():
    rule = parse_rule(r"*|*|x = convolution[act == 'it\'s'] # [[[")
    assert rule.inner is None and rule.outer.condition.right.value == "it's"


@pytest.mark.parametrize("text,col,expected", [
    ("fp16|nhwc|x = bn[act == 'none' {conv}", 32, "expected ']' after condition, found '{'"),
    ("fp16|nhwc|x = bn[act = 'none']", 22, "expected '==' to compare"),
    ("fp16|nhwc|x = bn[a == 1 | b]", 25, "expected ']' after condition (use '||' for or), found '|'"),
    ("fp8|nhwc|x = bn", 1, "expected a precision (fp32, fp16 or *), found 'fp8'"),
    ("fp16|nchx|x = bn", 6, "expected a layout (nchw, nhwc or *), found 'nchx'"),
    ("fp16 nhwc|x = bn", 6, "expected '|' after the precision, found 'nhwc'"),
    ("fp16|nhwc x = bn", 11, "expected '|' after the layout, found 'x'"),
    ("fp16|nhwc|= bn", 11, "expected the replacement layer type, found '='"),
    ("fp16|nhwc|x bn", 13, "expected '=' after the replacement layer type, found 'bn'"),
    ("fp16|nhwc|x = ", 14, "expected the outer layer type of the pattern, found the end of the rule"),
    ("fp16|nhwc|x = bn {conv", 23, "expected '}' after the inner layer"),
    ("fp16|nhwc|x = bn {conv {c}}", 24, "expected '}' after the inner layer (a pattern has two layers at most), found '{'"),
    ("fp16|nhwc|x = bn {}", 19, "expected the inner layer type inside '{', found '}'"),
    ("fp16|nhwc|x = bn[act == 'none", 25, "expected a closing ' for the string"),
    ("fp16|nhwc|x = bn[]", 18, "expected a parameter name, act, a number or a 'string', found ']'"),
    ("fp16|nhwc|x = bn[(a == 1]", 25, "expected ')' to close the parenthesis, found ']'"),
    ("fp16|nhwc|x = bn[a & b]", 20, "expected '&&', found '&'"),
    ('fp16|nhwc|x = bn[a == "x"]', 23, "expected a string in single quotes"),
    ("fp16|nhwc|x = bn[a == ]", 23, "expected a parameter name, act, a number or a 'string', found ']'"),
    ("fp16|nhwc|x = bn[a == 1] conv", 26, "expected '{' or the end of the rule, found 'conv'"),
    ("fp16|nhwc|x = bn conv", 18, "expected '[', '{' or the end of the rule, found 'conv'"),
    ("fp16|nhwc|x = bn {conv} extra", 25, "expected the end of the rule, found 'extra'"),
    ("fp16|nhwc|x = bn[a == 1 &&]", 27, "expected a parameter name"),
    ("fp16|nhwc|x = bn[a == - 1]", 23, "unexpected character, found '-'"),
    ("", 1, "expected a precision (fp32, fp16 or *), found the end of the rule"),
])
def test_malformed_rules_name_the_rule_the_column_and_what_was_expected(text, col, expected):
    with pytest.raises(FusingRuleError) as info:
        parse_rule(text, "x")
    assert str(info.value).startswith(f"rule 'x': column {col}: "), str(info.value)
    assert expected in str(info.value)


def test_an_unnamed_rule_is_named_by_its_text_in_errors():
    with pytest.raises(FusingRuleError, match=r"^rule 'fp16\|nhwc\|x = bn\[': column 18: "):
        parse_rule("fp16|nhwc|x = bn[")


# ---- conditions --------------------------------------------------------------------------------------

PY_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge}
GROUPS = 2


def conv_view(reg: Registry, act: str = "relu", **params: str) -> tuple[LayerSpec, LayerDesc]:
    spec = LayerSpec("c", "convolution", {"num_output_channels": "8", "groups": str(GROUPS), **params}, activation=act)
    return spec, reg.find_layer("convolution")


def holds(reg: Registry, condition: str, act: str = "relu", **params: str) -> bool:
    rule = parse_rule(f"*|*|x = convolution[{condition}]")
    spec, desc = conv_view(reg, act, **params)
    return rule.outer.holds(spec, desc, rule.label)


_numbers = st.one_of(st.integers(-5, 5), st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False))
_leaf = st.one_of(
    st.booleans().map(lambda b: ("true" if b else "false", str(b))),
    st.tuples(_numbers, st.sampled_from(list(PY_OPS)), _numbers).map(
        lambda t: (f"{t[0]!r} {t[1]} {t[2]!r}", str(PY_OPS[t[1]](t[0], t[2])))),
    st.tuples(st.sampled_from(list(PY_OPS)), st.integers(0, 4)).map(
        lambda t: (f"groups {t[0]} {t[1]}", str(PY_OPS[t[0]](GROUPS, t[1])))),
    st.tuples(st.sampled_from(["==", "!="]), st.sampled_from(["none", "relu", "tanh"])).map(
        lambda t: (f"act {t[0]} '{t[1]}'", str(PY_OPS[t[0]]("relu", t[1])))),
)


def _combine(t: tuple) -> tuple[str, str]:
    (a, pa), op, (b, pb), parens = t
    text, py = f"{a} {op} {b}", f"{pa} {'and' if op == '&&' else 'or'} {pb}"
    return (f"({text})", f"({py})") if parens else (text, py)


_conditions = st.recursive(_leaf, lambda kids: st.one_of(
    st.tuples(kids, st.sampled_from(["&&", "||"]), kids, st.booleans()).map(_combine),
    kids.map(lambda k: (f"!{k[0]}", f"not {k[1]}")),
    kids.map(lambda k: (f"!({k[0]})", f"not ({k[1]})")),
), max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(_conditions)
def test_conditions_follow_boolean_logic_and_precedence(reg, cond):
    text, python = cond
    expected = eval(python, {"__builtins__": {}}, {})  # noqa: S307 (only True/False/and/or/not/parentheses)
    assert holds(reg, text) is expected, (text, python)


@pytest.mark.parametrize("condition,expected", [
    ("groups == 2", True), ("groups == 2.0", True), ("groups != 2", False), ("groups < 3 && groups >= 2", True),
    ("num_output_channels == 8", True), ("output_channels == 8", True),  # legacy parameter name
    ("kernel_size == '3x3'", True), ("kernel_size == 3", True), ("kernel_size == '3'", True),
    ("kernel_size == '3x5'", False), ("kernel_size != '3x5'", True),
    ("kernel_size <= 3", True), ("kernel_size < 3", False), ("kernel_size <= '5x3'", True), ("kernel_size <= '2x5'", False),
    ("kernel_size < '3x4'", True), ("kernel_size > 2", True), ("kernel_size >= '3x4'", False), ("kernel_size > '2x3'", True),
    ("groups > 0", True), ("groups < -1", False), ("groups == '2'", True), ("groups < 1e9", True),
    ("stride == kernel_size", False), ("padding == dilation", True),
    ("bias", True), ("!bias", False), ("bias == true", True), ("bias == 'false'", False),
    ("act == 'relu'", True), ("act != 'none'", True), ("act == 'Relu'", False),
    ("groups == 'two'", False), ("groups != 'two'", True), ("groups < 'two'", False),  # a value groups cannot take
    ("act == 1", False), ("act != 1", True), ("act > 1", False),  # different kinds
    ("2 == 2.0", True), ("'a' < 'b'", True), ("'a' == 1", False), ("true", True), ("!false && !!true", True),
])
def test_conditions_on_activation_and_parameters(reg, condition, expected):
    assert holds(reg, condition) is expected


def test_unset_parameters_compare_with_their_defaults_and_legacy_activations_are_resolved(reg):
    spec, desc = conv_view(reg, act="none")
    rule = parse_rule("*|*|x = convolution[act == 'none' && kernel_size == 3 && padding == 1 && stride == 1]")
    assert rule.outer.holds(spec, desc, rule.label)
    assert not holds(reg, "act == 'none'")


def test_a_condition_on_a_missing_parameter_or_a_non_boolean_operand_is_an_error_naming_the_column(reg):
    with pytest.raises(FusingRuleError, match=r"column 38: convolution has no parameter 'colour' \(its parameters: act, num_"):
        holds(reg, "act == 'relu' && colour == 1")
    with pytest.raises(FusingRuleError, match=r"column 21: groups is not true or false"):
        holds(reg, "groups")


def test_compare_values_on_dimensions_is_component_wise():
    assert compare_values(Dims(1, 1, 3, 3), "<=", Dims(1, 1, 3, 4))
    assert not compare_values(Dims(1, 1, 3, 5), "<=", Dims(1, 1, 4, 4))
    assert not compare_values(Dims(1, 1, 3, 5), ">", Dims(1, 1, 4, 4))
    assert not compare_values(Dims(1, 1, 3, 3), "<", Dims(1, 1, 3, 3))
    assert compare_values(Dims(1, 1, 3, 3), "<=", Dims(1, 1, 3, 3))
    assert compare_values(Dims(1, 1, 3, 3), "<", Dims(1, 2, 3, 3))
    assert compare_values(Dims(1, 1, 3, 5), "!=", Dims(1, 1, 4, 4))


def test_check_rule_reports_what_the_plugins_do_not_know(reg):
    assert all(check_rule(parse_rule(t), reg) == [] for t in BUILTIN_RULES)
    assert check_rule(parse_rule(EXAMPLE), reg) == []  # convolution_bn is conv_bn's legacy name
    problems = check_rule(parse_rule(
        "*|*|conv_bnn = batch_norm {convolution[kernel_size == '3y3' && act == 'rellu' && colour && groups]}", "r"), reg)
    text = "\n".join(problems)
    assert "replacement layer type 'conv_bnn' is unknown (did you mean conv_bn" in text
    assert "column 16: unknown layer type 'batch_norm' (did you mean batch_normalization?)" in text
    assert "'3y3' is not a value of convolution parameter kernel_size" in text
    assert "'rellu' is not an activation" in text
    assert "convolution has no parameter 'colour'" in text
    assert "groups is not true or false" in text


# ---- applying rules: structure -----------------------------------------------------------------------

def test_conv_bn_fuses_into_one_layer_named_after_the_outer_layer(reg):
    m = conv_bn_model(groups="2", kernel_size="3x1", padding="1x0")
    m.layers["bn"].position = (5.0, 7.0)
    before = m.content()
    fused = apply_rules(m, reg, FP32_NCHW, [CONV_BN])
    assert m.content() == before and fused.model is not m
    assert list(fused.model.layers) == ["inp", "bn", "t", "out"]
    bn = fused.model.layers["bn"]
    assert bn.type == "conv_bn" and bn.inputs == ["inp"] and bn.activation == "relu" and bn.position == (5.0, 7.0)
    assert bn.params == {"num_output_channels": "6", "groups": "2", "kernel_size": "3x1", "padding": "1x0", "epsilon": "0.001"}
    assert fused.model.layers["t"].inputs == ["bn"]
    assert fused.applied == [(CONV_BN.name, "c", "bn", "bn")]
    assert fused.merged == {"c": "bn"}
    assert fused.weight_map == {
        ("bn", "weights"): ("c", "weights"), ("bn", "bias"): ("c", "bias"),
        ("bn", "bn_mean"): ("bn", "mean"), ("bn", "bn_variance"): ("bn", "variance"),
        ("bn", "bn_scale"): ("bn", "scale"), ("bn", "bn_bias"): ("bn", "bias"),
    }
    assert set(fused.sources) == {"c", "bn"} and fused.sources["bn"].type == "batch_normalization"
    fused.model.layers["t"].params["x"] = "1"  # the result shares nothing with the input model
    assert m.content() == before


def test_conv_pool_takes_pooling_parameters_under_their_prefixed_names(reg):
    m = Model("cp")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "c", params={"output_channels": "5", "bias": "false"}, inputs=["inp"], activation="relu")
    m.add_layer("pooling", "p", params={"type": "average", "kernel": "3", "stride": "2", "padding": "1",
                                        "count_include_pad": "true"}, inputs=["c"])
    m.add_layer("output", "out", inputs=["p"])
    fused = apply_rules(m, reg, FP32_NCHW, [CONV_POOL])
    p = fused.model.layers["p"]
    assert p.type == "conv_pool" and p.activation == "relu" and p.inputs == ["inp"]
    assert p.params == {"num_output_channels": "5", "bias": "false", "pool_type": "average", "pool_kernel_size": "3",
                        "pool_stride": "2", "pool_padding": "1", "pool_count_include_pad": "true"}
    assert fused.weight_map == {("p", "weights"): ("c", "weights"), ("p", "bias"): ("c", "bias")}


@pytest.mark.parametrize("extra", [{"ceil_mode": "true"}, {"padding_end": "1x0"}])
def test_pooling_with_ceil_mode_or_asymmetric_padding_is_not_fused_into_conv_pool(reg, extra):
    """conv_pool takes neither: the chain stays unfused (and still runs) instead of losing the parameter."""
    m = Model("cp")
    m.add_layer("input", "inp", params={"dimensions": "1x3x9x9"})
    m.add_layer("convolution", "c", params={"num_output_channels": "4"}, inputs=["inp"])
    m.add_layer("pooling", "p", params={"kernel_size": "3", "stride": "2", **extra}, inputs=["c"])
    m.add_layer("output", "out", inputs=["p"])
    fused = apply_rules(m, reg, FP32_NCHW, [CONV_POOL])
    assert fused.model.layers["p"].type == "pooling" and "c" in fused.model.layers
    x = np.random.default_rng(0).standard_normal((1, 3, 9, 9)).astype(np.float32)
    np.testing.assert_array_equal(Network(m, reg, fusing="on").infer({"inp": x})["out"],
                                  Network(m, reg, fusing="off").infer({"inp": x})["out"])


def test_asymmetric_convolution_padding_is_carried_into_conv_bn(reg):
    m = Model("cb")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "c", params={"num_output_channels": "4", "stride": "2", "padding": "0",
                                            "padding_end": "1"}, inputs=["inp"])
    m.add_layer("batch_normalization", "bn", inputs=["c"])
    m.add_layer("output", "out", inputs=["bn"])
    fused = apply_rules(m, reg, FP32_NCHW, [CONV_BN])
    assert fused.model.layers["bn"].type == "conv_bn" and fused.model.layers["bn"].params["padding_end"] == "1"
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = Network(m, reg, fusing="off").infer({"inp": x})["out"]
    assert want.shape == (1, 4, 4, 4)
    assert_close(Network(m, reg, fusing="on").infer({"inp": x})["out"], want, FP32_NCHW)


def _second_reader(m: Model) -> None:
    m.add_layer("convolution", "other", inputs=["c"])
    m.connect("other", "out", 0)


def _output_reads(m: Model) -> None:
    m.add_layer("output", "out2", inputs=["c"])


def _bn_reads_twice(m: Model) -> None:
    m.connect("c", "bn", 1)  # bn's 'mean' input


@pytest.mark.parametrize("edit,protected,reason", [
    (_second_reader, (), "the output of c is also read by other:0"),
    (_output_reads, (), "the output of c is also read by out2:0"),
    (_bn_reads_twice, (), "the output of c is also read by bn:1"),
    (lambda m: m.set_permanent("c", True), (), "c is permanent"),
    (lambda m: None, ("c",), "c is protected (breakpoint or inspected)"),
])
def test_a_rule_never_applies_where_the_intermediate_output_is_needed_elsewhere(reg, edit, protected, reason):
    m = conv_bn_model()
    edit(m)
    before = m.content()
    fused = apply_rules(m, reg, FP32_NCHW, [CONV_BN], protected=set(protected))
    assert fused.applied == [] and fused.weight_map == {}
    assert fused.model.content() == before == m.content()
    assert fused.skipped == [(CONV_BN.name, "c", "bn", reason)]


def test_a_rule_never_fuses_away_a_network_input_or_into_an_output_layer(reg):
    m = conv_bn_model()
    rules = [parse_rule("*|*|convolution = convolution {input}"), parse_rule("*|*|convolution = output {convolution}")]
    fused = apply_rules(m, reg, FP32_NCHW, rules)
    assert fused.applied == []
    assert {s[3] for s in fused.skipped} == {"inp is a network input", "t is a network output (read by output layer out)"}


def test_protecting_the_outer_layer_does_not_prevent_fusion(reg):
    fused = apply_rules(conv_bn_model(), reg, FP32_NCHW, [CONV_BN], protected={"bn", "t"})
    assert fused.applied == [(CONV_BN.name, "c", "bn", "bn")]


def test_conditions_decide_and_two_activations_are_never_fused(reg):
    assert apply_rules(conv_bn_model(conv_act="relu"), reg, FP32_NCHW, [CONV_BN]).applied == []
    anything = parse_rule("*|*|conv_bn = batch_normalization {convolution}")
    fused = apply_rules(conv_bn_model(conv_act="relu"), reg, FP32_NCHW, [anything])
    assert fused.applied == [] and fused.skipped == [(anything.name, "c", "bn", "both c and bn have an activation")]
    fused = apply_rules(conv_bn_model(conv_act="relu", bn_act="none"), reg, FP32_NCHW, [anything])
    assert fused.model.layers["bn"].activation == "relu"  # the inner layer's, when the outer has none


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_the_format_filter_selects_where_a_rule_applies(reg, fmt):
    rule = parse_rule("fp16|nhwc|conv_bn = batch_normalization {convolution}")
    half = parse_rule("fp16|*|conv_bn = batch_normalization {convolution}")
    assert rule.formats == (FP16_NHWC,) and len(half.formats) == 2
    assert bool(apply_rules(conv_bn_model(), reg, fmt, [rule]).applied) is (fmt == FP16_NHWC)
    assert bool(apply_rules(conv_bn_model(), reg, fmt, [half]).applied) is (fmt.precision is Precision.FP16)


def test_rules_apply_in_list_order_then_execution_order_until_nothing_matches(reg):
    m = conv_bn_model()
    m.add_layer("convolution", "c2", params={"num_output_channels": "4"}, inputs=["t"])
    m.add_layer("batch_normalization", "bn2", inputs=["c2"])
    m.add_layer("convolution", "c0", params={"num_output_channels": "4"}, inputs=["inp"])
    m.add_layer("batch_normalization", "bn0", inputs=["c0"])
    m.connect("bn2", "out", 0)
    m.add_layer("output", "out0", inputs=["bn0"])
    first = parse_rule("*|*|conv_bn = batch_normalization {convolution}", "first")
    second = parse_rule("*|*|conv_bn = batch_normalization {convolution}", "second")
    fused = apply_rules(m, reg, FP32_NCHW, [first, second])
    assert [a[:3] for a in fused.applied] == [("first", "c", "bn"), ("first", "c2", "bn2"), ("first", "c0", "bn0")]
    assert [a[0] for a in apply_rules(m, reg, FP32_NCHW, [second, first]).applied] == ["second"] * 3
    again = apply_rules(fused.model, reg, FP32_NCHW, [first])
    assert again.applied == [] and again.model.content() == fused.model.content()


def test_a_fused_layer_can_be_fused_again_and_its_weights_map_to_the_original_layers(reg):
    m = conv_bn_model(conv_act="none", bn_act="none")
    m.add_layer("pooling", "p", params={"pool_type": "average", "stride": "1"}, inputs=["bn"], activation="relu")
    m.connect("p", "t", 0)
    rules = [parse_rule("*|*|conv_bn_pool = pooling {conv_bn}", "cbp"), CONV_BN]
    fused = apply_rules(m, reg, FP32_NCHW, rules)
    assert [a[:3] for a in fused.applied] == [(CONV_BN.name, "c", "bn"), ("cbp", "bn", "p")]
    assert fused.merged == {"c": "p", "bn": "p"}
    p = fused.model.layers["p"]
    assert p.type == "conv_bn_pool" and p.inputs == ["inp"] and p.activation == "relu"
    assert p.params["pool_type"] == "average" and p.params["pool_stride"] == "1" and p.params["epsilon"] == "0.001"
    assert fused.weight_map == {
        ("p", "weights"): ("c", "weights"), ("p", "bias"): ("c", "bias"),
        ("p", "bn_mean"): ("bn", "mean"), ("p", "bn_variance"): ("bn", "variance"),
        ("p", "bn_scale"): ("bn", "scale"), ("p", "bn_bias"): ("bn", "bias"),
    }
    assert set(fused.sources) == {"c", "bn"} and fused.sources["bn"].type == "batch_normalization"
    a = Network(m, reg, weights=RandomWeights(4)).infer()["out"]
    b = Network(fused.model, reg, weights=MappedWeights(RandomWeights(4), fused, reg)).infer()["out"]
    assert_close(b, a, FP32_NCHW, "conv -> bn -> pool fused twice")


def test_a_match_the_replacement_cannot_represent_is_not_fused(reg):
    m = conv_bn_model(bn_act="none")
    m.add_layer("pooling", "p", inputs=["bn"])
    m.connect("p", "t", 0)
    pool_after_bn = parse_rule("*|*|conv_pool = pooling {batch_normalization}")
    fused = apply_rules(m, reg, FP32_NCHW, [pool_after_bn])
    assert fused.applied == []
    assert fused.skipped[0][3] == "conv_pool has no parameter for batch_normalization bn's epsilon = '0.001'"
    m.set_param("bn", "epsilon", None)
    fused = apply_rules(m, reg, FP32_NCHW, [pool_after_bn])
    assert fused.skipped[0][3] == "conv_pool has no weight for batch_normalization bn's mean, scale, variance"
    m.set_param("p", "global", "true")
    fused = apply_rules(m, reg, FP32_NCHW, [parse_rule("*|*|batch_normalization = pooling {batch_normalization}")])
    assert fused.skipped[0][3] == "batch_normalization has no parameter for pooling p's global = 'true'"


def test_secondary_inputs_that_replace_weights_move_to_the_fused_layer(reg):
    m = conv_bn_model()
    m.add_layer("input", "scale", params={"dimensions": "1x6x1x1"})
    m.add_layer("input", "w", params={"dimensions": "6x4x3x3"})
    m.connect("scale", "bn", 3)  # batch_normalization's 'scale' input
    m.connect("w", "c", 1)  # the convolution's 'weights' input
    fused = apply_rules(m, reg, FP32_NCHW, [CONV_BN])
    assert fused.model.layers["bn"].inputs == ["inp", "w", None, None, None, "scale"]
    inputs = {"inp": np.random.default_rng(0).random((1, 4, 9, 8), dtype=np.float32),
              "scale": np.random.default_rng(1).random((1, 6, 1, 1), dtype=np.float32),
              "w": np.random.default_rng(2).random((6, 4, 3, 3), dtype=np.float32) - 0.5}
    a = Network(m, reg).infer(inputs)["out"]
    b = Network(fused.model, reg, weights=MappedWeights(RandomWeights(0), fused, reg)).infer(inputs)["out"]
    assert_close(b, a, FP32_NCHW, "secondary inputs")


def test_a_data_input_of_the_outer_layer_that_the_replacement_lacks_is_not_fused(reg):
    m = Model("e")
    m.add_layer("input", "inp", params={"dimensions": "1x6x5x5"})
    m.add_layer("convolution", "c", params={"num_output_channels": "6"}, inputs=["inp"])
    m.add_layer("element_wise", "e", inputs=["c", "inp"])
    m.add_layer("output", "out", inputs=["e"])
    fused = apply_rules(m, reg, FP32_NCHW, [parse_rule("*|*|conv_pool = element_wise {convolution}")])
    assert fused.applied == [] and "conv_pool has no input for element_wise e's input 1" in fused.skipped[0][3]


def test_a_one_layer_rule_replaces_a_layer_once(reg):
    m = conv_bn_model()
    rules = [parse_rule("*|*|conv_pool = convolution[num_output_channels == 6]"),
             parse_rule("*|*|convolution = conv_pool")]
    fused = apply_rules(m, reg, FP32_NCHW, rules)
    assert fused.model.layers["c"].type == "convolution"  # replaced, then replaced back, and no loop
    assert [a[2] for a in fused.applied] == ["c", "c"]
    assert fused.weight_map[("c", "weights")] == ("c", "weights")


# ---- fused networks compute what the unfused ones compute ---------------------------------------------

EQUIVALENCE = [
    # rule, inner (type, params, act), outer (type, params, act)
    (CONV_BN, ("convolution", {}, "none"), ("batch_normalization", {"epsilon": "0.01"}, "relu")),
    (CONV_BN, ("convolution", {"bias": "false", "groups": "2", "stride": "2", "kernel_size": "3x1"}, "none"),
     ("batch_normalization", {}, "none")),
    (CONV_POOL, ("convolution", {}, "relu"), ("pooling", {}, "none")),
    (CONV_POOL, ("convolution", {"padding": "0"}, "none"),
     ("pooling", {"kernel_size": "3", "stride": "1", "padding": "1"}, "relu")),
    (CONV_POOL, ("convolution", {}, "leaky_relu"),
     ("pooling", {"pool_type": "average", "kernel_size": "3", "stride": "2", "padding": "1"}, "none")),
    (CONV_POOL, ("convolution", {"dilation": "2", "padding": "2"}, "tanh"),
     ("pooling", {"pool_type": "average", "global": "true"}, "none")),
]


def chain_model(inner: tuple, outer: tuple) -> Model:
    m = Model("chain")
    m.add_layer("input", "inp", params={"dimensions": "2x4x10x9"})
    m.add_layer(inner[0], "a", params={"num_output_channels": "6", **inner[1]}, inputs=["inp"], activation=inner[2])
    m.add_layer(outer[0], "b", params=outer[1], inputs=["a"], activation=outer[2])
    m.add_layer("convolution", "tail", params={"num_output_channels": "3", "kernel_size": "1", "padding": "0"}, inputs=["b"])
    m.add_layer("output", "out", inputs=["tail"])
    m.add_layer("output", "out_b", inputs=["b"])
    return m


@each_backend_and_format
@pytest.mark.parametrize("rule,inner,outer", EQUIVALENCE, ids=[f"{r.replacement}{i}" for i, (r, *_) in enumerate(EQUIVALENCE)])
def test_fused_and_unfused_networks_give_the_same_outputs(reg, backend, fmt, rule, inner, outer):
    m = chain_model(inner, outer)
    fused = apply_rules(m, reg, fmt, [CONV_BN, CONV_POOL])
    assert [a[1:] for a in fused.applied] == [("a", "b", "b")] and fused.model.layers["b"].type == rule.replacement
    x = np.random.default_rng(3).standard_normal((2, 4, 10, 9)).astype(np.float32)
    a = Network(m, reg, backend_param(backend), fmt, weights=RandomWeights(7)).infer({"inp": x})
    b = Network(fused.model, reg, backend_param(backend), fmt,
                weights=MappedWeights(RandomWeights(7), fused, reg)).infer({"inp": x})
    assert set(a) == set(b) == {"out", "out_b"}
    for name in a:
        assert_close(b[name], a[name], fmt, f"{rule.replacement} {name} {fmt}")


def test_mapped_weights_read_a_weights_folder_under_the_source_names(reg, tmp_path):
    m = conv_bn_model()
    rng = np.random.default_rng(5)
    save_weights(tmp_path, {
        "c": {"weights": rng.standard_normal((6, 4, 3, 3)), "bias": rng.standard_normal(6)},
        "bn": {"mean": rng.standard_normal(6), "variance": rng.random(6) + 0.5, "scale": rng.standard_normal(6),
               "bias": rng.standard_normal(6)},
        "t": {"weights": rng.standard_normal((3, 6, 3, 3)), "bias": rng.standard_normal(3)},
    })
    fused = apply_rules(m, reg, FP32_NCHW, [CONV_BN])
    a = Network(m, reg, weights=WeightsFolder(tmp_path)).infer()["out"]
    b = Network(fused.model, reg, weights=MappedWeights(WeightsFolder(tmp_path), fused, reg)).infer()["out"]
    assert_close(b, a, FP32_NCHW, "weights folder")
    assert not (tmp_path / "bn_bn_mean.npy").exists()


# ---- where rules come from ---------------------------------------------------------------------------

def test_rules_from_on_off_and_the_enabled_flags(reg):
    m = conv_bn_model()
    m.fusing_rules = [FusingRuleSpec("fp16|*|conv_bn = batch_normalization {convolution}"),
                      FusingRuleSpec("fp32|*|conv_bn = batch_normalization {convolution}", enabled=False),
                      FusingRuleSpec("*|nhwc|conv_pool = pooling {convolution}")]
    assert rules_from(reg, m, "off") == []
    on = rules_from(reg, m, "on")
    assert all(isinstance(r, FusingRule) for r in on)
    enabled_plugin = [r.text for r in reg.fusing_rules if r.enabled]
    assert [r.text for r in on] == enabled_plugin + [m.fusing_rules[0].text, m.fusing_rules[2].text]
    assert "*|*|conv_pool = pooling {convolution}" not in [r.text for r in on]  # disabled in the test plugin


def test_rules_from_reports_the_plugin_or_model_rule(reg):
    m = conv_bn_model()
    m.fusing_rules = [FusingRuleSpec("*|*|conv_bn = batch_normalization {convolution}"),
                      FusingRuleSpec("*|*|conv_bn = batch_normalization {convolution")]
    with pytest.raises(FusingRuleError, match=r"^network cbn fusing rule 2: rule '\*\|\*\|conv_bn = batch_normalization "
                                              r"\{convolution': column 47: expected '\}'"):
        rules_from(reg, m, "on")
    m.fusing_rules = [FusingRuleSpec("*|*|conv_bn = batch_normalisation {convolution}")]
    with pytest.raises(FusingRuleError, match=r"fusing rule 1: .*unknown layer type 'batch_normalisation' \(did you mean"):
        rules_from(reg, m, "on")


def test_rules_from_a_file_skips_comments_and_names_the_file_and_line(reg, tmp_path):
    path = tmp_path / "rules.txt"
    path.write_text("# my rules\n\n" + BUILTIN_RULES[0] + "  # conv + bn\n   # indented comment\n" + BUILTIN_RULES[1] + "\n")
    rules = rules_from(reg, conv_bn_model(), str(path))
    assert [r.to_text() for r in rules] == [CONV_BN.to_text(), CONV_POOL.to_text()]
    path.write_text(BUILTIN_RULES[0] + "\n\n  *|*|conv_bn = batch_normalization[act == 'none' {convolution}\n")
    with pytest.raises(FusingRuleError, match=rf"^{path}:3: rule .*: column 51: expected '\]' after condition"):
        rules_from(reg, conv_bn_model(), str(path))
    path.write_text("*|*|conv_bn = batch_normalization[colour == 1] {convolution}\n")
    with pytest.raises(FusingRuleError, match=rf"^{path}:1: .*column 35: batch_normalization has no parameter 'colour'"):
        rules_from(reg, conv_bn_model(), str(path))
    with pytest.raises(FusingRuleError, match="expected on, off or a rules file, and there is no file"):
        rules_from(reg, conv_bn_model(), str(tmp_path / "missing.txt"))


def test_builtin_rules_fuse_a_whole_network_and_it_still_runs_in_every_format(reg):
    m = Model("vgg")
    m.add_layer("input", "inp", params={"dimensions": "1x3x16x16"})
    prev = "inp"
    for i in range(3):
        m.add_layer("convolution", f"c{i}", params={"num_output_channels": "8"}, inputs=[prev])
        m.add_layer("batch_normalization", f"bn{i}", inputs=[f"c{i}"], activation="relu")
        m.add_layer("convolution", f"d{i}", params={"num_output_channels": "8"}, inputs=[f"bn{i}"], activation="relu")
        m.add_layer("pooling", f"p{i}", inputs=[f"d{i}"])
        prev = f"p{i}"
    m.add_layer("output", "out", inputs=[prev])
    for fmt in FORMATS:
        fused = apply_rules(m, reg, fmt, [CONV_BN, CONV_POOL])
        assert sorted(s.type for s in fused.model.layers.values()) == ["conv_bn"] * 3 + ["conv_pool"] * 3 + ["input", "output"]
        a = Network(m, reg, fmt=fmt).infer()["out"]
        b = Network(fused.model, reg, fmt=fmt, weights=MappedWeights(RandomWeights(0), fused, reg)).infer()["out"]
        assert_close(b, a, fmt, f"vgg {fmt}")


def test_a_model_switches_plugin_rules_off_and_the_file_keeps_it(registry):
    from engine import modelfile
    from engine.fusing import disabled_plugin_rules, rules_from, set_plugin_rule_enabled

    m = conv_bn_model()
    conv_bn = next(r.text for r in registry.fusing_rules if "conv_bn" in r.text)
    before = [r.name for r in rules_from(registry, m, "on")]
    set_plugin_rule_enabled(m, conv_bn, False)
    after = [r.name for r in rules_from(registry, m, "on")]
    assert len(after) == len(before) - 1 and "*|*|conv_bn" not in after
    loaded = modelfile.loads(modelfile.dumps(m), registry=registry)
    assert disabled_plugin_rules(loaded) == {conv_bn}
    assert Network(loaded, registry).fused is None or not Network(loaded, registry).fused.applied
    set_plugin_rule_enabled(m, conv_bn, True)
    assert "fusing_disabled" not in m.settings and [r.name for r in rules_from(registry, m, "on")] == before
