"""The engine's own convolution kernels against cuDNN on dncnn's few-channel layers at 1080p fp16 NHWC (the
3 -> 64 input layer, the 64 -> 3 output layer) and a 64 -> 64 middle layer: each candidate timed alone with CUDA
events, its largest difference from cuDNN, and the time of the one the backend chooses:
python -m tests.bench.bench_gpu_conv_kernels [--size 1080x1920] [--repeat 50]"""
from __future__ import annotations

import argparse
import functools

import numpy as np


def main() -> None:
    import cupy

    from engine.backends import get_backend
    from engine.backends.cuda import conv_direct, gather, wgmma

    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1080x1920")
    ap.add_argument("--repeat", type=int, default=50)
    a = ap.parse_args()
    h, w = (int(v) for v in a.size.split("x"))
    backend = get_backend("cupy", notice=None)
    backend.activate()
    rng = np.random.default_rng(0)

    def timed(fn) -> float:
        fn()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(a.repeat):
            fn()
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / a.repeat

    def layer(c: int, k: int, act: str | None) -> None:
        x = cupy.asarray(rng.standard_normal((1, h, w, c)).astype(np.float16))
        wt = cupy.asarray((rng.standard_normal((k, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float16))
        b = cupy.asarray(rng.standard_normal(k).astype(np.float16))
        out = cupy.empty((1, h, w, k), cupy.float16)
        geo = ((3, 3), (1, 1), (1, 1), (1, 1))
        xl, ol, wl = x.transpose(0, 3, 1, 2), out.transpose(0, 3, 1, 2), cupy.ascontiguousarray(
            wt.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        runs = {"cudnn": lambda: backend.cudnn.conv(xl, wl, b, ol, (1, 1), (1, 1), (1, 1), act, {})}
        ref = None
        if conv_direct.direct_applies(xl, wl, ol, 1, act):
            wd = conv_direct.direct_weights(wl)
            runs["direct"] = lambda: conv_direct.conv_direct(x, wd, b, out, *geo, act, 0.0)
        if gather.patch_applies(xl, wl, ol, (1, 1), 1):
            wp = gather.patch_weights(wl)
            runs["patches + cuDNN 1x1"] = lambda: gather.conv_patches(backend.cudnn, xl, wp, b, ol, (3, 3), (1, 1),
                                                                      (1, 1), act, {}, {})
        hopper = ((wgmma.conv64_applies, wgmma.conv64_weights, wgmma.conv3x3_c64, "conv64"),
                  (wgmma.patch64_applies, wgmma.patch64_weights, wgmma.conv3x3_patch64, "patch64"),
                  (wgmma.out64_applies, wgmma.out64_weights, wgmma.conv3x3_out64, "out64"))
        for applies, weights, launch, name in hopper:
            if applies(xl, wl, ol, (1, 1), (1, 1), (1, 1), 1, act):
                runs[f"{name} (wgmma)"] = functools.partial(launch, x, weights(wl), b, out, act, 0.0)
        print(f"{c} -> {k} 3x3 at {h}x{w}:")
        for name, fn in runs.items():
            ms = timed(fn)
            got = cupy.asnumpy(out).astype(np.float32)
            if ref is None:
                ref = got
            err = float(np.abs(got - ref).max())
            print(f"  {name:22s} {ms:7.4f} ms   max diff from cuDNN {err:.2e}")
        chosen = backend.kernel("conv2d")
        cache: dict = {}
        done = chosen(xl, wl, b, ol, (1, 1), (1, 1), (1, 1), 1, act, {}, cache)
        ms = timed(lambda: chosen(xl, wl, b, ol, (1, 1), (1, 1), (1, 1), 1, act, {}, cache))
        print(f"  backend's choice       {ms:7.4f} ms  ({done.candidate if done else 'the generic path'})")

    layer(3, 64, "relu")
    layer(64, 64, "relu")
    layer(64, 3, None)


if __name__ == "__main__":
    main()
