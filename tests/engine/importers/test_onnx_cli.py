"""`layerlab import` and the other commands on .onnx files: files written, weights used, round trips, and
bad input (one line, exit status 2, nothing written)."""
from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from app.cli import main
from engine.export import OnnxOptions, export_onnx
from engine.importers import load_model_any
from engine.importers.onnx import import_onnx
from engine.modelfile import load
from engine.network import Network
from engine.typecheck import ERROR, check
from engine.weights import RandomWeights, SafetensorsWeights, open_weights
from resources import SAMPLES
from tests.engine.importers.architectures import export
from tests.engine.importers.helpers import REGISTRY, reference, rel_l2, run, save_graph, tensor


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(args, out=out)
    return code, out.getvalue(), capsys.readouterr().err


@pytest.fixture(scope="module")
def dncnn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    path = tmp_path_factory.mktemp("dncnn") / "dncnn.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = export("dncnn", str(path)).numpy()
    return path, x, reference(path, {"input": x})[0]


def test_import_writes_model_and_safetensors_that_infer_uses(dncnn, tmp_path, capsys) -> None:
    path, x, ref = dncnn
    lnet = tmp_path / "out" / "dncnn.lnet"
    lnet.parent.mkdir()
    code, out, err = cli(["import", str(path), "-o", str(lnet)], capsys)
    assert code == 0, err
    assert "ONNX nodes ->" in out and "weight tensors" in out and f"wrote {lnet}" in out
    weights = lnet.with_suffix(".safetensors")
    assert weights.is_file()
    model = load(lnet, REGISTRY)
    assert model.settings["weights"] == "dncnn.safetensors"
    assert all(s.note for s in model.layers.values())  # the ONNX node each layer came from
    assert [d for d in check(model, REGISTRY) if d.severity == ERROR] == []
    src = SafetensorsWeights(weights)
    assert {k.split(".")[0] for k in src.keys()} <= set(model.layers)
    np.save(tmp_path / "x.npy", x)
    code, out, err = cli(["infer", str(lnet), "-i", f"input={tmp_path / 'x.npy'}", "-o", f"output={tmp_path / 'y.npy'}",
                          "-b", "numpy", "-n", "1"], capsys)
    assert code == 0, err
    assert rel_l2(np.load(tmp_path / "y.npy"), ref) < 1e-4
    # --weights accepts the file too, and a weights folder still works
    code, _, err = cli(["infer", str(lnet), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y2.npy"), "-b", "numpy",
                        "-n", "1", "--weights", str(weights)], capsys)
    assert code == 0, err
    assert np.array_equal(np.load(tmp_path / "y2.npy"), np.load(tmp_path / "y.npy"))


def test_weights_file_option_and_atomic_failure(dncnn, tmp_path, capsys) -> None:
    path, _, _ = dncnn
    code, _, err = cli(["import", str(path), "-o", str(tmp_path / "m.lnet"), "--weights-file",
                        str(tmp_path / "w" / "weights.safetensors")], capsys)
    assert code == 2 and err.count("layerlab: error:") == 1 and "no such folder" in err
    code, _, err = cli(["import", str(path), "-o", str(tmp_path / "m.lnet"), "--weights-file", str(tmp_path / "w.npz")],
                       capsys)
    assert code == 2 and "must end in .safetensors" in err
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "w").mkdir()
    code, _, err = cli(["import", str(path), "-o", str(tmp_path / "m.lnet"), "--weights-file",
                        str(tmp_path / "w" / "weights.safetensors")], capsys)
    assert code == 0, err
    assert load(tmp_path / "m.lnet", REGISTRY).settings["weights"] == str(Path("w") / "weights.safetensors")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["m.lnet", "w", "weights.safetensors"]


def test_every_command_takes_an_onnx_path(dncnn, tmp_path, capsys) -> None:
    path, x, ref = dncnn
    np.save(tmp_path / "x.npy", x)
    code, out, err = cli(["infer", str(path), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy"), "-b",
                          "numpy", "-n", "1"], capsys)
    assert code == 0, err
    assert rel_l2(np.load(tmp_path / "y.npy"), ref) < 1e-4  # the imported weights, not random ones
    code, out, err = cli(["check", str(path)], capsys)
    assert code == 0 and "0 error(s)" in out
    code, out, err = cli(["profile", str(path), "-b", "numpy", "-n", "1", "--warmup", "0", "--report",
                          str(tmp_path / "report")], capsys)
    assert code == 0, err
    assert (tmp_path / "report.json").is_file()
    code, out, err = cli(["drift", str(path), "--candidate", "fp16"], capsys)
    assert code in (0, 1), err
    back = tmp_path / "back.onnx"
    code, out, err = cli(["export", "onnx", str(path), "-o", str(back), "--fusing-rules", "off"], capsys)
    assert code == 0, err
    assert rel_l2(reference(back, {"input": x})[0], ref) < 1e-4


def test_round_trip_layerlab_to_onnx_and_back(tmp_path) -> None:
    """The sample denoiser exported to ONNX and imported again computes the same outputs, with the same layers
    (the exporter writes Conv + activation nodes; the importer folds the activations back)."""
    model = load(SAMPLES / "denoiser.lnet", REGISTRY)
    onnx_path = tmp_path / "denoiser.onnx"
    export_onnx(model, REGISTRY, onnx_path, OnnxOptions(), RandomWeights(3), fusing="off")
    result = import_onnx(onnx_path, registry=REGISTRY, input_shapes={"input": (1, 3, 40, 56)})
    x = np.random.default_rng(0).random((1, 3, 40, 56), dtype=np.float32)
    original = Network(model, REGISTRY, weights=RandomWeights(3), fusing="off")
    want = original.infer({"input": x})
    got = run(result, {"input": x})
    assert rel_l2(got[0], want["output"]) < 1e-5
    assert sorted(s.type for s in result.model.layers.values()) == sorted(s.type for s in model.layers.values())


def test_symbolic_sizes_default_with_a_notice_or_from_input_shape(tmp_path, capsys) -> None:
    import torch

    path = tmp_path / "dyn.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(torch.nn.Conv2d(3, 4, 3, padding=1), (torch.rand(1, 3, 8, 8),), str(path), dynamo=False,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}})
    result = import_onnx(path, registry=REGISTRY)
    assert result.model.layers["x"].params["dimensions"] == "1x3x224x224"
    assert len(result.notices) == 1 and "--input-shape x=NxCxHxW" in result.notices[0]
    result = import_onnx(path, registry=REGISTRY, input_shapes={"x": (2, 3, 30, 20)})
    assert result.model.layers["x"].params["dimensions"] == "2x3x30x20" and result.notices == []
    assert "--input-shape x=2x3x30x20" in result.command_line()
    code, _, err = cli(["import", str(path), "--input-shape", "x=1x3x0x4"], capsys)
    assert code == 2 and "NAME=NxCxHxW" in err
    code, _, err = cli(["import", str(path), "--input-shape", "nope=1x3x8x8"], capsys)
    assert code == 2 and "the model's inputs are x" in err
    assert not (tmp_path / "dyn.lnet").exists()


def _bad_models(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, what the one-line error must say)."""
    x, y = tensor("x", [1, 3, 4, 4]), tensor("y", [1, 3, 4, 4])
    relu = [helper.make_node("Relu", ["x"], ["y"])]
    out: dict[str, tuple[Path, str]] = {}
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07garbage that is not a protobuf\xff\xff")
    out["corrupt"] = (corrupt, "not a readable ONNX model")
    out["opset"] = (save_graph(tmp_path / "opset.onnx", relu, [x], [y], opset=99), "opset 99 is newer")
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["z"])], "b", [], [tensor("z", [1, 3, 4, 4])])
    cond = helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)
    out["if"] = (save_graph(tmp_path / "if.onnx", [cond], [x, tensor("c", [], TensorProto.BOOL)], [y]), "control flow (If)")
    out["int"] = (save_graph(tmp_path / "int.onnx", relu, [tensor("x", [1, 3, 4, 4], TensorProto.INT64)],
                             [tensor("y", [1, 3, 4, 4], TensorProto.INT64)]), "input 'x' is int64")
    out["rank"] = (save_graph(tmp_path / "rank.onnx", relu, [tensor("x", [1] * 7)], [tensor("y", [1] * 7)]), "rank 7")
    ext = tmp_path / "ext.onnx"
    model = helper.make_model(helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "g", [x], [y],
                                                [onnx.numpy_helper.from_array(np.ones((3, 3, 1, 1), np.float32), "w")]))
    onnx.save(model, str(ext), save_as_external_data=True, location="ext.data", size_threshold=0)
    (tmp_path / "ext.data").unlink()
    out["external"] = (ext, "external data file ext.data")
    nodes = [helper.make_node("Shrink", ["x"], ["e"], name="shrink1"), helper.make_node("Relu", ["e"], ["r"]),
             helper.make_node("ThresholdedRelu", ["r"], ["y"], name="thresholded1")]
    out["unsupported"] = (save_graph(tmp_path / "unsupported.onnx", nodes, [x], [y]), "2 node(s)")
    return out


@pytest.mark.parametrize("case", ["corrupt", "opset", "if", "int", "rank", "external", "unsupported"])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, case: str) -> None:
    path, expected = _bad_models(tmp_path)[case]
    before = sorted(p.name for p in tmp_path.iterdir())
    target = tmp_path / "out.lnet"
    code, out, err = cli(["import", str(path), "-o", str(target)], capsys)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("layerlab: error:")]
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    code, _, err = cli(["infer", str(path), "-b", "numpy", "-n", "1"], capsys)
    assert code == 2 and expected in err


def test_unsupported_nodes_listed_then_kept_as_placeholders(tmp_path, capsys) -> None:
    path, _ = _bad_models(tmp_path)["unsupported"]
    code, _, err = cli(["import", str(path), "-o", str(tmp_path / "u.lnet")], capsys)
    assert code == 2 and "Shrink (1): Shrink node 'shrink1': no LayerLab equivalent" in err
    assert "ThresholdedRelu (1): ThresholdedRelu node 'thresholded1'" in err
    assert "--placeholders" in err
    result = import_onnx(path, registry=REGISTRY, placeholders=True)
    kinds = {s.name: s for s in result.model.layers.values()}
    ph = [s for s in kinds.values() if s.type == "placeholder"]
    assert sorted(s.params["op_type"] for s in ph) == ["Shrink", "ThresholdedRelu"]
    assert [s for s in kinds.values() if s.type == "affine" or s.activation == "relu"]  # the Relu between them
    errors = [d for d in check(result.model, REGISTRY) if d.severity == ERROR]
    assert sorted(d.layer for d in errors) == sorted(s.name for s in ph) and all("does not run" in d.message for d in errors)
    code, _, err = cli(["import", str(path), "-o", str(tmp_path / "u.lnet"), "--placeholders"], capsys)
    assert code == 0 and err.count("placeholder for") == 2
    code, _, err = cli(["infer", str(tmp_path / "u.lnet"), "-b", "numpy", "-n", "1"], capsys)
    assert code == 2 and "cannot run" in err
    # exported back to ONNX, the placeholders are the original operators again: same outputs as the original
    back = tmp_path / "back.onnx"
    code, _, err = cli(["export", "onnx", str(tmp_path / "u.lnet"), "-o", str(back), "--fusing-rules", "off"], capsys)
    assert code == 0, err
    x = np.random.default_rng(1).standard_normal((1, 3, 4, 4)).astype(np.float32)
    assert rel_l2(reference(back, {"x": x})[0], reference(path, {"x": x})[0]) < 1e-6


def test_load_model_any_branches_on_the_suffix(dncnn) -> None:
    path, x, ref = dncnn
    model, weights = load_model_any(path, REGISTRY)
    assert weights is not None and model.layers
    model, weights = load_model_any(SAMPLES / "denoiser.lnet", REGISTRY)
    assert weights is None and model.path


def test_open_weights_reads_both_formats_and_names_bad_files(tmp_path) -> None:
    from engine.errors import WeightsError
    from engine.weights import WeightsFolder, save_safetensors, save_weights

    save_weights(tmp_path / "folder", {"c": {"weights": np.ones((2, 2))}})
    save_safetensors(tmp_path / "w.safetensors", {"c": {"weights": np.ones((2, 2))}})
    assert isinstance(open_weights(tmp_path / "folder"), WeightsFolder)
    assert isinstance(open_weights(tmp_path / "w.safetensors"), SafetensorsWeights)
    (tmp_path / "bad.safetensors").write_bytes(b"nope")
    with pytest.raises(WeightsError, match="not a readable safetensors file"):
        open_weights(tmp_path / "bad.safetensors")
    with pytest.raises(WeightsError, match="does not exist"):
        open_weights(tmp_path / "missing.safetensors")


def test_designer_run_settings_take_a_safetensors_weights_file(dncnn, tmp_path) -> None:
    from app.run_config import SettingsError, from_model

    path, _, _ = dncnn
    result = import_onnx(path, registry=REGISTRY)
    lnet, weights = result.write(tmp_path / "m.lnet")
    model = load(lnet, REGISTRY)
    assert from_model(model, str(lnet)).weights == str(weights.resolve())
    model.settings["weights"] = "missing.safetensors"
    with pytest.raises(SettingsError, match="missing.safetensors does not exist"):
        from_model(model, str(lnet))
    model.settings["weights"] = "m.lnet"
    with pytest.raises(SettingsError, match="neither a weights folder nor a .safetensors file"):
        from_model(model, str(lnet))


def test_round_trip_of_an_fp16_export(tmp_path) -> None:
    """LayerLab's --fp16 ONNX export (computed in float16: float16 tensors and weights) imports back."""
    model = load(SAMPLES / "denoiser.lnet", REGISTRY)
    onnx_path = tmp_path / "denoiser16.onnx"
    export_onnx(model, REGISTRY, onnx_path, OnnxOptions(fp16=True), RandomWeights(3), fusing="off")
    result = import_onnx(onnx_path, registry=REGISTRY, input_shapes={"input": (1, 3, 24, 32)})
    assert any("float16" in n for n in result.notices)
    x = np.random.default_rng(0).random((1, 3, 24, 32), dtype=np.float32)
    want = Network(model, REGISTRY, weights=RandomWeights(3), fusing="off").infer({"input": x})["output"]
    assert rel_l2(run(result, {"input": x})[0], want) < 1e-2
    assert sorted(s.type for s in result.model.layers.values()) == sorted(s.type for s in model.layers.values())


def _slope() -> np.ndarray:
    return np.array([0.1, 0.2, 0.3], np.float32).reshape(3, 1, 1)


def test_placeholder_keeps_integer_inputs_exactly_and_exports_them_back(tmp_path) -> None:
    """A refused op with an int64 input holding INT64_MAX (a float32 weight could not hold it) and a float
    weight input: kept as a placeholder and written back to ONNX with the same values."""
    x, y = tensor("x", [1, 3, 4, 4]), tensor("y", [1, 3, 4, 4])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "k"], ["m"]),
             helper.make_node("Slice", ["m", "st", "en", "ax", "sp"], ["s"]),  # keeps nothing of N: refused
             helper.make_node("PRelu", ["s", "slope"], ["y"], name="pr")]
    consts = {"k": np.float32(2.0), "st": np.array([2**63 - 1], np.int64), "en": np.array([2**63 - 1], np.int64),
              "ax": np.array([0], np.int64), "sp": np.array([1], np.int64), "slope": _slope()}
    path = save_graph(tmp_path / "p.onnx", nodes, [x], [y], consts)
    result = import_onnx(path, registry=REGISTRY, placeholders=True)
    ph = next(s for s in result.model.layers.values() if s.type == "placeholder")
    assert ph.params["op_type"] == "Slice" and str(2**63 - 1) in ph.params["constants"]
    lnet, _ = result.write(tmp_path / "p.lnet")
    code = main(["export", "onnx", str(lnet), "-o", str(tmp_path / "back.onnx"), "--fusing-rules", "off"],
                out=io.StringIO())
    assert code == 0
    xv = np.random.default_rng(2).standard_normal((1, 3, 4, 4)).astype(np.float32)
    assert rel_l2(reference(tmp_path / "back.onnx", {"x": xv})[0], reference(path, {"x": xv})[0]) < 1e-6
