"""Per-layer tensor formats: settings, conversions between every pair of formats, the preprocessor's passes, the
network running layers in their own formats, fusing per layer format, the model file attribute."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from engine.backends.cpu.backend import NumpyBackend
from engine.format_conversion import CONVERSION_TYPE, FormatConversion
from engine.formats import LayerFormat, LayerFormatError, nearest_supported, parse_assignments
from engine.model import Model
from engine.modelfile import dumps as model_to_text
from engine.modelfile import loads
from engine.network import Network
from engine.preprocess import preprocess
from engine.tensor import FORMATS, FP32_NCHW, Dims, Layout, Precision, TensorFormat, convert
from tests.harness import BACKENDS, FORMAT_IDS, assert_replays_match, backend_param, each_backend_and_format

FP16_NHWC = TensorFormat(Precision.FP16, Layout.NHWC)


def chain(pin: dict[str, str] | None = None) -> Model:
    m = Model("chain")
    m.add_layer("input", "inp", params={"dimensions": "1x3x9x7"})
    m.add_layer("convolution", "c1", params={"num_output_channels": "6"}, inputs=["inp"])
    m.add_layer("convolution", "c2", params={"num_output_channels": "6"}, inputs=["c1"], activation="relu")
    m.add_layer("convolution", "c3", params={"num_output_channels": "4"}, inputs=["c2"])
    m.add_layer("output", "out", inputs=["c3"])
    for name, text in (pin or {}).items():
        m.set_layer_format(name, text)
    return m


@pytest.mark.parametrize("text,expected", [
    ("fp32", LayerFormat(Precision.FP32, None)), ("NHWC", LayerFormat(None, Layout.NHWC)),
    ("fp32,nchw", LayerFormat(Precision.FP32, Layout.NCHW)), ("fp16|nhwc", LayerFormat(Precision.FP16, Layout.NHWC)),
    ("nchw fp32", LayerFormat(Precision.FP32, Layout.NCHW)), ("", LayerFormat()), ("default", LayerFormat()),
])
def test_layer_format_settings_parse(text, expected):
    assert LayerFormat.parse(text) == expected
    assert LayerFormat.parse(str(expected)) == expected


@pytest.mark.parametrize("bad", ["fp64", "fp32 fp16", "nchw,nhwc", "fp32;x"])
def test_bad_layer_format_settings_are_refused_naming_them(bad):
    with pytest.raises(LayerFormatError, match="expected a precision"):
        LayerFormat.parse(bad)


def test_assignments_of_the_command_line():
    assert parse_assignments(["c2=fp32", "c3=fp32,nchw", "c1=NHWC"]) == (
        ("c2", "fp32"), ("c3", "fp32 nchw"), ("c1", "nhwc"))
    for bad in ("c2", "=fp32", "c2=half"):
        with pytest.raises(LayerFormatError):
            parse_assignments([bad])


def test_a_partial_setting_keeps_the_network_part():
    assert LayerFormat.parse("fp32").over(FP16_NHWC) == TensorFormat(Precision.FP32, Layout.NHWC)
    assert LayerFormat.parse("nchw").over(FP16_NHWC) == TensorFormat(Precision.FP16, Layout.NCHW)
    assert LayerFormat().over(FP16_NHWC) == FP16_NHWC


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("src", "dst"), list(itertools.product(FORMATS, FORMATS)),
                         ids=[f"{a}-to-{b}" for a, b in itertools.product(FORMAT_IDS, FORMAT_IDS)])
def test_conversion_between_every_pair_of_formats_is_exact_where_values_fit(backend, src, dst):
    be = backend_param(backend)
    rng = np.random.default_rng(3)
    # values every format holds exactly: multiples of 1/16 below 64 (10 significant bits; fp16 has 11)
    logical = (rng.integers(-1024, 1024, size=(2, 5, 4, 3)) / 16).astype(np.float32)
    x = be.to_device(convert(logical, FP32_NCHW, src))
    layer = FormatConversion("conv", {"source": str(src), "target": str(dst)}, None, dst, be)
    out = be.empty(dst.shape(layer.output_dims([src.dims_of(x)])), dst.dtype)
    layer.forward([x], out)
    got = be.to_host(out)
    assert got.dtype == dst.dtype and got.shape == dst.shape(src.dims_of(x))
    np.testing.assert_array_equal(convert(got, dst, FP32_NCHW), logical)


def test_fp32_to_fp16_conversion_rounds_and_overflows_as_fp16_does(registry):
    src, dst = FP32_NCHW, TensorFormat(Precision.FP16, Layout.NCHW)
    x = np.array([1e5, -1e5, 1.0 + 2 ** -12, 65504.0], dtype=np.float32).reshape(1, 4, 1, 1)
    layer = FormatConversion("conv", {"source": str(src), "target": str(dst)}, None, dst, Network(chain(), registry).backend)
    out = np.empty((1, 4, 1, 1), np.float16)
    with np.errstate(over="ignore"):
        layer.forward([x], out)
    np.testing.assert_array_equal(out.ravel(), np.array([np.inf, -np.inf, 1.0, 65504.0], np.float16))


def test_preprocessor_inserts_one_conversion_per_link_between_formats(registry):
    m = chain({"c2": "fp32"})
    result = preprocess(m, registry, FP16_NHWC)
    assert result.passes == ["overrides", "networks", "templates", "formats", "fusing", "conversions"]
    conv = result.conversions
    assert conv is not None
    assert conv.pinned == {"c2": TensorFormat(Precision.FP32, Layout.NHWC)}
    inserted = [(c, s, str(a), str(b)) for c, s, a, b in conv.inserted]
    assert inserted == [("c1__to_fp32_nhwc", "c1", "fp16|nhwc", "fp32|nhwc"),
                        ("c2__to_fp16_nhwc", "c2", "fp32|nhwc", "fp16|nhwc")]
    layers = result.model.layers
    assert layers["c2"].inputs == ["c1__to_fp32_nhwc"] and layers["c3"].inputs == ["c2__to_fp16_nhwc"]
    assert layers["c1__to_fp32_nhwc"].type == CONVERSION_TYPE
    assert m.layers["c2"].inputs == ["c1"]  # the model itself is unchanged


def test_no_setting_changes_nothing(registry):
    m = chain()
    result = preprocess(m, registry, FP16_NHWC, fusing="off")
    assert result.model is m and result.conversions is not None and not result.conversions.inserted


def test_a_setting_equal_to_the_network_format_inserts_nothing(registry):
    result = preprocess(chain({"c2": "fp16"}), registry, FP16_NHWC, fusing="off")
    assert not result.conversions.inserted and not result.conversions.pinned


def test_run_settings_override_the_models_and_unknown_names_are_refused(registry):
    result = preprocess(chain({"c2": "fp32"}), registry, FP16_NHWC, layer_formats={"c2": "default", "c3": "nchw"})
    assert set(result.conversions.pinned) == {"c3", "out"}  # the output layer follows c3
    with pytest.raises(LayerFormatError, match="no layer 'nope'"):
        preprocess(chain(), registry, FP16_NHWC, layer_formats={"nope": "fp32"})


@each_backend_and_format
@pytest.mark.parametrize("pin", ["fp32 nchw", "fp16 nhwc", "fp32", "nhwc"])
def test_a_network_with_a_pinned_layer_matches_the_network_without(registry, backend, fmt, pin):
    be = backend_param(backend)
    plain = Network(chain(), registry, be, fmt).infer()
    pinned_net = Network(chain({"c2": pin}), registry, be, fmt)
    pinned = pinned_net.infer()
    assert pinned_net.fmt_of("c2") == LayerFormat.parse(pin).over(be.compute_format(fmt))
    tol = 2e-2 if Precision.FP16 in (fmt.precision, pinned_net.fmt_of("c2").precision) else 1e-5
    for name, value in plain.items():
        np.testing.assert_allclose(pinned[name], value, rtol=tol, atol=tol)
    # every intermediate layer reads back in fp32 NCHW whatever its own format
    assert pinned_net.output("c2").dtype == np.float32


def test_buffers_are_planned_per_layer_format(registry):
    fmt = TensorFormat(Precision.FP16, Layout.NCHW)
    net = Network(chain({"c2": "fp32"}), registry, fmt=fmt, reuse_buffers=False)
    net.run()
    assert net._views["c2"].dtype == np.float32 and net._views["c1"].dtype == np.float16
    assert net._views["c1__to_fp32_nchw"].dtype == np.float32
    all16 = Network(chain(), registry, fmt=fmt, reuse_buffers=False)
    all16.run()
    # c2 in fp32 (2 more bytes a value), c1 converted to fp32 (4 bytes) and c2 converted back to fp16 (2 bytes)
    extra = net.dims("c2").elements * 2 + net.dims("c1").elements * 4 + net.dims("c2").elements * 2
    assert net.peak_memory_bytes == all16.peak_memory_bytes + extra


def test_a_layer_that_does_not_implement_the_network_format_runs_in_one_it_implements(registry):
    from dataclasses import replace

    from engine.layer import Layer
    from engine.plugins import load_plugins
    from engine.registry import PluginMeta

    class Fp32Identity(Layer):
        desc = replace(registry.find_layer("dropout"), name="fp32_identity", legacy_names=(),
                       formats=tuple(f for f in FORMATS if f.precision is Precision.FP32))

        def output_dims(self, inputs: list[Dims | None]) -> Dims:
            return self.primary(inputs)

        def forward(self, inputs, out) -> None:
            assert out.dtype == np.float32
            self.store(out, self.nchw(inputs[0]) * 2)

    reg = load_plugins(entry_point_plugins=False)
    reg.register_plugin(PluginMeta("t", "1", "t", "t"), lambda r: r.layer(Fp32Identity), "test")
    m = Model("m")
    m.add_layer("input", "inp", params={"dimensions": "1x2x3x3"})
    m.add_layer("fp32_identity", "twice", inputs=["inp"])
    net = Network(m, reg, fmt=FP16_NHWC)
    assert net.fmt_of("twice") == TensorFormat(Precision.FP32, Layout.NHWC)
    assert net.conversions == [] and net.fmt_of("inp") == net.fmt_of("twice")  # the input is staged in fp32
    x = np.arange(18, dtype=np.float32).reshape(1, 2, 3, 3)
    net.set_input("inp", x)
    np.testing.assert_array_equal(net.infer()["twice"], 2 * x)
    assert nearest_supported(FP16_NHWC, Fp32Identity.desc.formats) == TensorFormat(Precision.FP32, Layout.NHWC)


def test_fusing_rules_match_per_layer_format(registry):
    m = Model("fuse")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "c", params={"num_output_channels": "4"}, inputs=["inp"])
    m.add_layer("batch_normalization", "bn", inputs=["c"])
    both = preprocess(m, registry, FP16_NHWC)
    assert [a[1:3] for a in both.fusions] == [("c", "bn")]
    m.set_layer_format("bn", "fp32")  # different formats: never fused
    apart = preprocess(m, registry, FP16_NHWC)
    assert apart.fusions == [] and [c[0] for c in apart.conversions.inserted] == ["c__to_fp32_nhwc"]
    m.set_layer_format("c", "fp32")  # both fp32: fused in fp32
    again = preprocess(m, registry, FP16_NHWC)
    assert [a[1:3] for a in again.fusions] == [("c", "bn")]
    assert again.model.layers["bn"].format == "fp32 nhwc"


def test_template_instance_settings_reach_its_layers(registry):
    from engine.templates.commands import group

    m = chain()
    instance = group(m, ["c2", "c3"], "pair", registry)
    m.set_layer_format(instance, "fp32")
    result = preprocess(m, registry, FP16_NHWC, fusing="off")
    expanded = sorted(n for n in result.model.layers if n.startswith(f"{instance}__")
                      and result.model.layers[n].type != CONVERSION_TYPE)
    assert len(expanded) == 2 and sorted(result.conversions.pinned) == ["out", *expanded]  # out follows its source


def test_model_file_round_trip_and_old_files(registry):
    m = chain({"c2": "fp32", "c3": "fp16,nchw"})
    text = model_to_text(m)
    assert 'format="fp32"' in text and 'format="fp16 nchw"' in text
    back = loads(text, registry=registry)
    assert back.layers["c2"].format == "fp32" and back.layers["c3"].format == "fp16 nchw"
    assert back.layers["c1"].format == ""
    assert "format=" not in model_to_text(chain())


def test_a_bad_format_attribute_names_file_layer_and_line(registry):
    text = model_to_text(chain({"c2": "fp32"})).replace('format="fp32"', 'format="fp8"')
    with pytest.raises(Exception, match=r"c2.*fp8"):
        loads(text, registry=registry)


def test_set_layer_format_is_one_undoable_command():
    m = chain()
    m.set_layer_format("c2", "FP32, nchw")
    assert m.layers["c2"].format == "fp32 nchw"
    m.undo()
    assert m.layers["c2"].format == ""
    m.redo()
    assert m.layers["c2"].format == "fp32 nchw"
    with pytest.raises(LayerFormatError):
        m.set_layer_format("c2", "fp64")
    assert m.layers["c2"].format == "fp32 nchw"


def test_the_network_overview_shows_pins_and_conversions(registry):
    from engine.analysis import network_overview

    net = Network(chain({"c2": "fp32"}), registry, fmt=FP16_NHWC)
    net.run()
    status = {it.name: it.status for it in network_overview(net)}
    assert status["c2"] == "pinned fp32|nhwc"
    assert status["c1__to_fp32_nhwc"] == "conversion fp16|nhwc -> fp32|nhwc, fused into c2 (its read)"
    unfused = Network(chain({"c2": "fp32"}), registry, fmt=FP16_NHWC, fuse_conversions=False)
    unfused.run()
    assert {it.name: it.status for it in network_overview(unfused)}["c1__to_fp32_nhwc"] == (
        "conversion fp16|nhwc -> fp32|nhwc")
    assert status["c1"] == ""


def test_preprocessed_export_writes_the_conversions_and_runs_the_same(registry, tmp_path):
    from engine.export.preprocessed import export_preprocessed
    from engine.modelfile import load
    from engine.weights import WeightsFolder

    m = chain({"c2": "fp32"})
    result = export_preprocessed(m, registry, tmp_path / "pre.lnet", FP16_NHWC, fusing="off")
    assert "2 format conversion(s) inserted" in result.summary
    pre = load(tmp_path / "pre.lnet", registry)
    assert pre.layers["c1__to_fp32_nhwc"].type == CONVERSION_TYPE
    assert all(s.format for s in pre.layers.values())  # every layer's format written out
    x = np.random.default_rng(0).random((1, 3, 9, 7), dtype=np.float32)
    first = Network(m, registry, fmt=FP16_NHWC, fusing="off")
    want = first.infer({"inp": x})
    again = Network(pre, registry, fmt=FP16_NHWC, weights=WeightsFolder(tmp_path / "pre_weights"))
    assert not again.conversions  # nothing more to insert
    assert again.fused_conversions == first.fused_conversions  # the written conversions fuse as the inserted ones
    np.testing.assert_array_equal(again.infer({"inp": x})["out"], want["out"])


def test_onnx_fp16_export_rounds_where_the_network_converts(registry, tmp_path):
    pytest.importorskip("onnxruntime")
    import onnx

    from engine.export.onnx_export import OnnxOptions, export_onnx

    m = chain({"c2": "fp32"})
    export_onnx(m, registry, tmp_path / "m.onnx", OnnxOptions(fp16=True), fusing="off")
    nodes = [n.name for n in onnx.load(str(tmp_path / "m.onnx")).graph.node if n.op_type == "Cast"]
    assert any(n.startswith("c2__to_fp16_nchw") for n in nodes)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["fp16 nhwc", "fp32 nchw"])
def test_cuda_graph_captures_with_pins_and_replays_the_conversions(registry, fmt):
    f = TensorFormat.parse(fmt)
    pins = {"c2": "fp32 nchw" if f.precision is Precision.FP16 else "fp16 nhwc"}
    net = Network(chain(pins), registry, backend_param("cupy"), f)
    ref = Network(chain(pins), registry, backend_param("numpy"), f)
    assert len(net.conversions) == 2
    assert_replays_match(net, ref, (1, 3, 9, 7))
    assert net.graph_status == f"captured ({len(net.order)} layers)", net.graph_status


def test_pytorch_export_keeps_pinned_layers_in_float32(registry, tmp_path):
    torch = pytest.importorskip("torch")
    import importlib.util

    from engine.export.torch_export import export_torch

    m = chain({"c2": "fp32"})
    export_torch(m, registry, tmp_path, fusing="off")
    source = (tmp_path / "chain.py").read_text()
    assert "FP32_LAYERS = ('c2',)" in source
    assert "c1__to_fp32_nchw = c1.float()" in source and "c2__to_fp16_nchw = c2.to(dtype)" in source
    spec = importlib.util.spec_from_file_location("chain_export", tmp_path / "chain.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    net = module.Chain.from_weights()
    x = np.random.default_rng(0).random((1, 3, 9, 7), dtype=np.float32)
    want = Network(m, registry, fusing="off").infer({"inp": x})["out"]
    np.testing.assert_allclose(net(torch.from_numpy(x)).detach().numpy(), want, rtol=1e-4, atol=1e-5)
    half = net.half()
    assert half.c2.weight.dtype == torch.float32 and half.c1.weight.dtype == torch.float16


def test_an_input_read_only_by_pinned_layers_is_staged_in_their_format(registry):
    m = chain({"c1": "fp32 nchw"})
    net = Network(m, registry, fmt=FP16_NHWC)
    assert net.fmt_of("inp") == FP32_NCHW  # no conversion between the input and c1: the upload converts
    assert [c[0] for c in net.conversions] == ["c1__to_fp16_nhwc"]
    x = np.random.default_rng(0).random((1, 3, 9, 7), dtype=np.float32)
    ref = Network(chain(), registry, fmt=FP32_NCHW).infer({"inp": x})
    np.testing.assert_allclose(net.infer({"inp": x})["out"], ref["out"], rtol=2e-2, atol=2e-2)
    m.set_layer_format("inp", "fp16")  # its own setting wins
    assert [c[0] for c in Network(m, registry, fmt=FP16_NHWC).conversions][0] == "inp__to_fp32_nchw"


class _ChannelsLastBackend(NumpyBackend):
    """A NumPy backend that, like the CuPy one, computes NCHW networks channels-last inside."""

    def compute_format(self, fmt, tf32=False):
        return TensorFormat(fmt.precision, Layout.NHWC)


@pytest.mark.parametrize("fmt", ["fp16 nchw", "fp32 nchw"])
def test_a_backends_compute_layout_gives_the_same_outputs_and_keeps_explicit_settings(registry, fmt):
    from tests.bench.networks import NETWORKS

    f = TensorFormat.parse(fmt)
    model = NETWORKS["resnet18"](Dims(2, 3, 64, 64))
    strict = Network(model, registry, NumpyBackend(), f)
    inside = Network(model, registry, _ChannelsLastBackend(), f)
    assert inside.fmt == f and inside.fmt_of("stem_bn") == TensorFormat(f.precision, Layout.NHWC)
    assert not inside.conversions  # inputs staged channels-last, outputs read back from it: no conversion layer
    x = np.random.default_rng(4).random((2, 3, 64, 64), dtype=np.float32)
    a, b = strict.infer({"input": x}), inside.infer({"input": x})
    tol = 2e-2 if f.precision is Precision.FP16 else 1e-4
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=tol, atol=tol)
    pinned = Network(chain({"c2": "nchw"}), registry, _ChannelsLastBackend(), f)
    assert pinned.fmt_of("c2") == f and pinned.fmt_of("c1").layout is Layout.NHWC and len(pinned.conversions) == 2
    precision_only = Network(chain({"c2": "fp32"}), registry, _ChannelsLastBackend(), f)
    assert precision_only.fmt_of("c2") == TensorFormat(Precision.FP32, Layout.NHWC)  # keeps the computed layout
