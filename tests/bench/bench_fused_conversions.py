"""Fused against unfused format conversions: resnet18 and unet in fp16 with their batch normalization and
element-wise layers pinned to fp32 (conversions the network can fuse on both backends: into the producer's write for
a conversion to fp16, into the readers' reads for a conversion to fp32), and with every layer of one kind pinned in
turn. Prints the time per inference (median of the iterations, whole inferences, CUDA graphs where the backend has
them), how many conversions were inserted and fused, the peak buffer memory, and whether the fused network's outputs
are bit-identical to the unfused one's. Not collected by the test run.

    python -m tests.bench.bench_fused_conversions --device gpu      # CuPy, fp16 NHWC, GPU sizes
    python -m tests.bench.bench_fused_conversions --device cpu      # NumPy, fp16 NCHW, small sizes
"""
from __future__ import annotations

import sys

import numpy as np

from engine.network import Network
from engine.plugins import default_registry
from engine.run import RunSpec, open_backend, time_iteration
from engine.tensor import TensorFormat
from engine.weights import RandomWeights
from tests.bench.bench_precision import CPU_SIZES, GPU_SIZES, parser, report
from tests.bench.networks import NETWORKS

#: pin sets: every layer of these types to fp32
PIN_SETS = {"bn+add": ("batch_normalization", "element_wise"), "bn": ("batch_normalization",),
            "conv": ("convolution",)}


def bench(name: str, device: str, pin_set: str, iterations: int) -> dict[str, object]:
    registry = default_registry()
    dims = (GPU_SIZES if device == "gpu" else CPU_SIZES)[name]
    model = NETWORKS[name](dims)
    backend = open_backend(RunSpec(backend="cupy" if device == "gpu" else "numpy"))
    fmt = TensorFormat.parse("fp16 nhwc" if device == "gpu" else "fp16 nchw")
    pins = {n: "fp32" for n, s in model.layers.items() if s.type in PIN_SETS[pin_set]}
    x = np.random.default_rng(0).random(tuple(dims), dtype=np.float32)
    inputs = {next(n for n, s in model.layers.items() if s.type == "input"): x}
    row: dict[str, object] = {"network": name, "dims": str(dims), "pins": pin_set, "pinned": len(pins)}
    outputs = {}
    for label, fuse in (("fused", True), ("unfused", False)):
        net = Network(model, registry, backend, fmt, weights=RandomWeights(0), layer_formats=pins,
                      fuse_conversions=fuse)
        outputs[label] = net.infer(inputs)
        for _ in range(3):
            time_iteration(net)
        times = sorted(time_iteration(net) for _ in range(iterations))
        row[f"ms_{label}"] = times[len(times) // 2]
        row[f"peak_mb_{label}"] = net.peak_memory_bytes / 2**20
        row[f"graph_{label}"] = net.graph_status
        if fuse:
            row["conversions"] = len(net.conversions)
            row["fused"] = len(net.fused_conversions)
    row["identical"] = all(np.array_equal(outputs["fused"][k], outputs["unfused"][k]) for k in outputs["fused"])
    return row


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, iterations=30)
    ap.add_argument("--pins", nargs="+", default=list(PIN_SETS), choices=list(PIN_SETS))
    args = ap.parse_args(argv)
    rows = [bench(n, args.device, p, args.iterations) for n in args.nets for p in args.pins]
    return report(rows, f"{'network':<9} {'pins':<7} {'pinned':>6} {'conv':>5} {'fused':>5} {'ms fused':>9} "
                  f"{'ms unfused':>10} {'MB fused':>9} {'MB unfused':>10} identical",
                  lambda r: f"{r['network']:<9} {r['pins']:<7} {r['pinned']:>6} {r['conversions']:>5} {r['fused']:>5} "
                  f"{r['ms_fused']:>9.3f} {r['ms_unfused']:>10.3f} {r['peak_mb_fused']:>9.2f} "
                  f"{r['peak_mb_unfused']:>10.2f} {r['identical']}\n"
                  f"{'':<9} CUDA graphs: fused {r['graph_fused']}, unfused {r['graph_unfused']}", args.json)


if __name__ == "__main__":
    sys.exit(main())
