"""LayerLab against its peers on the reference networks of BENCHMARKS.md, measured in one run on one machine,
outputs checked first.

    python tests/bench/run.py --device cpu|gpu [--networks dncnn,unet,resnet18] [--repeat N] [--json FILE]

GPU: fp16 NHWC against PyTorch eager fp16 channels_last (dncnn, unet) and PyTorch eager replayed as a
CUDA graph (resnet18); peak memory against torch.cuda.max_memory_allocated (LayerLab: tensor pool +
weights). CPU: fp32 NHWC on the NumPy backend against ONNX Runtime (2 threads, the model exported by
LayerLab's ONNX exporter), the two timed in turns; PyTorch CPU is shown too. Where the environment pins
OpenBLAS's kernels (OPENBLAS_CORETYPE), the CPU figures of what a user gets need
``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python tests/bench/run.py --device cpu``.
The last line is ``worst ratio: X (network)``. ``--json FILE`` also writes the rows (``python -m tests.bench.store
run MACHINE FILE`` keeps them as the machine's latest result)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.bench_networks import CPU_SIZES, GPU_SIZES, bench  # noqa: E402

TARGETS = {("gpu", "dncnn"): 0.60, ("gpu", "unet"): 0.65, ("gpu", "resnet18"): 1.0,
           ("cpu", "dncnn"): 1.0, ("cpu", "unet"): 1.0, ("cpu", "resnet18"): 1.0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cpu", "gpu"), required=True)
    ap.add_argument("--networks", default="dncnn,unet,resnet18")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--compile", metavar="MODE", help="also time torch.compile(mode=MODE) on the GPU, e.g. max-autotune")
    ap.add_argument("--format", help="LayerLab tensor format (default: fp16 nhwc on the GPU, fp32 nhwc on the CPU)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    a = ap.parse_args(argv)
    nets = [n.strip() for n in a.networks.split(",") if n.strip()]
    fmt = a.format or ("fp16 nhwc" if a.device == "gpu" else "fp32 nhwc")
    sizes = GPU_SIZES if a.device == "gpu" else CPU_SIZES
    rows = []
    for name in nets:
        r = bench(name, sizes[name], a.device, fmt, a.repeat, "on", a.compile)
        if a.device == "gpu":
            peer, peer_ms = ("torch graph", r["torch_graph_ms"]) if name == "resnet18" else ("torch eager", r["torch_ms"])
        else:
            peer, peer_ms = "onnxruntime", r["ort_ms"]
        r.update(peer=peer, peer_ms=peer_ms, peer_ratio=r["layerlab_ms"] / peer_ms, target=TARGETS[(a.device, name)])
        rows.append(r)
    print(f"{'network':<9} {'size':<14} {'format':<10} {'LayerLab ms':>11} {'peer':<12} {'peer ms':>8} {'ratio':>6} "
          f"{'target':>6} {'torch ms':>8} {'mem MiB':>8} {'peer MiB':>8} {'mem ratio':>9} {'err vs fp32':>11}")
    for r in rows:
        mem, pmem = r["layerlab_bytes"] / 2**20, (r["torch_bytes"] or 0) / 2**20
        peer_mem = f"{pmem:>8.1f} {mem / pmem:>9.2f}" if pmem else f"{'-':>8} {'-':>9}"
        print(f"{r['net']:<9} {r['dims']:<14} {r['format']:<10} {r['layerlab_ms']:>11.3f} {r['peer']:<12} "
              f"{r['peer_ms']:>8.3f} {r['peer_ratio']:>6.2f} {r['target']:>6.2f} {r['torch_ms']:>8.3f} {mem:>8.1f} "
              f"{peer_mem} {r['rel_err_vs_fp32']:>11.1e}")
        limit = 1e-2 if "fp16" in r["format"] else 1e-4
        if not r["rel_err_vs_fp32"] <= limit:
            print(f"ERROR: {r['net']} output differs from the fp32 reference by {r['rel_err_vs_fp32']:.2e} (> {limit})")
            return 1
    for r in rows:
        if r.get("torch_compile_ms"):
            print(f"{r['net']}: torch.compile({r['compile_mode']}) {r['torch_compile_ms']:.3f} ms, "
                  f"LayerLab / torch.compile = {r['layerlab_ms'] / r['torch_compile_ms']:.2f}")
    if a.device == "cpu":
        print(f"BLAS: {rows[0]['blas']}; LayerLab and ONNX Runtime timed in turns, one run each per round")
        if os.environ.get("OPENBLAS_CORETYPE"):
            print("note: OPENBLAS_CORETYPE pins OpenBLAS's kernels; unset it (and OPENBLAS_L2_SIZE) for the kernels "
                  "a user's machine runs")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1, default=str), encoding="utf-8")
    worst = max(rows, key=lambda r: r["peer_ratio"])
    print(f"worst ratio: {worst['peer_ratio']:.2f} ({worst['net']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
