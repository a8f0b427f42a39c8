"""Where the GPU time of a model-zoo network goes, kernel by kernel, for LayerLab and PyTorch side by side.

Both run as CUDA graphs under ``torch.profiler`` (CUPTI records every kernel on the device, whichever library
launched it), so the table shows device time per kernel name and the time between kernels. Not collected by the
test run; needs the GPU machine (PyTorch with torchvision, CuPy).

    PYTHONPATH=. python3 -m tests.bench.zoo_kernels --networks mobilenet_v2,efficientnet_b0 --batch 1,32
"""
from __future__ import annotations

import argparse
import collections
import functools
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


def torch_model(name: str) -> Any:
    """A torchvision architecture with seeded random weights and batch-norm statistics calibrated in train mode."""
    import torch
    import torchvision

    torch.manual_seed(0)
    builder = getattr(torchvision.models, name, None) or getattr(torchvision.models.segmentation, name)
    kwargs = {"weights": None}
    if "deeplab" in name or "lraspp" in name or "fcn" in name:
        kwargs["weights_backbone"] = None
        if "deeplab" in name or "fcn" in name:
            kwargs["aux_loss"] = False
    model = builder(**kwargs)
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(4, 3, 224, 224))
    return model.eval()


def export(model: Any, size: int, path: Path) -> None:
    import torch

    x = torch.randn(1, 3, size, size)
    torch.onnx.export(model, (x,), str(path), opset_version=17, input_names=["input"], dynamo=False,
                      dynamic_axes={"input": {0: "batch"}})


def kernel_table(prof: Any) -> tuple[dict[str, list[float]], float, float]:
    """Kernel name -> durations (µs), total kernel time and span (first start to last end) in µs."""
    by_name: dict[str, list[float]] = collections.defaultdict(list)
    starts, ends = [], []
    for e in prof.events():
        if e.device_type.name == "CUDA" and e.name not in ("Memcpy HtoD (Pageable -> Device)",):
            by_name[e.name].append(e.time_range.elapsed_us())
            starts.append(e.time_range.start)
            ends.append(e.time_range.end)
    total = sum(sum(v) for v in by_name.values())
    return by_name, total, (max(ends) - min(starts)) if starts else 0.0


def profiled(fn: Any, reps: int) -> Any:
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return prof


def show(title: str, prof: Any, reps: int, top: int) -> None:
    by_name, total, span = kernel_table(prof)
    print(f"-- {title}: {len(sum(by_name.values(), [])) / reps:.0f} kernels/iter, device {total / reps / 1000:.3f} ms/iter, "
          f"span {span / reps / 1000:.3f} ms/iter")
    rows = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:top]
    for name, ds in rows:
        print(f"   {sum(ds) / reps:8.1f} us  {len(ds) / reps:5.0f}x  {name[:150]}")


def rerun(net: Any, name: str) -> None:
    """One inference of the whole network (the input marked changed, so every layer runs)."""
    net.mark_affected(name)
    net.run()


def main(argv: list[str] | None = None) -> int:
    import cupy
    import torch

    from engine.backends import get_backend
    from engine.importers.onnx.importer import import_onnx
    from engine.network import Network
    from engine.plugins import default_registry
    from engine.tensor import TensorFormat

    ap = argparse.ArgumentParser()
    ap.add_argument("--networks", default="mobilenet_v2,mobilenet_v3_large,efficientnet_b0,densenet121")
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--format", default="fp16 nhwc")
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args(argv)
    torch.backends.cudnn.benchmark = True
    reg = default_registry()
    backend = get_backend("cupy", notice=None)
    tmp = Path(tempfile.mkdtemp())
    for name in a.networks.split(","):
        model = torch_model(name)
        path = tmp / f"{name}.onnx"
        export(model, a.size, path)
        for batch in map(int, a.batch.split(",")):
            res = import_onnx(path, input_shapes={"input": (batch, 3, a.size, a.size)}, registry=reg)
            net = Network(res.model, reg, backend, TensorFormat.parse(a.format), weights=res.weights_source())
            x = np.random.default_rng(0).standard_normal((batch, 3, a.size, a.size)).astype(np.float32)
            inp = next(iter(res.input_layers.values()))
            net.set_input(inp, x)
            net.run()

            ours = functools.partial(rerun, net, inp)
            ours()
            prof = profiled(ours, a.reps)
            cupy.cuda.Device().synchronize()
            show(f"{name} b{batch} LayerLab {a.format}", prof, a.reps, a.top)
            if a.no_torch:
                del net
                continue
            tm = model.cuda().half().to(memory_format=torch.channels_last)
            xt = torch.from_numpy(x).cuda().half().to(memory_format=torch.channels_last)
            with torch.no_grad():
                g = torch.cuda.CUDAGraph()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        tm(xt)
                torch.cuda.current_stream().wait_stream(s)
                with torch.cuda.graph(g):
                    tm(xt)
                prof = profiled(g.replay, a.reps)
            show(f"{name} b{batch} PyTorch fp16 channels-last graph", prof, a.reps, a.top)
            model = model.float().cpu().to(memory_format=torch.contiguous_format)
            del net
            cupy.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
