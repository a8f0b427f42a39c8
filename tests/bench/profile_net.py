"""Per-layer profile of a reference network: python -m tests.bench.profile_net unet --device gpu"""
from __future__ import annotations

import argparse

from engine import report
from engine.backends import get_backend
from engine.network import Network
from engine.plugins import default_registry
from engine.profiling import profile
from engine.tensor import TensorFormat
from tests.bench.bench_networks import CPU_SIZES, GPU_SIZES
from tests.bench.networks import NETWORKS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("net", choices=list(NETWORKS))
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--format", default=None)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--batch", type=int, default=0, help="batch size (default: the benchmark's)")
    a = ap.parse_args()
    backend = get_backend("cupy" if a.device == "gpu" else "numpy", notice=None)
    fmt = TensorFormat.parse(a.format or ("fp16 nhwc" if a.device == "gpu" else "fp32 nchw"))
    dims = (GPU_SIZES if a.device == "gpu" else CPU_SIZES)[a.net]
    if a.batch:
        dims = type(dims)(a.batch, *tuple(dims)[1:])
    reg = default_registry()
    net = Network(NETWORKS[a.net](dims), reg, backend, fmt)
    res = profile(net, iterations=10, warmup=2)
    doc = report.build_report(res, model_name=a.net, model_version="1", model_path=None, backend=backend.name,
                              device=backend.device_name, fmt=str(fmt), iterations=10, warmup=2)
    print(report.summary(doc))
    print(report.layer_table(doc, a.top))


if __name__ == "__main__":
    main()
