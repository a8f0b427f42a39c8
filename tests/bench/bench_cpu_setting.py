"""A tunable of the CPU kernels (a module attribute read when a network is opened) at two values: a zoo network
(bench_zoo's cached ONNX file) opened once with each, both run in turns in one process, medians; this machine's
speed drifts by tens of percent within minutes, so only such paired figures compare two settings. Not collected by
the test run.

    python -m tests.bench.bench_cpu_setting mobilenet_v2 engine.backends.cpu.panels.STRIP_BLOCK_BYTES 0 262144 [ROUNDS]
"""
from __future__ import annotations

import ast
import importlib
import sys

import numpy as np

from engine.backends.cpu import backend as _cpu_backend  # noqa: F401  (before onnxruntime: see bench_networks)
from engine.plugins import default_registry
from engine.run import RunSpec
from tests.bench import bench_zoo
from tests.bench.bench_networks import interleaved_ms


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 4:
        print(__doc__)
        return 2
    name, attribute, *values = args[:4]
    rounds = int(args[4]) if len(args) > 4 else 30
    module_name, _, attr = attribute.rpartition(".")
    module = importlib.import_module(module_name)
    net = bench_zoo.zoo_net(name)
    path = bench_zoo.CACHE / f"{net.name}_{net.size}.onnx"
    if not path.is_file():
        print(f"{path} is missing: python -m tests.bench.bench_zoo --device cpu --networks {name} exports it")
        return 2
    dims = (1, 3, net.size, net.size)
    reg = default_registry()
    x = np.random.default_rng(0).standard_normal(dims, dtype=np.float32)
    spec = RunSpec(backend="numpy", format="auto", fusing="on", profiling=False)
    real = getattr(module, attr)
    nets, timers = {}, {}
    try:
        for text in values:
            setattr(module, attr, ast.literal_eval(text))
            model, inp, out = bench_zoo.import_network(path, dims, reg)
            nets[text] = (bench_zoo._open(model, spec, reg, inp, x), out)
            timers[text] = bench_zoo._timer(nets[text][0], inp)
    finally:
        setattr(module, attr, real)
    (a, oa), (b, ob) = nets.values()
    diff = float(np.abs(a.output(oa) - b.output(ob)).max())
    times = interleaved_ms(timers, rounds)
    first, second = values
    print(f"{name}: {attr}={first} {times[first]:.3f} ms, {attr}={second} {times[second]:.3f} ms, "
          f"ratio {times[second] / times[first]:.3f} (outputs differ by at most {diff:.1e})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
