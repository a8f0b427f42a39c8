"""Exports honour per-layer precision: the fp16 ONNX export computes in fp16 with explicit Casts around the layers
pinned to fp32, the PyTorch module converts where the engine converts; both checked against the engine on a network
with a planted fp16 overflow that pinning fixes (ONNX's reference evaluator computes fp16 operators in fp16; ONNX
Runtime on the CPU runs the same files)."""
from __future__ import annotations

import importlib.util

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from engine.export.onnx_export import OnnxOptions, export_onnx
from engine.model import Model
from engine.network import Network
from engine.tensor import FP32_NCHW, TensorFormat

FP16 = TensorFormat.parse("fp16 nchw")
X = np.random.default_rng(1).uniform(8, 16, (1, 2, 6, 6)).astype(np.float32)
PINS = {"amp": "fp32", "shrink": "fp32"}


def planted(pins: dict[str, str] | None = None) -> Model:
    """'amp' multiplies c2 by 1e5 (beyond the fp16 range), 'shrink' scales it back before c3: in fp16 the output is
    infinite; with both pinned to fp32 it is finite (amp's output alone, rounded back to fp16, would overflow)."""
    m = Model("planted")
    m.add_layer("input", "inp", params={"dimensions": "1x2x6x6"})
    m.add_layer("convolution", "c1", params={"num_output_channels": "4"}, inputs=["inp"], activation="relu")
    m.add_layer("convolution", "c2", params={"num_output_channels": "4"}, inputs=["c1"])
    m.add_layer("affine", "amp", params={"scale": "1e5"}, inputs=["c2"])
    m.add_layer("affine", "shrink", params={"scale": "1e-5", "shift": "0.25"}, inputs=["amp"],
                activation="leaky_tanh")
    m.add_layer("convolution", "c3", params={"num_output_channels": "3"}, inputs=["shrink"])
    m.add_layer("output", "out", inputs=["c3"])
    for name, text in (pins or {}).items():
        m.set_layer_format(name, text)
    return m


def engine_out(model: Model, registry, fmt: TensorFormat) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):  # the planted overflow, unpinned
        return Network(model, registry, fmt=fmt, fusing="off").infer({"inp": X})["out"]


def export(model: Model, registry, path, **options) -> onnx.ModelProto:
    export_onnx(model, registry, path, OnnxOptions(fp16=True, **options), fusing="off")
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    return proto


def elem_types(proto: onnx.ModelProto) -> dict[str, int]:
    inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    g = inferred.graph
    types = {i.name: i.data_type for i in g.initializer}
    types.update({v.name: v.type.tensor_type.elem_type for v in [*g.input, *g.output, *g.value_info]})
    return types


def test_the_planted_overflow_and_its_fix_in_the_engine(registry):
    assert not np.isfinite(engine_out(planted(), registry, FP16)).all()
    fixed, ref = engine_out(planted(PINS), registry, FP16), engine_out(planted(), registry, FP32_NCHW)
    assert np.isfinite(fixed).all()
    np.testing.assert_allclose(fixed, ref, rtol=1e-2, atol=1e-2)


def test_fp16_onnx_computes_in_fp16_with_casts_around_the_pinned_layers(registry, tmp_path):
    proto = export(planted(PINS), registry, tmp_path / "p.onnx")
    g, types = proto.graph, elem_types(proto)
    f16, f32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    casts = {n.name: (n.input[0], onnx.helper.get_attribute_value(n.attribute[0])) for n in g.node if n.op_type == "Cast"}
    # exactly the engine's two conversions: before amp, after shrink; nothing casts the fp16 layers' tensors
    assert casts == {"c2__to_fp32_nchw": ("c2", f32), "shrink__to_fp16_nchw": ("shrink__act", f16)}
    assert types["inp"] == types["out"] == types["c1__weights"] == types["c3__bias"] == f16
    assert types["c1"] == types["c2"] == types["c3"] == f16
    # the pinned layers compute in float, their constants too
    assert types["amp"] == types["shrink__act"] == types["amp__scale"] == types["shrink__act_alpha"] == f32
    inputs = {n.name: list(n.input) for n in g.node}
    assert inputs["c3"][0] == "shrink__to_fp16_nchw"


def test_fp16_onnx_matches_the_engine_overflow_and_fix(registry, tmp_path):
    """The reference evaluator computes fp16 operators in fp16: unpinned the output overflows as the engine's does,
    pinned it matches the engine's mixed network."""
    x16 = {"inp": X.astype(np.float16)}
    with np.errstate(over="ignore", invalid="ignore"):
        plain = ReferenceEvaluator(export(planted(), registry, tmp_path / "plain.onnx")).run(None, x16)[0]
    assert plain.dtype == np.float16 and not np.isfinite(plain).all()
    got = ReferenceEvaluator(export(planted(PINS), registry, tmp_path / "p.onnx")).run(None, x16)[0]
    want = engine_out(planted(PINS), registry, FP16)
    assert got.dtype == np.float16 and np.isfinite(got).all()
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=1e-2)


def test_onnx_runtime_runs_the_fp16_graph_and_the_fp32_compute_one(registry, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    want = engine_out(planted(PINS), registry, FP16)
    for name, options in (("native", {}), ("fp32", {"fp32_compute": True})):
        proto = export(planted(PINS), registry, tmp_path / f"{name}.onnx", **options)
        sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        got = sess.run(None, {"inp": X.astype(np.float16)})[0]
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=1e-2, err_msg=name)


def test_a_constant_beyond_fp16_is_named_in_the_warnings(registry, tmp_path):
    result = export_onnx(planted(), registry, tmp_path / "plain.onnx", OnnxOptions(fp16=True), fusing="off")
    assert result.warnings == ["layer amp: scale holds 100000, beyond the float16 range: infinite in the fp16 graph "
                               "(pin the layer to fp32)"]
    assert not export_onnx(planted(PINS), registry, tmp_path / "p.onnx", OnnxOptions(fp16=True), fusing="off").warnings


def test_fp32_compute_keeps_the_float_graph(registry, tmp_path):
    proto = export(planted(PINS), registry, tmp_path / "f.onnx", fp32_compute=True)
    types = elem_types(proto)
    f16, f32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    assert types["inp"] == types["out"] == types["c1__weights"] == f16  # what the file holds
    assert types["c1"] == types["c2"] == types["c3"] == types["amp"] == f32  # what it computes in
    rounding = [n for n in proto.graph.node if n.name.startswith("shrink__to_fp16_nchw")]
    assert [n.op_type for n in rounding] == ["Cast", "Cast"]  # the conversion to fp16 as its rounding


def test_float_only_operators_are_computed_between_casts(registry, tmp_path):
    m = Model("celu")
    m.add_layer("input", "inp", params={"dimensions": "1x2x6x6"})
    m.add_layer("convolution", "c", params={"num_output_channels": "2"}, inputs=["inp"], activation="celu")
    m.add_layer("output", "out", inputs=["c"])
    proto = export(m, registry, tmp_path / "celu.onnx")
    ops = [(n.op_type, n.name) for n in proto.graph.node]
    celu = next(i for i, (op, _) in enumerate(ops) if op == "Celu")
    assert ops[celu - 1][0] == "Cast" and ops[celu + 1][0] == "Cast"
    got = ReferenceEvaluator(proto).run(None, {"inp": X.astype(np.float16)})[0]
    np.testing.assert_allclose(got.astype(np.float32), engine_out(m, registry, FP16), rtol=1e-2, atol=1e-2)


def test_fp16_export_on_the_command_line(tmp_path, capsys):
    from app.cli import main
    from engine.modelfile import save

    path = tmp_path / "m.lnet"
    save(planted(), path)
    code = main(["export", "onnx", str(path), "-o", str(tmp_path / "m.onnx"), "--fp32-compute"])
    assert code == 2 and "--fp32-compute goes with --fp16" in capsys.readouterr().err
    assert not (tmp_path / "m.onnx").exists()
    save(planted(PINS), path)
    assert main(["export", "onnx", str(path), "-o", str(tmp_path / "m.onnx"), "--fp16", "--fusing-rules", "off"]) == 0
    assert "fp16 tensors computed in fp16 (in fp32: amp, shrink)" in capsys.readouterr().out
    assert main(["export", "onnx", str(path), "-o", str(tmp_path / "f.onnx"), "--fp16", "--fp32-compute"]) == 0
    assert "fp16 tensors computed in float32" in capsys.readouterr().out


def load_module(folder, name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_export", folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pytorch_module_converts_where_the_engine_converts(registry, tmp_path):
    torch = pytest.importorskip("torch")
    from engine.export.torch_export import export_torch

    export_torch(planted(PINS), registry, tmp_path / "pinned", fusing="off")
    export_torch(planted(), registry, tmp_path / "plain", fusing="off")
    source = (tmp_path / "pinned" / "planted.py").read_text()
    assert "FP32_LAYERS" not in source  # amp and shrink are expressions: no weights to keep in float32
    assert "c2__to_fp32_nchw = c2.float()" in source and "shrink__to_fp16_nchw = shrink.to(dtype)" in source
    pinned = load_module(tmp_path / "pinned", "planted").Planted.from_weights()
    plain = load_module(tmp_path / "plain", "planted").Planted.from_weights()
    x = torch.from_numpy(X)
    with torch.no_grad():
        # float32 modules: the conversions are no-ops, both match the all-fp32 engine
        ref = engine_out(planted(), registry, FP32_NCHW)
        np.testing.assert_allclose(pinned(x).numpy(), ref, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(plain(x).numpy(), ref, rtol=1e-4, atol=1e-4)
        # half(): the unpinned module overflows as the engine's fp16 network does; the pinned one does not, and
        # matches the engine's mixed network
        assert not torch.isfinite(plain.half()(x.half())).all()
        half = pinned.half()
        assert half.c1.weight.dtype == half.c3.weight.dtype == torch.float16
        got = half(x.half())
    assert got.dtype == torch.float16 and torch.isfinite(got).all()
    np.testing.assert_allclose(got.float().numpy(), engine_out(planted(PINS), registry, FP16), rtol=1e-2, atol=1e-2)
