"""The built-in upscale_concat fusing rule (upsample feeding input 0 of a two-input concatenation): where it
applies and where it must not, parameters and inputs of the fused layer, fused and unfused networks giving
the same outputs in every format, the CPU kernel against NumPy references, its fallbacks, and ONNX export."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from engine.backends import cpu
from engine.backends.cpu import ops
from engine.backends.cpu.backend import NumpyBackend
from engine.backends.selection import Launched
from engine.descriptors import ParamDesc
from engine.errors import LayerLabError
from engine.export import export_onnx
from engine.fusing import apply_rules, check_rule, parse_rule, rules_from
from engine.model import Model
from engine.network import Network
from engine.plugins import default_registry, load_plugins
from engine.registry import PluginMeta, Registrar, Registry
from engine.tensor import FORMATS, FP32_NCHW, Dims, Precision, TensorFormat
from plugins.standard._common_resample import UPSCALE_PARAMS, resample, upsample_taps
from plugins.standard.fusing_rules import RULES as BUILTIN_RULES
from plugins.standard.upscale_concat import UpscaleConcat
from tests.bench.networks import unet
from tests.harness import assert_close, backend_param, each_backend_and_format

RULE_TEXT = "*|*|upscale_concat = concatenation[axis == 1] {upsample[act == 'none']}"
RULE = parse_rule(RULE_TEXT)
REGISTRY = default_registry()


@pytest.fixture(scope="module")
def reg() -> Registry:
    """The standard layers plus two replacements that cannot take every upsample: one without a method
    parameter, one whose method is nearest only."""
    r = load_plugins()
    assert not r.failures, r.failures
    factor = UPSCALE_PARAMS[0]

    class NoMethod(UpscaleConcat):
        desc = replace(UpscaleConcat.desc, name="upscale_concat_no_method", legacy_names=(), params=(factor,))

    class NearestOnly(UpscaleConcat):
        desc = replace(UpscaleConcat.desc, name="upscale_concat_nearest", legacy_names=(), params=(
            factor, ParamDesc("method", "enum", "nearest", "interpolation", enum_values=("nearest",))))

    def register(registrar: Registrar) -> None:
        registrar.layer(NoMethod)
        registrar.layer(NearestOnly)

    r.register_plugin(PluginMeta("upscale_concat_test", "1", "tests", "replacements for fusing tests"), register, "tests")
    return r


def decoder_step(method: str = "bilinear", factor: str = "2", cat_act: str = "none", up_act: str = "none",
                 dims: str = "1x4x8x6") -> Model:
    """inp -> enc (conv) -> down (pool 2) -> mid (conv) -> up (upsample) -> cat(up, enc) -> dec (conv) -> out."""
    m = Model("step")
    m.add_layer("input", "inp", params={"dimensions": dims})
    m.add_layer("convolution", "enc", params={"num_output_channels": "3"}, inputs=["inp"], activation="relu")
    m.add_layer("pooling", "down", params={"pool_type": "max", "kernel_size": factor, "stride": factor, "padding": "0"},
                inputs=["enc"])
    m.add_layer("convolution", "mid", params={"num_output_channels": "5"}, inputs=["down"], activation="relu")
    m.add_layer("upsample", "up", params={"factor": factor, "method": method}, inputs=["mid"], activation=up_act)
    m.add_layer("concatenation", "cat", inputs=["up", "enc"], activation=cat_act)
    m.add_layer("convolution", "dec", params={"num_output_channels": "2"}, inputs=["cat"])
    m.add_layer("output", "out", inputs=["dec"])
    return m


# ---- the rule and what it makes ----------------------------------------------------------------------

def test_the_rule_is_built_in_checks_clean_and_is_enabled():
    assert RULE_TEXT in BUILTIN_RULES
    assert check_rule(RULE, REGISTRY) == []
    assert RULE_TEXT in [r.text for r in rules_from(REGISTRY, Model("m"), "on")]
    assert RULE.formats == tuple(FORMATS)


def test_a_concatenation_along_another_axis_is_not_fused():
    """Joined along W (the upsample and the skip tensor of equal C and H), the layers stay as they are."""
    m = Model("w")
    m.add_layer("input", "inp", params={"dimensions": "1x3x4x4"})
    m.add_layer("upsample", "up", params={"factor": "2"}, inputs=["inp"])
    m.add_layer("input", "skip", params={"dimensions": "1x3x8x5"})
    m.add_layer("concatenation", "cat", params={"axis": "3"}, inputs=["up", "skip"])
    m.add_layer("output", "out", inputs=["cat"])
    fused = apply_rules(m, REGISTRY, FP32_NCHW, [RULE])
    assert fused.model.layers["cat"].type == "concatenation" and fused.applied == []


@pytest.mark.parametrize("method,factor", [("bilinear", "2"), ("nearest", "3x2")])
def test_upsample_into_input_0_of_a_concatenation_becomes_one_upscale_concat(method, factor):
    m = decoder_step(method, factor, dims="1x4x12x8")
    m.set_activation("cat", "leaky_relu", {"alpha": "0.3"})
    before = m.content()
    fused = apply_rules(m, REGISTRY, FP32_NCHW, [RULE])
    cat = fused.model.layers["cat"]
    assert (cat.type, cat.inputs, cat.params) == ("upscale_concat", ["mid", "enc"], {"factor": factor, "method": method})
    assert (cat.activation, cat.act_coefs) == ("leaky_relu", {"alpha": "0.3"})  # the concatenation's activation
    assert "up" not in fused.model.layers and fused.merged == {"up": "cat"}
    assert fused.applied == [(RULE.name, "up", "cat", "cat")] and fused.skipped == []
    assert fused.weight_map == {}
    assert m.content() == before


def test_default_parameters_stay_unset():
    m = decoder_step()
    m.set_param("up", "factor", None)
    m.set_param("up", "method", None)
    assert apply_rules(m, REGISTRY, FP32_NCHW, [RULE]).model.layers["cat"].params == {}


def test_every_decoder_step_of_a_unet_fuses():
    fused = apply_rules(unet(Dims(1, 3, 16, 16), widths=(4, 8, 16)), REGISTRY, FP32_NCHW, [RULE])
    assert [a[1:] for a in fused.applied] == [("up1", "cat1", "cat1"), ("up0", "cat0", "cat0")]
    assert fused.model.layers["cat0"].inputs == ["dec1_b", "enc0_b"]


# ---- where it must not apply ---------------------------------------------------------------------------

def _skip_first(m: Model) -> None:  # concat(enc, up): channel order would change
    m.connect("enc", "cat", 0)
    m.connect("up", "cat", 1)


def _three_inputs(m: Model) -> None:
    m.connect("enc", "cat", 2)


def _hole(m: Model) -> None:  # cat(up, -, enc)
    m.connect("enc", "cat", 2)
    m.disconnect("cat", 1)


def _second_reader(m: Model) -> None:
    m.add_layer("convolution", "other", inputs=["up"])
    m.add_layer("output", "out2", inputs=["other"])


@pytest.mark.parametrize("edit,protected,reason", [
    (_skip_first, (), None),
    (lambda m: m.set_activation("up", "relu"), (), None),
    (_three_inputs, (), "upscale_concat has no input for concatenation cat's input 2 (inputs)"),
    (_hole, (), "upscale_concat has no input for concatenation cat's input 2 (inputs)"),
    (lambda m: m.disconnect("cat", 1), (),
     "upscale_concat needs input 1 (skip), and no input of upsample up or concatenation cat goes there"),
    (_second_reader, (), "the output of up is also read by other:0"),
    (lambda m: m.add_layer("output", "out2", inputs=["up"]), (), "the output of up is also read by out2:0"),
    (lambda m: m.connect("up", "cat", 1), (), "the output of up is also read by cat:1"),
    (lambda m: m.set_permanent("up", True), (), "up is permanent"),
    (lambda m: None, ("up",), "up is protected (breakpoint or inspected)"),
], ids=["skip-first", "upsample-activation", "three-inputs", "hole", "one-input", "second-reader", "output-reads",
        "read-twice", "permanent", "breakpoint"])
def test_the_rule_does_not_apply_where_the_result_would_differ_or_is_needed(edit, protected, reason):
    m = decoder_step()
    edit(m)
    before = m.content()
    fused = apply_rules(m, REGISTRY, FP32_NCHW, [RULE], protected=set(protected))
    assert fused.applied == [] and fused.model.content() == before
    assert fused.skipped == ([] if reason is None else [(RULE.name, "up", "cat", reason)])


def test_two_inputs_for_one_input_of_the_replacement_are_refused():
    m = decoder_step()
    m.add_layer("element_wise", "e", inputs=["mid", "mid"])
    m.connect("e", "cat", 0)
    m.remove_layer("up")
    rule = parse_rule("*|*|upscale_concat = concatenation {element_wise}")
    fused = apply_rules(m, REGISTRY, FP32_NCHW, [rule])
    assert fused.applied == []
    assert fused.skipped == [(rule.name, "e", "cat", "upscale_concat input 1 cannot take both element_wise e's input 1 "
                                                     "(inputs) and concatenation cat's input 1 (inputs)")]


def test_protecting_the_concatenation_does_not_prevent_fusion():
    assert apply_rules(decoder_step(), REGISTRY, FP32_NCHW, [RULE], protected={"cat"}).applied


def test_a_breakpoint_on_the_upsample_keeps_its_output_readable():
    x = {"inp": np.random.default_rng(0).random((1, 4, 8, 6), np.float32)}
    fused = Network(decoder_step(), REGISTRY)
    with pytest.raises(LayerLabError, match="layer up was fused into cat by a fusing rule"):
        fused.output("up")
    kept = Network(decoder_step(), REGISTRY, protected={"up"})
    assert kept.model.layers["up"].type == "upsample"
    want = kept.infer(x)["out"]
    assert kept.output("up").shape == (1, 5, 8, 6)
    np.testing.assert_allclose(fused.infer(x)["out"], want, rtol=1e-5, atol=1e-6)


def test_an_upsample_parameter_the_replacement_cannot_take_is_refused(reg):
    no_method = parse_rule("*|*|upscale_concat_no_method = concatenation {upsample}")
    nearest = parse_rule("*|*|upscale_concat_nearest = concatenation {upsample}")
    fused = apply_rules(decoder_step("bilinear"), reg, FP32_NCHW, [no_method, nearest])
    assert fused.applied == []
    reasons = {s[0]: s[3] for s in fused.skipped}
    assert reasons[no_method.name] == "upscale_concat_no_method has no parameter for upsample up's method = 'bilinear'"
    assert reasons[nearest.name].startswith("upscale_concat_nearest parameter method cannot take upsample up's method:")
    # at their defaults (nearest), both take the upsample
    assert apply_rules(decoder_step("nearest"), reg, FP32_NCHW, [no_method]).applied
    assert apply_rules(decoder_step("nearest"), reg, FP32_NCHW, [nearest]).model.layers["cat"].params == {
        "factor": "2", "method": "nearest"}


# ---- fused and unfused networks agree --------------------------------------------------------------------

def _close(got: np.ndarray, want: np.ndarray, fmt: TensorFormat, what: str) -> None:
    if fmt.precision is Precision.FP16:
        assert_close(got, want, fmt, what)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())), err_msg=what)


@each_backend_and_format
@pytest.mark.parametrize("method", ["nearest", "bilinear"])
def test_a_fused_unet_gives_the_unfused_outputs(backend, fmt, method):
    model = unet(Dims(2, 3, 16, 24), widths=(4, 8, 16))
    for name in ("up0", "up1"):
        model.set_param(name, "method", method)
    model.layers["cat1"].activation = "relu"
    x = {"input": np.random.default_rng(1).standard_normal((2, 3, 16, 24)).astype(np.float32)}
    be = backend_param(backend)
    fused = Network(model, REGISTRY, be, fmt, fusing="on")
    assert {"cat0", "cat1"} <= {a[3] for a in fused.fused.applied if a[0] == RULE.name}
    plain = Network(model, REGISTRY, be, fmt, fusing="off")
    _close(fused.infer(x)["output"], plain.infer(x)["output"], fmt, f"unet {fmt} {method}")


def test_the_kernels_off_fallback_gives_the_same_outputs(monkeypatch):
    model = decoder_step("bilinear", dims="2x4x8x6")
    x = {"inp": np.random.default_rng(2).standard_normal((2, 4, 8, 6)).astype(np.float32)}
    fmt = TensorFormat.parse("fp32 nhwc")
    want = Network(model, REGISTRY, NumpyBackend(), fmt, fusing="off").infer(x)["out"]
    monkeypatch.setenv("LAYERLAB_CPU_KERNELS", "off")
    calls = []
    monkeypatch.setattr(cpu.upsample, "upscale_concat", lambda *a: calls.append(a))
    net = Network(model, REGISTRY, NumpyBackend(), fmt, fusing="on")
    assert net.model.layers["cat"].type == "upscale_concat"
    got = net.infer(x)["out"]
    assert calls == []  # the generic path
    _close(got, want, fmt, "kernels off")


@pytest.mark.parametrize("fmt", ["fp32 nchw", "fp32 nhwc"])
def test_the_layer_uses_the_backend_kernel_when_sizes_match_and_applies_its_activation(monkeypatch, fmt):
    calls: list[Launched | None] = []
    make = ops.upsample_concat

    def spy_factory(backend):
        kernel = make(backend)

        def spy(*args):
            calls.append(kernel(*args))
            return calls[-1]
        return spy

    monkeypatch.setattr(ops, "upsample_concat", spy_factory)
    f = TensorFormat.parse(fmt)
    model = decoder_step("bilinear", cat_act="tanh")
    x = {"inp": np.random.default_rng(3).standard_normal((1, 4, 8, 6)).astype(np.float32)}
    got = Network(model, REGISTRY, NumpyBackend(), f, fusing="on").infer(x)["out"]
    assert calls == [Launched("upsample_concat")]
    want = Network(model, REGISTRY, NumpyBackend(), f, fusing="off").infer(x)["out"]
    _close(got, want, f, "tanh after the kernel")


# ---- the CPU kernel -----------------------------------------------------------------------------------

def _ref_upsample(x: np.ndarray, factor: tuple[int, int], bilinear: bool) -> np.ndarray:
    """float64 upsampling of NCHW ``x``: half-pixel source coordinates, edge pixels extended."""
    def axis(n: int, f: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        o = np.arange(n * f)
        if not bilinear:
            return o // f, o // f, np.zeros(n * f)
        s = np.maximum((o + 0.5) / f - 0.5, 0.0)
        i0 = np.floor(s).astype(int)
        return i0, np.minimum(i0 + 1, n - 1), s - i0

    x = x.astype(np.float64)
    h0, h1, lh = axis(x.shape[2], factor[0])
    w0, w1, lw = axis(x.shape[3], factor[1])
    rows = x[:, :, h0] * (1 - lh)[:, None] + x[:, :, h1] * lh[:, None]
    return rows[..., w0] * (1 - lw) + rows[..., w1] * lw


@pytest.mark.parametrize("nhwc", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("method", ["nearest", "bilinear"])
@pytest.mark.parametrize("factor", [(2, 2), (3, 1), (1, 4)])
def test_the_kernel_matches_numpy_references(nhwc, method, factor):
    rng = np.random.default_rng(4)
    n, c0, c1, h, w = 2, 5, 3, 7, 6
    ho, wo = h * factor[0], w * factor[1]
    x = rng.standard_normal((n, c0, h, w)).astype(np.float32)
    skip = rng.standard_normal((n, c1, ho, wo)).astype(np.float32)
    bilinear = method == "bilinear"
    ref = np.concatenate([_ref_upsample(x, factor, bilinear), skip], axis=1)
    phys = (lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))) if nhwc else (lambda a: a)
    out = np.full(phys(ref).shape, np.nan, np.float32)
    assert NumpyBackend().kernel("upsample_concat")(phys(x), phys(skip), out, factor, bilinear, nhwc)
    logical = out.transpose(0, 3, 1, 2) if nhwc else out
    np.testing.assert_allclose(logical, ref, rtol=1e-6, atol=1e-6)
    # the generic maths of the layer, and exactly the arithmetic of the upsample kernel (fused == unfused)
    taps = (upsample_taps(np, h, ho, factor[0], method, np.float32), upsample_taps(np, w, wo, factor[1], method, np.float32))
    np.testing.assert_allclose(logical[:, :c0], resample(np, x, *taps), rtol=1e-6, atol=1e-6)
    up = np.empty(phys(ref[:, :c0]).shape, np.float32)
    cpu.upsample.upsample(phys(x), up, factor, bilinear, nhwc)
    np.testing.assert_array_equal(out, np.concatenate([up, phys(skip)], axis=3 if nhwc else 1))


def _cases() -> dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], tuple]]:
    half = np.float16
    return {
        "fp16": lambda x, s, o: (x.astype(half), s.astype(half), o.astype(half)),
        "strided input": lambda x, s, o: (np.repeat(x, 2, axis=3)[..., ::2], s, o),
        "strided output": lambda x, s, o: (x, s, np.empty(o.shape[:3] + (2 * o.shape[3],), np.float32)[..., ::2]),
        "cropped skip": lambda x, s, o: (x, s[:, :, :-1], o[:, :, :-1]),
        "extended skip": lambda x, s, o: (x[:, :, :-1], s, o),
        "wrong output": lambda x, s, o: (x, s, o[:, 1:]),
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_the_backend_declines_what_the_kernel_does_not_cover(case):
    x, skip, out = np.ones((1, 2, 4, 4), np.float32), np.ones((1, 3, 8, 8), np.float32), np.empty((1, 5, 8, 8), np.float32)
    assert NumpyBackend().kernel("upsample_concat")(x, skip, out, (2, 2), True, False)
    assert not NumpyBackend().kernel("upsample_concat")(*_cases()[case](x, skip, out), (2, 2), True, False)


def test_the_backend_declines_when_the_kernels_are_off(monkeypatch):
    monkeypatch.setenv("LAYERLAB_CPU_KERNELS", "off")
    assert NumpyBackend().kernel("upsample_concat") is None  # the plain NumPy path: no kernel offered


# ---- export ---------------------------------------------------------------------------------------------

def test_the_fused_network_exports_to_onnx_and_matches_onnxruntime(tmp_path):
    model = unet(Dims(1, 3, 16, 16), widths=(4, 8, 16))
    model.set_param("up0", "method", "nearest")
    export_onnx(model, REGISTRY, tmp_path / "u.onnx")
    nodes = onnx.load(str(tmp_path / "u.onnx")).graph.node
    assert not [n.name for n in nodes if n.name.startswith("up")]  # fused away: the upscale_concat layers export them
    for cat in ("cat0", "cat1"):
        assert {"Resize", "Pad", "Slice", "Concat"} <= {n.op_type for n in nodes if n.name.startswith(cat)}
    x = {"input": np.random.default_rng(5).random((1, 3, 16, 16), np.float32)}
    want = Network(model, REGISTRY, fusing="off").infer(x)["output"]
    sess = ort.InferenceSession(str(tmp_path / "u.onnx"), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x["input"]})[0]
    assert_close(got, want, FP32_NCHW, "fused unet in onnxruntime")


def test_fused_layer_refuses_sizes_the_concatenation_refuses():
    """An upsampled 9x9 (18x18) against a 17x17 skip: the unfused concatenation stops, so must the fused layer
    (where an upscale_concat drawn as such would crop)."""

    m = Model("odd")
    m.add_layer("input", "a", params={"dimensions": "1x4x9x9"})
    m.add_layer("input", "b", params={"dimensions": "1x2x17x17"})
    m.add_layer("upsample", "up", params={"factor": "2"}, inputs=["a"])
    m.add_layer("concatenation", "cat", inputs=["up", "b"])
    m.add_layer("output", "out", inputs=["cat"])
    for fusing in ("off", "on"):
        net = Network(m, default_registry(), backend_param("numpy"), TensorFormat.parse("fp32 nhwc"),
                      fusing=fusing)
        with pytest.raises(LayerLabError, match="18x18|H \\(18 vs 17\\)"):
            net.run()
    fused = Network(m, default_registry(), backend_param("numpy"), TensorFormat.parse("fp32 nhwc"))
    assert fused.layer("cat").desc.name == "upscale_concat" and fused.layer("cat").fused
