"""``--device N``: the GPU of the cupy backend, from every command that runs a network, the Network Settings and the
generated project. The error paths run everywhere; device 0 runs on the GPU machine (``gpu`` marker)."""
from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app import run_config
from app.cli import build_parser, main
from app.cli.common import spec_from_args
from app.services.commandline import command_line
from engine.backends import cupy_usable, get_backend
from engine.errors import BackendError
from engine.export import ProjectOptions, export_project
from engine.model import Model
from engine.run import RunSpec, RunSpecError, open_backend, open_network
from resources import SAMPLES

MODEL = str(SAMPLES / "denoiser.lnet")
ROOT = Path(__file__).resolve().parents[2]


def run(args, capsys):
    code = main(args, out=io.StringIO())
    return code, capsys.readouterr().err


def test_a_negative_or_cpu_device_is_a_clear_error_on_every_run_command(capsys):
    for command in (["infer", MODEL], ["profile", MODEL, "--report", "/nonexistent/never"]):
        code, err = run([*command, "--device", "-1", "-n", "1"], capsys)
        assert code == 2 and "device -1: expected a GPU ordinal, 0 or more" in err
        code, err = run([*command, "--device", "0", "-b", "numpy", "-n", "1"], capsys)
        assert code == 2 and "device 0: the numpy backend runs on the CPU" in err
    code, err = run(["drift", MODEL, "--device", "0"], capsys)
    assert code == 2 and "device 0: both runs are on the numpy backend" in err
    code, err = run(["infer", MODEL, "--device", "one"], capsys)
    assert code == 2 and "--device" in err


@pytest.mark.skipif(cupy_usable(), reason="the no-GPU error path")
def test_a_device_where_no_gpu_is_usable_is_an_error_not_a_fallback(capsys):
    code, err = run(["infer", MODEL, "--device", "0", "-n", "1"], capsys)
    assert code == 2 and "device 0 cannot be used here" in err
    code, err = run(["drift", MODEL, "--candidate", "cupy:fp16", "--device", "1"], capsys)
    assert code == 2 and "cannot be used here" in err
    with pytest.raises(BackendError, match="device 3 cannot be used here"):
        open_backend(RunSpec(device=3))


def test_run_spec_checks_the_device():
    assert RunSpec(device=2).check().device == 2
    for bad in (-1, True, "0"):
        with pytest.raises(RunSpecError, match="expected a GPU ordinal"):
            RunSpec(device=bad).check()  # type: ignore[arg-type]
    with pytest.raises(RunSpecError, match="numpy backend"):
        RunSpec(backend="numpy", device=0).check()
    with pytest.raises(BackendError, match="expected a GPU ordinal"):
        get_backend("cupy", device=-2)


def test_command_line_and_network_setting_carry_the_device():
    spec = RunSpec(backend="cupy", device=1)
    argv = shlex.split(command_line(spec, "m.lnet"))
    assert argv[-2:] == ["--device", "1"]
    args = build_parser().parse_args(argv[1:])
    assert spec_from_args(args, args.command == "profile") == spec
    model = Model("m")
    assert run_config.from_model(model).device is None
    model.settings["device"] = "1"
    cfg = run_config.from_model(model)
    assert cfg.device == 1 and "--device 1" in run_config.command_line(cfg, "m.lnet")
    model.settings["device"] = "first"
    with pytest.raises(run_config.SettingsError, match="device"):
        run_config.from_model(model)


def test_the_generated_project_takes_device(tmp_path, registry):
    from engine.modelfile import load

    export_project(load(MODEL, registry), registry, tmp_path, ProjectOptions())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LAYERLAB"))}
    env["PYTHONPATH"] = str(tmp_path)
    res = subprocess.run([sys.executable, "-m", "denoiser", "-b", "numpy", "--device", "0"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "device 0: the numpy backend runs on the CPU" in res.stderr, res.stderr
    assert "device: int | None = None" in (tmp_path / "denoiser" / "network.py").read_text()


@pytest.mark.gpu
def test_device_zero_runs_on_gpu_zero_and_out_of_range_names_the_gpus(tmp_path, capsys):
    import cupy

    backend = open_backend(RunSpec(backend="cupy", device=0))
    assert backend.device.id == 0
    code, err = run(["infer", MODEL, "-b", "cupy", "--device", "0", "-n", "2", "-o", f"output={tmp_path}/d0.npy"],
                    capsys)
    assert code == 0, err
    code, err = run(["infer", MODEL, "-b", "cupy", "-n", "2", "-o", f"output={tmp_path}/d.npy"], capsys)
    np.testing.assert_array_equal(np.load(tmp_path / "d0.npy"), np.load(tmp_path / "d.npy"))
    count = cupy.cuda.runtime.getDeviceCount()
    code, err = run(["infer", MODEL, "-b", "cupy", "--device", str(count), "-n", "1"], capsys)
    assert code == 2 and f"device {count} is out of range: this machine has {count} CUDA GPU(s) (0: " in err


@pytest.mark.gpu
def test_a_second_gpu_holds_the_network_and_gives_the_same_outputs(registry):
    import cupy

    from engine.modelfile import load

    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("one GPU: device 1 is the out-of-range error path")
    model = load(MODEL, registry)
    outs = {}
    for device in (0, 1):
        net = open_network(model, RunSpec(backend="cupy", format="fp32 nchw", device=device), registry)
        x = np.random.default_rng(0).random((1, 3, 96, 128), dtype=np.float32)
        outs[device] = net.infer({"input": x})["output"]
        weights = next(w for n in net.order for w in net.layer(n).weights.values())
        assert weights.device.id == device and net.backend.device.id == device
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)
