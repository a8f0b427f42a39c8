"""A reference network on the CPU layer by layer against ONNX Runtime's own profile (2 threads), in the same
minutes: rounds of fifteen LayerLab runs, each layer timed around its replayed kernel call or its forward, then
fifteen ONNX Runtime runs with
its profiler on; medians per layer side by side (ONNX Runtime's nodes matched by name; a fused pair appears under
the fused layer's name on our side and under its first node on theirs). Not collected by the test run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m tests.bench.bench_cpu_layers resnet18 [ROUNDS]
"""
from __future__ import annotations

import collections
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import engine.backends.cpu.runtime  # noqa: F401  (before onnxruntime: see bench_networks)
from engine.backends import get_backend
from engine.export.onnx_export import OnnxOptions, build_onnx
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import TensorFormat
from tests.bench.bench_networks import CPU_SIZES
from tests.bench.networks import NETWORKS

#: suffixes ONNX Runtime's optimizer gives the nodes it fuses or re-lays out
ORT_SUFFIXES = ("__act_nchwc", "_nchwc", "__gemm")


def main(argv: list[str] | None = None) -> int:
    import onnxruntime as ort

    args = sys.argv[1:] if argv is None else argv
    name = args[0] if args else "resnet18"
    rounds = int(args[1]) if len(args) > 1 else 4
    reg, cpu = default_registry(), get_backend("numpy", notice=None)
    dims = CPU_SIZES[name]
    x = np.random.default_rng(0).random(tuple(dims), dtype=np.float32)
    net = Network(NETWORKS[name](dims), reg, cpu, TensorFormat.parse("fp32 nhwc"))
    net.set_input("input", x)
    net.run()
    net.mark_affected("input")
    net.run()  # the replay of the layers' kernel calls recorded (layer hooks would turn it off: timed around it)
    ours: dict[str, list[float]] = collections.defaultdict(list)

    def timed(layer: str, fn: Callable[..., None]) -> Callable[..., None]:
        def run(*args: Any) -> None:
            t0 = time.perf_counter()
            fn(*args)
            ours[layer].append(time.perf_counter() - t0)
        return run
    execute = net._execute
    net._execute = lambda layer: timed(layer, execute)(layer)  # type: ignore[method-assign]
    recorded = net.replayer.recorded
    if recorded is not None:
        net.replayer.recorded = [(layer, call if call is None else timed(layer, call), w) for layer, call, w in recorded]
    plain = Network(NETWORKS[name](dims), reg, cpu, TensorFormat.parse("fp32 nchw"), fusing="off")
    payload = build_onnx(plain, OnnxOptions(explicit_sizes=True))[0].SerializeToString()
    totals: dict[str, list[float]] = {"LayerLab": [], "ONNX Runtime": []}
    peer: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(rounds):
        for _ in range(15):
            net.mark_affected("input")
            t0 = time.perf_counter()
            net.run()
            totals["LayerLab"].append(time.perf_counter() - t0)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 2
        opts.enable_profiling = True
        sess = ort.InferenceSession(payload, opts, providers=["CPUExecutionProvider"])
        feed = {sess.get_inputs()[0].name: x}
        for _ in range(5):
            sess.run(None, feed)
        for _ in range(15):
            t0 = time.perf_counter()
            sess.run(None, feed)
            totals["ONNX Runtime"].append(time.perf_counter() - t0)
        path = sess.end_profiling()
        with open(path, encoding="utf-8") as f:
            events = json.load(f)
        os.remove(path)
        runs: dict[str, list[float]] = collections.defaultdict(list)
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                node = e["name"][:-len("_kernel_time")]
                for suffix in ORT_SUFFIXES:
                    node = node.replace(suffix, "")
                runs[node].append(e["dur"] / 1000)
        for node, times in runs.items():
            peer[node] += times[5:]  # the warm-up runs' events left out
    print("  ".join(f"{k} median {1e3 * statistics.median(v):.2f} ms" for k, v in totals.items()))
    print(f"{'layer':18s} {'LayerLab':>9s} {'ORT':>9s} {'diff':>8s}")
    for layer in net.order:
        a = 1e3 * statistics.median(ours[layer]) if ours[layer] else 0.0
        b = statistics.median(peer[layer]) if peer.get(layer) else None
        print(f"{layer:18s} {a:9.3f} {'-' if b is None else f'{b:9.3f}':>9s} {a - (b or 0.0):+8.3f}")
    unmatched = sorted(k for k in peer if k not in net.nodes)
    print("ONNX Runtime nodes under other names:",
          ", ".join(f"{k} {statistics.median(peer[k]):.3f}" for k in unmatched) or "none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
