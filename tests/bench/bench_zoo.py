"""The model zoo: torchvision's architectures as a user brings them (random seeded weights, exported by
``torch.onnx.export``, opened by LayerLab's ONNX importer, the path of ``layerlab import``), outputs checked, then
timed against PyTorch (GPU) or ONNX Runtime (CPU) in one process. Not collected by the test run.

    python -m tests.bench.bench_zoo --device cpu                                  # the default list, batch 1
    python -m tests.bench.bench_zoo --device gpu --batch 1,32 --compile max-autotune
    python -m tests.bench.bench_zoo --device cpu --networks mobilenet_v3_large,efficientnet_b0 --profile
    python -m tests.bench.bench_zoo --networks convnext_tiny,deeplabv3_mobilenet_v3_large@384

Any torchvision classification or segmentation builder name works (``name@size`` sets the input size; segmentation
networks default to 512, the others to 224). Batch-norm statistics are calibrated on a few random batches in
train mode before export, so that fp16 activations stay in range (with torchvision's random initialisation
PyTorch's own fp16 result differs from its fp32 one by 100% on mobilenet_v2). The ONNX file and the PyTorch
weights are cached in ``~/.cache/layerlab/zoo`` (``LAYERLAB_ZOO_CACHE``), so every run and both peers use the
same network.

GPU: LayerLab in its default format (fp16 NHWC) against PyTorch fp16 channels-last with ``cudnn.benchmark`` on,
the best of eager and eager replayed as a CUDA graph (``--compile MODE`` adds ``torch.compile``); LayerLab strict
fp32 NCHW against PyTorch with TF32 off. CPU: LayerLab in its default format (fp32) against ONNX Runtime with 2
threads on the same ONNX file, the two run in turns, medians. Accuracy: fp32 within 1e-4 (relative L2) of ONNX
Runtime on the same file; fp16 within twice PyTorch's own fp16 error against its strict fp32 result.

Writes ``tests/bench/results/zoo/<machine>.json`` (``--json`` elsewhere); ``--profile`` prints LayerLab's
per-layer profile (the engine's, as ``layerlab profile`` prints it), the top layers with their input sizes and
parameters, and the time by layer kind (depthwise, squeeze-excitation 1x1, pointwise, concatenation, ...).
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# bench_networks first: it starts LayerLab's CPU kernel threads before torch is imported (see its comment)
from engine import report as rep  # noqa: E402
from engine.importers.onnx import import_onnx  # noqa: E402
from engine.network import Network  # noqa: E402
from engine.plugins import default_registry  # noqa: E402
from engine.registry import Registry  # noqa: E402
from engine.run import RunSpec, make_report, open_network, run_timed  # noqa: E402
from tests.bench.bench_networks import (  # noqa: E402
    blas_kernel,
    interleaved_ms,
    median_ms,
    rel_err,
    torch_compile_ms,
    torch_graph_ms,
)

DEFAULT_NETWORKS = ("resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "densenet121",
                    "deeplabv3_mobilenet_v3_large", "resnet18")
#: the networks the targets name (resnet18: no worse than BENCHMARKS.md's figures, no ratio target)
TARGET_NETWORKS = frozenset(DEFAULT_NETWORKS) - {"resnet18"}
CACHE = Path(os.environ.get("LAYERLAB_ZOO_CACHE", "~/.cache/layerlab/zoo")).expanduser()
RESULTS = Path(__file__).resolve().parent / "results" / "zoo"
OPSET = 17
FP32_LIMIT = 1e-4
CPU_THREADS = 2
#: untimed runs of each side before its timed one, in turns on the CPU: each side's first runs carry the other's
#: leftovers. ONNX Runtime's pool threads spin on after its run and share our second core with our kernels' worker
#: (every launch of ours waits for its worker): on 2 Zen 5 cores mobilenet_v2's first two runs after ONNX Runtime's
#: turn took 7.1 and 7.1 ms, the third 3.09, the fifth on 2.95-2.98 (ONNX Runtime's own: 3.68, 3.37, 3.25, then
#: 3.16-3.19 after ours, whose workers spin 20000 times). Eight leave both sides at their steady state (three had
#: timed our fourth run, 2-5% above it, and varied more between hours).
CPU_SETTLE = 8


# ---- torchvision ------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _no_fake_registrations() -> Iterator[None]:
    """``torch.library.register_fake`` as a no-op: a torchvision wheel built for another torch (the CUDA build
    beside the CPU build of torch) fails while registering fake implementations of its C operators, which the
    model definitions do not use."""
    import torch

    original = torch.library.register_fake

    def register_fake(op: Any, fn: Any = None, /, *args: Any, **kwargs: Any) -> Any:
        return fn if fn is not None else (lambda f: f)

    torch.library.register_fake = register_fake  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.library.register_fake = original


def import_torchvision() -> Any:
    """``torchvision``, imported normally, or where that fails on its C operators, without their fake
    implementations (``_no_fake_registrations``); the failed import's half-loaded modules are dropped first."""
    try:
        import torchvision
    except RuntimeError as exc:
        print(f"note: torchvision's import failed ({str(exc).splitlines()[0]}); importing its model definitions "
              "without the fake implementations of its C operators", file=sys.stderr)
        for key in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
            del sys.modules[key]
        with _no_fake_registrations():
            import torchvision
    return torchvision


# ---- the networks -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ZooNet:
    """One network of the zoo: a torchvision builder name and the input's height and width."""

    name: str
    size: int
    segmentation: bool

    @property
    def key(self) -> str:
        return f"{self.name}_{self.size}"


def zoo_net(text: str) -> ZooNet:
    """``name`` or ``name@size`` -> a ZooNet (a clear error for a name torchvision does not build)."""
    tv = import_torchvision()
    name, _, size = text.strip().partition("@")
    if name not in tv.models.list_models():
        print(f"bench_zoo: {name!r} is not a torchvision model (e.g. {', '.join(DEFAULT_NETWORKS)})", file=sys.stderr)
        raise SystemExit(2)
    seg = name in tv.models.list_models(module=tv.models.segmentation)
    if size and not size.isdigit():
        print(f"bench_zoo: {text!r}: expected NAME or NAME@SIZE", file=sys.stderr)
        raise SystemExit(2)
    return ZooNet(name, int(size) if size else (512 if seg else 224), seg)


def cpu_opener(text: str) -> Callable[[], tuple[Network, str, str]] | None:
    """A function that imports the network named ``text`` (``zoo_net``) from the ONNX file an earlier run exported
    (``CACHE``) and opens it on the NumPy backend in its default format, run once on a seeded random image: the
    network, its input and output layers. None, with the command that exports the file printed, where there is
    none. For the benchmarks that open one network several ways in one process."""
    net = zoo_net(text)
    path = CACHE / f"{net.key}.onnx"
    if not path.is_file():
        print(f"{path} is missing: python -m tests.bench.bench_zoo --device cpu --networks {text} exports it")
        return None
    dims = (1, 3, net.size, net.size)
    registry = default_registry()
    x = np.random.default_rng(0).standard_normal(dims, dtype=np.float32)
    spec = RunSpec(backend="numpy", format="auto", fusing="on", profiling=False)

    def open_it() -> tuple[Network, str, str]:
        model, inp, out = import_network(path, dims, registry)
        return _open(model, spec, registry, inp, x), inp, out
    return open_it


def build_torch(net: ZooNet, seed: int = 0) -> Any:
    """The architecture with seeded random weights, batch-norm statistics calibrated on random batches, in eval
    mode, on the CPU in fp32. Cached weights (``<name>_<size>.pt``) are loaded when present: the same network as
    the cached ONNX file."""
    import torch

    tv = import_torchvision()
    torch.manual_seed(seed)
    kwargs: dict[str, Any] = {"weights": None}
    if net.segmentation:
        kwargs.update(weights_backbone=None, aux_loss=False)
    inner = tv.models.get_model(net.name, **kwargs)
    module: Any = inner
    if net.segmentation:
        class Segmentation(torch.nn.Module):  # the "out" entry of torchvision's dict
            def __init__(self, m: Any) -> None:
                super().__init__()
                self.m = m

            def forward(self, x: Any) -> Any:
                return self.m(x)["out"]

        module = Segmentation(inner)
    weights = CACHE / f"{net.key}.pt"
    if weights.exists():
        module.load_state_dict(torch.load(weights, map_location="cpu"))
    else:
        calibrate_batch_norm(module, net.size, seed)
        CACHE.mkdir(parents=True, exist_ok=True)
        torch.save(module.state_dict(), weights.with_suffix(".pt.tmp"))
        os.replace(weights.with_suffix(".pt.tmp"), weights)
    return module.eval()


def calibrate_batch_norm(module: Any, size: int, seed: int, batches: int = 3) -> None:
    """Batch-norm running statistics as the average over ``batches`` random normal batches (train mode, cumulative
    average), so that activations stay in fp16's range with random weights."""
    import torch

    norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    gen = torch.Generator().manual_seed(seed + 1)
    n = 4 if size <= 256 else 2
    module.train()
    with torch.no_grad():
        for _ in range(batches):
            module(torch.randn(n, 3, size, size, generator=gen))
    module.eval()


def onnx_file(net: ZooNet, module: Any) -> tuple[Path, str]:
    """The cached ONNX file of ``net`` (batch dimension symbolic), exported when missing: the default exporter
    first, the legacy one (``dynamo=False``) where the default fails or cannot write opset 17. Returns the file
    and the exporter that wrote it ("cached" when it was there)."""
    import onnx
    import torch

    path = CACHE / f"{net.key}.onnx"
    if path.exists():
        return path, "cached"
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.onnx")
    x = torch.randn(1, 3, net.size, net.size)
    exporter = "dynamo"
    try:
        with contextlib.redirect_stdout(sys.stderr):
            program = torch.onnx.export(module, (x,), None, opset_version=OPSET, input_names=["input"],
                                        output_names=["output"], dynamic_shapes=({0: torch.export.Dim("batch")},))
        proto = program.model_proto
        opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
        if opset != OPSET:
            raise RuntimeError(f"the default exporter wrote opset {opset}")
        onnx.save(proto, str(tmp))
    except Exception as exc:  # the documented fallback: the legacy (TorchScript) exporter
        print(f"note: {net.name}: torch.onnx.export's default exporter: {type(exc).__name__}: "
              f"{str(exc).splitlines()[0][:200]}; using dynamo=False", file=sys.stderr)
        exporter = "legacy"
        torch.onnx.export(module, (x,), str(tmp), opset_version=OPSET, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, dynamo=False)
    os.replace(tmp, path)
    return path, exporter


def import_network(path: Path, dims: tuple[int, int, int, int], registry: Registry) -> tuple[Any, str, str]:
    """The imported model (weights in memory, as the designer holds an import) and its input and output layers:
    ``import_onnx`` exactly as ``layerlab import`` calls it."""
    result = import_onnx(path, input_shapes={"input": dims}, registry=registry)
    model = result.model
    model.weights_source = result.weights_source()
    return model, result.input_layers["input"], result.output_layers["output"]


# ---- one network -------------------------------------------------------------------------------------------------
def _row(net: ZooNet, batch: int, fmt: str, ours_ms: float, peer: str, peer_ms: float, err: float, limit: float,
         target: float | None, **extra: Any) -> dict[str, Any]:
    return {"network": net.name, "input": net.size, "batch": batch, "format": fmt, "layerlab_ms": ours_ms,
            "peer": peer, "peer_ms": peer_ms, "ratio": ours_ms / peer_ms, "target": target, "error": err,
            "error_limit": limit, "error_ok": bool(err <= limit), **extra}


def _open(model: Any, spec: RunSpec, registry: Registry, inp: str, x: np.ndarray) -> Network:
    net = open_network(model, spec, registry)
    net.set_input(inp, x)
    net.run()
    return net


def _timer(net: Network, inp: str) -> Any:
    def run() -> None:
        net.mark_affected(inp)
        net.run()
    return run


def bench_cpu(net: ZooNet, module: Any, path: Path, batch: int, repeat: int, registry: Registry,
              profile_top: int) -> list[dict[str, Any]]:
    """LayerLab in the CPU's default format against ONNX Runtime (2 threads) on the same file, in turns."""
    import onnxruntime as ort

    dims = (batch, 3, net.size, net.size)
    x = np.random.default_rng(0).standard_normal(dims, dtype=np.float32)
    model, inp, out = import_network(path, dims, registry)
    spec = RunSpec(backend="numpy", format="auto", fusing="on", profiling=False)
    lnet = _open(model, spec, registry, inp, x)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = CPU_THREADS
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"input": x})[0]
    ours = lnet.output(out).reshape(ref.shape)
    err = rel_err(ours, ref)
    times = interleaved_ms({"ours": _timer(lnet, inp), "ort": lambda: sess.run(None, {"input": x})}, repeat,
                           settle=CPU_SETTLE)
    target = 1.0 if net.name in TARGET_NETWORKS and batch == 1 else None
    row = _row(net, batch, str(lnet.fmt), times["ours"], "onnxruntime 2 threads", times["ort"], err, FP32_LIMIT,
               target, fusions=_fusions(lnet), layers=len(lnet.order))
    if profile_top:
        row["profile"] = profile_network(lnet, spec, model, path, profile_top)
    return [row]


def bench_gpu(net: ZooNet, module: Any, path: Path, batch: int, repeat: int, registry: Registry,
              compile_mode: str | None, profile_top: int) -> list[dict[str, Any]]:
    """LayerLab fp16 NHWC (the default) against PyTorch fp16 channels-last, and strict fp32 NCHW against PyTorch
    with TF32 off; best of eager and CUDA graph (and torch.compile in ``compile_mode``)."""
    import onnxruntime as ort
    import torch

    dims = (batch, 3, net.size, net.size)
    x = np.random.default_rng(0).standard_normal(dims, dtype=np.float32)
    model, inp, out = import_network(path, dims, registry)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref_ort = sess.run(None, {"input": x})[0]
    torch.backends.cudnn.benchmark = True
    rows = []

    def peer_times(m: Any, tx: Any, compiled: bool) -> dict[str, float | None]:
        def forward(t: Any, _: Any) -> Any:
            return m(t)
        with torch.inference_mode():
            eager = median_ms(lambda: m(tx), repeat, torch.cuda.synchronize)
            graph = torch_graph_ms(forward, tx, None, repeat)
        comp = torch_compile_ms(forward, tx, None, repeat, compile_mode) if compiled and compile_mode else None
        return {"eager": eager, "graph": graph, "compile": comp}

    def tf32(on: bool) -> None:
        torch.backends.cudnn.allow_tf32 = on
        torch.backends.cuda.matmul.allow_tf32 = on

    # strict fp32 reference and PyTorch's own fp16 error against it
    tf32(False)
    m32 = copy.deepcopy(module).cuda().eval()
    tx32 = torch.from_numpy(x).cuda()
    with torch.inference_mode():
        ref32 = m32(tx32).float().cpu().numpy()
    m16 = copy.deepcopy(module).cuda().half().to(memory_format=torch.channels_last).eval()
    tx16 = tx32.half().contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        torch_err16 = rel_err(m16(tx16).float().cpu().numpy(), ref32)

    # fp16 NHWC: LayerLab's default on the GPU
    spec16 = RunSpec(backend="cupy", format="auto", fusing="on", profiling=False)
    lnet = _open(model, spec16, registry, inp, x)
    err = rel_err(lnet.output(out).reshape(ref32.shape), ref32)
    ours = median_ms(_timer(lnet, inp), repeat, lnet.backend.synchronize)
    tf32(True)  # PyTorch's default for its half-precision run
    peer = peer_times(m16, tx16, True)
    best = min(v for k, v in peer.items() if k != "compile" and v is not None)
    target = 1.0 if net.name in TARGET_NETWORKS else None
    rows.append(_row(net, batch, str(lnet.fmt), ours, "torch fp16 channels-last, best of eager/graph", best, err,
                     2 * torch_err16, target, torch_eager_ms=peer["eager"], torch_graph_ms=peer["graph"],
                     torch_compile_ms=peer["compile"], compile_mode=compile_mode, torch_fp16_error=torch_err16,
                     graph=lnet.graph_status, fusions=_fusions(lnet), layers=len(lnet.order)))
    if profile_top:
        rows[-1]["profile"] = profile_network(lnet, spec16, model, path, profile_top)
    del lnet, m16

    # strict fp32 NCHW against PyTorch with TF32 off
    tf32(False)
    spec32 = replace(spec16, format="fp32 nchw", tf32=False)
    lnet = _open(model, spec32, registry, inp, x)
    err = rel_err(lnet.output(out).reshape(ref_ort.shape), ref_ort)
    ours = median_ms(_timer(lnet, inp), repeat, lnet.backend.synchronize)
    peer = peer_times(m32, tx32, False)
    best = min(v for k, v in peer.items() if v is not None)
    rows.append(_row(net, batch, str(lnet.fmt), ours, "torch fp32 (TF32 off), best of eager/graph", best, err,
                     FP32_LIMIT, target if batch == 1 else None, torch_eager_ms=peer["eager"],
                     torch_graph_ms=peer["graph"], graph=lnet.graph_status, fusions=_fusions(lnet),
                     layers=len(lnet.order)))
    del lnet, m32
    torch.cuda.empty_cache()
    return rows


def _fusions(net: Network) -> int:
    return len(net.fused.applied) if net.fused else 0


# ---- profile -----------------------------------------------------------------------------------------------------
def _kernel(layer: Any) -> tuple[int, int] | None:
    text = str(layer.p.get("kernel_size", ""))
    nums = [int(v) for v in re.findall(r"\d+", text)]
    return (nums[-2], nums[-1]) if len(nums) >= 2 else None


def layer_kind(net: Network, name: str) -> str:
    """What a layer is, for the time-by-kind summary: depthwise / grouped / 1x1 on 1x1 inputs (squeeze-excitation)
    / pointwise / dense KxK convolutions, the SE multiply, global pooling, concatenation, ..., else its type."""
    layer = net.layer(name)
    kind = layer.desc.name
    srcs = [s for s in net.nodes[name].inputs if s]
    ins = [net.dims(s) for s in srcs]
    if kind == "pooling":
        return "global pooling" if str(layer.p.get("global", "")).lower() in ("true", "1") else "pooling"
    k = _kernel(layer) if "conv" in kind and "deconv" not in kind else None
    if k is not None and ins:
        groups = int(layer.p.get("groups", 1) or 1)
        cin = ins[0].c
        if groups > 1 and groups == cin:
            return f"depthwise conv {k[0]}x{k[1]}"
        if groups > 1:
            return f"grouped conv {k[0]}x{k[1]}"
        if k == (1, 1) and ins[0].h == 1 and ins[0].w == 1:
            return "1x1 conv on 1x1 input (squeeze-excitation)"
        if k == (1, 1):
            return "pointwise 1x1 conv"
        return f"dense conv {k[0]}x{k[1]}"
    if kind == "element_wise" and str(layer.p.get("operation")) == "product" and len(ins) == 2 and any(
            d.h == 1 and d.w == 1 for d in ins):
        return "multiply by a per-channel scale (SE)"
    return kind


def profile_network(net: Network, spec: RunSpec, model: Any, path: Path, top: int) -> dict[str, Any]:
    """LayerLab's per-layer profile (``engine.run.run_timed`` with profiling, the report of ``layerlab profile``):
    prints the report's layer table, the top layers with their sizes and parameters, and the time by kind."""
    pspec = replace(spec, profiling=True, iterations=5, warmup=1)
    result = run_timed(net, pspec)
    doc = make_report(net, result, pspec, model=model, model_path=str(path))
    print(f"\n=== profile: {model.name} ===")
    print(rep.summary(doc))
    print(rep.layer_table(doc, top))
    rows = sorted(doc["layers"], key=lambda r: -r["time_ms"]["mean"])
    total = sum(r["time_ms"]["mean"] for r in rows) or 1e-12
    print(f"\n{'layer':<44} {'kind':<40} {'act':<13} {'input':<16} {'output':<16} {'ms':>8} {'share':>6} {'GFLOP/s':>8}")
    top_rows = []
    for r in rows[:top]:
        name = r["name"]
        layer = net.layer(name)
        srcs = [s for s in net.nodes[name].inputs if s]
        ins = " ".join(str(net.dims(s)) for s in srcs)
        act = layer.activation.name if layer.activation is not None else "-"
        gflops = r["flops"] / max(r["time_ms"]["mean"], 1e-9) / 1e6
        kind = layer_kind(net, name)
        top_rows.append({"layer": name, "type": r["type"], "kind": kind, "activation": act, "input": ins,
                         "output": r["output_dims"], "ms": r["time_ms"]["mean"], "share": r["time_ms"]["mean"] / total,
                         "gflop_per_s": gflops})
        print(f"{name[-44:]:<44} {kind[:40]:<40} {act[:13]:<13} {ins[:16]:<16} {r['output_dims'][:16]:<16} "
              f"{r['time_ms']['mean']:>8.3f} {100 * r['time_ms']['mean'] / total:>5.1f}% {gflops:>8.2f}")
    by_kind: dict[str, list[float]] = {}
    for r in rows:
        kind = layer_kind(net, r["name"])
        acc = by_kind.setdefault(kind, [0.0, 0, 0.0])
        acc[0] += r["time_ms"]["mean"]
        acc[1] += 1
        acc[2] += r["flops"]
    print(f"\n{'kind':<44} {'layers':>6} {'ms':>9} {'share':>6} {'GFLOP/s':>8}")
    kinds = []
    for kind, (ms, count, flops) in sorted(by_kind.items(), key=lambda kv: -kv[1][0]):
        kinds.append({"kind": kind, "layers": count, "ms": ms, "share": ms / total,
                      "gflop_per_s": flops / max(ms, 1e-9) / 1e6})
        print(f"{kind[:44]:<44} {count:>6} {ms:>9.3f} {100 * ms / total:>5.1f}% {kinds[-1]['gflop_per_s']:>8.2f}")
    return {"sum_layers_ms": total, "network_ms": doc["network"]["median_ms"], "top": top_rows, "by_kind": kinds}


# ---- machine, table, main ----------------------------------------------------------------------------------------
def machine_name(device: str) -> str:
    """The GPU's name, or the CPU's model name (from /proc/cpuinfo where there is one)."""
    if device == "gpu":
        import torch

        return torch.cuda.get_device_name(0)
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _commit() -> str:
    try:
        root = Path(__file__).resolve().parents[2]
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
        return f"{sha}{' (modified)' if dirty else ''}"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'network':<30} {'input':>5} {'batch':>5} {'format':<10} {'LayerLab ms':>11} {'peer ms':>9} "
          f"{'ratio':>6} {'target':>6} {'error':>9} {'limit':>9}  peer")
    for r in rows:
        if "failed" in r:
            print(f"{r['network']:<30} {r['input']:>5} {r['batch']:>5} FAILED: {r['failed']}")
            continue
        target = f"{r['target']:.2f}" if r["target"] is not None else "-"
        mark = "" if r["error_ok"] else " DIFFERS"
        print(f"{r['network']:<30} {r['input']:>5} {r['batch']:>5} {r['format']:<10} {r['layerlab_ms']:>11.3f} "
              f"{r['peer_ms']:>9.3f} {r['ratio']:>6.2f} {target:>6} {r['error']:>9.1e} {r['error_limit']:>9.1e}"
              f"{mark}  {r['peer']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--networks", default=",".join(DEFAULT_NETWORKS),
                    help="comma-separated torchvision builder names, NAME@SIZE for another input size")
    ap.add_argument("--batch", default=None, help="comma-separated batch sizes (default: 1 on the CPU, 1,32 on the GPU)")
    ap.add_argument("--repeat", type=int, default=20, help="timed runs per side (CPU: rounds in turns)")
    ap.add_argument("--compile", metavar="MODE", help="GPU: also time torch.compile(mode=MODE), e.g. max-autotune")
    ap.add_argument("--profile", action="store_true", help="print LayerLab's per-layer profile of each network")
    ap.add_argument("--top", type=int, default=15, help="layers shown by --profile")
    ap.add_argument("--json", default=None, help="results file (default: tests/bench/results/zoo/<machine>.json)")
    a = ap.parse_args(argv)
    try:
        batches = [int(b) for b in (a.batch or ("1" if a.device == "cpu" else "1,32")).split(",") if b.strip()]
    except ValueError:
        ap.error(f"--batch {a.batch!r}: expected comma-separated integers")
    if not batches or min(batches) < 1:
        ap.error("--batch: batch sizes must be 1 or more")
    if a.repeat < 1:
        ap.error("--repeat must be 1 or more")
    import torch

    if a.device == "cpu":
        torch.set_num_threads(CPU_THREADS)
    load_start = os.getloadavg() if hasattr(os, "getloadavg") else None  # a busy machine skews the CPU ratios
    nets = [zoo_net(t) for t in a.networks.split(",") if t.strip()]
    registry = default_registry()
    rows: list[dict[str, Any]] = []
    exporters: dict[str, str] = {}
    for net in nets:
        try:
            module = build_torch(net)
            path, exporters[net.key] = onnx_file(net, module)
        except Exception as exc:
            rows.append({"network": net.name, "input": net.size, "batch": "-", "failed": f"export: {type(exc).__name__}: {exc}"})
            traceback.print_exc()
            continue
        for batch in batches:
            try:
                if a.device == "cpu":
                    new = bench_cpu(net, module, path, batch, a.repeat, registry, a.top if a.profile else 0)
                else:
                    new = bench_gpu(net, module, path, batch, a.repeat, registry, a.compile, a.top if a.profile else 0)
            except Exception as exc:  # one network failing must not lose the table
                traceback.print_exc()
                rows.append({"network": net.name, "input": net.size, "batch": batch,
                             "failed": f"{type(exc).__name__}: {exc}"})
                continue
            rows.extend(new)
            print_table(new)
            sys.stdout.flush()
    print("\n=== model zoo ===")
    print_table(rows)
    machine = machine_name(a.device)
    notes = []
    if a.device == "cpu":
        notes.append(f"LayerLab and ONNX Runtime ({CPU_THREADS} threads) in turns, medians of {a.repeat} rounds; "
                     f"BLAS {blas_kernel()}")
    doc = {"machine": machine, "device": a.device, "commit": _commit(), "date": datetime.datetime.now().isoformat(
        timespec="seconds"), "torch": torch.__version__, "torchvision": import_torchvision().__version__,
        "onnxruntime": __import__("onnxruntime").__version__, "cpu_count": os.cpu_count(), "repeat": a.repeat,
        "command": " ".join(["python -m tests.bench.bench_zoo", *(argv if argv is not None else sys.argv[1:])]),
        "load_average_start_end": [load_start, os.getloadavg() if hasattr(os, "getloadavg") else None],
        "exporters": exporters, "notes": notes, "rows": rows}
    out = Path(a.json) if a.json else RESULTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', machine).strip('_')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, default=str))
    print(f"wrote {out}")
    return 1 if any("failed" in r or not r.get("error_ok", True) for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
