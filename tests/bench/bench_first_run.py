"""The designer's first Run (F5) of an imported network on the CPU, phase by phase: import, building the network,
warm-up (the first inference, which loads or compiles the CPU kernels, and the warm-up iterations) and the timed
iterations, with the time Numba spent compiling and how many kernels it compiled. Not collected by the test run.

    python -m tests.bench.bench_first_run                       # resnet50 of the zoo cache, kernels compiled first
    python -m tests.bench.bench_first_run --cold                # an empty kernel cache (the first start after installing)
    python -m tests.bench.bench_first_run --model FILE.onnx --iterations 10 --warmup 1

Each measurement runs in a fresh process (``--cold``: with ``NUMBA_CACHE_DIR`` on an empty folder). The ONNX file
of resnet50 comes from ``tests.bench.bench_zoo`` (``~/.cache/layerlab/zoo``; run it once to export the file).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = Path(os.environ.get("LAYERLAB_ZOO_CACHE", "~/.cache/layerlab/zoo")).expanduser() / "resnet50_224.onnx"


def measure(model: str, iterations: int, warmup: int) -> dict[str, float]:
    """One first run in this process: seconds per phase, and Numba's compile count and seconds."""
    from numba.core import event

    compiled = {"n": 0, "s": 0.0}

    class _Compiles(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            self.t0 = time.perf_counter()

        def on_end(self, ev: event.Event) -> None:
            compiled["n"] += 1
            compiled["s"] += time.perf_counter() - self.t0

    event.register("numba:compile", _Compiles())
    from engine.importers import load_model_any
    from engine.plugins import default_registry
    from engine.run import RunSpec, open_network, run_timed

    t0 = time.perf_counter()
    registry = default_registry()
    loaded, weights = load_model_any(model, registry)
    t1 = time.perf_counter()
    spec = RunSpec(backend="numpy", iterations=iterations, warmup=warmup)
    net = open_network(loaded, spec, registry, weights=weights)  # type: ignore[arg-type]
    t2 = time.perf_counter()
    warm: list[float] = []
    result = run_timed(net, spec, progress=lambda i, n: warm.append(time.perf_counter()) if i == 1 else None)
    t3 = time.perf_counter()
    timed = sum(result.network_times_ms) / 1000
    return {"import_s": t1 - t0, "build_s": t2 - t1, "warmup_s": t3 - t2 - timed, "timed_s": timed,
            "ms_per_iteration": timed * 1000 / iterations, "kernels_compiled": compiled["n"],
            "compile_s": compiled["s"], "total_s": t3 - t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(DEFAULT_MODEL), help="ONNX or .lnet file (default: resnet50 of the zoo)")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--cold", action="store_true", help="start from an empty kernel cache")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.model, args.iterations, args.warmup)))
        return 0
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "tests.bench.bench_first_run", "--child", "--model", args.model,
           "--iterations", str(args.iterations), "--warmup", str(args.warmup)]
    with tempfile.TemporaryDirectory(prefix="layerlab_kernels_") as cache:
        if args.cold:
            env["NUMBA_CACHE_DIR"] = cache
        else:  # the cache filled first, as the designer's background compile does
            subprocess.run(cmd, env=env, check=True, capture_output=True, cwd=ROOT)
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=ROOT)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{Path(args.model).name} on the CPU, {'empty' if args.cold else 'filled'} kernel cache:")
    for key, value in figures.items():
        print(f"  {key:<18} {value:10.3f}" if isinstance(value, float) else f"  {key:<18} {value:10d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
