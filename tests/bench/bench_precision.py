"""Mixed precision benchmark: resnet18 and unet with the pins ``engine.precision.fix_precision`` finds against
all-fp16 and all-fp32 — the time per inference and every output's relative error against the fp32 reference.
Not collected by the test run.

    python -m tests.bench.bench_precision --device gpu              # CuPy, fp16 NHWC candidate, GPU sizes
    python -m tests.bench.bench_precision --device cpu              # NumPy, fp16 NCHW candidate, small sizes
    python -m tests.bench.bench_precision --device cpu --nets unet --threshold 5e-3 --json out.json
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.analysis import Variant
from engine.plugins import default_registry
from engine.precision import fix_precision, time_mixed
from engine.run import RunSpec
from engine.tensor import Dims, TensorFormat
from engine.weights import RandomWeights
from tests.bench.networks import NETWORKS
from tests.bench.store import write_json

CPU_SIZES = {"unet": Dims(1, 3, 128, 128), "resnet18": Dims(1, 3, 112, 112)}
GPU_SIZES = {"unet": Dims(1, 3, 512, 512), "resnet18": Dims(1, 3, 224, 224)}


def bench(name: str, device: str, threshold: float, iterations: int) -> dict[str, object]:
    """One network: the search, then the three timings; returns the row of the results table."""
    registry = default_registry()
    dims = (GPU_SIZES if device == "gpu" else CPU_SIZES)[name]
    model = NETWORKS[name](dims)
    backend = "cupy" if device == "gpu" else "numpy"
    layout = "nhwc" if device == "gpu" else "nchw"
    x = np.random.default_rng(0).random(tuple(dims), dtype=np.float32)
    inputs = {next(n for n, s in model.layers.items() if s.type == "input"): x}
    weights = RandomWeights(0)
    t0 = time.perf_counter()
    fix = fix_precision(model, registry, inputs, candidate=Variant(backend, TensorFormat.parse(f"fp16 {layout}")),
                        weights=weights, threshold=threshold)
    search_s = time.perf_counter() - t0
    base = RunSpec(backend=backend, format=f"fp16 {layout}", iterations=iterations, warmup=3)
    timed = time_mixed(model, registry, fix.pins, base, weights=weights)
    times = {t.label: t.ms for t in timed}
    return {"network": name, "dims": str(dims), "backend": backend, "threshold": threshold, "pins": fix.pins,
            "satisfied": fix.satisfied, "search_runs": fix.evaluations, "search_s": round(search_s, 2),
            "error_all_fp16": fix.before.max_output_error, "error_mixed": fix.after.max_output_error,
            "ms_mixed": times["mixed"], "ms_all_fp16": times["all fp16"], "ms_all_fp32": times["all fp32"],
            "graphs": {t.label: t.graph for t in timed}}


def parser(doc: str | None, iterations: int) -> argparse.ArgumentParser:
    """The options of the fp16 benchmarks of whole networks: device, networks, iterations and the JSON output."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--nets", nargs="+", default=["resnet18", "unet"], choices=sorted(GPU_SIZES))
    ap.add_argument("--iterations", type=int, default=iterations)
    ap.add_argument("--json", metavar="PATH")
    return ap


def report(rows: list[dict[str, Any]], header: str, line: Callable[[dict[str, Any]], str], path: str | None) -> int:
    """Print the results table (``header``, then ``line(row)`` for each row) and write the rows to ``path``."""
    print(header)
    for r in rows:
        print(line(r))
    write_json(path, rows)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, iterations=20)
    ap.add_argument("--threshold", type=float, default=1e-2)
    args = ap.parse_args(argv)
    rows = [bench(n, args.device, args.threshold, args.iterations) for n in args.nets]
    return report(rows, f"{'network':<9} {'pins':>4} {'err fp16':>10} {'err mixed':>10} {'ms mixed':>9} {'ms fp16':>9} "
                  f"{'ms fp32':>9}  pinned layers",
                  lambda r: f"{r['network']:<9} {len(r['pins']):>4} {r['error_all_fp16']:>10.3e} "
                  f"{r['error_mixed']:>10.3e} {r['ms_mixed']:>9.3f} {r['ms_all_fp16']:>9.3f} {r['ms_all_fp32']:>9.3f}  "
                  f"{', '.join(r['pins']) or '-'}\n{'':<9} CUDA graphs: {r['graphs']}", args.json)


if __name__ == "__main__":
    sys.exit(main())
