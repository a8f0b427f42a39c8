"""`layerlab drift`: the subcommand built from app/cli/drift.py, run end to end on model files."""
from __future__ import annotations

import argparse
import io
import json

import numpy as np
import pytest

from app.cli import CliError, build_parser
from app.cli.drift import run as cmd_drift
from engine.modelfile import save
from resources import SAMPLES
from tests.harness import drift_model


def parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(["drift", *argv])


def drift(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    return cmd_drift(parse(argv), out), out.getvalue()


@pytest.fixture
def planted(tmp_path):
    """c2's output is multiplied by 1e5 in 'amp': beyond the fp16 range."""
    path = tmp_path / "planted.lnet"
    save(drift_model(name="planted"), path)
    x = np.random.default_rng(1).uniform(8, 16, (1, 2, 6, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    return str(path), str(tmp_path / "x.npy")


def test_drift_names_the_planted_layer_and_writes_json(planted, tmp_path):
    model, x = planted
    code, out = drift([model, "--input", f"inp={x}", "--json", str(tmp_path / "d.json")])
    assert code == 1
    assert "precision drift: numpy:fp16|nchw against numpy:fp32|nchw (threshold 0.01)" in out
    assert "first layer over the threshold: amp (linear_blend" in out
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["first_over"] == "amp" and [l["name"] for l in doc["layers"]] == ["inp", "c1", "c2", "amp", "out"]
    assert doc["layers"][3]["rel_error"] == "inf" and doc["layers"][1]["rel_error"] < 0.01


def test_drift_on_sample_model_with_image_passes_a_loose_threshold():
    code, out = drift([str(SAMPLES / "denoiser.lnet"), "-i", str(SAMPLES / "sample.png"), "--threshold", "0.05",
                       "--candidate", "fp16 nhwc"])
    assert code == 0, out
    assert "no layer exceeds the threshold" in out and "numpy:fp16|nhwc" in out


def test_drift_errors_are_named(planted):
    model, x = planted
    with pytest.raises(CliError, match="--threshold must be a positive number"):
        drift([model, "--threshold", "0"])
    from engine.errors import LayerLabError

    with pytest.raises(LayerLabError, match="no input layer named 'nope'"):
        drift([model, "--input", f"nope={x}"])
    with pytest.raises(LayerLabError, match="unknown tensor format"):
        drift([model, "--candidate", "fp8"])


# ---- per-layer formats and the mixed precision search ---------------------------------------------------
def test_drift_with_a_pinned_layer_passes(planted):
    model, x = planted
    code, out = drift([model, "--input", f"inp={x}", "--layer-format", "amp=fp32"])
    assert code == 0, out
    assert "no layer exceeds the threshold" in out and "__to_" not in out  # conversions are not compared


def test_drift_fix_prints_the_pins_errors_and_times_and_writes_them(planted):
    from engine.modelfile import load

    model, x = planted
    code, out = drift([model, "--input", f"inp={x}", "--fix", "--iterations", "2"])
    assert code == 0, out
    assert "layers pinned to fp32: amp" in out
    assert "out" in out and "inf" in out  # the output's error before
    for label in ("mixed", "all fp16", "all fp32"):
        assert f"  {label}" in out
    assert load(model).layers["amp"].format == ""  # without --write the model is unchanged
    code, out = drift([model, "--input", f"inp={x}", "--fix", "--write", "--iterations", "1"])
    assert code == 0 and f"wrote the pins to {model}" in out
    saved = load(model)
    assert saved.layers["amp"].format == "fp32"
    assert [n for n, s in saved.layers.items() if s.format] == ["amp"]
    code, out = drift([model, "--input", f"inp={x}"])  # the model's own pin now holds
    assert code == 0, out


def test_drift_fix_flag_errors(planted):
    model, x = planted
    with pytest.raises(CliError, match="--write stores the pins --fix finds"):
        drift([model, "--write"])
    with pytest.raises(CliError, match="leave out --layer-format"):
        drift([model, "--fix", "--layer-format", "amp=fp32"])
    from engine.errors import LayerLabError

    with pytest.raises(LayerLabError, match="expected a precision"):
        drift([model, "--layer-format", "amp=fp8"])
    with pytest.raises(LayerLabError, match="no layer 'nope'"):
        drift([model, "--layer-format", "nope=fp32"])


def test_drift_fix_write_failure_is_a_named_error_and_leaves_the_file(planted, monkeypatch):
    import os

    model, x = planted
    before = open(model, "rb").read()

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)  # the atomic rename fails, as on a read-only folder
    with pytest.raises(CliError, match=f"cannot write the pins to {model}: (cannot write the model file: )?Permission denied"):
        drift([model, "--input", f"inp={x}", "--fix", "--write", "-n", "1"])
    monkeypatch.undo()
    assert open(model, "rb").read() == before
