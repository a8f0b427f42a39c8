"""The CPU zoo against ONNX Runtime with each side in processes of its own, alternated: for each network, PAIRS pairs
of a LayerLab process then an ONNX Runtime process (2 threads), each timing RUNS runs after 30 untimed ones; the
table gives each side's median and the median and range of the pairs' ratios. Not collected by the test run.

``bench_zoo --device cpu`` times both sides in turns in one process, which cancels this shared machine's drift from
second to second; but now and then one side stays slow for a whole network there (ONNX Runtime's
mobilenet_v3_large at 15.7 ms once, 5.6-9.0 in every other run), and a process of its own for each side shows
whether a ratio holds without the other's threads in the same process. Needs the ONNX files ``bench_zoo`` exports
(``~/.cache/layerlab/zoo``).

    python -m tests.bench.zoo_processes [--networks mobilenet_v3_small,mobilenet_v2] [--pairs 3] [--runs 150]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results" / "zoo-processes"
NETWORKS = ("mobilenet_v3_small", "mobilenet_v3_large", "mobilenet_v2", "efficientnet_b0", "resnet50", "densenet121")
WARMUP = 30


def _median_ms(fn, runs: int) -> float:
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _side(side: str, network: str, runs: int) -> float:
    """One side's median run time, in this process (what a pair's subprocess runs)."""
    if side == "layerlab":
        from tests.bench import bench_zoo

        opener = bench_zoo.cpu_opener(network)
        if opener is None:
            raise SystemExit(2)
        net, inp, _ = opener()

        def run() -> None:
            net.mark_affected(inp)
            net.run()
        return _median_ms(run, runs)
    import numpy as np
    import onnxruntime as ort

    from tests.bench.bench_zoo import CACHE, CPU_THREADS, zoo_net

    zoo = zoo_net(network)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = CPU_THREADS
    sess = ort.InferenceSession(str(CACHE / f"{zoo.key}.onnx"), opts, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, 3, zoo.size, zoo.size), dtype=np.float32)
    feed = {sess.get_inputs()[0].name: x}
    return _median_ms(lambda: sess.run(None, feed), runs)


def _in_own_process(side: str, network: str, runs: int) -> float:
    """One side's median run time, timed by a process of its own."""
    done = subprocess.run([sys.executable, "-m", "tests.bench.zoo_processes", "--side", side, "--networks", network,
                           "--runs", str(runs)], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode != 0:
        raise RuntimeError(f"{side} {network}: {done.stderr.strip().splitlines()[-1:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--networks", default=",".join(NETWORKS))
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--runs", type=int, default=150)
    ap.add_argument("--side", choices=("layerlab", "ort"), help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help="results file (default: tests/bench/results/zoo-processes/<machine>.json)")
    a = ap.parse_args(argv)
    if a.pairs < 1 or a.runs < 1:
        ap.error("--pairs and --runs must be 1 or more")
    names = [n for n in a.networks.split(",") if n.strip()]
    if a.side:
        print(f"{_side(a.side, names[0], a.runs):.4f}")
        return 0
    rows = []
    print(f"{'network':<24} {'LayerLab ms':>11} {'ORT ms':>9} {'ratio':>6}  pairs")
    for name in names:
        pairs = [(_in_own_process("layerlab", name, a.runs), _in_own_process("ort", name, a.runs)) for _ in range(a.pairs)]
        ratios = [ours / peer for ours, peer in pairs]
        row = {"network": name, "layerlab_ms": statistics.median(p[0] for p in pairs),
               "peer_ms": statistics.median(p[1] for p in pairs), "ratio": statistics.median(ratios),
               "ratio_min": min(ratios), "ratio_max": max(ratios), "pairs": pairs}
        rows.append(row)
        print(f"{name:<24} {row['layerlab_ms']:>11.3f} {row['peer_ms']:>9.3f} {row['ratio']:>6.2f}  "
              + " ".join(f"{r:.2f}" for r in ratios), flush=True)
    from tests.bench.bench_zoo import _commit, machine_name

    machine = machine_name("cpu")
    doc = {"machine": machine, "commit": _commit(), "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "command": " ".join(["python -m tests.bench.zoo_processes", *(argv if argv is not None else sys.argv[1:])]),
           "notes": [f"each side in processes of its own, alternated; {a.runs} timed runs after {WARMUP} untimed, "
                     "ONNX Runtime with 2 threads"], "rows": rows}
    out = Path(a.json) if a.json else RESULTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', machine).strip('_')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
