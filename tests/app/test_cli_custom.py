"""The command line and custom layer code: running needs --trust-custom-code (refused: exit status 2 naming
the custom layers, nothing written, the code not run); reading the model (check, export) never runs it."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from engine import modelfile
from plugins.standard.space_to_depth import space_to_depth
from tests.cli_helpers import run_cli as run
from tests.engine.custom_cases import (
    net_with,
    no_consent,  # noqa: F401 - autouse fixture: no consent before/after each test
    s2d,
    softsign,
)


@pytest.fixture
def model_file(tmp_path: Path) -> tuple[Path, Path]:
    """A model whose custom layers' Python code also writes a marker file when it is run."""
    marker = tmp_path / "code_ran"
    d = s2d()
    spy = replace(d, python=f"open({str(marker)!r}, 'a').write('x')\n" + d.python)
    model = net_with(spy, "1x2x4x6")
    model.set_custom_layer("softsign", softsign().to_xml())  # defined but unused: not named
    path = tmp_path / "custom.lnet"
    modelfile.save(model, path)
    return path, marker


@pytest.mark.parametrize("command", [["infer", "-n", "1"], ["profile", "-n", "1"], ["drift"]])
def test_running_without_consent_stops_naming_the_custom_layers(command: list[str], model_file, tmp_path, capsys):
    path, marker = model_file
    code, out, err = run([command[0], str(path), *command[1:], "--output-dir", str(tmp_path / "o")]
                         if command[0] == "infer" else [command[0], str(path), *command[1:]], capsys)
    assert code == 2
    assert err.strip() == (f"layerlab: error: {path}: the model carries code in its custom layers (s2d), which runs only "
                           "if you trust the file: add --trust-custom-code to run it")
    assert not marker.exists() and not (tmp_path / "o").exists() and out == ""


def test_running_with_consent(model_file, tmp_path, capsys):
    path, marker = model_file
    x = np.random.default_rng(0).random((1, 2, 4, 6), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    code, out, err = run(["infer", str(path), "-i", str(tmp_path / "x.npy"), "-n", "2", "-b", "numpy",
                          "--output-dir", str(tmp_path / "o"), "--trust-custom-code"], capsys)
    assert code == 0, err
    assert "running the code of custom layers s2d (--trust-custom-code)" in err
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "output.npy"), space_to_depth(x, 2, "DCR"))
    assert marker.exists()


def test_checking_and_exporting_never_run_the_code(model_file, tmp_path, capsys):
    path, marker = model_file
    code, out, err = run(["check", str(path)], capsys)
    assert code == 0 and "0 error(s)" in out, err
    pytest.importorskip("onnx")
    code, out, err = run(["export", "onnx", str(path), "-o", str(tmp_path / "m.onnx")], capsys)
    assert code == 0, err
    assert not marker.exists()


def test_profile_with_consent_reports_the_custom_layer(model_file, tmp_path, capsys):
    import json

    path, _ = model_file
    code, out, err = run(["profile", str(path), "-n", "2", "-b", "numpy", "--report", str(tmp_path / "rep"),
                          "--trust-custom-code"], capsys)
    assert code == 0, err
    layers = {x["name"]: x for x in json.loads((tmp_path / "rep.json").read_text())["layers"]}
    assert layers["custom"]["type"] == "custom:s2d" and layers["custom"]["output_dims"] == "1x8x2x3"
