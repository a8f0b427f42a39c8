"""The designer and the command line run through the same engine path (engine.run): for the same model and
settings they use the same default tensor format and give the same outputs, and the command line the designer
shows means exactly the designer's settings."""
from __future__ import annotations

import io
import shlex
import shutil
from dataclasses import replace

import numpy as np
import pytest

from app import run_config
from app.cli import build_parser
from app.cli import main as cli_main
from app.cli.common import spec_from_args
from app.services.commandline import command_line
from engine import modelfile
from engine.model import Model
from engine.network import Network
from engine.run import RunSpec, load_inputs, open_network, tensor_format
from engine.weights import RandomWeights, save_weights
from resources import SAMPLES


@pytest.fixture
def model_file(tmp_path, registry):
    """The sample denoiser with a weights folder and an input image in its settings, on NumPy, profiling off."""
    path = tmp_path / "denoiser.lnet"
    shutil.copy(SAMPLES / "denoiser.lnet", path)
    shutil.copy(SAMPLES / "sample.png", tmp_path / "photo.png")
    net = Network(modelfile.load(path, registry), registry, weights=RandomWeights(11), fusing="off")
    net.run()
    save_weights(tmp_path / "weights", {n: {w: np.asarray(a) for w, a in net.layer(n).weights.items()} for n in net.order})
    model = modelfile.load(path, registry)
    for key, value in {"backend": "numpy", "weights": "weights", "input.input": "photo.png", "seed": "3",
                       "iterations": "2", "warmup": "0", "profiling": "off"}.items():
        model.set_setting(key, value)
    modelfile.save(model, path)
    return path


def test_designer_run_and_its_command_line_agree_on_format_and_outputs(qtbot, registry, model_file, tmp_path):
    from app.designer.worker import RunRequest, Worker

    model = modelfile.load(model_file, registry)
    cfg = run_config.from_model(model, str(model_file))
    assert cfg.format == "auto"  # the model does not set a format: the unified default
    worker = Worker()
    finished, failed = [], []
    worker.run_finished.connect(lambda _id, result: finished.append(result))
    worker.run_failed.connect(lambda _id, reason: failed.append(reason))
    worker.cmd_run(RunRequest(1, None, model.copy(), registry, cfg, tmp_path / "report", str(model_file)))
    assert not failed and len(finished) == 1, failed
    designer = worker.net.output("output")
    assert finished[0].format == str(tensor_format("auto", "numpy")) == "fp32|nhwc"

    line = run_config.command_line(cfg, str(model_file))
    argv = shlex.split(line)
    assert argv[:2] == ["layerlab", "infer"] and "--format" not in argv  # auto: no format flag, the same default
    out = io.StringIO()
    assert cli_main([*argv[1:], "-o", f"output={tmp_path / 'cli.npy'}"], out=out) == 0
    assert f"format {finished[0].format}" in out.getvalue()
    np.testing.assert_array_equal(np.load(tmp_path / "cli.npy"), designer)
    # the settings' weights folder was used: seed 3's random weights give another output
    random_weights = open_network(model, replace(cfg, weights=None), registry)
    load_inputs(random_weights, cfg).close()
    random_weights.run()
    assert not np.allclose(random_weights.output("output"), designer)


@pytest.mark.parametrize("spec", [
    RunSpec(),
    RunSpec(backend="numpy", format="fp16 nchw", iterations=3, warmup=0, weights="/w dir", seed=7,
            inputs=(("a", "/x y.png"), ("b", "b.npy")), input_layout="nhwc", fusing="off", profiling=False,
            plugins=("/plugins",)),
    RunSpec(backend="cupy", fusing="rules.txt", inputs=((None, "clip.mp4"),), tf32=True),
])
def test_command_line_round_trips_to_the_same_spec(spec):
    argv = shlex.split(command_line(spec, "m.lnet", "out/report"))
    assert argv[:2] == ["layerlab", "profile" if spec.profiling else "infer"]
    assert ("--report" in argv) == spec.profiling
    args = build_parser().parse_args(argv[1:])
    assert spec_from_args(args, args.command == "profile") == spec


def test_tf32_network_setting_reaches_the_run_spec_and_the_network(registry):
    """The model's ``tf32`` setting (Network Settings) becomes RunSpec.tf32, the network's and its command line's."""
    model = Model("m")
    model.add_layer("input", "input", params={"dimensions": "1x3x8x8"})
    model.add_layer("output", "output", inputs=["input"])
    assert run_config.from_model(model).tf32 is False
    model.settings["tf32"] = "on"
    cfg = run_config.from_model(model)
    assert cfg.tf32 is True and "--tf32" in run_config.command_line(cfg, "m.lnet")
    assert open_network(model, replace(cfg, backend="numpy"), registry).tf32 is True
    model.settings["tf32"] = "maybe"
    with pytest.raises(run_config.SettingsError, match="tf32"):
        run_config.from_model(model)
