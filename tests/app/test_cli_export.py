"""`layerlab export ...` end to end (through app.cli.main), and the export request the dialog shares."""
from __future__ import annotations

import shlex

import numpy as np
import pytest

from app.services.export import ExportRequest
from engine.modelfile import load
from engine.network import Network
from engine.plugins import default_registry
from engine.weights import WeightsFolder
from resources import SAMPLES
from tests.cli_helpers import run_cli as run

MODEL = str(SAMPLES / "denoiser.lnet")


def test_export_onnx_with_options(tmp_path, capsys):
    onnx = pytest.importorskip("onnx")
    code, out, err = run(["export", "onnx", MODEL, "-o", str(tmp_path / "d.onnx"), "--fp16", "--explicit-sizes",
                          "--seed", "3"], capsys)
    assert code == 0, err
    assert f"wrote {tmp_path / 'd.onnx'}" in out and "fp16 tensors" in out and "explicit sizes" in out
    m = onnx.load(str(tmp_path / "d.onnx"))
    assert m.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    assert [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim] == [1, 3, 96, 128]


def test_export_torch_and_pytorch_alias(tmp_path, capsys):
    code, out, err = run(["export", "torch", MODEL, "-o", str(tmp_path / "t")], capsys)
    assert code == 0, err
    assert (tmp_path / "t" / "denoiser.py").is_file() and (tmp_path / "t" / "denoiser_weights.npz").is_file()
    code, out, err = run(["export", "pytorch", MODEL, "-o", str(tmp_path / "t2"), "--stubs"], capsys)
    assert code == 0, err
    assert "class Denoiser" in out


def test_export_project_and_preprocessed(tmp_path, capsys):
    code, out, err = run(["export", "project", MODEL, "-o", str(tmp_path / "p"), "--builder", "build_denoiser",
                          "--no-pyproject", "--format", "fp16", "nhwc"], capsys)
    assert code == 0, err
    assert "build_denoiser()" in out and not (tmp_path / "p" / "pyproject.toml").exists()
    assert "TENSOR_FORMAT = 'fp16 nhwc'" in (tmp_path / "p" / "denoiser" / "network.py").read_text()
    code, out, err = run(["export", "preprocessed", MODEL, "-o", str(tmp_path / "pre.lnet")], capsys)
    assert code == 0, err
    reg = default_registry()
    pre = load(tmp_path / "pre.lnet", reg)
    x = {"input": np.random.default_rng(0).random((1, 3, 16, 16), dtype=np.float32)}
    got = Network(pre, reg, weights=WeightsFolder(tmp_path / "pre_weights")).infer(x)["output"]
    np.testing.assert_array_equal(got, Network(load(MODEL, reg), reg).infer(x)["output"])


def test_user_errors_are_one_line_with_status_2(tmp_path, capsys):
    code, _, err = run(["export", "project", MODEL, "-o", str(tmp_path / "p"), "--builder", "class"], capsys)
    assert code == 2 and "builder name 'class' is not a Python identifier" in err and err.count("\n") == 1
    code, _, err = run(["export", "onnx", MODEL], capsys)
    assert code == 2 and "required: --output/-o" in err
    code, _, err = run(["export", "keras", MODEL, "-o", "x"], capsys)
    assert code == 2 and "invalid choice: 'keras'" in err
    code, _, err = run(["export", "onnx", MODEL, "-o", str(tmp_path / "x.onnx"), "--weights", str(tmp_path / "none")],
                       capsys)
    assert code == 2 and "weights folder" in err and "does not exist" in err


def test_request_command_line_round_trips_through_the_parser(tmp_path, capsys):
    req = ExportRequest("project", str(tmp_path / "my project"), builder="make_net", package="dn", sample=False,
                        tensor_format="fp16 nchw", seed=4, fusing="off")
    line = req.command_line(MODEL)
    assert line.startswith("layerlab export project ") and "'" in line  # the space is quoted
    args = shlex.split(line)[1:]
    code, out, err = run(args, capsys)
    assert code == 0, err
    assert not (tmp_path / "my project" / "dn" / "__main__.py").exists()
    assert ExportRequest("onnx", "a.onnx", placeholders=True, fp16=True).argv("m.lnet") == [
        "export", "onnx", "m.lnet", "-o", "a.onnx", "--placeholders", "--fp16"]
    assert ExportRequest("torch", "d", fusing="on").argv("m.lnet")[-2:] == ["--fusing-rules", "on"]
