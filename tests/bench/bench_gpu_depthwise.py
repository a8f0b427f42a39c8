"""The squeeze-excitation and depthwise kernels of the CuPy backend against cuDNN and PyTorch on the layer shapes of
mobilenet_v2, mobilenet_v3_large and efficientnet_b0: each depthwise convolution (fp16 NHWC at batch 1 and 32, strict
fp32 NCHW at batch 1) by our kernel, cuDNN's heuristic plan, cuDNN's timed plan and PyTorch (channels-last,
``cudnn.benchmark``; TF32 off for fp32), then global average pooling and the gated channel scale. Device times: the
kernels' durations from CUPTI (torch.profiler), as tests/bench/zoo_kernels.py measures networks:
python -m tests.bench.bench_gpu_depthwise [--repeat 50]"""
from __future__ import annotations

import argparse
import contextlib

import numpy as np

#: (channels, input size, stride, kernel) of the depthwise layers of the three networks at 224x224
LAYERS = sorted({
    (32, 112, 1, 3), (96, 112, 2, 3), (144, 56, 1, 3), (144, 56, 2, 3), (192, 28, 1, 3), (192, 28, 2, 3),
    (384, 14, 1, 3), (576, 14, 1, 3), (576, 14, 2, 3), (960, 7, 1, 3),  # mobilenet_v2
    (16, 112, 1, 3), (64, 112, 2, 3), (72, 56, 1, 3), (72, 56, 2, 5), (120, 28, 1, 5), (240, 28, 2, 3),
    (200, 14, 1, 3), (184, 14, 1, 3), (480, 14, 1, 3), (672, 14, 1, 3), (672, 14, 2, 5), (960, 7, 1, 5),  # v3
    (144, 56, 2, 5), (240, 28, 1, 5), (480, 14, 1, 5), (672, 14, 1, 5), (1152, 7, 1, 5), (1152, 7, 1, 3),  # effnet
})

#: (channels, size) of global average pools of squeeze-excitation blocks and heads
POOLS = [(32, 112), (96, 56), (144, 56), (240, 28), (480, 14), (672, 14), (1152, 7), (1280, 7), (960, 7)]


def main() -> None:
    import cupy

    from engine.backends import get_backend
    from engine.backends.cuda import cudnn, depthwise, pooling
    from engine.backends.cuda.channel_scale import channel_scale
    from tests.bench.zoo_kernels import kernel_table, profiled

    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    backend = get_backend("cupy", notice=None)
    backend.activate()
    stream = cupy.cuda.get_current_stream()
    try:
        import torch
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    except Exception:  # no PyTorch: its column stays empty
        torch = None

    def timed(fn) -> float | None:
        """Device time of one ``fn()`` in milliseconds: the durations of the kernels it launched (CUPTI, through
        torch.profiler) over ``repeat`` calls; launching from Python costs more than these kernels take."""
        if torch is None:
            return None
        _, total, _ = kernel_table(profiled(fn, a.repeat))
        return total / a.repeat / 1000.0

    def torch_timed(fn) -> float | None:
        return timed(fn)

    heuristic = cudnn.CudnnConvolutions(stream)
    tuned = cudnn.CudnnConvolutions(stream)
    rng = np.random.default_rng(0)

    def conv_row(n: int, c: int, size: int, stride: int, k: int, dtype, nhwc: bool) -> list[float | None]:
        x = rng.standard_normal((n, c, size, size)).astype(dtype)
        w = (rng.standard_normal((c, 1, k, k)) / k).astype(dtype)
        b = rng.standard_normal(c).astype(dtype)
        ho = (size + 2 * (k // 2) - k) // stride + 1
        if nhwc:
            xl = cupy.asarray(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).transpose(0, 3, 1, 2)
            wl = cupy.asarray(np.ascontiguousarray(w.transpose(0, 2, 3, 1))).transpose(0, 3, 1, 2)
            out = cupy.empty((n, ho, ho, c), dtype).transpose(0, 3, 1, 2)
        else:
            xl, wl, out = cupy.asarray(x), cupy.asarray(w), cupy.empty((n, c, ho, ho), dtype)
        bl = cupy.asarray(b)
        geo = ((stride, stride), (k // 2, k // 2), (1, 1))
        wd = depthwise.weights(wl)
        ours = timed(lambda: depthwise.conv_depthwise(xl, wd, bl, out, (k, k), geo[0], geo[1], "relu", {}))
        ref = cupy.asnumpy(out).astype(np.float32)
        times: list[float | None] = [ours]
        for conv, tune in ((heuristic, 0), (tuned, 8)):
            cudnn.AUTOTUNE = tune
            if conv.conv(xl, wl, bl, out, *geo, "relu", {}) is None:
                times.append(None)
                continue
            err = float(np.abs(cupy.asnumpy(out).astype(np.float32) - ref).max())
            assert err < 2e-2 * max(1.0, float(np.abs(ref).max())), f"cuDNN differs from ours by {err}"
            times.append(timed(lambda conv=conv: conv.conv(xl, wl, bl, out, *geo, "relu", {})))
        if torch is not None:
            tx = torch.as_tensor(xl, device="cuda")
            tw = torch.as_tensor(wl, device="cuda")
            tb = torch.as_tensor(bl, device="cuda")
            fn = torch.nn.functional
            times.append(torch_timed(lambda: fn.relu(fn.conv2d(tx, tw, tb, stride, k // 2, 1, c), inplace=True)))
        return times

    def show(times: list[float | None]) -> str:
        return " ".join("      -" if t is None else f"{t * 1e3:7.1f}" for t in times)

    for title, n, dtype, nhwc in (("fp16 NHWC batch 1", 1, np.float16, True), ("fp16 NHWC batch 32", 32, np.float16, True),
                                  ("fp32 NCHW batch 1 (strict)", 1, np.float32, False)):
        print(f"depthwise 3x3/5x5 + bias + relu, {title}: us for ours, cuDNN heuristic, cuDNN timed, PyTorch")
        totals = np.zeros(4)
        for c, size, stride, k in LAYERS:
            t = conv_row(n, c, size, stride, k, dtype, nhwc)
            totals += [v or 0.0 for v in t] + [0.0] * (4 - len(t))
            print(f"  {c:5d} ch {size:3d}^2 s{stride} {k}x{k}: {show(t)}")
        print(f"  total:                  {show(list(totals))}")

    def pool_row(n: int, c: int, size: int, dtype, nhwc: bool) -> list[float | None]:
        shape = (n, size, size, c) if nhwc else (n, c, size, size)
        x = cupy.asarray(rng.standard_normal(shape).astype(dtype))
        out = cupy.empty((n, 1, 1, c) if nhwc else (n, c, 1, 1), dtype)
        t = [timed(lambda: pooling.global_pool(x, out, False, nhwc)),
             timed(lambda: pooling.pool2d(x, out, False, (size, size), (1, 1), (0, 0), True, nhwc))]
        if torch is not None:
            tx = torch.as_tensor(x, device="cuda")
            t.append(torch_timed(lambda: tx.mean((1, 2) if nhwc else (2, 3), keepdim=True)))
        return t

    def scale_row(n: int, c: int, size: int, dtype, nhwc: bool) -> list[float | None]:
        shape = (n, size, size, c) if nhwc else (n, c, size, size)
        x = cupy.asarray(rng.standard_normal(shape).astype(dtype))
        g = cupy.asarray(rng.standard_normal((n, 1, 1, c) if nhwc else (n, c, 1, 1)).astype(dtype))
        out = cupy.empty_like(x)
        coefs = {"alpha": 1 / 6, "beta": 0.5}
        sixth, half = g.dtype.type(1 / 6), g.dtype.type(0.5)
        t = [timed(lambda: channel_scale(x, g, out, nhwc, "hard_sigmoid", coefs)),
             timed(lambda: cupy.multiply(x, cupy.clip(g * sixth + half, 0, 1), out=out))]
        if torch is not None:
            tx, tg, to = (torch.as_tensor(v, device="cuda") for v in (x, g, out))
            t.append(torch_timed(lambda: torch.mul(tx, torch.nn.functional.hardsigmoid(tg), out=to)))
        return t

    for dtype, nhwc, n in ((np.float16, True, 1), (np.float16, True, 32), (np.float32, False, 1)):
        name = f"{np.dtype(dtype).name} {'NHWC' if nhwc else 'NCHW'} batch {n}"
        print(f"global average pool, {name}: us for ours, one window per thread (pool2d), PyTorch mean")
        for c, size in POOLS:
            print(f"  {c:5d} ch {size:3d}^2: {show(pool_row(n, c, size, dtype, nhwc))}")
        print(f"channel scale x * hard_sigmoid(g), {name}: us for ours, activation + broadcast multiply, PyTorch")
        for c, size in POOLS:
            print(f"  {c:5d} ch {size:3d}^2: {show(scale_row(n, c, size, dtype, nhwc))}")
    with contextlib.suppress(Exception):
        print("cuDNN:", heuristic.version)


if __name__ == "__main__":
    main()
