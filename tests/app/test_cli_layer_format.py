"""``--layer-format`` on ``layerlab infer`` and ``profile``: a layer's own format for one run."""
from __future__ import annotations

import json

import numpy as np

from app.cli import main
from app.services.commandline import command_line
from engine.model import Model
from engine.modelfile import save
from engine.run import RunSpec


def model_file(tmp_path) -> str:
    m = Model("pins")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "c1", params={"num_output_channels": "4"}, inputs=["inp"])
    m.add_layer("convolution", "c2", params={"num_output_channels": "4"}, inputs=["c1"])
    m.add_layer("output", "out", inputs=["c2"])
    path = tmp_path / "pins.lnet"
    save(m, path)
    return str(path)


def run(argv, capsys):
    code = main(argv)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_infer_with_a_pinned_layer_names_it_and_its_conversions(tmp_path, capsys):
    path = model_file(tmp_path)
    code, out, err = run(["infer", path, "-b", "numpy", "-f", "fp16", "nhwc", "-n", "1", "--layer-format", "c1=fp32",
                          "--output-dir", str(tmp_path)], capsys)
    assert code == 0, err
    assert "layer c1 runs in fp32|nhwc (network fp16|nhwc)" in out
    assert "format conversion c1__to_fp16_nhwc: c1 fp32|nhwc -> fp16|nhwc" in out
    code, _, err = run(["infer", path, "-b", "numpy", "-f", "fp32", "-n", "1", "--output-dir", str(tmp_path / "ref")],
                       capsys)
    assert code == 0, err
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), np.load(tmp_path / "ref" / "out.npy"), rtol=1e-2,
                               atol=1e-2)


def test_profile_report_lists_the_conversion_with_its_time(tmp_path, capsys):
    path = model_file(tmp_path)
    report = tmp_path / "r.json"
    code, _, err = run(["profile", path, "-b", "numpy", "-f", "fp16", "-n", "2", "--layer-format", "c2=fp32,nchw",
                        "--report", str(report)], capsys)
    assert code == 0, err
    doc = json.loads(report.read_text())
    text = json.dumps(doc)
    assert "c1__to_fp32_nchw" in text and "layer c2 runs in fp32|nchw" in text


def test_bad_layer_format_flags_exit_2_naming_them(tmp_path, capsys):
    path = model_file(tmp_path)
    code, _, err = run(["infer", path, "-b", "numpy", "--layer-format", "c1=fp8"], capsys)
    assert code == 2 and "c1" in err and "fp8" in err
    code, _, err = run(["infer", path, "-b", "numpy", "--layer-format", "nope=fp32"], capsys)
    assert code == 2 and "no layer 'nope'" in err
    code, _, err = run(["infer", path, "-b", "numpy", "--layer-format", "c1"], capsys)
    assert code == 2 and "NAME=FORMAT" in err


def test_the_reproducing_command_line_carries_the_layer_formats():
    spec = RunSpec(backend="numpy", layer_formats=(("c1", "fp32 nchw"), ("c2", "")))
    line = command_line(spec, "m.lnet")
    assert "--layer-format c1=fp32,nchw" in line and "--layer-format c2=default" in line
