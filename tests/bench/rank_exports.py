"""Whole networks with tensors of any rank through every exporter: torchvision's convnext_tiny and shufflenet_v2_x1_0
(seeded random weights, 1x3x224x224, exported by torch.onnx.export at opset 17 with the TorchScript exporter) are
imported, then exported again to ONNX, to a PyTorch module and to a standalone project; each export runs (ONNX
Runtime, the module, the project's command-line sample in a clean process) and is compared with ONNX Runtime on the
original file. Not collected by the test run (a minute or two per network on a CPU).

    python -m tests.bench.rank_exports [NAME ...] [--out DIR]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from engine.export import OnnxOptions, ProjectOptions, TorchOptions, export_onnx, export_project, export_torch
from engine.importers.onnx import import_onnx
from engine.plugins import default_registry
from tests.bench.bench_zoo import import_torchvision

NETWORKS = ("convnext_tiny", "shufflenet_v2_x1_0")
TOLERANCE = 1e-4  # relative L2 against ONNX Runtime on the original file


def rel_l2(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(got.reshape(ref.shape) - ref) / np.linalg.norm(ref))


def export_torchvision(name: str, path: Path) -> None:
    import torch

    torch.manual_seed(0)
    model = getattr(import_torchvision().models, name)(weights=None).eval()
    torch.onnx.export(model, (torch.rand(1, 3, 224, 224),), str(path), input_names=["input"], output_names=["output"],
                      opset_version=17, dynamo=False)


def torch_module(path: Path, name: str):  # noqa: ANN201 - a torch.nn.Module (torch is imported lazily)
    import torch

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    cls = next(v for v in vars(module).values()
               if isinstance(v, type) and issubclass(v, torch.nn.Module) and hasattr(v, "from_weights"))
    return cls.from_weights()


def check(name: str, out: Path) -> dict[str, float]:
    """Relative L2 errors of each export of network ``name`` (files under ``out``)."""
    import torch

    reg = default_registry()
    original = out / f"{name}.onnx"
    export_torchvision(name, original)
    x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    ref = ort.InferenceSession(str(original), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    result = import_onnx(original, registry=reg)
    inp, outp = result.input_layers["input"], result.output_layers["output"]
    errors: dict[str, float] = {}
    export_onnx(result.model, reg, out / "back.onnx", OnnxOptions(), result.weights_source(), fusing="off")
    back = ort.InferenceSession(str(out / "back.onnx"), providers=["CPUExecutionProvider"])
    errors["onnx"] = rel_l2(back.run(None, {inp: x})[0], ref)
    done = export_torch(result.model, reg, out / "torch", TorchOptions(), result.weights_source(), fusing="off")
    with torch.no_grad():
        errors["torch"] = rel_l2(torch_module(done.path, f"exported_{name}")(torch.from_numpy(x)).numpy(), ref)
    export_project(result.model, reg, out / "project", ProjectOptions(package="net"), result.weights_source())
    np.save(out / "x.npy", x)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=str(out / "project"))
    run = subprocess.run([sys.executable, "-m", "net", "-i", f"{inp}={out / 'x.npy'}", "-o", f"{outp}={out / 'y.npy'}",
                          "-b", "numpy"], cwd=out, env=env, capture_output=True, text=True, timeout=1200)
    if run.returncode != 0:
        raise SystemExit(f"{name}: the project's sample failed: {run.stderr.strip()}")
    errors["project"] = rel_l2(np.load(out / "y.npy"), ref)
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("networks", nargs="*", default=list(NETWORKS))
    parser.add_argument("--out", help="folder for the files (default: a temporary one)")
    args = parser.parse_args(argv)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.networks:
            out = Path(args.out or tmp) / name
            out.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            errors = check(name, out)
            ok = all(e < TOLERANCE for e in errors.values())
            failed |= not ok
            print(f"{name}: " + ", ".join(f"{k} {v:.2e}" for k, v in errors.items())
                  + f" ({'agrees' if ok else 'DISAGREES'}, {time.perf_counter() - t0:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
