"""Standalone project export: the package runs outside this repository with only what it holds (checked
module by module), and its command-line sample gives the same outputs as `layerlab infer`."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from engine.export import ExportError, ProjectOptions, export_project
from engine.modelfile import load
from engine.plugins import default_registry
from engine.weights import RandomWeights
from resources import SAMPLES

ROOT = Path(__file__).resolve().parents[3]
REGISTRY = default_registry()
MODEL = SAMPLES / "denoiser.lnet"

# runs the exported sample with only the project folder on the path, then lists modules loaded from the repo
DRIVER = textwrap.dedent("""
    import runpy, sys
    from pathlib import Path
    root, package, args = Path(sys.argv[1]).resolve(), sys.argv[2], sys.argv[3:]
    sys.argv = [package, *args]
    try:
        runpy.run_module(package, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    env = Path(sys.prefix).resolve()  # a virtual environment may live inside the repository (CI's .venv)
    leaked = sorted(name for name, m in list(sys.modules.items())
                    if getattr(m, "__file__", None) and Path(m.__file__).resolve().is_relative_to(root)
                    and not Path(m.__file__).resolve().is_relative_to(env))
    print("LEAKED:", leaked)
    import engine
    print("ENGINE:", Path(engine.__file__).resolve())
    raise SystemExit(code)
""")


def clean_env(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LAYERLAB"))}
    env["PYTHONPATH"] = str(project)
    # the vendored engine's CPU kernels were never compiled: without this, each generated project would start
    # compiling them in the background; its plain NumPy path agrees with layerlab's kernels to float32 rounding
    env["LAYERLAB_CPU_KERNELS"] = "off"
    return env


def run_sample(project: Path, package: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", DRIVER, str(ROOT), package, *args], cwd=cwd, env=clean_env(project),
                          capture_output=True, text=True, timeout=300)


def layerlab_infer(args: list[str]) -> None:
    import io

    from app.cli import main

    assert main(["infer", *args], out=io.StringIO()) == 0


@pytest.fixture(scope="module")
def sample_project(tmp_path_factory):
    out = tmp_path_factory.mktemp("project")
    result = export_project(load(MODEL, REGISTRY), REGISTRY, out, ProjectOptions(builder="build_denoiser"))
    return out, result


def test_project_layout(sample_project):
    out, result = sample_project
    pkg = out / "denoiser"
    assert {p.name for p in pkg.iterdir()} >= {"__init__.py", "network.py", "__main__.py", "weights", "_vendor"}
    assert (out / "pyproject.toml").is_file() and (out / "README.md").is_file()
    assert sorted(p.name for p in (pkg / "weights").iterdir()) == sorted(
        f"{layer}_{w}.npy" for layer in ("conv1", "conv2", "conv3", "residual") for w in ("weights", "bias"))
    assert (pkg / "_vendor" / "engine" / "network.py").is_file()
    assert (pkg / "_vendor" / "plugins" / "standard" / "convolution.py").is_file()
    assert (pkg / "_vendor" / "plugins" / "activations" / "relu.py").is_file()
    assert not (pkg / "_vendor" / "plugins" / "analysis").exists()  # only the collections it uses
    assert not list(pkg.rglob("__pycache__"))
    network = (pkg / "network.py").read_text()
    assert "def build_denoiser(" in network and "m.add_layer('convolution', 'conv1'" in network
    pyproject = (out / "pyproject.toml").read_text()
    for dep in ("numpy", "defusedxml", "opencv-python-headless"):
        assert f'"{dep}>=' in pyproject
    assert 'denoiser = "denoiser.__main__:main"' in pyproject
    assert "build_denoiser()" in result.summary


def test_sample_runs_outside_the_repository_like_layerlab_infer(sample_project, tmp_path):
    out, _ = sample_project
    x = np.random.default_rng(1).random((1, 3, 40, 56), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    res = run_sample(out, "denoiser", ["--input", "input=x.npy", "--output", "output=y.npy", "-b", "numpy", "-n", "2"],
                     tmp_path)
    assert res.returncode == 0, res.stderr + res.stdout
    assert "LEAKED: []" in res.stdout, res.stdout
    assert f"ENGINE: {out.resolve() / 'denoiser' / '_vendor' / 'engine' / '__init__.py'}" in res.stdout
    assert "average time per iteration" in res.stdout and "over 2 iteration(s)" in res.stdout
    layerlab_infer([str(MODEL), "-i", f"input={tmp_path / 'x.npy'}", "-o", f"output={tmp_path / 'ref.npy'}",
                    "-b", "numpy", "-n", "1"])
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), np.load(tmp_path / "ref.npy"), rtol=1e-5, atol=1e-6)


def test_sample_formats_images_and_errors(sample_project, tmp_path):
    out, _ = sample_project
    res = run_sample(out, "denoiser", ["-i", str(SAMPLES / "sample.png"), "-o", "y.png", "-f", "fp16", "nhwc",
                                       "-b", "numpy"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "format fp16|nhwc" in res.stdout and (tmp_path / "y.png").is_file()
    layerlab_infer([str(MODEL), "-i", str(SAMPLES / "sample.png"), "-o", f"output={tmp_path / 'ref.npy'}",
                    "-f", "fp16", "nhwc", "-b", "numpy", "-n", "1"])
    res = run_sample(out, "denoiser", ["-o", "y.npy", "-f", "fp16", "nhwc", "-b", "numpy"], tmp_path)
    assert res.returncode == 0, res.stderr
    res = run_sample(out, "denoiser", ["--output", "nothing=y.npy", "-b", "numpy"], tmp_path)
    assert res.returncode == 2 and "no output layer named 'nothing'" in res.stderr


def test_options_weights_and_names(tmp_path):
    model = load(MODEL, REGISTRY)
    result = export_project(model, REGISTRY, tmp_path / "p", ProjectOptions(builder="make", package="dn", sample=False,
                                                                             pyproject=False), weights=RandomWeights(5))
    pkg = tmp_path / "p" / "dn"
    assert not (pkg / "__main__.py").exists() and not (tmp_path / "p" / "pyproject.toml").exists()
    assert result.path == tmp_path / "p"
    code = ("import numpy as np\nfrom dn import make\nnet = make(backend='numpy')\n"
            "np.save('y.npy', net.infer({'input': np.load('x.npy')})['output'])\n")
    x = np.random.default_rng(2).random((1, 3, 16, 16), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=clean_env(tmp_path / "p"), capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    from engine.run import RunSpec, open_network

    want = open_network(model, RunSpec(backend="numpy"), REGISTRY, weights=RandomWeights(5)).infer({"input": x})["output"]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-5, atol=1e-6)
    # re-exporting replaces the package it wrote; a folder it did not write is refused
    export_project(model, REGISTRY, tmp_path / "p", ProjectOptions(builder="make", package="dn"))
    (tmp_path / "q" / "denoiser").mkdir(parents=True)
    with pytest.raises(ExportError, match="was not written by a LayerLab project export"):
        export_project(model, REGISTRY, tmp_path / "q", ProjectOptions(builder="make"))
    with pytest.raises(ExportError, match=r"builder name '2fast' is not a Python identifier"):
        export_project(model, REGISTRY, tmp_path / "r", ProjectOptions(builder="2fast"))


@pytest.mark.slow
def test_pip_install_into_a_fresh_virtual_environment(sample_project, tmp_path):
    """The project installs with pip into an empty virtual environment (numpy, defusedxml and
    opencv-python-headless come from the package index or pip's cache) and its console script runs."""
    out, _ = sample_project
    venv = tmp_path / "venv"
    t0 = time.perf_counter()
    # no pip of its own (this one installs into it) and no byte-compiling: the same install, half the time
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    res = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-compile", str(out)],
                         capture_output=True, text=True, timeout=900,
                         cwd=tmp_path, env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")})
    if res.returncode != 0 and any(s in res.stderr for s in ("Could not find a version", "NewConnectionError",
                                                              "Temporary failure in name resolution")):
        pytest.skip(f"no package index reachable: {res.stderr.strip().splitlines()[-1]}")
    assert res.returncode == 0, res.stderr
    x = np.random.default_rng(3).random((1, 3, 24, 32), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    run = subprocess.run([str(venv / "bin" / "denoiser"), "-i", "x.npy", "-o", "y.npy", "-b", "numpy"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, env={"PATH": os.environ.get("PATH", "")})
    assert run.returncode == 0, run.stderr
    layerlab_infer([str(MODEL), "-i", f"{tmp_path / 'x.npy'}", "-o", f"output={tmp_path / 'ref.npy'}", "-b", "numpy",
                    "-n", "1"])
    # the fresh environment has no Numba, so the project uses im2col + BLAS where LayerLab used Winograd
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), np.load(tmp_path / "ref.npy"), rtol=1e-5, atol=1e-6)
    print(f"fresh venv + pip install + run: {time.perf_counter() - t0:.1f} s")
