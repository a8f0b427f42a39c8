"""Each ``conv2d`` candidate of the CuPy backend on one convolution, timed as launched from Python (host overhead
included) and as the selector times it (captured in a CUDA graph, as a network runs it). Not collected by the test
run; needs the GPU machine.

    PYTHONPATH=. python3 -m tests.bench.bench_conv_rows --shape 1x160x7x7 --out 960 --kernel 1 --act clamp
"""
from __future__ import annotations

import argparse

import numpy as np


def main(argv: list[str] | None = None) -> int:
    import cupy

    from engine.backends import get_backend
    from engine.backends.cuda import runtime
    from engine.model import Model
    from engine.network import Network
    from engine.plugins import default_registry
    from engine.tensor import TensorFormat

    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="1x160x7x7", help="input N x C x H x W")
    ap.add_argument("--out", type=int, default=960, help="output channels")
    ap.add_argument("--kernel", type=int, default=1)
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--act", default="clamp")
    ap.add_argument("--format", default="fp16 nhwc")
    ap.add_argument("--reps", type=int, default=200)
    a = ap.parse_args(argv)
    reg = default_registry()
    backend = get_backend("cupy", notice=None)
    pad = a.kernel // 2 if a.stride == 1 else 0
    m = Model("one")
    m.add_layer("input", "inp", params={"dimensions": a.shape})
    m.add_layer("convolution", "conv", params={"num_output_channels": str(a.out), "kernel_size": str(a.kernel),
                                               "stride": str(a.stride), "padding": str(pad)},
                inputs=["inp"], activation=a.act, act_coefs={"min": "0", "max": "6"} if a.act == "clamp" else {})
    m.add_layer("output", "out", inputs=["conv"])
    dims = tuple(int(v) for v in a.shape.split("x"))
    x = np.random.default_rng(0).standard_normal(dims).astype(np.float32)
    rows = []
    forced: list[str | None] = [None]
    choose = backend.selector.choose

    def pick(op, key, names, time, default):  # the forced candidate where it applies, else the selector's
        if forced[0] is not None and forced[0] in names:
            return forced[0]
        return choose(op, key, names, time, default)

    backend.selector.choose = pick  # type: ignore[method-assign]
    from engine.backends.cuda.ops import CONV2D_CANDIDATES
    from engine.backends.selection import served_candidates

    def timings(net: Network) -> tuple[float, float | None]:
        layer, xin, out = net.nodes["conv"].layer, net._views["inp"], net._views["conv"]

        def forward() -> bool:
            layer.forward([xin], out)
            return True

        stream = backend.stream
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        forward()
        start.record(stream)
        for _ in range(a.reps):
            forward()
        end.record(stream)
        end.synchronize()
        launched = cupy.cuda.get_elapsed_time(start, end) / a.reps
        return launched, runtime.elapsed_ms(forward, 20)

    for name in [None, *(c.name for c in CONV2D_CANDIDATES)]:
        forced[0] = name
        net = Network(m, reg, backend, TensorFormat.parse(a.format), graph_capture=False)
        net.set_input("inp", x)
        with served_candidates() as served:
            net.run()
        if name is not None and name not in served:
            continue
        backend.activate()
        alone, graph = timings(net)
        rows.append((name or "selector", ",".join(served), alone, graph))
    print(f"{a.shape} -> {a.out}, {a.kernel}x{a.kernel}/{a.stride}, {a.act}, {a.format}")
    for name, served, launched, graph in rows:
        print(f"{name:10s} served {served:12s} launched {launched * 1000:8.1f} us   captured {(graph or 0) * 1000:8.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
