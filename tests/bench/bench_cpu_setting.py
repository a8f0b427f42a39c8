"""A tunable of the CPU kernels (a module attribute read when a network is opened) at two values: a zoo network
(bench_zoo's cached ONNX file) opened once with each, both run in turns in one process, medians; this machine's
speed drifts by tens of percent within minutes, so only such paired figures compare two settings. Not collected by
the test run.

    python -m tests.bench.bench_cpu_setting mobilenet_v2 engine.backends.cpu.panels.STRIP_BLOCK_BYTES 0 262144 [ROUNDS]
    python -m tests.bench.bench_cpu_setting resnet50 engine.backends.cpu.backend.NumpyBackend.overwrites_inputs False True

The attribute may be a class's (the module is the longest importable prefix of the name).
"""
from __future__ import annotations

import ast
import importlib
import sys

import numpy as np

from engine.backends.cpu import backend as _cpu_backend  # noqa: F401  (before onnxruntime: see bench_networks)
from tests.bench import bench_zoo
from tests.bench.bench_networks import interleaved_ms


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 4:
        print(__doc__)
        return 2
    name, attribute, *values = args[:4]
    rounds = int(args[4]) if len(args) > 4 else 30
    owner_name, _, attr = attribute.rpartition(".")
    try:
        module = _owner(owner_name)
        real = getattr(module, attr)
        settings = [ast.literal_eval(text) for text in values]
    except (ImportError, AttributeError, ValueError, SyntaxError) as exc:
        print(f"bench_cpu_setting: {attribute} = {' or '.join(values)}: {exc}")
        return 2
    open_it = bench_zoo.cpu_opener(name)
    if open_it is None:
        return 2
    nets, timers = {}, {}
    try:
        for text, value in zip(values, settings):
            setattr(module, attr, value)
            lnet, inp, out = open_it()
            nets[text] = (lnet, out)
            timers[text] = bench_zoo._timer(lnet, inp)
    finally:
        setattr(module, attr, real)
    (a, oa), (b, ob) = nets.values()
    diff = float(np.abs(a.output(oa) - b.output(ob)).max())
    times = interleaved_ms(timers, rounds)
    first, second = values
    print(f"{name}: {attr}={first} {times[first]:.3f} ms, {attr}={second} {times[second]:.3f} ms, "
          f"ratio {times[second] / times[first]:.3f} (outputs differ by at most {diff:.1e})")
    return 0


def _owner(name: str) -> object:
    """The module or class called ``name``: the longest importable prefix, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            owner: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            if cut == 1:
                raise
            continue
        for part in parts[cut:]:
            owner = getattr(owner, part)
        return owner
    raise ImportError(name)


if __name__ == "__main__":
    raise SystemExit(main())
