"""The model zoo against ``torch.compile(mode="max-autotune")``, fp16 channels-last, batch 1 or 32. Not collected by
the test run.

    python -m tests.bench.zoo_compile                                   # the zoo's networks, ATen convolutions
    python -m tests.bench.zoo_compile --networks mobilenet_v2 --conv-autotune --wait 900
    python -m tests.bench.zoo_compile --batch 32 --aten-gemms densenet121

max-autotune spends minutes per network (tens of Triton candidates benchmarked per matrix product and convolution
shape), so every network compiles in a process of its own at the same time (``--wait`` seconds at most), then the
processes time one at a time, each in turns in one process: LayerLab in its default format (fp16 NHWC, the
network imported from the same ONNX file as ``bench_zoo``), PyTorch eager, eager replayed as a CUDA graph, and the
compiled module; medians of 20 runs, the best of two rounds. By default convolutions keep ATen's (cuDNN) kernels
(``TORCHINDUCTOR_MAX_AUTOTUNE_CONV_BACKENDS=ATEN``; matrix products, fusion and CUDA graphs are max-autotune's):
with Triton convolution candidates too (``--conv-autotune``) no network compiled within 250 s on an H200. The
networks named by ``--aten-gemms`` keep ATen's (cuBLAS) matrix products as well: densenet121's 1x1 convolutions
are about 60 matrix-product shapes, whose Triton autotuning alone outlasts a command's 600 s on the device machine.
Concurrent compiles share the GPU while autotuning, so a candidate's timing there is noisier than alone.

Writes ``tests/bench/results/zoo-compile/<machine>.json`` (``zoo-compile-b32/`` at batch 32; ``--json``
elsewhere); a network that does not compile within ``--wait`` is listed with the reason.
"""
from __future__ import annotations

import argparse
import copy
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.bench.bench_networks import median_ms, rel_err, torch_graph_ms
from tests.bench.bench_zoo import DEFAULT_NETWORKS, _open, _timer, build_torch, import_network, onnx_file, zoo_net
from tests.bench.store import RESULTS, current_commit, machine_name, write_json

ZOO = tuple(n if n != "deeplabv3_mobilenet_v3_large" else f"{n}@512" for n in DEFAULT_NETWORKS if n != "resnet18")


def compile_then_time(name: str, sync_dir: Path, count: int, deadline: float, batch: int = 1) -> dict[str, Any]:
    """One network: compile (while the others compile), wait for the others or the deadline, then time it with the
    GPU to itself (one process at a time, by a lock in ``sync_dir``)."""
    import torch

    from engine.plugins import default_registry
    from engine.run import RunSpec

    net = zoo_net(name)
    module = build_torch(net)
    path, _ = onnx_file(net, module)
    torch.backends.cudnn.benchmark = True
    x = np.random.default_rng(0).standard_normal((batch, 3, net.size, net.size), dtype=np.float32)
    m32 = copy.deepcopy(module).cuda().eval()
    tx32 = torch.from_numpy(x).cuda()
    m16 = copy.deepcopy(module).cuda().half().to(memory_format=torch.channels_last).eval()
    tx16 = tx32.half().contiguous(memory_format=torch.channels_last)
    tf32(torch, True)
    t0 = time.perf_counter()
    compiled = torch.compile(lambda t: m16(t), mode="max-autotune")
    with torch.no_grad():
        for _ in range(3):  # compile, autotune, record the CUDA graph
            compiled(tx16)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    (sync_dir / f"ready-{net.key}").write_text("")
    while len(list(sync_dir.glob("ready-*"))) < count and time.time() < deadline:
        time.sleep(0.5)
    with open(sync_dir / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with torch.inference_mode():
            tf32(torch, False)
            ref32 = m32(tx32).float().cpu().numpy()
            tf32(torch, True)
            err_torch = rel_err(m16(tx16).float().cpu().numpy(), ref32)
        with torch.no_grad():
            err_compiled = rel_err(compiled(tx16).float().cpu().numpy(), ref32)
        registry = default_registry()
        model, inp, out = import_network(path, x.shape, registry)
        lnet = _open(model, RunSpec(backend="cupy", format="auto", fusing="on", profiling=False), registry, inp, x)
        err_ours = rel_err(lnet.output(out).reshape(ref32.shape), ref32)
        row: dict[str, Any] = {"network": net.name, "input": net.size, "batch": batch, "format": str(lnet.fmt),
                               "compile_s": round(compile_s, 1),
                               "gemm_backends": os.environ.get("TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS", "default")}
        for _ in range(2):  # two rounds in turns; the best median of each
            with torch.inference_mode():
                times = {"layerlab_ms": median_ms(_timer(lnet, inp), 20, lnet.backend.synchronize),
                         "eager_ms": median_ms(lambda: m16(tx16), 20, torch.cuda.synchronize),
                         "graph_ms": torch_graph_ms(lambda t, _: m16(t), tx16, None, 20)}
            with torch.no_grad():
                times["compile_ms"] = median_ms(lambda: compiled(tx16), 20, torch.cuda.synchronize)
            for k, v in times.items():
                row[k] = round(min(v, row.get(k, v)), 4)
        row.update(error=err_ours, error_torch_fp16=err_torch, error_compiled=err_compiled,
                   error_ok=err_ours <= 2 * err_torch,
                   ratio_eager_graph=round(row["layerlab_ms"] / min(row["eager_ms"], row["graph_ms"]), 3),
                   ratio_compile=round(row["layerlab_ms"] / row["compile_ms"], 3))
        return row


def tf32(torch: Any, on: bool) -> None:
    torch.backends.cudnn.allow_tf32 = on
    torch.backends.cuda.matmul.allow_tf32 = on


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--networks", default=",".join(ZOO), help="comma-separated torchvision names (NAME@SIZE)")
    ap.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    ap.add_argument("--aten-gemms", default="", help="comma-separated networks whose matrix products stay on ATen")
    ap.add_argument("--wait", type=float, default=330, help="seconds the compiles may take together")
    ap.add_argument("--conv-autotune", action="store_true", help="Triton convolution candidates too")
    ap.add_argument("--json", default=None, help="results file (default: results/zoo-compile/<machine>.json)")
    ap.add_argument("--one", nargs=4, metavar=("NAME", "SYNC_DIR", "DEADLINE", "BATCH"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        name, sync_dir, deadline, batch = a.one
        count = int(os.environ["ZOO_COMPILE_COUNT"])
        row = compile_then_time(name, Path(sync_dir), count, float(deadline), int(batch))
        print("ROW " + json.dumps(row), flush=True)
        return 0
    names = [n.strip() for n in a.networks.split(",") if n.strip()]
    env = dict(os.environ, ZOO_COMPILE_COUNT=str(len(names)), TORCHINDUCTOR_COMPILE_THREADS="2")
    if not a.conv_autotune:
        env["TORCHINDUCTOR_MAX_AUTOTUNE_CONV_BACKENDS"] = "ATEN"
    aten_gemms = {n.strip() for n in a.aten_gemms.split(",") if n.strip()}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as sync:
        (Path(sync) / "lock").touch()
        deadline = time.time() + a.wait
        procs = {n: subprocess.Popen([sys.executable, "-m", "tests.bench.zoo_compile", "--one", n, sync, str(deadline),
                                      str(a.batch)],
                                     env=dict(env, TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS="ATEN")
                                     if n.split("@")[0] in aten_gemms else env,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                 for n in names}
        for n, p in procs.items():
            try:  # a network still compiling long after the others have been timed is stopped
                out, _ = p.communicate(timeout=max(1.0, deadline - time.time()) + 60 * len(names))
            except subprocess.TimeoutExpired:
                p.kill()
                out = ""
            found = [json.loads(line[4:]) for line in out.splitlines() if line.startswith("ROW ")]
            rows.extend(found or [{"network": n, "failed": f"not compiled and timed within {a.wait:.0f} s "
                                                          f"(exit status {p.returncode})"}])
            print(json.dumps(rows[-1]), flush=True)
    import torch

    machine = machine_name(torch.cuda.get_device_name(0))
    benchmark = "zoo-compile" if a.batch == 1 else f"zoo-compile-b{a.batch}"
    doc = {"benchmark": benchmark, "machine": machine, "commit": current_commit(),
           "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "torch": torch.__version__,
           "conv_backends": "ATen and Triton" if a.conv_autotune else "ATen",
           "command": " ".join(["python3 -m tests.bench.zoo_compile", *(argv if argv is not None else sys.argv[1:])]),
           "rows": rows}
    out = Path(a.json) if a.json else RESULTS / benchmark / f"{machine}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(str(out), doc)
    return 1 if any("failed" in r for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
