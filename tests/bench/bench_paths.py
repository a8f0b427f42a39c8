"""The user's whole path on the GPU: every tensor format, strict fp32 and TF32, batches, the
host-array-in -> host-array-out time and peak memory, LayerLab and PyTorch measured back to back in one
process, outputs checked against PyTorch's strict fp32 result first. Not collected by the test run.

    python -m tests.bench.bench_paths --device gpu                       # the whole table
    python -m tests.bench.bench_paths --nets resnet18 --batches 1 32 64 --formats "fp16 nhwc" --compile max-autotune

Like with like: LayerLab strict fp32 (the default, ``tf32`` off) against PyTorch with TF32 off; LayerLab with
``--tf32`` against PyTorch's defaults (cuDNN convolutions may use TF32). "best" is the faster of PyTorch eager
and eager replayed as a CUDA graph (and ``torch.compile`` when asked). Peak memory: LayerLab's tensor pool and
weights against ``torch.cuda.max_memory_allocated`` of one forward (weights included), both for the same input.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.backends import get_backend  # noqa: E402
from engine.network import Network  # noqa: E402
from engine.plugins import default_registry  # noqa: E402
from engine.tensor import Dims, TensorFormat  # noqa: E402
from tests.bench.bench_networks import GPU_SIZES, first_run, interleaved_ms, median_ms, rel_err, torch_compile_ms, torch_graph_ms  # noqa: E402
from tests.bench.networks import NETWORKS, torch_twin  # noqa: E402


def _torch_tf32(on: bool) -> None:
    import torch

    torch.backends.cudnn.allow_tf32 = on
    torch.backends.cuda.matmul.allow_tf32 = on


def bench_path(name: str, dims: Dims, fmt_text: str, tf32: bool, repeat: int,
               compile_mode: str | None = None) -> dict[str, Any]:
    """One network, format and TF32 choice: engine time, host->host time and peak memory for both."""
    import cupy
    import torch

    reg = default_registry()
    backend = get_backend("cupy", notice=None)
    fmt = TensorFormat.parse(fmt_text)
    model = NETWORKS[name](dims)
    x = np.random.default_rng(0).random(tuple(dims), dtype=np.float32)

    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    pool_base = pool.total_bytes()
    net = Network(model, reg, backend, fmt, fusing="on", tf32=tf32)
    ours, engine = first_run(net, x)

    def host_to_host() -> None:
        net.set_input("input", x)
        net.run()
        net.output("output")

    t_engine = median_ms(engine, repeat, backend.synchronize)
    ours_bytes = net.peak_memory_bytes + sum(int(np.prod(w.shape)) * w.dtype.itemsize
                                             for n in net.order for w in net.layer(n).weights.values())
    graph_status = net.graph_status
    backend.synchronize()
    ours_held = pool.total_bytes() - pool_base  # everything LayerLab's allocator holds for it: weights, tensors,
    # input staging, cuDNN workspaces and padded copies, the CUDA graph's buffers

    plain = Network(model, reg, backend, TensorFormat.parse("fp32 nchw"), fusing="off", graph_capture=False)
    plain.set_input("input", x)
    plain.run()  # loads the weights the twin copies
    forward, params = torch_twin(plain)
    del plain
    half = fmt.dtype == np.float16
    tdtype = torch.float16 if half else torch.float32
    mf = torch.channels_last if fmt.layout.value == "nhwc" else torch.contiguous_format
    with torch.inference_mode():
        _torch_tf32(False)
        p32 = {n: {k: v.to("cuda", torch.float32) for k, v in w.items()} for n, w in params.items()}
        ref = forward(torch.from_numpy(x).to("cuda"), p32).float().cpu().numpy()
        del p32
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        held_base = torch.cuda.memory_reserved()
        _torch_tf32(tf32 if not half else True)
        tparams = {n: {k: v.to("cuda", tdtype).contiguous(memory_format=mf) if v.dim() == 4 else v.to("cuda", tdtype)
                       for k, v in w.items()} for n, w in params.items()}
        tx = torch.from_numpy(x).to("cuda", tdtype).contiguous(memory_format=mf)
        theirs = forward(tx, tparams).float().cpu().numpy()
        torch.cuda.synchronize()
        torch_held = torch.cuda.max_memory_reserved() - held_base  # weights, input, one forward (eager, as a user runs)
        t_eager = median_ms(lambda: forward(tx, tparams), repeat, torch.cuda.synchronize)
        t_graph = torch_graph_ms(forward, tx, tparams, repeat)

        def torch_h2h() -> None:
            t = torch.from_numpy(x).to("cuda").to(tdtype).contiguous(memory_format=mf)
            forward(t, tparams).float().cpu().numpy()

        # in turns (a round of ours, then one of PyTorch's, ``repeat`` times): the pageable host copies (a
        # 38 MB input at resnet18 b64) drift by 10-25% over seconds, which measured one side after the other put
        # on whichever ran during it (b64 fp16 NHWC read 1.12 in one run and 0.86 in the next)
        h2h = interleaved_ms({"ours": lambda: (host_to_host(), backend.synchronize()),
                              "torch": lambda: (torch_h2h(), torch.cuda.synchronize())},
                             repeat, settle=1, pause=0.0)
        t_h2h, t_torch_h2h = h2h["ours"], h2h["torch"]
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        forward(tx, tparams)
        torch.cuda.synchronize()
        torch_bytes = torch.cuda.max_memory_allocated() - base + sum(
            v.numel() * v.element_size() for w in tparams.values() for v in w.values())
    t_compile = torch_compile_ms(forward, tx, tparams, repeat, compile_mode) if compile_mode else None
    _torch_tf32(False)
    best = min(t for t in (t_eager, t_graph, t_compile) if t is not None)
    cupy.get_default_memory_pool().free_all_blocks()
    return {"net": name, "dims": str(dims), "format": str(fmt), "tf32": tf32, "graph": graph_status,
            "layerlab_ms": t_engine, "torch_eager_ms": t_eager, "torch_graph_ms": t_graph, "torch_compile_ms": t_compile,
            "ratio_best": t_engine / best, "layerlab_h2h_ms": t_h2h, "torch_h2h_ms": t_torch_h2h,
            "ratio_h2h": t_h2h / t_torch_h2h, "layerlab_bytes": ours_bytes, "torch_bytes": torch_bytes,
            "ratio_mem": ours_bytes / torch_bytes, "layerlab_held_bytes": ours_held, "torch_held_bytes": torch_held,
            "ratio_held": ours_held / max(torch_held, 1), "rel_err_vs_fp32": rel_err(ours, ref),
            "torch_rel_err_vs_fp32": rel_err(theirs, ref)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nets", nargs="+", default=["dncnn", "unet", "resnet18"])
    ap.add_argument("--formats", nargs="+", default=["fp32 nchw", "fp32 nhwc", "fp16 nchw", "fp16 nhwc"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1], help="batch sizes (resnet18 only; others at 1)")
    ap.add_argument("--tf32", choices=("off", "on", "both"), default="both", help="fp32 rows: strict, TF32 or both")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--compile", metavar="MODE", help="also time torch.compile(mode=MODE)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    rows = []
    head = (f"{'network':<10}{'dims':<18}{'format':<11}{'tf32':<6}{'ours ms':>9}{'eager':>9}{'graph':>9}{'compile':>9}"
            f"{'/best':>7}{'h2h ours':>10}{'h2h torch':>10}{'/h2h':>6}{'mem':>6}{'held':>6}{'err':>9}  graph")
    print(head, flush=True)
    for name in a.nets:
        for batch in (a.batches if name == "resnet18" else [1]):
            d = GPU_SIZES[name]
            dims = Dims(batch, d.c, d.h, d.w)
            for fmt in a.formats:
                modes = [False] if fmt.startswith("fp16") else {"off": [False], "on": [True], "both": [False, True]}[a.tf32]
                for tf32 in modes:
                    try:
                        r = bench_path(name, dims, fmt, tf32, a.repeat, a.compile)
                    except Exception as exc:  # one failing row must not lose the table
                        print(f"{name} {dims} {fmt} tf32={tf32}: {type(exc).__name__}: {exc}", flush=True)
                        continue
                    rows.append(r)
                    comp = f"{r['torch_compile_ms']:9.3f}" if r["torch_compile_ms"] else f"{'-':>9}"
                    print(f"{name:<10}{r['dims']:<18}{r['format']:<11}{str(tf32):<6}{r['layerlab_ms']:9.3f}"
                          f"{r['torch_eager_ms']:9.3f}{r['torch_graph_ms']:9.3f}{comp}{r['ratio_best']:7.2f}"
                          f"{r['layerlab_h2h_ms']:10.2f}{r['torch_h2h_ms']:10.2f}{r['ratio_h2h']:6.2f}{r['ratio_mem']:6.2f}{r['ratio_held']:6.2f}"
                          f"{r['rel_err_vs_fp32']:9.1e}  {r['graph'][:40]}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
