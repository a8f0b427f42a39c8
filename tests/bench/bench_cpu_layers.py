"""A reference network on the CPU layer by layer against ONNX Runtime's own profile (2 threads), in the same
minutes: rounds of fifteen LayerLab runs, each layer timed around its replayed kernel call or its forward, then
fifteen ONNX Runtime runs with
its profiler on; medians per layer side by side (ONNX Runtime's nodes matched by name; a fused pair appears under
the fused layer's name on our side and under its first node on theirs). Not collected by the test run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m tests.bench.bench_cpu_layers resnet18 [ROUNDS]
    python -m tests.bench.bench_cpu_layers ~/.cache/layerlab/zoo/mobilenet_v2_224.onnx [ROUNDS]

An ONNX file (one of bench_zoo's, say) is imported as ``layerlab import`` does and run against ONNX Runtime on the
file itself; ONNX Runtime's node names are matched to the importer's layer names (runs of other characters as one
underscore), a fused layer's row counting the nodes of every layer fused into it. Layers are listed slowest first,
with the sums by the kernel that ran.
"""
from __future__ import annotations

import collections
import json
import os
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import engine.backends.cpu.runtime  # noqa: F401  (before onnxruntime: see bench_networks)
from engine.backends.selection import served_candidates
from tests.bench.bench_cpu_turns import network_from_args

#: suffixes ONNX Runtime's optimizer gives the nodes it fuses or re-lays out
ORT_SUFFIXES = ("__act_nchwc", "_nchwc", "__gemm")


def main(argv: list[str] | None = None) -> int:
    import onnxruntime as ort

    name, net, input_name, x, payload, rounds = network_from_args(argv, 4)
    served: dict[str, list[str]] = {}
    execute = net._execute

    def noted(layer: str) -> None:
        with served_candidates() as names:
            execute(layer)
        served[layer] = names
    net._execute = noted  # type: ignore[method-assign]
    net.run()
    net.mark_affected(input_name)
    net.run()  # the replay of the layers' kernel calls recorded (layer hooks would turn it off: timed around it)
    ours: dict[str, list[float]] = collections.defaultdict(list)

    def timed(layer: str, fn: Callable[..., None]) -> Callable[..., None]:
        def run(*args: Any) -> None:
            t0 = time.perf_counter()
            fn(*args)
            ours[layer].append(time.perf_counter() - t0)
        return run
    net._execute = lambda layer: timed(layer, execute)(layer)  # type: ignore[method-assign]
    recorded = net.replayer.recorded
    if recorded is not None:
        net.replayer.recorded = [(layer, call if call is None else timed(layer, call), w) for layer, call, w in recorded]
        net.replayer.make_segments()
    totals: dict[str, list[float]] = {"LayerLab": [], "ONNX Runtime": []}
    peer: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(rounds):
        for _ in range(15):
            net.mark_affected(input_name)
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
                node = re.sub(r"[^A-Za-z0-9]+", "_", node).strip("_")
                node = re.sub(r"_output_0$", "", node)  # nodes ONNX Runtime made, named after their output
                runs[node].append(e["dur"] / 1000)
        for node, times in runs.items():
            peer[node] += times[5:]  # the warm-up runs' events left out
    print("  ".join(f"{k} median {1e3 * statistics.median(v):.2f} ms" for k, v in totals.items()))
    width = max(18, *(len(layer) for layer in net.order))
    print(f"{'layer':{width}s} {'LayerLab':>9s} {'ORT':>9s} {'diff':>8s}  kernel  output")
    kinds: dict[str, float] = collections.defaultdict(float)
    rows = []
    # a node ONNX Runtime fused with the activation after it is named after that activation (a convolution, its
    # batch normalization and a Clip: ``..._conv_0_2_Clip`` against the importer's ``..._conv_0_0_Conv``): left
    # unmatched on both sides, the two are paired by the name without its last two parts where that is unique
    def stem(node: str) -> str:
        return re.sub(r"_\d+_[A-Za-z]+$", "", node)

    # the layers fused into another one (conv_sum's convolution, conv_depthwise's expansion): their nodes are
    # matched under their own names, then counted in the fused layer's row
    merged = dict(net.fused.merged) if net.fused is not None else {}
    names = [*net.order, *merged]
    left = [k for k in peer if k not in net.nodes and k not in merged]
    stems = collections.Counter(stem(k) for k in left)
    by_stem = {stem(k): k for k in left if stems[stem(k)] == 1}
    for layer in names:
        node = by_stem.get(stem(layer))
        if not peer.get(layer) and node is not None and sum(stem(m) == stem(layer) for m in names) == 1:
            peer[layer] = peer.pop(node)
    medians = {k: statistics.median(v) for k, v in peer.items() if v}
    for inner, outer in merged.items():
        if inner in medians:
            medians[outer] = medians.get(outer, 0.0) + medians.pop(inner)
    for layer in net.order:
        a = 1e3 * statistics.median(ours[layer]) if ours[layer] else 0.0
        b = medians.get(layer)
        kernel = ",".join(dict.fromkeys(served.get(layer, [])))
        kind = f"{type(net.nodes[layer].layer).__name__}/{kernel or '-'}"
        kinds[kind] += a
        rows.append((a - (b or 0.0), f"{layer:{width}s} {a:9.3f} {'-' if b is None else f'{b:9.3f}':>9s} "
                                     f"{a - (b or 0.0):+8.3f}  {kind}  {tuple(net.dims(layer))}"))
    for _, line in sorted(rows, reverse=True) if name.endswith(".onnx") else rows:
        print(line)
    print("LayerLab by layer type/kernel:", ", ".join(f"{k} {v:.2f}" for k, v in sorted(kinds.items(),
                                                                                      key=lambda kv: -kv[1])))
    unmatched = sorted(k for k in medians if k not in net.nodes)
    print("ONNX Runtime nodes under other names:", ", ".join(f"{k} {medians[k]:.3f}" for k in unmatched) or "none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
