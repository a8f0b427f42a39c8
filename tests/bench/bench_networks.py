"""Reference-network benchmark: LayerLab against PyTorch (and ONNX Runtime where available), measured in
one process, back to back, outputs compared first. Not collected by the test run.

    python -m tests.bench.bench_networks --device cpu            # 2-core CPU sizes of BENCHMARKS.md
    python -m tests.bench.bench_networks --device gpu            # H100/H200 sizes, fp32 NCHW and fp16 NHWC
    python -m tests.bench.bench_networks --device cpu --nets dncnn --repeat 5
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

# The user's path: `layerlab` and the designer never import PyTorch, so LayerLab's CPU kernels start Numba's
# OpenMP layer themselves. Imported here, before the peers import torch: with torch's OpenMP runtime loaded first
# the kernels fall back to Numba's work-queue threads (engine/backends/cpu/runtime.py), which is what a script
# importing torch first gets, not what the command line does (resnet18 on 2 cores: 15.5 ms against 26.3 ms).
import engine.backends.cpu.runtime  # noqa: F401, E402  (import order matters, see above)
from engine.backends import get_backend
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import Dims, TensorFormat
from tests.bench.networks import NETWORKS, torch_twin

CPU_SIZES = {"dncnn": Dims(1, 3, 256, 256), "unet": Dims(1, 3, 256, 256), "resnet18": Dims(1, 3, 224, 224)}
GPU_SIZES = {"dncnn": Dims(1, 3, 1080, 1920), "unet": Dims(1, 3, 512, 512), "resnet18": Dims(1, 3, 224, 224)}


def first_run(net: Network, x: np.ndarray) -> tuple[np.ndarray, Callable[[], None]]:
    """Run ``net`` once on ``x`` at its layer 'input': its 'output', and the call the benchmarks time as the engine's
    run (the input marked affected and every layer run again, no host copies)."""
    net.set_input("input", x)
    net.run()

    def again() -> None:
        net.mark_affected("input")
        net.run()
    return net.output("output"), again


def median_ms(fn: Callable[[], Any], repeat: int, sync: Callable[[], None], warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def interleaved_ms(fns: dict[str, Callable[[], Any]], repeat: int, settle: int = 3,
                   pause: float = 0.02) -> dict[str, float]:
    """Median time of each of ``fns`` measured in turns: ``repeat`` rounds, each running every function after
    a pause of ``pause`` seconds, ``settle`` times untimed and then once timed.

    This shared 2-core machine's speed drifts by 15-20% over seconds (dncnn: 141 to 169 ms for the same run);
    in turns the drift weighs on both sides alike, where timing one side after the other put it on whichever
    ran during it. The untimed runs are needed: the first runs after the other side's (ONNX Runtime's threads
    spin after a run) or after a pause were slow on both sides (resnet18: 21 instead of 11 ms with one untimed
    run, 11.4 with three)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for key, fn in fns.items():
            time.sleep(pause)
            for _ in range(settle):
                fn()
            t0 = time.perf_counter()
            fn()
            times[key].append((time.perf_counter() - t0) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def blas_kernel() -> str:
    """The BLAS NumPy uses and the kernel family it runs (threadpoolctl), with OPENBLAS_CORETYPE when set:
    that variable pins OpenBLAS to an older family (AVX2 "Haswell" kernels on an AVX-512 CPU run at about
    half speed), so CPU figures name it."""
    try:
        from threadpoolctl import threadpool_info  # noqa: PLC0415
    except ImportError:
        return "unknown"
    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    info = next((i for i in blas if "numpy" in i.get("filepath", "")), blas[0] if blas else None)
    if info is None:
        return "none"
    text = f"{info.get('internal_api')} {info.get('version')} {info.get('architecture')}"
    pinned = os.environ.get("OPENBLAS_CORETYPE")
    return f"{text} (OPENBLAS_CORETYPE={pinned})" if pinned else text


def torch_graph_ms(forward: Callable[..., Any], tx: Any, params: Any, repeat: int) -> float:
    """PyTorch eager replayed as a CUDA graph (the peer figure for latency-bound networks)."""
    import torch

    static_x = tx.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            forward(static_x, params)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        forward(static_x, params)
    return median_ms(graph.replay, repeat, torch.cuda.synchronize)


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a.astype(np.float64) - b) / max(np.linalg.norm(b.astype(np.float64)), 1e-30))


@contextlib.contextmanager
def _generic_cpu_path() -> Iterator[None]:
    old = os.environ.get("LAYERLAB_CPU_KERNELS")
    os.environ["LAYERLAB_CPU_KERNELS"] = "off"
    try:
        yield
    finally:
        if old is None:
            del os.environ["LAYERLAB_CPU_KERNELS"]
        else:
            os.environ["LAYERLAB_CPU_KERNELS"] = old


def bench(name: str, dims: Dims, device: str, fmt_text: str, repeat: int, fusing: str,
          compile_mode: str | None = None) -> dict[str, Any]:
    """One network: LayerLab against its peers (and torch.compile in ``compile_mode`` on the GPU)."""
    import torch

    reg = default_registry()
    backend = get_backend("cupy" if device == "gpu" else "numpy", notice=None)
    fmt = TensorFormat.parse(fmt_text)
    model = NETWORKS[name](dims)
    net = Network(model, reg, backend, fmt, fusing=fusing)
    x = np.random.default_rng(0).random(tuple(dims), dtype=np.float32)
    ours, run_ours = first_run(net, x)
    t_ours = median_ms(run_ours, repeat, backend.synchronize)
    cpu = get_backend("numpy", notice=None) if device == "gpu" else backend
    plain = Network(model, reg, cpu, TensorFormat.parse("fp32 nchw"), fusing="off")
    plain.set_input("input", x)
    with _generic_cpu_path():  # the reference: plain im2col + BLAS, not the kernels being measured
        plain.run()
    forward, params = torch_twin(plain)
    half = fmt.dtype == np.float16
    dev = "cuda" if device == "gpu" else "cpu"
    tdtype = torch.float16 if half and device == "gpu" else torch.float32
    mf = torch.channels_last if fmt.layout.value == "nhwc" and device == "gpu" else torch.contiguous_format
    tparams = {n: {k: v.to(dev, tdtype) for k, v in w.items()} for n, w in params.items()}
    tx = torch.from_numpy(x).to(dev, tdtype).contiguous(memory_format=mf)
    sync = torch.cuda.synchronize if device == "gpu" else (lambda: None)
    with torch.inference_mode():
        ref = forward(tx, tparams).float().cpu().numpy()
        t_torch = median_ms(lambda: forward(tx, tparams), repeat, sync)
        p32 = {n: {k: v.to(dev, torch.float32) for k, v in w.items()} for n, w in params.items()}
        ref32 = forward(torch.from_numpy(x).to(dev), p32).float().cpu().numpy()
        t_graph = torch_mem = None
        if device == "gpu":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            forward(tx, tparams)
            torch.cuda.synchronize()
            torch_mem = torch.cuda.max_memory_allocated()
            t_graph = torch_graph_ms(forward, tx, tparams, repeat)
    t_compile = None
    if compile_mode and device == "gpu":
        t_compile = torch_compile_ms(forward, tx, tparams, repeat, compile_mode)
    ort_ms = t_ours_alone = None
    if device == "cpu":  # ONNX Runtime peer, through LayerLab's own ONNX exporter (2 threads, like the machine)
        import onnxruntime as ort

        from engine.export.onnx_export import OnnxOptions, build_onnx

        proto, _ = build_onnx(plain, OnnxOptions(explicit_sizes=True))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 2
        sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        feed = {sess.get_inputs()[0].name: x}
        ort_out = sess.run(None, feed)[0]
        # side by side: LayerLab and ONNX Runtime in turns, so both see the same machine (the figure above
        # measured LayerLab alone, before either peer had run, and stays for the PyTorch column)
        turns = interleaved_ms({"ours": run_ours, "ort": lambda: sess.run(None, feed)}, max(repeat, 10))
        t_ours_alone, t_ours, ort_ms = t_ours, turns["ours"], turns["ort"]
    row = {"net": name, "ort_ms": ort_ms,
           "rel_err_vs_ort": rel_err(ours, ort_out) if ort_ms is not None else None, "dims": str(dims),
           "device": backend.device_name, "format": str(fmt), "fusing": fusing,
           "graph": net.graph_status, "cudnn": getattr(backend, "cudnn_status", "-"),
           "layerlab_ms": t_ours, "layerlab_alone_ms": t_ours_alone, "blas": blas_kernel() if device == "cpu" else None,
           "torch_ms": t_torch, "ratio": t_ours / t_torch, "torch_graph_ms": t_graph,
           "torch_compile_ms": t_compile, "compile_mode": compile_mode,
           "rel_err_vs_torch": rel_err(ours, ref), "rel_err_vs_fp32": rel_err(ours, ref32),
           "layerlab_bytes": net.peak_memory_bytes + sum(int(np.prod(w.shape)) * w.dtype.itemsize
                                                         for n in net.order for w in net.layer(n).weights.values()),
           "torch_bytes": torch_mem}
    return row


def torch_compile_ms(forward: Callable[..., Any], tx: Any, params: Any, repeat: int, mode: str) -> float | None:
    """Median time of ``forward`` compiled by torch.compile in ``mode`` (None, with the reason on stderr,
    when compiling fails on this machine)."""
    import torch

    try:
        compiled = torch.compile(lambda t: forward(t, params), mode=mode)
        with torch.no_grad():
            for _ in range(3):  # compile, autotune, warm up
                compiled(tx)
            return median_ms(lambda: compiled(tx), repeat, torch.cuda.synchronize)
    except Exception as exc:
        print(f"torch.compile({mode!r}) failed: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--nets", nargs="+", default=list(NETWORKS))
    ap.add_argument("--formats", nargs="+", default=None)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--fusing", default="on")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    import torch

    if a.device == "cpu":
        torch.set_num_threads(2)
    formats = a.formats or (["fp32 nchw"] if a.device == "cpu" else ["fp32 nchw", "fp16 nhwc"])
    sizes = CPU_SIZES if a.device == "cpu" else GPU_SIZES
    rows = []
    for name in a.nets:
        for f in formats:
            row = bench(name, sizes[name], a.device, f, a.repeat, a.fusing)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(f"{'net':<9} {'size':<14} {'format':<10} {'LayerLab ms':>12} {'PyTorch ms':>11} {'ratio':>7} {'rel err':>9}"
          f" {'ORT ms':>9} {'vs ORT':>7}")
    for r in rows:
        ort = f" {r['ort_ms']:>9.2f} {r['layerlab_ms'] / r['ort_ms']:>7.2f}" if r["ort_ms"] else ""
        print(f"{r['net']:<9} {r['dims']:<14} {r['format']:<10} {r['layerlab_ms']:>12.2f} {r['torch_ms']:>11.2f} "
              f"{r['ratio']:>7.2f} {r['rel_err_vs_torch']:>9.1e}{ort}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
