"""Do the profile's per-layer times add up to a plain run? For each network: the plain run's average (CUDA graph,
no profiling), the profile's average per iteration and its sum of layer times, how the layers were timed, and the
device time against the gaps between kernels.

    python -m tests.bench.profile_sums --networks dncnn,unet,resnet18,mobilenet_v2 --json out.json
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

REFERENCE = ("dncnn", "unet", "resnet18")


def build(name: str, backend: Any, fmt: str, tmp: Path) -> Any:
    from engine.network import Network
    from engine.plugins import default_registry
    from engine.tensor import TensorFormat
    from tests.bench import networks

    reg = default_registry()
    if name in REFERENCE:
        return Network(getattr(networks, name)(), reg, backend, TensorFormat.parse(fmt))
    from engine.importers.onnx.importer import import_onnx
    from tests.bench.zoo_kernels import export, torch_model

    path = tmp / f"{name}.onnx"
    export(torch_model(name), 224, path)
    res = import_onnx(path, input_shapes={"input": (1, 3, 224, 224)}, registry=reg)
    return Network(res.model, reg, backend, TensorFormat.parse(fmt), weights=res.weights_source())


def measure(net: Any, iterations: int, reports: str = "") -> dict[str, Any]:
    from engine import report as rep
    from engine.profiling import profile
    from engine.run import time_iteration

    net.run()
    for _ in range(3):
        time_iteration(net)
    plain = sorted(time_iteration(net) for _ in range(iterations))
    t0 = time.perf_counter()
    result = profile(net, iterations, 2)
    wall = time.perf_counter() - t0
    doc = rep.build_report(result, model_name=net.model_name, model_version="", model_path=None,
                           backend=net.backend.name, device=net.backend.device_name, fmt=str(net.fmt),
                           iterations=iterations, warmup=2, notes=result.notes,
                           graph_capture=net.graph_status.startswith("captured"))
    if reports:
        rep.write_json(doc, Path(reports) / f"{net.model_name}.json")
        rep.write_html(doc, Path(reports) / f"{net.model_name}.html")
    n = doc["network"]
    top = sorted(doc["layers"], key=lambda r: -r["time_ms"]["mean"])[:3]
    return {"plain_ms": sum(plain) / len(plain), "plain_median_ms": plain[len(plain) // 2],
            "profile_avg_ms": n["avg_ms"], "sum_layers_ms": n["sum_layers_ms"], "device_ms": n.get("device_ms"),
            "gap_ms": n.get("gap_ms"), "launch_bound": n.get("launch_bound"), "timing": doc["run"].get("timing"),
            "graph": net.graph_status, "notes": result.notes, "profile_wall_s": wall, "layers": len(doc["layers"]),
            "kernels": sum(len(r.get("kernels") or []) for r in doc["layers"]),
            "top": [{"name": r["name"], "type": r["type"], "ms": r["time_ms"]["mean"],
                     "kernels": (r.get("kernels") or [])[:3]} for r in top]}


def main(argv: list[str] | None = None) -> int:
    from engine.backends import get_backend

    ap = argparse.ArgumentParser()
    ap.add_argument("--networks", default="dncnn,unet,resnet18,resnet50,mobilenet_v2,mobilenet_v3_large,"
                    "efficientnet_b0,densenet121,deeplabv3_mobilenet_v3_large")  # BENCHMARKS.md's and the zoo's
    ap.add_argument("--format", default="fp16 nhwc")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--json", default="")
    ap.add_argument("--reports", default="", help="also write each network's report (JSON and HTML) into this folder")
    a = ap.parse_args(argv)
    backend = get_backend("cupy", notice=None)
    tmp = Path(tempfile.mkdtemp())
    rows: dict[str, Any] = {"device": backend.device_name, "format": a.format, "networks": {}}
    print(f"{'network':<18} {'plain ms':>9} {'profile avg':>12} {'sum layers':>11} {'device':>8} {'gaps':>8}  timing")
    for name in a.networks.split(","):
        try:
            row = measure(build(name, backend, a.format, tmp), a.iterations, a.reports)
        except Exception as exc:  # one network's failure must not hide the others'
            traceback.print_exc()
            rows["networks"][name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        rows["networks"][name] = row
        print(f"{name:<18} {row['plain_ms']:>9.3f} {row['profile_avg_ms']:>12.3f} {row['sum_layers_ms']:>11.3f} "
              f"{row['device_ms'] or 0:>8.3f} {row['gap_ms'] or 0:>8.3f}  {row['timing']} | {row['graph']}",
              flush=True)
        for note in row["notes"]:
            print(f"    note: {note}")
        for t in row["top"]:
            print(f"    {t['name']} ({t['type']}) {t['ms']:.4f} ms: "
                  + "; ".join(f"{k['name'][:60]} {k['ms']:.4f} {k.get('grid')}x{k.get('block')}" for k in t["kernels"]))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
