"""``-v``/``-vv``/``-q`` of the command line: how much of the logger tree is printed (no Qt needed)."""
from __future__ import annotations

import io

from app.cli import main
from app.cli.common import verbosity
from engine.model import Model
from engine.modelfile import save


def run(args, capsys):
    code = main(args, out=io.StringIO())
    return code, capsys.readouterr().err


def model_with_unknown_param(tmp_path):
    m = Model("m")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "c", params={"num_output_channels": "4", "colour": "blue"}, inputs=["inp"])
    m.add_layer("output", "out", inputs=["c"])
    save(m, tmp_path / "m.lnet")
    return str(tmp_path / "m.lnet")


def test_verbosity_counts_flags_anywhere():
    assert verbosity(["infer", "m.lnet"]) == 0
    assert verbosity(["-v", "infer", "m.lnet"]) == 1 and verbosity(["infer", "-vv", "m"]) == 2
    assert verbosity(["--verbose", "infer", "-v", "m"]) == 2 and verbosity(["-q", "check", "m"]) == -1
    assert verbosity(["-vvv"]) == 2 and verbosity(["-i", "-v.png"]) == 0


def test_default_prints_warnings_v_info_vv_debug_q_errors_only(tmp_path, capsys):
    path = model_with_unknown_param(tmp_path)
    args = ["infer", path, "-b", "numpy", "-n", "1", "--warmup", "0"]
    code, err = run(args, capsys)
    assert code == 0 and "layerlab: warning:" in err and "'colour'" in err and "built network" not in err
    code, err = run([*args, "-v"], capsys)
    assert code == 0 and "[engine.network] built network m: 3 layers" in err and "[engine.run] running m" in err
    assert "[engine.plugins] loaded collection standard" in err and "layer c: convolution" not in err
    code, err = run(["-vv", *args], capsys)
    assert code == 0 and "[engine.network] layer c: convolution" in err
    code, err = run(["-q", *args], capsys)
    assert code == 0 and err == ""


def test_quiet_still_prints_errors(tmp_path, capsys):
    code, err = run(["-q", "check", str(tmp_path / "missing.lnet")], capsys)
    assert code == 2 and "layerlab: error:" in err and "missing.lnet" in err
