"""The `layerlab` command line end to end."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from engine.io import read_image
from resources import SAMPLES
from tests.cli_helpers import run_cli as run

MODEL = str(SAMPLES / "denoiser.lnet")
IMAGE = str(SAMPLES / "sample.png")


def test_infer_sample_with_image_writes_png_and_npy(tmp_path, capsys):
    code, out, err = run(["infer", MODEL, "--input", f"input={IMAGE}", "--output", f"output={tmp_path}/d.png",
                          "-n", "2", "--backend", "numpy"], capsys)
    assert code == 0, err
    assert "average time per iteration:" in out and "over 2 iterations" in out
    assert read_image(tmp_path / "d.png").shape == (1, 3, 96, 128)
    code, out, _ = run(["infer", MODEL, "-i", IMAGE, "--output-dir", str(tmp_path), "--format", "fp16", "nhwc",
                        "-b", "numpy", "-n", "1"], capsys)
    assert code == 0 and "format fp16|nhwc" in out
    assert np.load(tmp_path / "output.npy").shape == (1, 3, 96, 128)


def test_infer_same_result_from_npy_input_and_seeded_random_input(tmp_path, capsys):
    x = read_image(IMAGE)
    np.save(tmp_path / "x.npy", x.transpose(0, 2, 3, 1))
    run(["infer", MODEL, "-i", f"{tmp_path}/x.npy", "--input-layout", "nhwc", "-o", f"{tmp_path}/a.npy", "-b", "numpy"],
        capsys)
    run(["infer", MODEL, "-i", IMAGE, "-o", f"{tmp_path}/b.npy", "-b", "numpy"], capsys)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))
    run(["infer", MODEL, "-o", f"{tmp_path}/r1.npy", "--seed", "5", "-b", "numpy"], capsys)
    run(["infer", MODEL, "-o", f"{tmp_path}/r2.npy", "--seed", "5", "-b", "numpy"], capsys)
    np.testing.assert_array_equal(np.load(tmp_path / "r1.npy"), np.load(tmp_path / "r2.npy"))


def test_infer_video_frame_by_frame(tmp_path, capsys):
    from engine.io import VideoWriter

    w = VideoWriter(tmp_path / "in.avi", 5)
    for i in range(3):
        w.write(np.full((1, 3, 32, 48), 0.3 * i, np.float32))
    w.close()
    code, out, err = run(["infer", MODEL, "-i", f"{tmp_path}/in.avi", "-o", f"{tmp_path}/out.avi", "-b", "numpy"], capsys)
    assert code == 0, err
    assert "3 frames, average time per frame" in out and (tmp_path / "out.avi").stat().st_size > 0


def test_check_and_layers(tmp_path, capsys):
    code, out, _ = run(["check", MODEL], capsys)
    assert code == 0 and "0 error(s)" in out
    bad = tmp_path / "bad.lnet"
    bad.write_text(Path(MODEL).read_text().replace('<input index="0" source="conv2" />', ""))
    code, out, _ = run(["check", str(bad)], capsys)
    assert code == 1 and "error: conv3: These mandatory inputs are not connected: 0" in out
    code, out, _ = run(["layers"], capsys)
    assert code == 0
    assert "standard 0.1.0 by LayerLab" in out and "convolution" in out and "2-D convolution" in out
    assert "leaky_relu" in out


def test_every_command_module_is_a_row_of_the_command_table_and_has_its_help(capsys):
    import app.cli
    from app.cli import COMMANDS

    folder = Path(app.cli.__file__).parent
    modules = {p.stem for p in folder.glob("*.py") if "\ndef run(" in p.read_text(encoding="utf-8")}
    assert modules == {c.run.__module__.rpartition(".")[2] for c in COMMANDS}
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    listed = capsys.readouterr().out
    assert all(f"    {c.name} " in listed and c.help.split()[0] in listed for c in COMMANDS)


@pytest.mark.parametrize("args,message", [
    (["infer", "missing.lnet"], "missing.lnet: no such file"),
    (["infer", MODEL, "-n", "0"], "argument --iterations/-n: must be at least 1, got 0"),
    (["infer", MODEL, "--format", "fp64"], "unknown tensor format 'fp64'"),
    (["infer", MODEL, "--backend", "tpu"], "invalid choice: 'tpu'"),
    (["infer", MODEL, "-i", "nope=x.png"], "no input layer named 'nope'"),
    (["infer", MODEL, "-i", "missing.png"], "missing.png: no such image file"),
    (["infer", MODEL, "-o", "out.txt"], "unsupported output file type '.txt'"),
    (["profile", MODEL, "-o", "out.txt"], "unsupported output file type '.txt'"),
    (["infer", MODEL, "-o", "out.mp4"], "a video output takes a video input's frames"),
    (["infer", MODEL, "-w", "/no/such/dir"], "weights folder /no/such/dir does not exist"),
    (["check", "missing.lnet"], "no such file"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_user_errors_exit_2_with_one_line(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(args, capsys)
    lines = [line for line in err.splitlines() if not line.startswith("layerlab: using the numpy")]
    assert code == 2 and len(lines) == 1 and message in lines[0] and lines[0].startswith("layerlab: error: ")
    assert "Traceback" not in err


def test_malformed_model_message_and_verbose_traceback(tmp_path, capsys):
    bad = tmp_path / "t.lnet"
    bad.write_text("<network>\n<layers>\n")
    code, _, err = run(["infer", str(bad)], capsys)
    assert code == 2 and f"{bad}:3: malformed XML" in err and "Traceback" not in err
    code, _, err = run(["infer", str(bad), "--verbose"], capsys)
    assert code == 2 and "Traceback" in err


def test_cupy_backend_where_unusable(capsys, monkeypatch, tmp_path):
    import engine.backends as b

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(b, "_cupy_probe", (False, "no usable CUDA GPU (test)"))
    code, _, err = run(["infer", MODEL, "-b", "cupy"], capsys)
    assert code == 2 and "the cupy backend cannot be used here: no usable CUDA GPU (test)" in err
    notice = "layerlab: using the numpy backend: no usable CUDA GPU (test)"
    code, out, err = run(["infer", MODEL, "-n", "1"], capsys)
    assert code == 0 and notice in err
    code, out, err = run(["infer", MODEL, "-n", "1"], capsys)  # once per machine
    assert code == 0 and notice not in err
    code, out, err = run(["infer", MODEL, "-n", "1", "-v"], capsys)  # and with --verbose
    assert code == 0 and notice in err


def installed() -> bool:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution("layerlab")
        return True
    except PackageNotFoundError:
        return False


@pytest.mark.skipif(not installed(), reason="LayerLab is not installed in this environment (source tree on PYTHONPATH)")
def test_console_script_runs(tmp_path):
    exe = shutil.which("layerlab", path=str(Path(sys.executable).parent))
    assert exe, "the layerlab console script is installed with the package"
    res = subprocess.run([exe, "infer", MODEL, "-i", IMAGE, "-o", f"{tmp_path}/o.png", "-n", "1", "-b", "numpy"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "o.png").is_file()
    res = subprocess.run([exe, "check", "nope.lnet"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stderr.strip() == "layerlab: error: nope.lnet: no such file"


def test_fusing_rules_flag(tmp_path, capsys):
    from engine.model import Model
    from engine.modelfile import save

    m = Model("cbn")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "conv", inputs=["inp"])
    m.add_layer("batch_normalization", "bn", inputs=["conv"])
    m.add_layer("output", "out", inputs=["bn"])
    save(m, tmp_path / "cbn.lnet")
    code, _, err = run(["infer", str(tmp_path / "cbn.lnet"), "-o", f"{tmp_path}/on.npy", "-b", "numpy"], capsys)
    assert code == 0 and "conv + bn -> bn" in err
    code, _, err = run(["infer", str(tmp_path / "cbn.lnet"), "-o", f"{tmp_path}/off.npy", "--fusing-rules", "off",
                        "-b", "numpy"], capsys)
    assert code == 0 and "fusing rule" not in err
    np.testing.assert_allclose(np.load(tmp_path / "on.npy"), np.load(tmp_path / "off.npy"), rtol=1e-4, atol=1e-4)
    (tmp_path / "rules.txt").write_text("# my rules\nfp32|nchw|conv_bn = batch_normalization {convolution[act = 'none']}\n")
    code, _, err = run(["infer", str(tmp_path / "cbn.lnet"), "--fusing-rules", str(tmp_path / "rules.txt")], capsys)
    assert code == 2 and "rules.txt:2" in err and "column" in err
    code, out, err = run(["profile", str(tmp_path / "cbn.lnet"), "-n", "2", "-b", "numpy", "--report",
                          str(tmp_path / "fused")], capsys)
    assert code == 0 and "note: fusing rules applied: 1 fusion(s) (*|*|conv_bn); a fused layer is timed as one layer" in out
    assert "note: fusing rule *|*|conv_bn: conv + bn -> bn" in out and "fusing rule" not in err  # said once
    code, out, _ = run(["profile", str(tmp_path / "cbn.lnet"), "-n", "2", "-b", "numpy", "--fusing-rules", "off",
                        "--report", str(tmp_path / "plain")], capsys)
    assert code == 0 and "note: fusing rules: none applied (switched off, or nothing matched)" in out
    assert "every layer is timed unfused" in (tmp_path / "plain.html").read_text()


def test_profile_writes_the_outputs_it_is_asked_for(tmp_path, capsys):
    """``profile -o`` / ``--output-dir`` write the network's outputs as ``infer`` does (they used to be accepted and
    ignored); a path that cannot be written is refused before the run, with nothing written."""
    code, out, _ = run(["infer", MODEL, "-n", "1", "-b", "numpy", "-o", str(tmp_path / "infer.npy")], capsys)
    assert code == 0
    code, out, _ = run(["profile", MODEL, "-n", "2", "-b", "numpy", "--report", str(tmp_path / "rep"),
                        "-o", str(tmp_path / "prof.npy")], capsys)
    assert code == 0 and f"to {tmp_path / 'prof.npy'}" in out
    np.testing.assert_allclose(np.load(tmp_path / "prof.npy"), np.load(tmp_path / "infer.npy"), rtol=1e-5, atol=1e-5)
    code, out, _ = run(["profile", MODEL, "-n", "1", "-b", "numpy", "--report", str(tmp_path / "rep2"),
                        "--output-dir", str(tmp_path / "outs")], capsys)
    assert code == 0 and sorted(p.suffix for p in (tmp_path / "outs").iterdir()) == [".npy"]
    code, _, err = run(["profile", MODEL, "-n", "1", "-b", "numpy", "--report", str(tmp_path / "rep3"),
                        "-o", str(tmp_path / "x.txt")], capsys)
    assert code == 2 and "unsupported output file type" in err
    assert not (tmp_path / "rep3.json").exists() and not (tmp_path / "x.txt").exists()


def test_a_model_file_where_the_command_goes_opens_the_designer_on_it(monkeypatch, tmp_path, capsys):
    """``layerlab model.onnx`` and ``layerlab --plugins DIR model.lnet`` are ``layerlab gui FILE``; an unknown
    command is still refused and ``--help`` still lists the commands."""
    from app import gui

    seen = []
    monkeypatch.setattr(gui, "run", lambda path=None, argv=None, plugins=None: seen.append((path, plugins)) or 0)
    onnx_file, lnet_file = tmp_path / "model.onnx", tmp_path / "Model.LNET"
    onnx_file.write_bytes(b"")
    lnet_file.write_text("")
    assert main([str(onnx_file)]) == 0
    assert main(["--plugins", str(tmp_path), str(lnet_file)]) == 0
    assert seen == [(str(onnx_file), []), (str(lnet_file), [str(tmp_path)])]
    assert main([str(tmp_path / "missing.lnet")]) == 2
    assert "missing.lnet: no such model file" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2 and "frobnicate" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0 and "infer" in capsys.readouterr().out
