"""Network layers from the command line: check names the missing file, infer runs through (no Qt needed)."""
from __future__ import annotations

import io

from app.cli import main
from engine.model import Model
from engine.modelfile import save
from engine.netlayers import network_type


def models(tmp_path, ref="block.lnet"):
    block = Model("block")
    block.add_layer("input", "x", params={"dimensions": "1x3x8x8"})
    block.add_layer("convolution", "c", params={"num_output_channels": "2"}, inputs=["x"])
    block.add_layer("output", "y", inputs=["c"])
    save(block, tmp_path / "block.lnet")
    outer = Model("outer")
    outer.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    outer.add_layer(network_type(ref), "net", inputs=["inp"])
    outer.add_layer("output", "out", inputs=["net"])
    save(outer, tmp_path / "outer.lnet")
    return str(tmp_path / "outer.lnet")


def test_check_and_infer_through_a_network_layer(tmp_path, capsys):
    path = models(tmp_path)
    assert main(["check", path], out=io.StringIO()) == 0
    out = io.StringIO()
    assert main(["-v", "infer", path, "-b", "numpy", "-n", "1", "--warmup", "0", "--output-dir", str(tmp_path)],
                out=out) == 0
    err = capsys.readouterr().err
    assert "network layer net: expanded" in err and "block.lnet" in err
    assert (tmp_path / "out.npy").is_file()


def test_a_missing_referenced_file_is_named(tmp_path, capsys):
    path = models(tmp_path, ref="gone/block.lnet")
    out = io.StringIO()
    assert main(["check", path], out=out) == 1
    assert "net: network file gone/block.lnet not found" in out.getvalue()
    assert main(["infer", path, "-b", "numpy", "-n", "1"], out=io.StringIO()) == 2
    assert "network file gone/block.lnet not found" in capsys.readouterr().err
