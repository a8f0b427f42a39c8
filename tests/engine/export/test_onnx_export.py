"""ONNX export round trips: every exporting layer and activation (one small network each), in fp32 and
fp16, with explicit and symbolic sizes, through the ONNX checker, strict shape inference and ONNX
Runtime; the reference networks; placeholders both ways."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from engine.errors import LayerLabError
from engine.export import ExportError, OnnxOptions, export_onnx
from engine.export.common import build_network
from engine.export.onnx_export import PLACEHOLDER_DOMAIN, build_onnx, check_onnx
from engine.model import Model
from engine.plugins import default_registry
from engine.tensor import FP32_NCHW, Dims, TensorFormat
from engine.weights import RandomWeights
from tests.bench.networks import dncnn, resnet18, unet
from tests.engine.export.cases import C, activation_case, layer_cases, run_labnet
from tests.harness import assert_close

REGISTRY = default_registry()
FP16 = TensorFormat.parse("fp16 nchw")
LAYER_CASES = layer_cases(REGISTRY, "onnx_support")
ACTIVATIONS = [a for a in REGISTRY.activation_names if REGISTRY.activation_class(a).onnx_support != "no"]
MODES = [pytest.param(OnnxOptions(), id="fp32-symbolic"), pytest.param(OnnxOptions(explicit_sizes=True), id="fp32-explicit"),
         pytest.param(OnnxOptions(fp16=True), id="fp16-symbolic"),
         pytest.param(OnnxOptions(fp16=True, explicit_sizes=True), id="fp16-explicit")]


def ort_outputs(path, inputs: dict[str, np.ndarray], fp16: bool) -> dict[str, np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    dtype = np.float16 if fp16 else np.float32
    outs = sess.run(None, {k: v.astype(dtype) for k, v in inputs.items()})
    return {o.name: np.asarray(v, dtype=np.float32) for o, v in zip(sess.get_outputs(), outs)}


def round_trip(model: Model, inputs: dict[str, np.ndarray], options: OnnxOptions, tmp_path, scale_inputs=None):
    """Export, check (checker + strict shape inference), run in ONNX Runtime and compare with LayerLab."""
    path = tmp_path / f"{model.name}.onnx"
    export_onnx(model, REGISTRY, path, options)
    proto = onnx.load(str(path))
    check_onnx(proto)
    fmt = FP16 if options.fp16 else FP32_NCHW
    for feed in [inputs] + ([scale_inputs] if scale_inputs else []):
        try:
            want = run_labnet(model, feed, REGISTRY, fmt)
        except LayerLabError:  # the network does not take these sizes (weights or sizes fixed by parameters)
            assert feed is scale_inputs
            continue
        if feed is scale_inputs and any(d.dim_value for i in proto.graph.input for d in i.type.tensor_type.shape.dim[2:]):
            with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument):  # sizes fixed by the weights
                ort_outputs(path, feed, options.fp16)
            continue
        got = ort_outputs(path, feed, options.fp16)
        assert got.keys() == want.keys()
        for name in want:
            assert_close(got[name], want[name], fmt, f"{model.name} output {name} ({options})")
    return proto


@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize("case", LAYER_CASES, ids=[c.id for c in LAYER_CASES])
def test_layer_round_trip(case, options, tmp_path):
    model = case.model()
    # symbolic sizes: the same file also runs at another resolution (where the layer takes it)
    bigger = None if options.explicit_sizes else case.inputs(1, scale=2)
    proto = round_trip(model, case.inputs(), options, tmp_path, bigger)
    layer_nodes = [n.name for n in proto.graph.node if n.name == "L" or n.name.startswith("L__")]
    assert layer_nodes, "nodes are named after the layer"


@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_round_trip(name, options, tmp_path):
    case = activation_case(name)
    proto = round_trip(case.model(), case.inputs(), options, tmp_path)
    assert any(n.name.startswith("L__act") for n in proto.graph.node)


SECONDARY = [
    C("convolution", ((1, 3, 6, 6), (4, 3, 3, 3)), num_output_channels=4, bias="false"),
    C("fully_connected", ((1, 2, 3, 3), (4, 18, 1, 1), (1, 4, 1, 1)), num_outputs=4),
    C("batch_normalization", ((1, 3, 4, 4), None, (1, 3, 1, 1))),
    C("affine", ((1, 3, 4, 4), (1, 1, 1, 1))),
    C("affine", ((1, 3, 4, 4), None, (3, 1, 1, 1)), mode="per_channel"),
]


@pytest.mark.parametrize("case", SECONDARY, ids=[c.id for c in SECONDARY])
def test_weights_from_secondary_inputs(case, tmp_path):
    inputs = {k: (np.abs(v) + 0.5 if case.type == "batch_normalization" and k == "in2" else v)
              for k, v in case.inputs().items()}
    round_trip(case.model(), inputs, OnnxOptions(), tmp_path)


def test_fp16_and_explicit_sizes_are_visible_in_the_file(tmp_path):
    case = C("convolution", (1, 3, 9, 10), "relu", num_output_channels=4)
    p16 = tmp_path / "a.onnx"
    export_onnx(case.model(), REGISTRY, p16, OnnxOptions(fp16=True, explicit_sizes=True))
    m = onnx.load(str(p16))
    f16 = onnx.TensorProto.FLOAT16
    assert [i.type.tensor_type.elem_type for i in m.graph.input] == [f16]
    assert [o.type.tensor_type.elem_type for o in m.graph.output] == [f16]
    assert {t.name: t.data_type for t in m.graph.initializer} == {"L__weights": f16, "L__bias": f16}
    dims = [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in (*m.graph.input, *m.graph.output)]
    assert dims == [[1, 3, 9, 10], [1, 4, 9, 10]]
    p32 = tmp_path / "b.onnx"
    export_onnx(case.model(), REGISTRY, p32, OnnxOptions())
    m = onnx.load(str(p32))
    assert all(t.data_type == onnx.TensorProto.FLOAT for t in m.graph.initializer)
    shape = [(d.dim_param or d.dim_value) for d in m.graph.input[0].type.tensor_type.shape.dim]
    assert shape == ["N", 3, "in0_height", "in0_width"]
    out_shape = [(d.dim_param or d.dim_value) for d in m.graph.output[0].type.tensor_type.shape.dim]
    assert out_shape == ["N", 4, "out_height", "out_width"]
    assert [n.name for n in m.graph.node] == ["L", "L__act", "out"]


def test_sizes_that_do_not_follow_the_input_stay_explicit(tmp_path):
    case = C("pooling", (1, 3, 8, 8), **{"global": "true"})
    export_onnx(case.model(), REGISTRY, tmp_path / "g.onnx")
    out = onnx.load(str(tmp_path / "g.onnx")).graph.output[0]
    assert [(d.dim_param or d.dim_value) for d in out.type.tensor_type.shape.dim] == ["N", 3, 1, 1]


def _with_analysis_layer() -> Model:
    m = Model("mixed")
    m.add_layer("input", "x", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "c1", params={"num_output_channels": "3"}, inputs=["x"])
    m.add_layer("noise", "n1", inputs=["c1"], params={"amount": "0.25"} if REGISTRY.find_layer("noise") and any(
        p.name == "amount" for p in REGISTRY.find_layer("noise").params) else {})
    m.add_layer("snapshot", "s1", inputs=["n1"], activation="relu")
    m.add_layer("output", "y", inputs=["s1"])
    return m


@pytest.mark.skipif(REGISTRY.find_layer("noise") is None or REGISTRY.find_layer("snapshot") is None,
                    reason="the analysis collection is not loaded")
def test_placeholders_off_lists_every_unsupported_layer():
    unsupported = [t for t in ("noise", "snapshot") if REGISTRY.layer_class(t).onnx_support == "no"]
    if not unsupported:
        pytest.skip("the analysis layers export to ONNX")
    net = build_network(_with_analysis_layer(), REGISTRY)
    with pytest.raises(ExportError) as err:
        build_onnx(net, OnnxOptions())
    msg = str(err.value)
    for layer, t in (("n1", "noise"), ("s1", "snapshot")):
        if t in unsupported:
            assert f"{layer} ({t})" in msg
    assert "--placeholders" in msg


@pytest.mark.skipif(REGISTRY.find_layer("noise") is None, reason="the analysis collection is not loaded")
def test_placeholders_on_keep_parameters_and_pass_the_checker(tmp_path):
    if REGISTRY.layer_class("noise").onnx_support != "no":
        pytest.skip("noise exports to ONNX")
    path = tmp_path / "p.onnx"
    result = export_onnx(_with_analysis_layer(), REGISTRY, path, OnnxOptions(allow_placeholders=True))
    assert any("n1" in w for w in result.warnings)
    m = onnx.load(str(path))
    onnx.checker.check_model(m, full_check=True)
    nodes = {n.name: n for n in m.graph.node}
    ph = nodes["n1"]
    assert ph.domain == PLACEHOLDER_DOMAIN and ph.op_type == "noise" and ph.input == ["c1"]
    desc = REGISTRY.find_layer("noise")
    assert {a.name for a in ph.attribute} >= {p.name for p in desc.params}
    assert any(o.domain == PLACEHOLDER_DOMAIN for o in m.opset_import)


def test_placeholder_for_an_unsupported_activation(tmp_path, monkeypatch):
    act = REGISTRY.activation_class("sine")
    monkeypatch.setattr(act, "to_onnx", classmethod(lambda cls, g, x, coefs: (_ for _ in ()).throw(NotImplementedError())))
    model = activation_case("sine").model()
    with pytest.raises(ExportError, match=r"activation sine of layer L"):
        export_onnx(model, REGISTRY, tmp_path / "a.onnx")
    export_onnx(model, REGISTRY, tmp_path / "a.onnx", OnnxOptions(allow_placeholders=True))
    node = next(n for n in onnx.load(str(tmp_path / "a.onnx")).graph.node if n.name == "L__act")
    assert (node.domain, node.op_type) == (PLACEHOLDER_DOMAIN, "sine")


def test_sample_model(tmp_path):
    from engine.modelfile import load
    from resources import SAMPLES

    model = load(SAMPLES / "denoiser.lnet", REGISTRY)
    rng = np.random.default_rng(3)
    x = {"input": rng.random((1, 3, 96, 128), dtype=np.float32)}
    x2 = {"input": rng.random((2, 3, 40, 56), dtype=np.float32)}
    for options in (OnnxOptions(), OnnxOptions(fp16=True, explicit_sizes=True)):
        round_trip(model, x, options, tmp_path, None if options.explicit_sizes else x2)


@pytest.mark.parametrize("build,dims", [
    (dncnn, Dims(1, 3, 16, 16)), (unet, Dims(1, 3, 16, 16)), (resnet18, Dims(1, 3, 32, 32)),
])
def test_reference_networks(build, dims, tmp_path):
    model = build(dims, **({"depth": 3} if build is dncnn else {"widths": (4, 8, 16)} if build is unet else
                           {"classes": 10}))
    rng = np.random.default_rng(4)
    x = {"input": rng.random(tuple(dims), dtype=np.float32)}
    proto = round_trip(model, x, OnnxOptions(), tmp_path)
    if build is not unet:  # fusing rules turn convolution + batch normalization into conv_bn layers
        assert any(n.op_type == "BatchNormalization" for n in proto.graph.node)
    if build is unet:  # resolution-independent: the symbolic graph runs at another size too
        x2 = {"input": rng.random((1, 3, 24, 40), dtype=np.float32)}
        want = run_labnet(model, x2, REGISTRY)["output"]
        export_onnx(model, REGISTRY, tmp_path / "u.onnx")
        assert_close(ort_outputs(tmp_path / "u.onnx", x2, False)["output"], want, FP32_NCHW, "unet at 24x40")


def test_weights_folder_initializers(tmp_path):
    from engine.weights import WeightsFolder, save_weights

    case = C("convolution", (1, 2, 5, 5), num_output_channels=3)
    w = np.arange(3 * 2 * 9, dtype=np.float32).reshape(3, 2, 3, 3) / 50
    b = np.array([0.5, -1.0, 2.0], np.float32)
    save_weights(tmp_path / "w", {"L": {"weights": w, "bias": b}})
    export_onnx(case.model(), REGISTRY, tmp_path / "w.onnx", weights=WeightsFolder(tmp_path / "w"))
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "w.onnx")).graph.initializer}
    np.testing.assert_array_equal(inits["L__weights"], w)
    np.testing.assert_array_equal(inits["L__bias"], b)
    export_onnx(case.model(), REGISTRY, tmp_path / "r.onnx", weights=RandomWeights(7))
    inits7 = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "r.onnx")).graph.initializer}
    net = build_network(case.model(), REGISTRY, RandomWeights(7))
    np.testing.assert_array_equal(inits7["L__weights"], net.layer("L").weights["weights"])
